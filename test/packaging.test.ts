/**
 * The packages as npm publishes them, and the README's "Install" and first program followed
 * literally by a new app outside the repository:
 *
 * - `npm publish --dry-run` for each published package is clean (no warning: npm corrects
 *   nothing), ships what its package.json points at and nothing of the tests, and needs neither
 *   the network nor credentials (an unreachable registry, `--offline`, a placeholder token);
 * - `npm run pack` writes the tarballs into the ignored packs/ folder, and a plain `npm pack`
 *   leaves nothing untracked;
 * - a temporary app folder runs `npm init -y`, installs the library's tarball and Express, runs
 *   the README's first Express program and sees the 429 after the limit; then makes the
 *   README's one change for Redis and sees two processes share the limit on a real redis-server;
 * - the service's four tarballs install together and give a working `npx sluice`.
 *
 * Installs use `--prefer-offline`: the npm cache the repository's own install filled, the
 * registry only for what is missing. The one departure from the README: packing does not
 * rebuild (the test command has just built, and other test files read dist/ meanwhile).
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { blocks, repoRoot as root } from "./support/markdown.js";
import { freePort, waitFor } from "./support/ports.js";
import { type RedisServer, startRedis } from "./support/redis.js";

/** The published packages: folder under packages/, and files each must ship. */
const PACKAGES = [
  {
    dir: "sluice",
    name: "sluice",
    ships: ["dist/index.js", "dist/index.cjs", "dist/express.d.ts", "src/stores/lua/sluice.lua"],
  },
  {
    dir: "api",
    name: "@sluice/api",
    ships: ["dist/index.js", "dist/index.d.ts"],
  },
  {
    dir: "admin",
    name: "@sluice/admin",
    ships: ["dist/index.html", "dist/app.js", "dist/app.css"],
  },
  {
    dir: "server",
    name: "@sluice/server",
    ships: [
      "bin/sluice.js",
      "dist/cli.js",
      "dist/index.d.ts",
      "proto/envoy/service/ratelimit/v3/rls.proto",
    ],
  },
] as const;

interface PackageJson {
  name: string;
  version: string;
  description?: string;
  license?: string;
  private?: boolean;
  engines?: { node?: string };
  repository?: { type: string; url: string; directory?: string };
  publishConfig?: { access?: string };
  main?: string;
  module?: string;
  types?: string;
  bin?: Record<string, string>;
  exports?: unknown;
  dependencies?: Record<string, string>;
}

const readJson = <T>(path: string): T => JSON.parse(readFileSync(path, "utf8")) as T;
const pkgOf = (dir: string) => readJson<PackageJson>(join(root, "packages", dir, "package.json"));

/** Every file path an `exports` map (or a `bin` object) points at. */
function targets(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (value && typeof value === "object") return Object.values(value).flatMap(targets);
  return [];
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Runs a command to its end; throws with its stderr when it fails. */
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: "utf8",
    env: { ...process.env, ...env },
    timeout: 300_000,
  });
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(" ")} failed in ${cwd}:\n${r.stderr}${r.stdout}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

/** `npm install` as a reader types it, from the cache where it can. */
const install = (cwd: string, ...what: string[]) =>
  run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", ...what], cwd);

const untracked = () => run("git", ["status", "--porcelain"], root).stdout;

