/**
 * The service on a PostgreSQL this suite starts (initdb in a temp dir) with Redis counters:
 * the API end to end, propagation of a change between two `sluice serve` processes within a
 * second, and a Redis outage (503 / onStoreError).
 */
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PostgresServer, startPostgres } from "../../../test/support/postgres.js";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { waitFor } from "../../../test/support/ports.js";
import { type TestService, call, startService } from "./helpers.js";
import { decisionsOutliveTheDatabase, describeTwoNodes } from "./sql-servers.js";

let pg: PostgresServer;
let redis: RedisServer;

beforeAll(async () => {
  [pg, redis] = await Promise.all([startPostgres(), startRedis()]);
});
afterAll(async () => {
  await Promise.all([pg?.stop(), redis?.stop()]);
});

describe("on PostgreSQL with Redis counters (in process)", () => {
  let s: TestService;
  beforeAll(async () => {
    s = await startService({ databaseUrl: await pg.createDatabase("inproc"), redisUrl: redis.url });
  });
  afterAll(async () => {
    await s?.close();
  });

  it("decides, enforces grants, versions and refuses bad input without writing", async () => {
    const key = await s.createApp("web");
    await s.createApp("other");
    await s.createPolicy({
      name: "api",
      algorithm: "sliding-window",
      rules: [{ limit: 2, period: "1m" }],
      apps: ["web"],
    });
    await s.createPolicy({ name: "private", rules: [{ limit: 2, period: "1m" }], apps: ["other"] });
    const allowed = [];
    for (let i = 0; i < 3; i++)
      allowed.push(
        (await call(s.url, "POST", "/v1/limit", { token: key, body: { policy: "api", key: "u" } }))
          .body.allowed,
      );
    expect(allowed).toEqual([true, true, false]);
    expect(
      (
        await call(s.url, "POST", "/v1/limit", {
          token: key,
          body: { policy: "private", key: "u" },
        })
      ).status,
    ).toBe(403);
    expect(
      (await call(s.url, "POST", "/v1/limit", { token: key, body: { policy: "nope", key: "u" } }))
        .status,
    ).toBe(404);
    expect(
      (await call(s.url, "POST", "/v1/limit", { body: { policy: "api", key: "u" } })).status,
    ).toBe(401);

    const db = s.service.context.repo.database.db;
    const before = await db.selectFrom("document_versions").selectAll().execute();
    const bad = await s.call("PUT", "/v1/admin/policies/api", {
      body: { rules: [{ limit: 2, period: "1m", burst: 0 }], apps: ["web"] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues[0].path).toBe("rules.0.burst");
    const unknownApp = await s.call("PUT", "/v1/admin/policies/api", {
      body: { rules: [{ limit: 2, period: "1m" }], apps: ["ghost"] },
    });
    expect(unknownApp.status).toBe(400);
    expect(await db.selectFrom("document_versions").selectAll().execute()).toEqual(before);

    await s.call("PUT", "/v1/admin/policies/api", {
      body: { rules: [{ limit: 5, period: "1m" }], apps: ["web"] },
    });
    expect((await s.call("POST", "/v1/admin/policies/api/versions/1/restore")).body.version).toBe(
      3,
    );
    expect((await s.call("GET", "/v1/admin/policies/api/versions")).body.versions).toHaveLength(3);
    expect((await call(s.url, "GET", "/readyz")).body.checks).toEqual({
      database: "ok",
      counters: "ok",
    });
  });

  it("a user made while another transaction runs is still consistent (writes serialize on the revision row)", async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        s.call("PUT", "/v1/admin/policies/race", {
          body: { rules: [{ limit: i + 1, period: "1m" }], apps: ["web"] },
        }),
      ),
    );
    expect(results.every((r) => r.status === 200)).toBe(true);
    const versions = (await s.call("GET", "/v1/admin/policies/race/versions")).body.versions.map(
      (v: { version: number }) => v.version,
    );
    expect(versions).toEqual([8, 7, 6, 5, 4, 3, 2, 1]);
  });
});

