/**
 * The `sluice` command, spawned from the sources: help, configuration errors, the first-start
 * hint, graceful shutdown with a request in flight, policy validate/import/export (YAML round
 * trip, all or nothing) and `check`.
 */
import { request } from "node:http";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { waitFor } from "../../../test/support/ports.js";
import { call, runCli, spawnServe } from "./helpers.js";

// Every test spawns several CLI processes (~1 s each, more on a busy machine).
vi.setConfig({ testTimeout: 120_000 });

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "sluice-cli-"));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

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
        "No admin user exists yet. Create the first one with:",
        `  npx sluice admin create-user --data-dir ${dir} --username <name> --password <password> --role admin`,
      ].join("\n"),
    );
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
    const dir = tempDir();
    const good = join(dir, "good.yaml");
    writeFileSync(good, POLICIES);
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
    const dir = tempDir();
    const data = join(dir, "data");
    const file = join(dir, "policies.yaml");
    writeFileSync(file, POLICIES);

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
    expect((await runCli(["policy", "export", "--data-dir", data])).output).toBe(exported);

    const one = join(dir, "one.yaml");
    writeFileSync(one, POLICIES.split("  - name: login")[0]!);
    const pruned = await runCli(["policy", "import", one, "--prune", "--data-dir", data]);
    expect(pruned.output).toContain("delete 1");
    expect(pruned.output).toContain("  - login");

    const check = await runCli(["check", "api", "user-1", "--data-dir", data, "--cost", "5"]);
    expect(check.code).toBe(0);
    expect(JSON.parse(check.output)).toMatchObject({
      allowed: true,
      policy: "api",
      cost: 5,
      remaining: 15,
    });
    const tooBig = await runCli(["check", "api", "user-1", "--data-dir", data, "--cost", "21"]);
    expect(tooBig.code).toBe(1);
    expect(tooBig.output).toContain("can never fit");
    // --peek asks about a request of --cost units, without charging.
    const peek = await runCli(["check", "api", "u", "--data-dir", data, "--peek", "--cost", "5"]);
    expect(peek.code).toBe(0);
    expect(JSON.parse(peek.output)).toMatchObject({ allowed: true, cost: 5, remaining: 20 });
    const peekTooBig = await runCli([
      "check",
      "api",
      "u",
      "--data-dir",
      data,
      "--peek",
      "--cost",
      "21",
    ]);
    expect(peekTooBig.code).toBe(1);
    expect(peekTooBig.output).toContain("can never fit");
    const unknown = await runCli(["check", "nope", "k", "--data-dir", data]);
    expect(unknown.code).toBe(1);
    expect(unknown.output).toContain('unknown policy "nope"');
  });

  it("creates users from the CLI (validated) and the server accepts them", async () => {
    const dir = tempDir();
    const bad = await runCli([
      "admin",
      "create-user",
      "--data-dir",
      dir,
      "--username",
      "a b",
      "--password",
      "short",
    ]);
    expect(bad.code).toBe(1);
    expect(bad.output).toContain("--username");
    expect(bad.output).toContain("--password: must be at least 8 characters");
    // Only owners own apps, from the CLI too.
    const viewerWithApps = await runCli([
      "admin",
      "create-user",
      "--data-dir",
      dir,
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
    const ok = await runCli(
      ["admin", "create-user", "--data-dir", dir, "--username", "ops", "--role", "viewer"],
      { SLUICE_ADMIN_PASSWORD: "long-enough" },
    );
    expect(ok.code).toBe(0);
    const admin = await runCli([
      "admin",
      "create-user",
      "--data-dir",
      dir,
      "--username",
      "root",
      "--password",
      "root-password",
    ]);
    expect(admin.code).toBe(0);
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
      const token = (
        await call(a.url, "POST", "/v1/admin/login", {
          body: { username: "root", password: "root-password" },
        })
      ).body.token;
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