let scratch: string;
beforeAll(() => {
  for (const p of PACKAGES) {
    const missing = p.ships.find((f) => !existsSync(join(root, "packages", p.dir, f)));
    expect(missing, `packages/${p.dir} is not built: run npm run build`).toBeUndefined();
  }
  scratch = mkdtempSync(join(tmpdir(), "sluice-packaging-"));
  // No credentials and no registry: a placeholder token for an address nothing listens on.
  writeFileSync(
    join(scratch, "npmrc"),
    "//127.0.0.1:9/:_authToken=placeholder-for-dry-run\nupdate-notifier=false\nfund=false\naudit=false\n",
  );
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("npm publish --dry-run, for every published package", () => {
  const rootPkg = readJson<PackageJson>(join(root, "package.json"));

  it.each(PACKAGES)(
    "$name: clean, offline, without credentials, shipping what it points at",
    (p) => {
      const r = spawnSync(
        "npm",
        [
          "publish",
          "--dry-run",
          "--json",
          "--ignore-scripts",
          "--offline",
          "--registry=http://127.0.0.1:9/",
          `--userconfig=${join(scratch, "npmrc")}`,
        ],
        { cwd: join(root, "packages", p.dir), encoding: "utf8" },
      );
      expect(r.status, r.stderr).toBe(0);
      // Only notices: a warning means npm corrected or doubted something in package.json.
      expect(
        r.stderr.split("\n").filter((l) => l.trim() !== "" && !l.startsWith("npm notice")),
      ).toEqual([]);
      const report = (
        JSON.parse(r.stdout) as Record<
          string,
          { name: string; version: string; files: { path: string }[] }
        >
      )[p.name]!;
      const files = report.files.map((f) => f.path);
      const pkg = pkgOf(p.dir);
      expect(report).toMatchObject({ name: p.name, version: pkg.version });
      for (const f of ["package.json", "README.md", "LICENSE", ...p.ships])
        expect(files).toContain(f);
      const pointed = [
        pkg.main,
        pkg.module,
        pkg.types,
        ...targets(pkg.bin),
        ...targets(pkg.exports),
      ]
        .filter((x): x is string => x !== undefined)
        .map((x) => x.replace(/^\.\//, ""));
      // A subpath pattern (`./dist/compat/*.js`) must match at least one shipped file.
      const ships = (target: string) =>
        target.includes("*")
          ? files.some((f) =>
              new RegExp(`^${target.split("*").map(escapeRegExp).join("[^/]+(?:/[^/]+)*")}$`).test(
                f,
              ),
            )
          : files.includes(target);
      expect(pointed.filter((f) => !ships(f))).toEqual([]);
      // Nothing of the tests, and no TypeScript source (declarations only).
      expect(files.filter((f) => /(^|\/)test\/|\.test\.|(?<!\.d)\.[cm]?ts$/.test(f))).toEqual([]);
    },
  );

  it.each(PACKAGES)("$name: the metadata a registry page and an install need", (p) => {
    const pkg = pkgOf(p.dir);
    expect(pkg.private).toBeUndefined();
    expect(pkg.description).toBeTruthy();
    expect(pkg.license).toBe("MIT");
    expect(pkg.engines?.node).toBe(">=20");
    expect(pkg.repository).toEqual({ ...rootPkg.repository, directory: `packages/${p.dir}` });
    if (p.name.startsWith("@")) expect(pkg.publishConfig?.access).toBe("public");
    // The packages are released at one version, and depend on each other at exactly it.
    expect(pkg.version).toBe(pkgOf("sluice").version);
    for (const [dep, spec] of Object.entries(pkg.dependencies ?? {})) {
      expect(spec, `${p.name} → ${dep}`).not.toMatch(/^(file|link|workspace):/);
      if (PACKAGES.some((q) => q.name === dep)) expect(spec).toBe(pkg.version);
    }
  });
});

describe("the README's Install and first program, in a new app outside the repository", () => {
  const version = pkgOf("sluice").version;
  const packs = join(root, "packs");
  const tarball = (name: string) => join(packs, `${name}-${version}.tgz`);
  let app: string;
  const children: ChildProcess[] = [];
  let redis: RedisServer | undefined;

  /** The README's first program (plain JavaScript), and the block with its one change for Redis. */
  const readme = blocks("README.md").filter((b) => b.lang === "js");
  const [program, redisChange] = [readme[0]!.code, readme[1]!.code];

  beforeAll(() => {
    const before = untracked();
    run("npm", ["run", "pack"], root, { SLUICE_PACK_BUILT: "1" });
    expect(untracked()).toBe(before);
    app = mkdtempSync(join(tmpdir(), "sluice-my-app-"));
  }, 300_000);
  afterAll(async () => {
    for (const c of children) c.kill();
    await redis?.stop();
    if (app) rmSync(app, { recursive: true, force: true });
  });

  it("npm run pack wrote one tarball per package into packs/; a plain npm pack leaves nothing untracked", () => {
    expect(readdirSync(packs).sort()).toEqual(
      [
        `sluice-${version}.tgz`,
        `sluice-api-${version}.tgz`,
        `sluice-admin-${version}.tgz`,
        `sluice-server-${version}.tgz`,
      ].sort(),
    );
    const before = untracked();
    const dir = join(root, "packages/sluice");
    run("npm", ["pack", "--ignore-scripts", "--loglevel", "warn"], dir);
    try {
      expect(existsSync(join(dir, `sluice-${version}.tgz`))).toBe(true);
      expect(untracked()).toBe(before);
    } finally {
      rmSync(join(dir, `sluice-${version}.tgz`), { force: true });
    }
  });

  /** Starts `node app.mjs` in the app folder on a free port; resolves its base URL once it listens. */
  async function start(file: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
    const port = await freePort();
    const child = spawn(process.execPath, [file], {
      cwd: app,
      env: { ...process.env, ...env, PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    await waitFor(() => out.includes("listening on"), 15_000).catch(() => {
      throw new Error(`${file} did not start:\n${out}`);
    });
    expect(out).toContain(`listening on http://localhost:${port}`);
    return `http://127.0.0.1:${port}/`;
  }

  it("installs the tarball with Express, runs the README's program, and sees the 429 after the limit", async () => {
    run("npm", ["init", "-y"], app);
    install(app, tarball("sluice"), "express");
    writeFileSync(join(app, "app.mjs"), program);
    const url = await start("app.mjs");
    const answers: Array<[number, string]> = [];
    for (let i = 0; i < 6; i++) {
      const r = await fetch(url);
      answers.push([r.status, await r.text()]);
      if (i === 5) {
        expect(r.headers.get("content-type")).toMatch(/^application\/problem\+json/);
        expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
        expect(r.headers.get("ratelimit-policy")).toBe('"api";q=5;w=60');
      }
    }
    expect(answers.map(([s]) => s)).toEqual([200, 200, 200, 200, 200, 429]);
    expect(answers[0]![1]).toBe("hello, 4 left\n");
    expect(JSON.parse(answers[5]![1])).toMatchObject({ status: 429, "violated-policies": ["api"] });
  });

  it("with the README's one change for Redis, two processes share the limit", async () => {
    install(app, "ioredis");
    writeFileSync(join(app, "redis.mjs"), applyChange(program, redisChange));
    redis = await startRedis();
    const a = await start("redis.mjs", { REDIS_URL: redis.url });
    const b = await start("redis.mjs", { REDIS_URL: redis.url });
    const statuses: number[] = [];
    for (const url of [a, b, a, b, a, b, a]) statuses.push((await fetch(url)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
  });

  it("installs the service from its four tarballs: `npx sluice` runs and finds the console", () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-service-"));
    try {
      run("npm", ["init", "-y"], dir);
      // --ignore-scripts: better-sqlite3's native build needs a download or a compiler; the
      // CLI, its dependencies and the console's files are what the tarballs decide.
      install(
        dir,
        "--ignore-scripts",
        tarball("sluice"),
        tarball("sluice-api"),
        tarball("sluice-admin"),
        tarball("sluice-server"),
      );
      expect(run("npx", ["--no-install", "sluice", "--help"], dir).stdout).toMatch(
        /^Usage: sluice/,
      );
      writeFileSync(
        join(dir, "policies.yaml"),
        "policies:\n  - name: api\n    rules: [{ limit: 5, period: 1m }]\n",
      );
      expect(
        run("npx", ["--no-install", "sluice", "policy", "validate", "policies.yaml"], dir).stdout,
      ).toBe("policies.yaml: 1 valid policy\n");
      // The console as the service finds it: @sluice/admin resolved from @sluice/server.
      const server = createRequire(join(dir, "package.json")).resolve("@sluice/server");
      const admin = createRequire(server).resolve("@sluice/admin/package.json");
      expect(existsSync(join(dirname(admin), "dist/index.html"))).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * Makes the README's change to its program: each import of the change replaces the program's
 * import from the same module (or joins the imports), and each `const` statement of the change
 * replaces the program's statement declaring the same name.
 */
function applyChange(source: string, change: string): string {
  let out = source;
  const imports = change.split("\n").filter((l) => l.startsWith("import "));
  for (const line of imports) {
    const from = /from "([^"]+)";$/.exec(line)![1]!;
    const existing = out
      .split("\n")
      .find((l) => l.startsWith("import ") && l.endsWith(`"${from}";`));
    if (existing) out = out.replace(existing, line);
    else {
      const last = out
        .split("\n")
        .filter((l) => l.startsWith("import "))
        .at(-1)!;
      out = out.replace(last, `${last}\n${line}`);
    }
  }
  // A statement on one line, or one whose last line is `});`.
  for (const m of change.matchAll(/^const (\w+) = .*;$|^const (\w+) = [\s\S]*?^\}\);$/gm)) {
    const name = m[1] ?? m[2]!;
    const statement = new RegExp(`^const ${name} = .*;$|^const ${name} = [\\s\\S]*?^\\}\\);$`, "m");
    expect(out, `the program declares ${name}`).toMatch(statement);
    out = out.replace(statement, m[0]);
  }
  return out;
}
