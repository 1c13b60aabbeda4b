/**
 * The `sluice` command, spawned from the sources: help, configuration errors, the first-start
 * hint and setup link, graceful shutdown with a request in flight, policy validate/import/export
 * (YAML round trip, all or nothing), `check`, `key peek|reset` and `admin set-password`.
 */
import { request } from "node:http";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Repository, openDatabase } from "../src/index.js";
import { freePort, waitFor } from "../../../test/support/ports.js";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { call, runCli, signIn, spawnServe } from "./helpers.js";
import { tempDirs } from "./temp-dirs.js";

// Every test spawns several CLI processes (~1 s each, more on a busy machine).
vi.setConfig({ testTimeout: 120_000 });

const temp = tempDirs("sluice-cli-");
const tempDir = temp.dir;

/** `sluice admin <command> --data-dir <dir> <flags>`, to its end. */
const admin = (command: string, dir: string, flags: string[], env: Record<string, string> = {}) =>
  runCli(["admin", command, "--data-dir", dir, ...flags], env);

const POLICIES = `version: 1
policies:
  - name: api
    description: public API
    algorithm: gcra
    rules:
      - { limit: 100, period: 1m, burst: 20 }
  - name: login
    algorithm: sliding-log
    rules:
      - { limit: 5, period: 15m }
      - { limit: 20, period: 1d }
    blockDuration: 1h
    onStoreError: deny
    apps: []
`;

describe("help and configuration", () => {
  it("prints --help for every command", async () => {
    const [top, serve, user, imp, check] = await Promise.all([
      runCli(["--help"]),
      runCli(["serve", "--help"]),
      runCli(["admin", "create-user", "--help"]),
      runCli(["policy", "import", "--help"]),
      runCli(["check", "--help"]),
    ]);
    expect(top.output).toMatch(/serve[\s\S]*admin[\s\S]*policy[\s\S]*check/);
    for (const flag of [
      "--port",
      "--host",
      "--data-dir",
      "--database-url",
      "--redis-url",
      "--config",
      "env PORT",
      "env REDIS_URL",
    ])
      expect(serve.output).toContain(flag);
    expect(user.output).toContain("--username");
    expect(imp.output).toContain("--prune");
    expect(check.output).toContain("--cost");
  });

  it("names the bad field and where its value came from", async () => {
    const dir = tempDir();
    const flag = await runCli(["serve", "--port", "abc", "--data-dir", dir]);
    expect(flag.code).toBe(1);
    expect(flag.output).toContain(
      'port: must be an integer from 0 to 65535 (got "abc") (from --port)',
    );
    const env = await runCli(["serve", "--data-dir", dir], { PORT: "70000" });
    expect(env.output).toContain("(from env PORT)");
    const file = join(dir, "sluice.yaml");
    writeFileSync(file, "port: 8080\nprot: 1\npollIntervalMs: 5\n");
    const bad = await runCli(["serve", "--config", file]);
    expect(bad.code).toBe(1);
    expect(bad.output).toContain(`prot: unknown configuration key (from ${file})`);
    expect(bad.output).toContain(
      `pollIntervalMs: must be an integer from 20 to 10000 (got 5) (from ${file})`,
    );
    const url = await runCli(["serve", "--data-dir", dir], { DATABASE_URL: "sqlserver://x" });
    expect(url.output).toContain(
      "databaseUrl: must be a postgres://, postgresql://, mysql:// or mariadb:// URL (from env DATABASE_URL)",
    );
  });
});

