/**
 * The console's copy-ready snippets, as a user copies them.
 *
 * First, the Express snippets compile against the library as installed: each is written into
 * a module under the repository's node_modules (so `sluice`, `express` and `ioredis` resolve as
 * in an app) and checked by TypeScript with `checkJs` — a wrong import, name or call fails;
 * nullability is not checked (strict is off, as an editor checks a plain .mjs file).
 *
 * Then every snippet snippets.ts makes is run against a real service: the built `sluice serve`
 * on a free loopback port with SQLite and a redis-server of its own, the first admin made with
 * `sluice admin create-user`. The Express apps run in Node from that node_modules directory
 * (the built packages: `npm run build` first), each on a free port, and are asked over HTTP;
 * the curl lines run in bash. Each runs with a good and a bad credential (app key, session
 * token, password), and the test asserts what the app (or the shell) answers in each case. The
 * browser test (admin.test.ts) shows them on the page.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { repoRoot as ROOT } from "../../../test/support/markdown.js";
import { freePort, waitFor } from "../../../test/support/ports.js";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { typecheck } from "../../../test/support/tsc.js";
import type { PolicyDoc } from "../src/api.js";
import {
  curlCreateApp,
  curlCreatePolicy,
  curlLimit,
  curlLogin,
  expressConnectSnippet,
  expressSnippet,
  expressViaServiceSnippet,
} from "../src/snippets.js";
import {
  CLI,
  type Served,
  answers,
  callApi,
  createUser,
  requireFiles,
  startServe,
} from "./helpers.js";

const doc: PolicyDoc = {
  name: "api.search",
  algorithm: "gcra",
  rules: [{ limit: 100, period: "1m", burst: 20 }],
  apps: ["web"],
};

/** Where the browser would have reached the service (the snippets are made with it). */
let origin = "http://127.0.0.1:8080";
beforeEach(() =>
  vi.stubGlobal("location", {
    get origin() {
      return origin;
    },
  }),
);
afterEach(() => vi.unstubAllGlobals());

