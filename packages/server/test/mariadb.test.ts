/**
 * The service on a MariaDB this suite starts (a fresh data directory in a temp dir, the server's
 * compiled-in defaults: `latin1`, case-insensitive collations) with Redis counters: what MySQL
 * does differently (connection settings, writers serializing, sign-ins not deadlocking,
 * migrations that are not transactional), propagation of a change between two `sluice serve`
 * processes within a second, and a database outage. The whole SQL suite runs on MariaDB too
 * (./databases.ts).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pino } from "pino";
import { Repository, createService, loadConfig, openDatabase, toApiError } from "../src/index.js";
import { type MariaDbServer, startMariaDb } from "../../../test/support/mariadb.js";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { waitFor } from "../../../test/support/ports.js";
import { type TestService, call, startService } from "./helpers.js";
import { decisionsOutliveTheDatabase, describeTwoNodes } from "./sql-servers.js";

let maria: MariaDbServer;
let redis: RedisServer;
let dataDir: string;

beforeAll(async () => {
  [maria, redis] = await Promise.all([startMariaDb(), startRedis()]);
  dataDir = mkdtempSync(join(tmpdir(), "sluice-mariadb-test-"));
});
afterAll(async () => {
  await Promise.all([maria?.stop(), redis?.stop()]);
  rmSync(dataDir, { recursive: true, force: true });
});

describe("on MariaDB with Redis counters (in process)", () => {
  let s: TestService;
  beforeAll(async () => {
    s = await startService({
      databaseUrl: await maria.createDatabase("inproc"),
      redisUrl: redis.url,
      values: { loginLimitPerUser: 100, loginLimitPerIp: 100 },
    });
    await s.createApp("web");
  });
  afterAll(async () => {
    await s?.close();
  });

  it("sets up every connection: UTC, strict, READ COMMITTED, utf8mb4 compared byte for byte", async () => {
    const db = s.service.context.repo.database.db;
    // Several at once, so that more than one pooled connection answers.
    const rows = await Promise.all(
      Array.from({ length: 4 }, () =>
        sql<Record<string, string>>`select @@session.time_zone as tz, @@session.sql_mode as mode,
          @@session.tx_isolation as isolation, @@session.collation_connection as collation,
          @@session.character_set_server as server_charset`.execute(db),
      ),
    );
    for (const r of rows)
      expect(r.rows[0]).toMatchObject({
        tz: "+00:00",
        mode: expect.stringContaining("STRICT_ALL_TABLES"),
        isolation: "READ-COMMITTED",
        collation: "utf8mb4_bin",
        // The server's own default stays what it is: the tables say what they need.
        server_charset: "latin1",
      });
    const tables = await sql<{ name: string; collation: string }>`
      select table_name as name, table_collation as collation from information_schema.tables
      where table_schema = database() and table_name not like 'kysely%'`.execute(db);
    expect(tables.rows.length).toBe(15);
    for (const t of tables.rows) expect(t, t.name).toMatchObject({ collation: "utf8mb4_bin" });
    expect(s.service.context.repo.database.location).toBe(
      `mariadb://sluice:***@127.0.0.1:${maria.port}/inproc`,
    );
  });

  it("writers serialize on the revision row: eight updates at once make versions 1–8", async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        s.call("PUT", "/v1/admin/policies/race", {
          body: { rules: [{ limit: i + 1, period: "1m" }], apps: ["web"] },
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(200));
    const versions = (await s.call("GET", "/v1/admin/policies/race/versions")).body.versions.map(
      (v: { version: number }) => v.version,
    );
    expect(versions).toEqual([8, 7, 6, 5, 4, 3, 2, 1]);
  });

  it("sign-ins at once all succeed (each deletes expired sessions, then adds one)", async () => {
    const results = await Promise.all(
      Array.from({ length: 12 }, () =>
        call(s.url, "POST", "/v1/admin/login", {
          body: { username: "root", password: "root-password" },
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(12).fill(200));
  });

  it("shadow counts summed over reports are exact (an upsert; BIGINT read back)", async () => {
    await s.createPolicy({ name: "counted", rules: [{ limit: 100, period: "1m" }], apps: ["web"] });
    await s.call("PUT", "/v1/admin/policies/counted/draft", {
      body: { rules: [{ limit: 2, period: "1m" }], apps: ["web"] },
    });
    const repo = s.service.context.repo;
    const draft = await repo.policies.getDraft("counted");
    const big = 2 ** 40;
    const report = { evaluated: big, wouldDeny: 3, wouldDenyNewly: 2, wouldAllowNewly: 1 };
    await Promise.all([
      repo.addDraftStats(draft!.id, report),
      repo.addDraftStats(draft!.id, report),
    ]);
    expect(await repo.getDraftStats(draft!.id)).toEqual({
      evaluated: 2 * big,
      wouldDeny: 6,
      wouldDenyNewly: 4,
      wouldAllowNewly: 2,
    });
  });
});

describe("migrations on MySQL, where DDL is not transactional", () => {
  it("nodes migrating one empty database at once all start", async () => {
    const url = await maria.createDatabase("race");
    const nodes = await Promise.all(
      Array.from({ length: 4 }, () => openDatabase({ databaseUrl: url, dataDir })),
    );
    expect(await Promise.all(nodes.map((n) => new Repository(n).revision()))).toEqual([0, 0, 0, 0]);
    const migrated = await sql<{
      name: string;
    }>`select name from kysely_migration order by name`.execute(nodes[0]!.db);
    expect(migrated.rows.map((r) => r.name)).toEqual([
      "0001_initial",
      "0002_draft_stats",
      "0003_only_owners_own_apps",
      "0004_policy_clients",
      "0005_envoy_domains",
      "0006_traffic",
      "0007_changes",
      "0008_documents",
      "0009_traffic_key_slots",
      "0010_policy_overrides",
    ]);
    await Promise.all(nodes.map((n) => n.close()));

    // Once migrated, a user with SELECT, INSERT, UPDATE and DELETE alone runs it.
    await maria.query(`create user 'dml'@'%' identified by 'dml-pw'`);
    await maria.query(`grant select, insert, update, delete on race.* to 'dml'@'%'`);
    const dml = await openDatabase({ databaseUrl: maria.urlOf("race", "dml", "dml-pw"), dataDir });
    const repo = new Repository(dml);
    await repo.createApp("web", "", "test");
    expect(await repo.revision()).toBe(1);
    await dml.close();
  });

  it("0004 (embedded clients) runs again over its own work: each of its steps can", async () => {
    const url = await maria.createDatabase("again0004");
    const first = await openDatabase({ databaseUrl: url, dataDir });
    await new Repository(first).recordClientReport(
      { app: "web", instance: "p1", host: "h", version: "sluice/0.1.0", revision: 1 },
      [],
    );
    // As if the process had died after its steps but before Kysely recorded the migration.
    await sql`delete from kysely_migration where name = '0004_policy_clients'`.execute(first.db);
    await first.close();
    const again = await openDatabase({ databaseUrl: url, dataDir });
    const { clients } = await new Repository(again).listClients("1970-01-01T00:00:00.000Z");
    expect(clients.map((c) => [c.app, c.instance])).toEqual([["web", "p1"]]);
    await again.close();
  });

  it("a step that fails says which, and what was applied; the next start resumes there", async () => {
    const name = "partial";
    await maria.createDatabase(name);
    // A user who may create tables but not indexes: the seventh step of 0001 fails.
    await maria.query(`create user 'noindex'@'%' identified by 'noindex-pw'`);
    await maria.query(
      `grant select, insert, update, delete, create, drop, alter on \`${name}\`.* to 'noindex'@'%'`,
    );
    const where = { databaseUrl: maria.urlOf(name, "noindex", "noindex-pw"), dataDir };
    await expect(openDatabase(where)).rejects.toThrow(
      /^database migration 0001_initial failed at step 7 of 10 \(create index sessions_username\): INDEX command denied .*; MySQL commits each step on its own: steps 1–6 are applied, the rest not; every step can run again, so the next start resumes at step 7$/,
    );
    const tables = (await maria.query(
      `select table_name as t from information_schema.tables where table_schema = ? order by t`,
      [name],
    )) as { t: string }[];
    expect(tables.map((r) => r.t)).toEqual([
      "apps",
      "kysely_migration",
      "kysely_migration_lock",
      "policies",
      "policy_drafts",
      "policy_versions",
      "sessions",
      "sluice_migration_step",
      "users",
    ]);

    // As if the process had died between applying step 6 and recording it: step 6 runs again,
    // harmlessly (each step is idempotent).
    await maria.query(`delete from \`${name}\`.sluice_migration_step where step = 6`);
    await maria.query(`grant index on \`${name}\`.* to 'noindex'@'%'`);
    // `sluice serve` starts, and its log says what it resumed.
    const log: { level: number; msg: string }[] = [];
    const service = await createService(
      loadConfig({ values: { ...where, port: 0, host: "127.0.0.1", logLevel: "warn" } }),
      {
        logger: pino({ level: "warn" }, { write: (line: string) => log.push(JSON.parse(line)) }),
      },
    );
    try {
      expect(log).toEqual([
        expect.objectContaining({
          level: 40,
          msg: "database migration 0001_initial was left part-way by an earlier start: 5 of 10 steps were applied; resuming at step 6 (create table sessions)",
        }),
      ]);
      const repo = service.context.repo;
      expect(await repo.revision()).toBe(0);
      const records = await sql`select * from sluice_migration_step`.execute(repo.database.db);
      expect(records.rows).toEqual([]);
    } finally {
      await service.close();
    }
  });
});

describeTwoNodes("MariaDB", async () => ({
  DATABASE_URL: await maria.createDatabase("nodes"),
  REDIS_URL: redis.url,
}));

describe("a database outage", () => {
  it("a query cut off by the server dying, or by its connection being killed, is the database being unavailable", async () => {
    const own = await startMariaDb();
    const database = await openDatabase({
      databaseUrl: await own.createDatabase("cut"),
      dataDir,
    });
    try {
      /** Starts a long query and returns it with its connection's id on the server. */
      const longQuery = async () => {
        const query = sql`select sleep(30)`.execute(database.db);
        let id = 0;
        await waitFor(async () => {
          const rows = (await own.query(
            "select id from information_schema.processlist where info = 'select sleep(30)'",
          )) as { id: number }[];
          id = rows[0]?.id ?? 0;
          return id > 0;
        });
        return {
          query: query.then(
            () => undefined,
            (err: unknown) => err,
          ),
          id,
        };
      };
      const killed = await longQuery();
      await own.query(`kill ${killed.id}`);
      expect(toApiError(await killed.query).code).toBe("database_unavailable");

      const cut = await longQuery();
      own.process.kill("SIGKILL");
      expect(toApiError(await cut.query).code).toBe("database_unavailable");
    } finally {
      await database.close().catch(() => {});
      await own.stop();
    }
  });

  it("hung (SIGSTOP): admin requests fail within the deadline with 503, readiness names the database, and it recovers", async () => {
    const own = await startMariaDb();
    const s = await startService({
      databaseUrl: await own.createDatabase("hung"),
      values: { databaseTimeoutMs: 500, readinessTimeoutMs: 300 },
    });
    const timed = async <T>(work: () => Promise<T>) => {
      const t0 = performance.now();
      const value = await work();
      return { value, ms: performance.now() - t0 };
    };
    try {
      own.process.kill("SIGSTOP");
      try {
        // Twice each: the second request must not queue behind the first one's hung query.
        for (let i = 0; i < 2; i++) {
          const read = await timed(() => s.call("GET", "/v1/admin/policies"));
          expect(read.value.status).toBe(503);
          expect(read.value.body.error.code).toBe("database_unavailable");
          expect(read.ms).toBeLessThan(3000);
          const write = await timed(() =>
            s.call("POST", "/v1/admin/apps", { body: { name: `x${i}` } }),
          );
          expect(write.value.status).toBe(503);
          expect(write.ms).toBeLessThan(3000);
        }
        const ready = await timed(() => call(s.url, "GET", "/readyz"));
        expect(ready.value.status).toBe(503);
        expect(ready.value.body.checks.database).toMatch(/^unavailable/);
        expect(ready.ms).toBeLessThan(1500);
      } finally {
        own.process.kill("SIGCONT");
      }
      // The connections that timed out were destroyed and replaced: everything works again.
      await waitFor(async () => (await s.call("GET", "/v1/admin/policies")).status === 200, 10_000);
      expect((await s.call("POST", "/v1/admin/apps", { body: { name: "after" } })).status).toBe(
        201,
      );
      expect((await call(s.url, "GET", "/readyz")).status).toBe(200);
    } finally {
      own.process.kill("SIGCONT");
      await s.close();
      await own.stop();
    }
  });

  it("keeps decisions going on the last loaded policies; the admin API and /readyz answer 503", async () => {
    const own = await startMariaDb();
    const s = await startService({ databaseUrl: await own.createDatabase("outage") });
    try {
      await decisionsOutliveTheDatabase(s, () => own.stop());
      const ready = await call(s.url, "GET", "/readyz");
      expect(ready.status).toBe(503);
      expect(ready.body.checks.database).toMatch(/^unavailable/);
    } finally {
      await s.close();
      await own.stop();
    }
  });
});