describeTwoNodes(
  "PostgreSQL",
  async () => ({ DATABASE_URL: await pg.createDatabase("nodes"), REDIS_URL: redis.url }),
  async ({ a, b, token, key }) => {
    // A draft's shadow counts are summed over both nodes.
    await call(a.url, "POST", "/v1/admin/policies", {
      token,
      body: { name: "drafted", rules: [{ limit: 100, period: "1m" }], apps: ["web"] },
    });
    await call(a.url, "PUT", "/v1/admin/policies/drafted/draft", {
      token,
      body: { rules: [{ limit: 2, period: "1m" }], apps: ["web"] },
    });
    const hasDraft = async (url: string) =>
      (await call(url, "GET", "/v1/admin/policies", { token })).body.policies.find(
        (p: { name: string }) => p.name === "drafted",
      )?.hasDraft === true;
    await waitFor(async () => (await hasDraft(a.url)) && (await hasDraft(b.url)), 2000, 20);
    for (const url of [a.url, b.url, a.url, b.url, a.url, b.url]) {
      expect(
        (
          await call(url, "POST", "/v1/limit", {
            token: key,
            body: { policy: "drafted", key: "d" },
          })
        ).body.allowed,
      ).toBe(true);
    }
    await waitFor(
      async () =>
        (await call(a.url, "GET", "/v1/admin/policies/drafted/draft", { token })).body.stats
          .evaluated === 6,
      3000,
      100,
    );
    expect(
      (await call(b.url, "GET", "/v1/admin/policies/drafted/draft", { token })).body.stats,
    ).toEqual({ evaluated: 6, wouldDeny: 4, wouldDenyNewly: 4, wouldAllowNewly: 0 });

    const metrics = await (await fetch(`${b.url}/metrics`)).text();
    expect(metrics).toMatch(
      /sluice_store_duration_seconds_count\{store="redis",operation="decide"\} [1-9]/,
    );
  },
);

describe("a Redis outage", () => {
  it("is decided by onStoreError where it can be, and is a 503 where it cannot", async () => {
    const own = await startRedis();
    const s = await startService({
      databaseUrl: await pg.createDatabase("outage"),
      redisUrl: own.url,
    });
    try {
      const key = await s.createApp("web");
      await s.createPolicy({ name: "open", rules: [{ limit: 5, period: "1m" }], apps: ["web"] });
      await s.createPolicy({
        name: "closed",
        rules: [{ limit: 5, period: "1m" }],
        onStoreError: "deny",
        apps: ["web"],
      });
      await s.createPolicy({
        name: "leases",
        algorithm: "concurrency",
        rules: [{ limit: 5, period: "1m" }],
        apps: ["web"],
      });
      expect(
        (await call(s.url, "POST", "/v1/limit", { token: key, body: { policy: "open", key: "k" } }))
          .body.allowed,
      ).toBe(true);
      own.kill();
      await waitFor(
        async () =>
          (
            await call(s.url, "POST", "/v1/limit", {
              token: key,
              body: { policy: "open", key: "k" },
            })
          ).body.reason === "store-error",
        10_000,
      );
      const open = await call(s.url, "POST", "/v1/limit", {
        token: key,
        body: { policy: "open", key: "k" },
      });
      expect(open.status).toBe(200);
      expect(open.body).toMatchObject({ allowed: true, reason: "store-error", remaining: 4 });
      // The counters are unknown: the headers show the limit and the policy, no figures.
      expect(open.headers.get("x-ratelimit-limit")).toBe("5");
      expect(open.headers.get("x-ratelimit-remaining")).toBeNull();
      const closed = await call(s.url, "POST", "/v1/limit", {
        token: key,
        body: { policy: "closed", key: "k" },
      });
      expect(closed.body).toMatchObject({ allowed: false, reason: "store-error", remaining: 0 });
      const release = await call(s.url, "POST", "/v1/release", {
        token: key,
        body: { policy: "leases", key: "k", leaseId: "l1" },
      });
      expect(release.status).toBe(503);
      expect(release.body.error.code).toBe("store_unavailable");
      const ready = await call(s.url, "GET", "/readyz");
      expect(ready.status).toBe(503);
      expect(ready.body.checks.database).toBe("ok");
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      expect(metrics).toMatch(
        /sluice_store_errors_total\{store="redis",operation="decide"\} [1-9]/,
      );
    } finally {
      await s.close();
      await own.stop();
    }
  });
});

describe("a database outage", () => {
  it("keeps decisions going on the last loaded policies; the admin API and /readyz answer 503", async () => {
    const own = await startPostgres();
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino(
      { level: "warn" },
      { write: (text: string) => void lines.push(JSON.parse(text) as Record<string, unknown>) },
    );
    const s = await startService({ databaseUrl: await own.createDatabase("outage"), logger });
    try {
      await decisionsOutliveTheDatabase(s, () => own.stop());
      // Where the database is (its address) is not told to anyone who reaches the port; nor
      // to an admin, whose session cannot be checked meanwhile: it is in the log.
      for (const token of [undefined, s.adminToken]) {
        const ready = await call(s.url, "GET", "/readyz", token ? { token } : {});
        expect(ready.status).toBe(503);
        expect(ready.body.checks).toEqual({ database: "unavailable", counters: "ok" });
        expect(JSON.stringify(ready.body)).not.toContain(String(own.port));
      }
      const said = lines.find((l) => l.msg === "not ready: database unavailable");
      expect(said?.cause).toContain(`127.0.0.1:${own.port}`);
    } finally {
      await s.close();
      await own.stop();
    }
  });
});
