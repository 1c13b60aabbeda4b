/**
 * The service with its dependencies failing for real: the SQLite file deleted or replaced while
 * it runs, a read-only SQLite file, and PostgreSQL and Redis hung (SIGSTOP). In each case
 * `/readyz` answers in time and names what failed, and no write is acknowledged that could not
 * be read back; requests fail within their deadline with `database_unavailable` (503).
 */
import { spawn } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  linkSync,
  mkdtempSync,
  renameSync,
  rmSync,
  unlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, waitFor } from "../../../test/support/ports.js";
import { type PostgresServer, startPostgres } from "../../../test/support/postgres.js";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { ROOT, type TestService, call, runCli, startService } from "./helpers.js";

/** Runs `work` and returns its result with how long it took. */
async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  const value = await work();
  return { value, ms: Date.now() - started };
}

describe("a SQLite file deleted or replaced while the service runs", () => {
  let s: TestService;
  let file: string;
  beforeAll(async () => {
    s = await startService();
    file = join(s.dataDir, "sluice.db");
    expect((await s.call("POST", "/v1/admin/apps", { body: { name: "before" } })).status).toBe(201);
  });
  afterAll(async () => {
    await s?.close();
  });

  it("deleted: readiness fails and writes are refused (503), never acknowledged", async () => {
    // A second name keeps the file itself, to put it back afterwards.
    const saved = `${file}.saved`;
    linkSync(file, saved);
    unlinkSync(file);
    try {
      const ready = await call(s.url, "GET", "/readyz");
      expect(ready.status).toBe(503);
      expect(ready.body.checks.database).toMatch(/^unavailable: the database file .* was deleted/);
      const write = await s.call("POST", "/v1/admin/apps", { body: { name: "lost" } });
      expect(write.status).toBe(503);
      expect(write.body.error.code).toBe("database_unavailable");
      expect(write.body.error.message).toContain("was deleted while the service ran");
      // A sign-in writes a session: refused too, rather than handing out a token that would
      // be gone after a restart.
      const login = await call(s.url, "POST", "/v1/admin/login", {
        body: { username: "root", password: "root-password" },
      });
      expect(login.status).toBe(503);
      // Reads still answer from the open file.
      expect((await s.call("GET", "/v1/admin/apps")).status).toBe(200);
    } finally {
      renameSync(saved, file);
    }
    // The file it opened is back: the service takes writes again.
    expect((await call(s.url, "GET", "/readyz")).status).toBe(200);
    expect((await s.call("POST", "/v1/admin/apps", { body: { name: "back" } })).status).toBe(201);
  });

  it("replaced (even by a copy of itself): readiness fails and writes are refused", async () => {
    copyFileSync(file, `${file}.copy`);
    renameSync(`${file}.copy`, file);
    expect((await call(s.url, "GET", "/readyz")).body.checks.database).toMatch(
      /^unavailable: the database file .* was replaced/,
    );
    const write = await s.call("POST", "/v1/admin/apps", { body: { name: "lost-too" } });
    expect(write.status).toBe(503);
    expect(write.body.error.code).toBe("database_unavailable");
    expect(write.body.error.message).toContain("was replaced while the service ran");
  });
});