describe("sluice serve", () => {
  it("with its counters unreachable: says so instead of 'ready', /readyz 503 until Redis answers", async () => {
    const dir = tempDir();
    const redisPort = await freePort();
    const serve = await spawnServe([
      "--data-dir",
      dir,
      "--redis-url",
      `redis://127.0.0.1:${redisPort}`,
    ]);
    let redis: RedisServer | undefined;
    try {
      await waitFor(() => serve.stderr().includes("--role admin\n"), 10_000);
      expect(serve.stderr()).toContain(
        [
          `  counters in:   redis`,
          "",
          `The counters are UNAVAILABLE: Redis is unreachable: connect ECONNREFUSED 127.0.0.1:${redisPort}.`,
          "Until they answer, each policy's onStoreError decides (allow by default: every request",
          "passes) and /readyz answers 503. Check the Redis address (--redis-url, SLUICE_REDIS_URL).",
        ].join("\n"),
      );
      const log = () => serve.output();
      expect(log()).not.toContain("sluice service ready");
      expect(log()).toContain("sluice service started, but its counters are unavailable");
      // The store's own line: once, naming the cause.
      expect(log().split("is unavailable (ECONNREFUSED").length - 1).toBe(1);
      expect((await fetch(`${serve.url}/readyz`)).status).toBe(503);
      redis = await startRedis([], redisPort);
      await waitFor(async () => (await fetch(`${serve.url}/readyz`)).status === 200, 20_000, 100);
      await waitFor(() => log().includes("is available again after"), 10_000, 50);
    } finally {
      await serve.stop();
      await redis?.stop();
    }
  });

  it("says how to create the first admin, and finishes an in-flight request on SIGTERM", async () => {
    const dir = tempDir();
    const serve = await spawnServe(["--data-dir", dir]);
    // In words, not JSON: where it listens, the admin page, and the command for the first admin.
    await waitFor(() => serve.stderr().includes("--role admin\n"), 10_000);
    expect(serve.stderr()).toContain(
      [
        `sluice is listening on ${serve.url}`,
        `  admin page:    ${serve.url}/admin/`,
        `  decision API:  POST ${serve.url}/v1/limit   (reference: ${serve.url}/openapi.json)`,
        `  policies in:   sqlite ${join(dir, "sluice.db")}`,
        `  counters in:   memory (this process only)`,
        "",
        "No admin user exists yet. Create the first one in the browser with this one-time link",
        "(it works once, on this node, for an hour):",
        `  ${serve.url}/admin/#/setup?token=su_`,
      ].join("\n"),
    );
    expect(serve.stderr()).toContain(
      [
        "or here:",
        `  npx sluice admin create-user --data-dir ${dir} --username <name> --password <password> --role admin`,
      ].join("\n"),
    );
    // The link creates the first admin (once); the token is never in the JSON log on stdout.
    const token = /#\/setup\?token=(su_[A-Za-z0-9_-]+)/.exec(serve.stderr())![1]!;
    expect(serve.output().replace(serve.stderr(), "")).not.toContain(token);
    const made = await call(serve.url, "POST", "/v1/admin/setup", {
      body: { token, username: "first", password: "first-password" },
    });
    expect(made.status).toBe(200);
    expect(made.body.user).toEqual({ username: "first", role: "admin", apps: [] });
    expect(
      (
        await call(serve.url, "POST", "/v1/admin/setup", {
          body: { token, username: "second", password: "second-password" },
        })
      ).status,
    ).toBe(409);
    // A browser pointed at the service lands on the admin page.
    const root = await fetch(`${serve.url}/`, { redirect: "manual" });
    expect(root.status).toBe(302);
    expect(root.headers.get("location")).toBe("/admin/");

    // A request whose body is still arriving when SIGTERM comes in.
    const body = JSON.stringify({ username: "nobody", password: "whatever" });
    const port = Number(new URL(serve.url).port);
    let req!: ReturnType<typeof request>;
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      req = request(
        {
          host: "127.0.0.1",
          port,
          method: "POST",
          path: "/v1/admin/login",
          headers: {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(body),
          },
        },
        (res) => {
          let text = "";
          res.on("data", (d: Buffer) => (text += d.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on("error", reject);
      req.write(body.slice(0, 10));
    });
    // Once the server counts it in flight (with the /metrics request itself: 2), stop the server.
    await waitFor(
      async () =>
        /^sluice_http_requests_in_flight 2$/m.test(
          await (await fetch(`${serve.url}/metrics`)).text(),
        ),
      10_000,
    );
    serve.child.kill("SIGTERM");
    await waitFor(() => serve.output().includes("shutting down"), 10_000);
    // New requests are turned away now (refused, or 503 while closing); the one in flight completes.
    const late = await fetch(`${serve.url}/healthz`).then(
      (r) => r.status,
      () => "refused",
    );
    expect([503, "refused"]).toContain(late);
    req.end(body.slice(10));
    const res = await response;
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body).error.code).toBe("unauthorized");
    expect(await serve.exited).toBe(0);
    expect(serve.output()).toContain("shutting down: finishing in-flight requests");
    expect(serve.output()).toContain('"msg":"stopped"');
  });
});

