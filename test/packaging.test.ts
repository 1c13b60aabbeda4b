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
 * - the service's four tarballs install together and give a working `npx sluice`;
 * - @sluice/nest installs into a Nest app as npm installs Nest today (12: ES modules only), and
 *   into one on Nest 11, and limits HTTP on Express and Fastify, GraphQL and a WebSocket
 *   gateway, also where `require` cannot load an ES module (Node before 20.19); the throttler
 *   face guards the same app.
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
import WebSocket from "ws";

/** The published packages: folder under packages/, and files each must ship. */
const PACKAGES = [
  {
    dir: "sluice",
    name: "sluice",
    ships: ["dist/index.js", "dist/index.cjs", "dist/express.d.ts", "src/stores/lua/sluice.lua"],
  },
  {
    dir: "nest",
    name: "@sluice/nest",
    ships: ["dist/index.js", "dist/index.cjs", "dist/index.d.ts", "dist/index.d.cts"],
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

/**
 * {@link run} without blocking this test's thread: for the long installs, where a blocked
 * worker misses vitest's own messages (its RPC times out after 60 s).
 */
function runAsync(
  cmd: string,
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv = {},
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0) resolve({ stdout, stderr });
      else reject(new Error(`${cmd} ${args.join(" ")} failed in ${cwd}:\n${stderr}${stdout}`));
    });
  });
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
  const servers: RedisServer[] = [];

  /** The README's first program (plain JavaScript), and the block with its one change for Redis. */
  const readme = blocks("README.md").filter((b) => b.lang === "js");
  const [program, redisChange, nodeRedisChange] = [
    readme[0]!.code,
    readme[1]!.code,
    readme[2]!.code,
  ];
  /** The version of a package npm installed into the app. */
  const installedVersion = (name: string): string =>
    (
      JSON.parse(
        readFileSync(join(app, "node_modules", name, "package.json"), "utf8"),
      ) as PackageJson
    ).version;

  beforeAll(async () => {
    const before = untracked();
    await runAsync("npm", ["run", "pack"], root, { SLUICE_PACK_BUILT: "1" });
    expect(untracked()).toBe(before);
    app = mkdtempSync(join(tmpdir(), "sluice-my-app-"));
  }, 300_000);
  afterAll(async () => {
    for (const c of children) c.kill();
    await Promise.all(servers.map((r) => r.stop()));
    if (app) rmSync(app, { recursive: true, force: true });
  });

  it("npm run pack wrote one tarball per package into packs/; a plain npm pack leaves nothing untracked", () => {
    expect(readdirSync(packs).sort()).toEqual(
      [
        `sluice-${version}.tgz`,
        `sluice-nest-${version}.tgz`,
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

  /**
   * Starts `node app.mjs` in the app folder on a free port; resolves its base URL once it
   * listens. What it prints goes into `output` too.
   */
  async function start(
    file: string,
    env: NodeJS.ProcessEnv = {},
    output: string[] = [],
    where: { cwd?: string; nodeArgs?: string[] } = {},
  ): Promise<string> {
    const port = await freePort();
    const child = spawn(process.execPath, [...(where.nodeArgs ?? []), file], {
      cwd: where.cwd ?? app,
      env: { ...process.env, ...env, PORT: String(port) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    let out = "";
    const note = (d: Buffer) => {
      out += d.toString();
      output.push(d.toString());
    };
    child.stdout.on("data", note);
    child.stderr.on("data", note);
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

  it.each([
    ["ioredis", () => redisChange],
    ["redis", () => nodeRedisChange],
  ])(
    "with the README's one change for Redis (%s), two processes share the limit",
    async (client, change) => {
      install(app, client);
      writeFileSync(join(app, `${client}.mjs`), applyChange(program, change()));
      // A server of its own per client (the README's policy, "api", would share one count).
      const server = await startRedis();
      servers.push(server);
      const a = await start(`${client}.mjs`, { REDIS_URL: server.url });
      const b = await start(`${client}.mjs`, { REDIS_URL: server.url });
      const statuses: number[] = [];
      for (const url of [a, b, a, b, a, b, a]) statuses.push((await fetch(url)).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
    },
  );

  it("with REDIS_URL where nothing listens, every request passes and the store says so once", async () => {
    const port = await freePort();
    const out: string[] = [];
    const url = await start("ioredis.mjs", { REDIS_URL: `redis://127.0.0.1:${port}` }, out);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await fetch(url)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 200]);
    const said = out
      .join("")
      .split("\n")
      .filter((l) => l.startsWith("sluice: "));
    expect(said).toEqual([
      `sluice: Redis (ioredis client) is unavailable (ECONNREFUSED 127.0.0.1:${port}); each policy's onStoreError decides until it is back`,
    ]);
  });

  it("every Redis client as npm installs it today: exact, 4 × 50 concurrent at limit 5, and the faces count", async () => {
    install(app, "ioredis", "redis", "iovalkey");
    const server = await startRedis();
    servers.push(server);
    writeFileSync(join(app, "clients.mjs"), CLIENTS_PROGRAM);
    const out = run(process.execPath, ["clients.mjs"], app, { REDIS_URL: server.url });
    const report = JSON.parse(out.stdout) as Record<string, unknown>;
    const versions = report.versions as Record<string, string>;
    for (const name of ["ioredis", "redis", "iovalkey"])
      expect(versions[name], name).toBe(installedVersion(name));
    for (const client of ["ioredis", "node-redis", "iovalkey"]) {
      expect(report[client], client).toEqual({
        "fixed-window": { allowed: 5, storeErrors: 0, remaining: [4, 3, 2, 1, 0, 0], waits: true },
        gcra: { allowed: 5, storeErrors: 0, remaining: [4, 3, 2, 1, 0, 0], waits: true },
        rateLimiterRedis: ["ok 1", "ok 2", "rejected 3"],
        sluiceStore: [1, 2, 3, 4, 5],
        upstash: [true, true, false],
        throttler: [false, false, false, true],
      });
    }
  });

  // Nest as npm installs it today (12 or later: the workspace's suites run on it too), and the
  // major before (11), side by side: a framework whose packages require each other by name
  // cannot be held twice under npm aliases in one tree, so each is its own app.
  it.each([
    { nest: "as npm installs it today", at: "", graphql: "", major: (m: number) => m >= 12 },
    { nest: "11", at: "@11", graphql: "@13", major: (m: number) => m === 11 },
  ])(
    "installs @sluice/nest into an app on Nest $nest: HTTP, GraphQL, a gateway, and the throttler face",
    async ({ at, graphql, major }) => {
      const dir = mkdtempSync(join(tmpdir(), "sluice-nest-app-"));
      try {
        run("npm", ["init", "-y"], dir);
        run("npm", ["pkg", "set", "type=module"], dir);
        // Plain `npm install`: a peer range that left out this Nest would fail it (ERESOLVE).
        await runAsync(
          "npm",
          [
            "install",
            "--prefer-offline",
            "--no-audit",
            "--no-fund",
            tarball("sluice"),
            tarball("sluice-nest"),
            ...[
              "common",
              "core",
              "platform-express",
              "platform-fastify",
              "websockets",
              "platform-ws",
            ].map((p) => `@nestjs/${p}${at}`),
            `@nestjs/graphql${graphql}`,
            `@nestjs/apollo${graphql}`,
            "@apollo/server",
            "@as-integrations/express5",
            "@nestjs/throttler",
            "graphql",
            "reflect-metadata",
            "rxjs",
          ],
          dir,
        );
        const nest = readJson<PackageJson>(join(dir, "node_modules/@nestjs/core/package.json"));
        expect(major(Number(nest.version.split(".")[0])), nest.version).toBe(true);
        writeFileSync(join(dir, "nest-app.mjs"), NEST_PROGRAM);
        for (const platform of ["express", "fastify"]) {
          const url = await start("nest-app.mjs", { PLATFORM: platform }, [], { cwd: dir });
          const statuses = async (path: string, n: number) => {
            const out: number[] = [];
            for (let i = 0; i < n; i++) out.push((await fetch(`${url}${path}`)).status);
            return out;
          };
          expect(await statuses("health", 3), platform).toEqual([200, 200, 200]);
          // login: its own policy (2) and the default one (5), all or nothing.
          expect(await statuses("login", 3), platform).toEqual([200, 200, 429]);
          expect(await statuses("hello", 4), platform).toEqual([200, 200, 200, 429]);
          const denied = await fetch(`${url}hello`);
          expect(denied.headers.get("content-type")).toMatch(/^application\/problem\+json/);
          expect(denied.headers.get("ratelimit-policy")).toBe('"api";q=5;w=60');
        }
        // GraphQL and the gateway (Express), once as Node runs today and once as a Node that
        // cannot require an ES module: Nest 12's WsException is still found.
        for (const nodeArgs of [[], ["--no-experimental-require-module"]]) {
          const base = await start("nest-app.mjs", { PLATFORM: "express" }, [], {
            cwd: dir,
            nodeArgs,
          });
          const answers: unknown[] = [];
          for (let i = 0; i < 3; i++) {
            const r = await fetch(`${base}graphql`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ query: "{ me }" }),
            });
            answers.push(await r.json());
          }
          expect(answers.slice(0, 2)).toEqual([{ data: { me: "me" } }, { data: { me: "me" } }]);
          expect(answers[2]).toMatchObject({
            errors: [{ extensions: { code: "RATE_LIMITED", limit: 2, remaining: 0 } }],
          });
          // The gateway names SluiceGuard, as the guide says, and Nest 12 runs the global one
          // too (11 does not): either way one charge a message (limit 2: two said, then the
          // exception).
          const messages = await chat(`${base.replace("http", "ws")}chat`, 3);
          const said = messages.filter((m) => m.event === "said");
          expect(said, nodeArgs.join(" ")).toHaveLength(2);
          expect(messages.find((m) => m.event === "exception")).toMatchObject({
            data: { code: "RATE_LIMITED", limit: 2, remaining: 0, policies: ["messages"] },
          });
        }
        // The @nestjs/throttler face on the same Nest: ThrottlerGuard over SluiceThrottlerStorage.
        writeFileSync(join(dir, "throttler.mjs"), THROTTLER_PROGRAM);
        const port = await freePort();
        expect(
          (await runAsync(process.execPath, ["throttler.mjs"], dir, { PORT: String(port) })).stdout,
        ).toBe("200 1 null\n200 0 null\n429 null 60\n");
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    // Two installs of Nest (from the npm cache, or the registry when it is cold) and five apps.
    180_000,
  );

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
  // The change's statements replace the program's declaration of the last name the change
  // declares (`limiter`); what comes before it in the change (a client made and connected) goes
  // in its place too. A statement is one line, or one whose last line is `});`.
  const body = change
    .split("\n")
    .filter((l) => !l.startsWith("import "))
    .join("\n")
    .trim();
  const names = [...body.matchAll(/^const (\w+) = /gm)].map((m) => m[1]!);
  const name = names.at(-1)!;
  const statement = new RegExp(`^const ${name} = .*;$|^const ${name} = [\\s\\S]*?^\\}\\);$`, "m");
  expect(out, `the program declares ${name}`).toMatch(statement);
  return out.replace(statement, () => body);
}

/**
 * A new app's check of every Redis client as npm installs it (ioredis, node-redis, iovalkey),
 * each passed to sluice as made: the core store's exactness under concurrency and its answers,
 * and the drop-in faces' counts. Prints one JSON report.
 */
const CLIENTS_PROGRAM = `
import { readFileSync } from "node:fs";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { Redis as Valkey } from "iovalkey";
import { createLimiter, redisStore } from "sluice";
import { RateLimiterRedis } from "sluice/compat/rate-limiter-flexible";
import { SluiceStore } from "sluice/compat/express-rate-limit";
import { SluiceThrottlerStorage } from "sluice/compat/nestjs-throttler";
import { Ratelimit } from "sluice/compat/upstash";

const url = process.env.REDIS_URL;
const run = Date.now().toString(36);
const makers = {
  ioredis: async () => new Redis(url),
  "node-redis": async () => {
    const c = createClient({ url });
    await c.connect();
    return c;
  },
  iovalkey: async () => new Valkey(url),
};
const close = (c) => (typeof c.destroy === "function" ? c.destroy() : c.disconnect());
const report = { versions: {} };
for (const name of ["ioredis", "redis", "iovalkey"])
  report.versions[name] = JSON.parse(readFileSync(\`node_modules/\${name}/package.json\`, "utf8")).version;

for (const [name, make] of Object.entries(makers)) {
  const r = {};
  const clients = await Promise.all([0, 1, 2, 3].map(() => make()));
  const stores = clients.map((client) => redisStore({ client, heartbeatMs: 0 }));
  for (const algorithm of ["fixed-window", "gcra"]) {
    const policy = { name: \`c\${run}-\${name}-\${algorithm}\`, algorithm, rules: [{ limit: 5, period: "1h" }], onStoreError: "deny" };
    const limiters = stores.map((store) => createLimiter({ store, policy }));
    const ds = await Promise.all(limiters.flatMap((l) => Array.from({ length: 50 }, () => l.limit("hot"))));
    const one = limiters[0];
    const seen = [];
    for (let i = 0; i < 6; i++) seen.push(await one.limit("single"));
    r[algorithm] = {
      allowed: ds.filter((d) => d.allowed).length,
      storeErrors: ds.filter((d) => d.reason === "store-error").length,
      remaining: seen.map((d) => d.remaining),
      waits: !seen[5].allowed && seen[5].retryAfterMs > 0 && seen.slice(0, 5).every((d) => d.allowed),
    };
  }
  const client = clients[0];
  const rlf = new RateLimiterRedis({ storeClient: client, keyPrefix: \`r\${run}-\${name}\`, points: 2, duration: 60 });
  r.rateLimiterRedis = [];
  for (let i = 0; i < 3; i++)
    r.rateLimiterRedis.push(await rlf.consume("k").then((x) => \`ok \${x.consumedPoints}\`, (x) => \`rejected \${x.consumedPoints}\`));
  const ers = new SluiceStore({ client, prefix: \`e\${run}-\${name}\` });
  ers.init({ windowMs: 60000 });
  r.sluiceStore = [];
  for (let i = 0; i < 5; i++) r.sluiceStore.push((await ers.increment("k")).totalHits);
  const up = new Ratelimit({ redis: client, limiter: Ratelimit.fixedWindow(2, "60 s"), prefix: \`u\${run}-\${name}\`, ephemeralCache: false });
  r.upstash = [];
  for (let i = 0; i < 3; i++) r.upstash.push((await up.limit("id")).success);
  const nest = new SluiceThrottlerStorage({ client, prefix: \`n\${run}-\${name}\` });
  r.throttler = [];
  for (let i = 0; i < 4; i++) r.throttler.push((await nest.increment("k", 60000, 3, 60000, "default")).isBlocked);
  report[name] = r;
  await Promise.all(stores.map((s) => s.close()));
  clients.forEach(close);
}
console.log(JSON.stringify(report));
`;

/** Opens a `ws` connection to `url`, sends `n` "say" messages, resolves its first `n` answers. */
function chat(url: string, n: number): Promise<Array<{ event: string; data: unknown }>> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url);
    const got: Array<{ event: string; data: unknown }> = [];
    // A denial the gateway cannot answer (its exception class not found) answers nothing: the
    // test then fails at its timeout.
    socket.on("error", reject);
    socket.on("open", () => {
      for (let i = 0; i < n; i++) socket.send(JSON.stringify({ event: "say", data: `hi ${i}` }));
    });
    socket.on("message", (data: Buffer) => {
      got.push(JSON.parse(data.toString("utf8")) as { event: string; data: unknown });
      if (got.length === n) {
        socket.close();
        resolve(got);
      }
    });
  });
}

/**
 * A Nest app as plain JavaScript (no compiler: each decorator applied as the function it is):
 * HTTP routes on Express or Fastify (PLATFORM), and on Express a GraphQL query (Apollo) and a
 * WebSocket gateway (platform-ws) that names SluiceGuard and the WebSocket filter as the guide
 * says. Policies: "api" (5 a minute) for every route, "login" (2) on /login, none on /health;
 * "gql" (2) on the query, "messages" (2) on the gateway's "say".
 */
const NEST_PROGRAM = `
import "reflect-metadata";
import { Controller, Get, Module, UseFilters, UseGuards } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { RateLimit, SkipRateLimit, SluiceGuard, SluiceModule, SluiceWsExceptionFilter } from "@sluice/nest";

const method = (decorator, cls, name) =>
  decorator(cls.prototype, name, Object.getOwnPropertyDescriptor(cls.prototype, name));
// GCRA, not a window aligned to the clock: a run that crossed a minute would be let in again.
const twoAMinute = (name) => ({ name, algorithm: "gcra", rules: [{ limit: 2, period: "1m" }] });

class HelloController {
  hello() { return "hello"; }
  login() { return "welcome"; }
  health() { return "ok"; }
}
Controller()(HelloController);
method(Get("hello"), HelloController, "hello");
method(Get("login"), HelloController, "login");
method(RateLimit(twoAMinute("login")), HelloController, "login");
method(Get("health"), HelloController, "health");
method(SkipRateLimit(), HelloController, "health");

const express = process.env.PLATFORM === "express";
const imports = [
  SluiceModule.forRoot({
    policies: [{ name: "api", algorithm: "gcra", rules: [{ limit: 5, period: "1m" }] }],
    defaultPolicies: ["api"],
  }),
];
const providers = [];
if (express) {
  const { GraphQLModule, Query, Resolver } = await import("@nestjs/graphql");
  const { ApolloDriver } = await import("@nestjs/apollo");
  const { SubscribeMessage, WebSocketGateway } = await import("@nestjs/websockets");
  class QueryResolver {
    me() { return "me"; }
  }
  Resolver()(QueryResolver);
  method(Query("me"), QueryResolver, "me");
  method(SkipRateLimit("api"), QueryResolver, "me");
  method(RateLimit(twoAMinute("gql")), QueryResolver, "me");
  class ChatGateway {
    say(_client, text) { return { event: "said", data: text }; }
  }
  WebSocketGateway({ path: "/chat" })(ChatGateway);
  UseGuards(SluiceGuard)(ChatGateway);
  UseFilters(SluiceWsExceptionFilter)(ChatGateway);
  method(SubscribeMessage("say"), ChatGateway, "say");
  method(SkipRateLimit("api"), ChatGateway, "say");
  method(RateLimit(twoAMinute("messages")), ChatGateway, "say");
  imports.push(GraphQLModule.forRoot({ driver: ApolloDriver, typeDefs: "type Query { me: String! }" }));
  providers.push(QueryResolver, ChatGateway);
}

class AppModule {}
Module({ imports, controllers: [HelloController], providers })(AppModule);

const options = { logger: false, abortOnError: false };
let app;
if (express) {
  app = await NestFactory.create(AppModule, options);
  const { WsAdapter } = await import("@nestjs/platform-ws");
  app.useWebSocketAdapter(new WsAdapter(app));
} else {
  const { FastifyAdapter } = await import("@nestjs/platform-fastify");
  app = await NestFactory.create(AppModule, new FastifyAdapter(), options);
}
await app.listen(Number(process.env.PORT), "127.0.0.1");
console.log(\`listening on http://localhost:\${process.env.PORT}\`);
`;

/**
 * @nestjs/throttler's guard over sluice's storage in the same Nest app (limit 2 a minute): asks
 * itself three times and prints each answer's status, X-RateLimit-Remaining and Retry-After.
 */
const THROTTLER_PROGRAM = `
import "reflect-metadata";
import { Controller, Get, Module } from "@nestjs/common";
import { APP_GUARD, NestFactory } from "@nestjs/core";
import { ThrottlerGuard, ThrottlerModule } from "@nestjs/throttler";
import { SluiceThrottlerStorage } from "sluice/compat/nestjs-throttler";

class HelloController {
  hello() { return "hi"; }
}
Controller()(HelloController);
Get("hello")(HelloController.prototype, "hello", Object.getOwnPropertyDescriptor(HelloController.prototype, "hello"));
class AppModule {}
Module({
  imports: [ThrottlerModule.forRoot({ throttlers: [{ ttl: 60000, limit: 2 }], storage: new SluiceThrottlerStorage() })],
  controllers: [HelloController],
  providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
})(AppModule);

const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
await app.listen(Number(process.env.PORT), "127.0.0.1");
for (let i = 0; i < 3; i++) {
  const r = await fetch(\`http://127.0.0.1:\${process.env.PORT}/hello\`);
  console.log(r.status, r.headers.get("x-ratelimit-remaining"), r.headers.get("retry-after"));
}
await app.close();
`;