describe("the console's Express snippets", () => {
  it("the library snippet points at connectPolicies, which follows the console", () => {
    expect(expressSnippet(doc)).toMatch(/the connectPolicies snippet follows them/);
    const connect = expressConnectSnippet(doc.name);
    expect(connect).toContain(`url: "http://127.0.0.1:8080"`);
    expect(connect).toContain(`policies.limiter("api.search")`);
  });

  it("compile as plain JavaScript against the library's declarations", () => {
    const dir = mkdtempSync(join(ROOT, "node_modules", ".sluice-snippets-"));
    try {
      const files = {
        "library.mjs": expressSnippet(doc),
        "connect.mjs": expressConnectSnippet(doc.name),
        "service.mjs": expressViaServiceSnippet(doc.name),
      };
      for (const [name, code] of Object.entries(files)) writeFileSync(join(dir, name), code);
      const r = typecheck(
        dir,
        {
          allowJs: true,
          checkJs: true,
          target: "es2022",
          lib: ["es2023", "dom"],
          module: "nodenext",
          moduleResolution: "nodenext",
          types: ["node"],
          skipLibCheck: true,
        },
        Object.keys(files),
      );
      expect(r.output).toBe("");
      expect(r.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const ADMIN = { username: "root", password: "root-password-1" };
/** A key as a user mistypes it: the right shape, not a key the service issued. */
const BAD_KEY = "sk_0123456789abcdef_mistyped";

let redis: RedisServer | undefined;
let server: Served | undefined;
let dataDir = "";
let appsDir = "";
let base = "";
let token = "";
let webKey = "";

/** Calls the service (setup and the service's side of a shared limit). */
const api = (method: string, path: string, options?: { token?: string; body?: unknown }) =>
  callApi(base, method, path, options);

/** Runs a shell snippet in bash with `env`; its stdout and stderr apart. */
function bash(
  script: string,
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile("bash", ["-c", script], { env: { ...process.env, ...env } }, (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** An Express snippet running in its own Node process. */
interface RunningApp {
  /** `GET /`: the status, `Retry-After` and body. */
  get(): Promise<{ status: number; retryAfter: string | null; body: string }>;
  /** What the process printed (stdout and stderr). */
  output(): string;
  stop(): Promise<void>;
}

/**
 * Writes `code` as a module where the workspace's packages resolve, starts it on a free port
 * with `env`, and waits until it listens — or, when `expectExit`, until it exits (resolving to
 * its exit code and output). Nothing is asked of the app before it listens: each request
 * would count against its limit.
 */
async function runApp(code: string, env: Record<string, string>): Promise<RunningApp>;
async function runApp(
  code: string,
  env: Record<string, string>,
  expectExit: true,
): Promise<{ code: number | null; output: string }>;
async function runApp(
  code: string,
  env: Record<string, string>,
  expectExit = false,
): Promise<RunningApp | { code: number | null; output: string }> {
  const file = join(appsDir, `app-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(file, code);
  const port = await freePort();
  const child = spawn(process.execPath, [file], {
    cwd: appsDir,
    env: { ...process.env, PORT: String(port), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr.on("data", (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
  if (expectExit) {
    const killer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    const exitCode = await exited;
    clearTimeout(killer);
    return { code: exitCode, output };
  }
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  try {
    await waitFor(
      () => {
        if (child.exitCode !== null) throw new Error(`the app exited (${child.exitCode})`);
        return new Promise<boolean>((resolve) => {
          const socket = connect(port, "127.0.0.1");
          socket.once("connect", () => {
            socket.destroy();
            resolve(true);
          });
          socket.once("error", () => resolve(false));
        });
      },
      20_000,
      50,
    );
  } catch (err) {
    await stop();
    throw new Error(`the snippet did not listen: ${String(err)}\n${output}`);
  }
  return {
    async get() {
      const res = await fetch(`http://127.0.0.1:${port}/`);
      return {
        status: res.status,
        retryAfter: res.headers.get("retry-after"),
        body: await res.text(),
      };
    },
    output: () => output,
    stop,
  };
}

/** Asks `app` for `/` `n` times, one after the other. */
async function statuses(app: RunningApp, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await app.get()).status);
  return out;
}

/** Creates a policy of 2 a minute (fixed window) granted to `apps`. */
async function policy(name: string, apps: string[] = ["web"]): Promise<void> {
  const r = await api("POST", "/v1/admin/policies", {
    token,
    body: { name, algorithm: "fixed-window", rules: [{ limit: 2, period: "1m" }], apps },
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
}

describe("every console snippet, run against sluice serve with a good and a bad credential", () => {
  beforeAll(async () => {
    requireFiles([[CLI, "npm run build"]]);
    redis = await startRedis();
    dataDir = mkdtempSync(join(tmpdir(), "sluice-snippets-data-"));
    appsDir = mkdtempSync(join(ROOT, "node_modules", ".sluice-snippets-run-"));
    server = await startServe({
      args: ["--data-dir", dataDir],
      env: { REDIS_URL: redis.url, SLUICE_LOG_LEVEL: "warn" },
      ready: answers("/readyz"),
    });
    base = server.base;
    expect(await createUser(dataDir, ADMIN, "admin")).toContain(
      `created admin "${ADMIN.username}"`,
    );
    token = (await api("POST", "/v1/admin/login", { body: ADMIN })).body.token as string;
    webKey = (await api("POST", "/v1/admin/apps", { token, body: { name: "web" } })).body
      .apiKey as string;
    expect(webKey).toMatch(/^sk_/);
    expect((await api("POST", "/v1/admin/apps", { token, body: { name: "other" } })).status).toBe(
      201,
    );
    origin = base;
  }, 120_000);

  afterAll(async () => {
    origin = "http://127.0.0.1:8080";
    await server?.stop();
    await redis?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    if (appsDir) rmSync(appsDir, { recursive: true, force: true });
  });

  describe("Express, asking the service", () => {
    it("with a good key: passes while the policy allows, then 429 with the service's Retry-After", async () => {
      await policy("snip.service");
      const app = await runApp(expressViaServiceSnippet("snip.service"), {
        SLUICE_API_KEY: webKey,
      });
      try {
        const answers = [await app.get(), await app.get(), await app.get()];
        expect(answers.map((a) => a.status)).toEqual([200, 200, 429]);
        expect(answers[0]!.body).toBe("ok");
        expect(answers[2]!.retryAfter).toMatch(/^[1-9]\d*$/);
        expect(Number(answers[2]!.retryAfter)).toBeLessThanOrEqual(60);
        expect(app.output()).toBe("");
      } finally {
        await app.stop();
      }
    });

    // Each is no decision: the snippet fails open (as its comment says) and says why, once.
    it.each([
      ["a mistyped key (401)", "snip.service", BAD_KEY, /HTTP 401: /],
      ["a policy not granted to the app (403)", "snip.theirs", "web", /HTTP 403: /],
      ["a policy that does not exist (404)", "snip.gone", "web", /HTTP 404: /],
    ])(
      "with %s: every request passes, and the reason is logged once",
      async (_what, name, key, logged) => {
        if (name === "snip.theirs") await policy(name, ["other"]);
        const app = await runApp(expressViaServiceSnippet(name), {
          SLUICE_API_KEY: key === "web" ? webKey : key,
        });
        try {
          expect(await statuses(app, 4)).toEqual([200, 200, 200, 200]);
          const lines = app.output().trim().split("\n");
          expect(lines).toHaveLength(1);
          expect(lines[0]).toMatch(/^sluice gave no decision, requests let through: /);
          expect(lines[0]).toMatch(logged);
        } finally {
          await app.stop();
        }
      },
    );

    it("with the service unreachable: every request passes, and the reason is logged once", async () => {
      origin = `http://127.0.0.1:${await freePort()}`; // nothing listens there
      const code = expressViaServiceSnippet("snip.service");
      origin = base;
      const app = await runApp(code, { SLUICE_API_KEY: webKey });
      try {
        expect(await statuses(app, 3)).toEqual([200, 200, 200]);
        expect(app.output().trim().split("\n")).toEqual([
          expect.stringMatching(/^sluice gave no decision, .*ECONNREFUSED 127\.0\.0\.1:\d+$/),
        ]);
      } finally {
        await app.stop();
      }
    });
  });

  describe("Express with the library, following the console (connectPolicies)", () => {
    it("with a good key: enforces the policy in the app's process", async () => {
      await policy("snip.connect");
      const app = await runApp(expressConnectSnippet("snip.connect"), {
        SLUICE_API_KEY: webKey,
        REDIS_URL: redis!.url,
      });
      try {
        const answers = [await app.get(), await app.get(), await app.get()];
        expect(answers.map((a) => a.status)).toEqual([200, 200, 429]);
        expect(answers[2]!.retryAfter).toMatch(/^[1-9]\d*$/);
      } finally {
        await app.stop();
      }
    });

    it("with a bad key: does not start, and says the service refused the key", async () => {
      const r = await runApp(
        expressConnectSnippet("snip.connect"),
        { SLUICE_API_KEY: BAD_KEY, REDIS_URL: redis!.url },
        true,
      );
      expect(r.code).not.toBe(0);
      expect(r.output).toContain("apiKey");
      expect(r.output).toContain("the service refused it (401)");
    });
  });

  describe("Express with the library, a fixed copy (the same Redis: one limit)", () => {
    it("takes no app key (a bad one changes nothing), and counts one limit with the service", async () => {
      await policy("snip.library");
      const stored = (await api("GET", "/v1/admin/policies/snip.library", { token })).body;
      const app = await runApp(expressSnippet(stored as PolicyDoc), {
        SLUICE_API_KEY: BAD_KEY,
        REDIS_URL: redis!.url,
      });
      try {
        // The service takes one of the 2 for the key the middleware uses (the client's IP).
        const viaService = await api("POST", "/v1/limit", {
          token: webKey,
          body: { policy: "snip.library", key: "ip:127.0.0.1" },
        });
        expect(viaService.body).toMatchObject({ allowed: true, remaining: 1 });
        expect(await statuses(app, 2)).toEqual([200, 429]);
        expect(app.output()).toBe("");
      } finally {
        await app.stop();
      }
    });
  });

  describe("curl", () => {
    it("signs in: the token in $TOKEN, or the service's message for a wrong password", async () => {
      const line = (password: string) =>
        `${curlLogin(ADMIN.username).replace("<your password>", password)}\nprintf %s "$TOKEN"`;
      const good = await bash(line(ADMIN.password), {});
      expect(good.stdout).toMatch(/^st_/);
      const bad = await bash(line("not-the-password"), {});
      expect(bad.stdout).toBe("");
      expect(bad.stderr).toMatch(/^jq: error .*: wrong username or password/m);
    });

    it("creates an app: its key in $SLUICE_API_KEY, or the service's message for a bad token", async () => {
      const line = `${curlCreateApp("made.by.curl")}\nprintf %s "$SLUICE_API_KEY"`;
      const good = await bash(line, { TOKEN: token });
      expect(good.stdout).toMatch(/^sk_/);
      const bad = await bash(line, { TOKEN: "st_0123456789abcdef_expired" });
      expect(bad.stdout).toBe("");
      expect(bad.stderr).toMatch(/^jq: error .*session/m);
    });

    it("creates a policy: the policy, or the service's error for a bad token", async () => {
      const line = curlCreatePolicy("made.by.curl", "made.by.curl");
      const good = await bash(line, { TOKEN: token });
      expect(JSON.parse(good.stdout)).toMatchObject({ name: "made.by.curl", version: 1 });
      const bad = await bash(line.replace("made.by.curl", "never.made"), { TOKEN: "st_x_y" });
      expect(JSON.parse(bad.stdout)).toMatchObject({ error: { code: "unauthorized" } });
    });

    it("asks for a decision: the decision and its headers, or 401 for a bad key", async () => {
      await policy("snip.curl");
      const line = curlLimit("snip.curl");
      const good = await bash(line, { SLUICE_API_KEY: webKey });
      expect(good.stdout).toMatch(/^HTTP\/1\.1 200 /);
      expect(good.stdout).toMatch(/^x-ratelimit-remaining: 1\r?$/im);
      expect(good.stdout).toContain(`"allowed":true`);
      const bad = await bash(line, { SLUICE_API_KEY: BAD_KEY });
      expect(bad.stdout).toMatch(/^HTTP\/1\.1 401 /);
      expect(bad.stdout).toContain(`"code":"unauthorized"`);
    });
  });
});