describe("policy files and check", () => {
  it("validates a file without a database, naming each bad field", async () => {
    const { dir, file: good } = temp.file("good.yaml", POLICIES);
    const ok = await runCli(["policy", "validate", good]);
    expect(ok.code).toBe(0);
    expect(ok.output).toContain("2 valid policies");
    const bad = join(dir, "bad.yaml");
    writeFileSync(
      bad,
      POLICIES.replace("limit: 100", "limit: -1")
        .replace("period: 15m", "period: soon")
        .replace("name: login", "name: api"),
    );
    const r = await runCli(["policy", "validate", bad]);
    expect(r.code).toBe(1);
    expect(r.output).toContain(
      "policies.0.rules.0.limit: limit must be a positive integer (got -1)",
    );
    expect(r.output).toContain("policies.1.rules.0.period");
    expect(r.output).toContain('policies.1.name: "api" is also defined at policies.0');
  });

  it("lets several processes create a new SQLite database at once", async () => {
    const data = join(tempDir(), "data");
    const runs = await Promise.all(
      [1, 2, 3, 4].map(() => runCli(["policy", "export", "--data-dir", data])),
    );
    expect(runs.map((r) => r.code)).toEqual([0, 0, 0, 0]);
  });

  it("imports all or nothing, exports the same YAML back, prunes, and checks a decision", async () => {
    const { dir, file } = temp.file("policies.yaml", POLICIES);
    const data = join(dir, "data");

    const dry = await runCli(["policy", "import", file, "--dry-run", "--data-dir", data]);
    expect(dry.output).toContain("dry run: would create 2");
    const imp = await runCli(["policy", "import", file, "--data-dir", data]);
    expect(imp.code).toBe(0);
    expect(imp.output).toContain("create 2, update 0, delete 0, unchanged 0");

    const out = join(dir, "export.yaml");
    expect((await runCli(["policy", "export", "--data-dir", data, "-o", out])).code).toBe(0);
    const exported = readFileSync(out, "utf8");
    expect(exported).toContain("period: 1m");
    // Round trip: the export imports as "unchanged" into the same database, and recreates it elsewhere.
    expect((await runCli(["policy", "import", out, "--data-dir", data])).output).toContain(
      "create 0, update 0, delete 0, unchanged 2",
    );
    const other = join(dir, "other");
    await runCli(["policy", "import", out, "--data-dir", other]);
    expect((await runCli(["policy", "export", "--data-dir", other])).output).toBe(exported);

    // One bad policy: nothing is written.
    const bad = join(dir, "bad.yaml");
    writeFileSync(
      bad,
      `${POLICIES}  - name: extra\n    rules: [{ limit: 0, period: 1s }]\n`.replace(
        "description: public API",
        "description: changed",
      ),
    );
    const refused = await runCli(["policy", "import", bad, "--data-dir", data]);
    expect(refused.code).toBe(1);
    expect(refused.output).toContain("policies.2.rules.0.limit");
    expect((await runCli(["policy", "export", "--data-dir", data])).output).toBe(exported);
    // Granting an app that does not exist is refused inside the transaction.
    writeFileSync(
      bad,
      POLICIES.replace("apps: []", "apps: [ghost]").replace(
        "description: public API",
        "description: changed",
      ),
    );
    const ghost = await runCli(["policy", "import", bad, "--data-dir", data]);
    expect(ghost.code).toBe(1);
    expect(ghost.output).toContain("policies.1.apps: unknown app(s): ghost");
    // The dry run refuses it too, rather than promising what the import will not do.
    const ghostDry = await runCli(["policy", "import", bad, "--dry-run", "--data-dir", data]);
    expect(ghostDry.code).toBe(1);
    expect(ghostDry.output).toContain("policies.1.apps: unknown app(s): ghost");
    expect(ghostDry.output).not.toContain("would");
    expect((await runCli(["policy", "export", "--data-dir", data])).output).toBe(exported);

    const one = join(dir, "one.yaml");
    writeFileSync(one, POLICIES.split("  - name: login")[0]!);
    const pruned = await runCli(["policy", "import", one, "--prune", "--data-dir", data]);
    expect(pruned.output).toContain("delete 1");
    expect(pruned.output).toContain("  - login");

    /** `sluice check <policy> <id> <flags> --memory` on the imported policies. */
    const checkOnFreshCounters = (policy: string, id: string, ...flags: string[]) =>
      runCli(["check", policy, id, "--data-dir", data, ...flags, "--memory"]);
    // Without Redis, check refuses: fresh counters here would say nothing of a service's.
    const noRedis = await runCli(["check", "api", "user-1", "--data-dir", data]);
    expect(noRedis.code).toBe(1);
    expect(noRedis.output).toContain("sluice check: no Redis given (--redis-url or REDIS_URL).");
    expect(noRedis.output).toContain("or --memory to try the policy on fresh counters");
    const check = await checkOnFreshCounters("api", "user-1", "--cost", "5");
    expect(check.code).toBe(0);
    expect(JSON.parse(check.output)).toMatchObject({
      allowed: true,
      policy: "api",
      cost: 5,
      remaining: 15,
    });
    const tooBig = await checkOnFreshCounters("api", "user-1", "--cost", "21");
    expect(tooBig.code).toBe(1);
    expect(tooBig.output).toContain("can never fit");
    // --peek asks about a request of --cost units, without charging.
    const peek = await checkOnFreshCounters("api", "u", "--peek", "--cost", "5");
    expect(peek.code).toBe(0);
    expect(JSON.parse(peek.output)).toMatchObject({ allowed: true, cost: 5, remaining: 20 });
    const peekTooBig = await checkOnFreshCounters("api", "u", "--peek", "--cost", "21");
    expect(peekTooBig.code).toBe(1);
    expect(peekTooBig.output).toContain("can never fit");
    const unknown = await checkOnFreshCounters("nope", "k");
    expect(unknown.code).toBe(1);
    expect(unknown.output).toContain('unknown policy "nope"');
  });

  it("creates users from the CLI (validated) and the server accepts them", async () => {
    const dir = tempDir();
    const bad = await admin("create-user", dir, ["--username", "a b", "--password", "short"]);
    expect(bad.code).toBe(1);
    expect(bad.output).toContain("--username");
    expect(bad.output).toContain("--password: must be at least 8 characters");
    // Only owners own apps, from the CLI too.
    const viewerWithApps = await admin("create-user", dir, [
      "--username",
      "vic",
      "--password",
      "long-enough",
      "--role",
      "viewer",
      "--apps",
      "web",
    ]);
    expect(viewerWithApps.code).toBe(1);
    expect(viewerWithApps.output).toContain("Invalid user:\n  - --apps: only owners own apps");
    const ok = await admin("create-user", dir, ["--username", "ops", "--role", "viewer"], {
      SLUICE_ADMIN_PASSWORD: "long-enough",
    });
    expect(ok.code).toBe(0);
    // No --role: an admin, by default.
    const root = await admin("create-user", dir, [
      "--username",
      "root",
      "--password",
      "root-password",
    ]);
    expect(root.code).toBe(0);
    // Two nodes on one SQLite data directory: a change through one is enforced by the other within a second.
    const [a, b] = await Promise.all([
      spawnServe(["--data-dir", dir]),
      spawnServe(["--data-dir", dir]),
    ]);
    try {
      const r = await call(a.url, "POST", "/v1/admin/login", {
        body: { username: "ops", password: "long-enough" },
      });
      expect(r.body.user).toEqual({ username: "ops", role: "viewer", apps: [] });
      const token = await signIn(a.url);
      const key = (await call(a.url, "POST", "/v1/admin/apps", { token, body: { name: "web" } }))
        .body.apiKey;
      const t0 = Date.now();
      await call(a.url, "POST", "/v1/admin/policies", {
        token,
        body: { name: "p", rules: [{ limit: 7, period: "1m" }], apps: ["web"] },
      });
      await waitFor(
        async () =>
          (await call(b.url, "POST", "/v1/limit", { token: key, body: { policy: "p", key: "k" } }))
            .body.limit === 7,
        1000,
        20,
      );
      expect(Date.now() - t0).toBeLessThan(1000);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});

describe("key peek and reset, set-password", () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("looks up and unblocks a key on the shared counters, audited; refuses without Redis", async () => {
    const { dir, file } = temp.file(
      "tiny.yaml",
      "version: 1\npolicies:\n  - name: tiny\n    rules: [{ limit: 2, period: 1m }]\n",
    );
    expect((await runCli(["policy", "import", file, "--data-dir", dir])).code).toBe(0);
    const on = ["--data-dir", dir, "--redis-url", redis.url];
    expect((await runCli(["check", "tiny", "u", ...on])).code).toBe(0);
    expect((await runCli(["check", "tiny", "u", ...on])).code).toBe(0);
    expect((await runCli(["check", "tiny", "u", ...on])).code).toBe(2);
    const peek = await runCli(["key", "peek", "tiny", "u", ...on]);
    expect(peek.code).toBe(0);
    expect(JSON.parse(peek.output)).toMatchObject({ allowed: false, remaining: 0 });
    const reset = await runCli(["key", "reset", "tiny", "u", ...on, "--actor", "ops"]);
    expect(reset.code).toBe(0);
    expect(reset.output).toBe('reset "u" under "tiny": 2 of 2 left (was 0, denied)\n');
    expect(JSON.parse((await runCli(["key", "peek", "tiny", "u", ...on])).output)).toMatchObject({
      allowed: true,
      remaining: 2,
    });
    const database = await openDatabase({ dataDir: dir });
    try {
      const [entry] = await new Repository(database).listAudit({ limit: 1, action: "key.reset" });
      expect(entry).toMatchObject({
        actor: "ops",
        target: "tiny",
        detail: { key: "u", via: "cli", before: { remaining: 0 }, after: { remaining: 2 } },
      });
    } finally {
      await database.close();
    }
    const noRedis = await runCli(["key", "reset", "tiny", "u", "--data-dir", dir]);
    expect(noRedis.code).toBe(1);
    expect(noRedis.output).toContain("sluice key reset: no Redis given");
    const unknown = await runCli(["key", "peek", "nope", "u", ...on]);
    expect(unknown.code).toBe(1);
    expect(unknown.output).toContain('unknown policy "nope"');
  });

  it("sets a locked-out user's password and ends their sessions", async () => {
    const dir = tempDir();
    expect(
      (
        await admin("create-user", dir, ["--username", "root", "--role", "admin"], {
          SLUICE_ADMIN_PASSWORD: "forgotten-1",
        })
      ).code,
    ).toBe(0);
    const short = await admin("set-password", dir, ["--username", "root"], {
      SLUICE_ADMIN_PASSWORD: "short",
    });
    expect(short.code).toBe(1);
    expect(short.output).toContain(
      "Invalid password:\n  - --password: must be at least 8 characters",
    );
    /** `sluice admin set-password` of `username` to `password`. */
    const setPassword = (username: string, password: string) =>
      admin("set-password", dir, ["--username", username, "--password", password]);
    const nobody = await setPassword("nobody", "long-enough");
    expect(nobody.code).toBe(1);
    expect(nobody.output).toContain('unknown user "nobody"');
    const database = await openDatabase({ dataDir: dir });
    try {
      const repo = new Repository(database);
      const session = await repo.createSession("root", 60_000);
      const ok = await setPassword("root", "remembered-2");
      expect(ok.code).toBe(0);
      expect(ok.output).toBe('password of "root" set; their sessions have ended\n');
      expect(await repo.authenticateSession(session.token)).toBeUndefined();
      expect(await repo.checkPassword("root", "remembered-2")).toMatchObject({ role: "admin" });
      expect(await repo.checkPassword("root", "forgotten-1")).toBeUndefined();
    } finally {
      await database.close();
    }
  });
});
