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
import { type Logger, pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, waitFor } from "../../../test/support/ports.js";
import { type PostgresServer, startPostgres } from "../../../test/support/postgres.js";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { ROOT, type TestService, call, createRootWithCli, startService } from "./helpers.js";

/** Runs `work` and returns its result with how long it took. */
async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  const value = await work();
  return { value, ms: Date.now() - started };
}

/** A logger at info whose lines are kept, for what the service says of its dependencies. */
function keptLog(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: "info" },
    { write: (text: string) => void lines.push(JSON.parse(text) as Record<string, unknown>) },
  );
  return { logger, lines };
}

describe("a SQLite file deleted or replaced while the service runs", () => {
  let s: TestService;
  let file: string;
  let viewer: string;
  const log = keptLog();
  let t = 1_800_000_000_000;
  beforeAll(async () => {
    s = await startService({ logger: log.logger, now: () => t });
    file = join(s.dataDir, "sluice.db");
    expect((await s.call("POST", "/v1/admin/apps", { body: { name: "before" } })).status).toBe(201);
    viewer = await s.createUser("vera", "viewer");
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
      // Unauthenticated callers (a balancer's probe, anyone who reaches the port) learn which
      // dependency failed, never where the data lives.
      const ready = await call(s.url, "GET", "/readyz");
      expect(ready.status).toBe(503);
      expect(ready.body.checks).toEqual({ database: "unavailable", counters: "ok" });
      expect(ready.body.note).toMatch(/in the service's log, and in this answer for an admin/);
      expect(JSON.stringify(ready.body)).not.toContain(s.dataDir);
      // A viewer's session is not enough; an admin's shows the cause.
      const asViewer = await call(s.url, "GET", "/readyz", { token: viewer });
      expect(asViewer.body.checks).toEqual({ database: "unavailable", counters: "ok" });
      expect(asViewer.body.note).toMatch(/admins only \(you are viewer\)/);
      const asAdmin = await s.call("GET", "/readyz");
      expect(asAdmin.status).toBe(503);
      expect(asAdmin.body.checks.database).toBe(
        `unavailable: the database file ${file} was deleted while the service ran: writes would be lost at the next restart; restore the file (or restart on a new one)`,
      );
      expect(asAdmin.body).not.toHaveProperty("note");
      const bogus = await call(s.url, "GET", "/readyz", { token: "st_nope" });
      expect(bogus.body.checks.database).toBe("unavailable");
      expect(bogus.body.note).toMatch(/session token was not accepted/);
      // The log has the cause, once while it lasts.
      const said = log.lines.filter((l) => l.msg === "not ready: database unavailable");
      expect(said).toHaveLength(1);
      expect(said[0]).toMatchObject({ level: 40, component: "database" });
      expect(said[0]!.cause).toContain(file);
      const write = await s.call("POST", "/v1/admin/apps", { body: { name: "lost" } });
      expect(write.status).toBe(503);
      expect(write.body.error.code).toBe("database_unavailable");
      expect(write.body.error.message).toContain("was deleted while the service ran");
      expect(write.body.error.message).not.toContain(s.dataDir);
      // A sign-in writes a session: refused too, rather than handing out a token that would
      // be gone after a restart — and an anonymous caller is not told where the file was.
      const login = await call(s.url, "POST", "/v1/admin/login", {
        body: { username: "root", password: "root-password" },
      });
      expect(login.status).toBe(503);
      expect(JSON.stringify(login.body)).not.toContain(s.dataDir);
      // Reads still answer from the open file.
      expect((await s.call("GET", "/v1/admin/apps")).status).toBe(200);
      // A minute on, still failing: said again (the log shows the outage goes on).
      t += 60_000;
      await call(s.url, "GET", "/readyz");
      expect(log.lines.filter((l) => l.msg === "not ready: database unavailable")).toHaveLength(2);
    } finally {
      renameSync(saved, file);
    }
    // The file it opened is back: the service takes writes again, and says so once.
    expect((await call(s.url, "GET", "/readyz")).status).toBe(200);
    expect((await call(s.url, "GET", "/readyz")).body).toEqual({
      status: "ready",
      checks: { database: "ok", counters: "ok" },
      revision: expect.any(Number),
    });
    expect(log.lines.filter((l) => l.msg === "ready again: database answers")).toHaveLength(1);
    expect((await s.call("POST", "/v1/admin/apps", { body: { name: "back" } })).status).toBe(201);
  });

  it("replaced (even by a copy of itself): readiness fails and writes are refused", async () => {
    copyFileSync(file, `${file}.copy`);
    renameSync(`${file}.copy`, file);
    expect((await call(s.url, "GET", "/readyz")).body.checks.database).toBe("unavailable");
    expect((await s.call("GET", "/readyz")).body.checks.database).toMatch(
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
    const created = await createRootWithCli({}, ["--data-dir", dir]);
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
    // No session can be made (a sign-in writes one): the cause is in the log alone.
    expect(ready.body.checks).toEqual({ counters: "ok", database: "unavailable" });
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
      // An admin's session cannot be checked in a database that does not answer: the cause is
      // in the log, and the answer says so, within the readiness deadline all the same.
      const ready = await timed(() => s.call("GET", "/readyz"));
      expect(ready.value.status).toBe(503);
      expect(ready.value.body.checks).toEqual({ database: "unavailable", counters: "ok" });
      expect(ready.value.body.note).toMatch(/your session could not be checked/);
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
      expect(ready.value.body.checks).toEqual({ database: "ok", counters: "unavailable" });
      expect(ready.ms).toBeLessThan(1500);
      // An admin's session is checked beside the dependencies, within the same deadline.
      const asAdmin = await timed(() => s.call("GET", "/readyz"));
      expect(asAdmin.value.body.checks).toEqual({
        database: "ok",
        counters: "unavailable: the counter store did not answer within 300 ms",
      });
      expect(asAdmin.ms).toBeLessThan(1500);
    } finally {
      redis.resume();
    }
    await waitFor(async () => (await call(s.url, "GET", "/readyz")).status === 200, 10_000);
  });
});