describe("a read-only SQLite file", () => {
  // A read-only file is read-only for its owner only when the process is not root (root writes
  // through any permission bits by its CAP_DAC_OVERRIDE capability). So when the test runs as
  // root the service runs without that capability (util-linux's setpriv drops it), on a
  // database file with mode 0444: the same refusal an operator's read-only file gives.
  const asRoot = process.getuid?.() === 0;
  const dropCaps = asRoot
    ? [
        "setpriv",
        "--bounding-set=-dac_override,-dac_read_search",
        "--inh-caps=-dac_override,-dac_read_search",
        "--",
      ]
    : [];
  let dir: string;
  let url: string;
  let stop: () => Promise<void>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "sluice-ro-"));
    const created = await runCli([
      "admin",
      "create-user",
      "--data-dir",
      dir,
      "--username",
      "root",
      "--password",
      "root-password",
      "--role",
      "admin",
    ]);
    expect(created.code).toBe(0);
    chmodSync(join(dir, "sluice.db"), 0o444);
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    const [command, ...prefix] = [...dropCaps, process.execPath];
    const child = spawn(
      command!,
      [
        ...prefix,
        join(ROOT, "packages/server/dist/cli.js"),
        "serve",
        "--port",
        String(port),
        "--data-dir",
        dir,
        "--log-level",
        "silent",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const exited = new Promise((resolve) => child.once("exit", resolve));
    stop = async () => {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    };
    await waitFor(async () => {
      if (child.exitCode !== null) throw new Error(`sluice serve exited: ${err}`);
      return (await fetch(`${url}/healthz`)).ok;
    }, 20_000).catch((e: unknown) => {
      throw new Error(`sluice serve did not start: ${String(e)}\n${err}`);
    });
  });
  afterAll(async () => {
    await stop?.();
    rmSync(dir, { recursive: true, force: true });
  });

  it("fails readiness, and a sign-in answers 503 database_unavailable, not 500", async () => {
    const ready = await call(url, "GET", "/readyz");
    expect(ready.status).toBe(503);
    expect(ready.body.checks).toEqual({
      counters: "ok",
      database: expect.stringMatching(/^unavailable: it is read-only/),
    });
    const login = await call(url, "POST", "/v1/admin/login", {
      body: { username: "root", password: "root-password" },
    });
    expect(login.status).toBe(503);
    expect(login.body.error).toEqual({
      code: "database_unavailable",
      message: expect.stringContaining("read-only"),
    });
  });
});

describe("a hung PostgreSQL (SIGSTOP)", () => {
  let pg: PostgresServer;
  let s: TestService;
  beforeAll(async () => {
    pg = await startPostgres();
    s = await startService({
      databaseUrl: await pg.createDatabase("hung"),
      values: { databaseTimeoutMs: 500, readinessTimeoutMs: 300 },
    });
  });
  afterAll(async () => {
    pg?.resume();
    await s?.close();
    await pg?.stop();
  });

  it("admin requests fail within the deadline with 503; readiness names the database; it recovers", async () => {
    pg.pause();
    try {
      const read = await timed(() => s.call("GET", "/v1/admin/policies"));
      expect(read.value.status).toBe(503);
      expect(read.value.body.error.code).toBe("database_unavailable");
      expect(read.ms).toBeLessThan(3000);
      const write = await timed(() => s.call("POST", "/v1/admin/apps", { body: { name: "x" } }));
      expect(write.value.status).toBe(503);
      expect(write.ms).toBeLessThan(3000);
      const ready = await timed(() => call(s.url, "GET", "/readyz"));
      expect(ready.value.status).toBe(503);
      expect(ready.value.body.checks).toEqual({
        database: "unavailable: the database did not answer within 300 ms",
        counters: "ok",
      });
      expect(ready.ms).toBeLessThan(1500);
    } finally {
      pg.resume();
    }
    // The connections that timed out were replaced: everything works again.
    await waitFor(async () => (await s.call("GET", "/v1/admin/policies")).status === 200, 10_000);
    expect((await s.call("POST", "/v1/admin/apps", { body: { name: "after" } })).status).toBe(201);
    expect((await call(s.url, "GET", "/readyz")).status).toBe(200);
  });
});

describe("a hung Redis (SIGSTOP)", () => {
  let redis: RedisServer;
  let s: TestService;
  beforeAll(async () => {
    redis = await startRedis();
    s = await startService({ redisUrl: redis.url, values: { readinessTimeoutMs: 300 } });
  });
  afterAll(async () => {
    redis?.resume();
    await s?.close();
    await redis?.stop();
  });

  it("/readyz answers within its timeout, naming the counter store", async () => {
    expect((await call(s.url, "GET", "/readyz")).status).toBe(200);
    redis.pause();
    try {
      const ready = await timed(() => call(s.url, "GET", "/readyz"));
      expect(ready.value.status).toBe(503);
      expect(ready.value.body.checks).toEqual({
        database: "ok",
        counters: "unavailable: the counter store did not answer within 300 ms",
      });
      expect(ready.ms).toBeLessThan(1500);
    } finally {
      redis.resume();
    }
    await waitFor(async () => (await call(s.url, "GET", "/readyz")).status === 200, 10_000);
  });
});
