/**
 * What the suites of the SQL servers the tests start (PostgreSQL, MariaDB) check alike, each
 * on its own database:
 *
 * - two `sluice serve` processes on one database and one Redis, as a deployment runs them:
 *   both start together on an empty database (they migrate it at once), the first admin is
 *   made from the CLI as the start-up log says, and a change made through node A is enforced
 *   by node B within one second, with the counters shared in Redis;
 * - a database outage under a running service: decisions go on with the last loaded policies
 *   while the admin API answers 503.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../../../test/support/ports.js";
import {
  type ServeProcess,
  type TestService,
  call,
  createRootWithCli,
  signIn,
  spawnServe,
} from "./helpers.js";

/** The two nodes, with the admin's session and an app's key (for checks of a database's own). */
export interface TwoNodes {
  readonly a: ServeProcess;
  readonly b: ServeProcess;
  /** The admin's session, made on node A. */
  readonly token: string;
  /** The API key of the app `web`. */
  readonly key: string;
}

/**
 * Declares the suite on `database` (its title: `PostgreSQL`, `MariaDB`): `env` gives both
 * nodes' environment (`DATABASE_URL`, `REDIS_URL`), called once the file's servers run; `more`
 * runs further checks on the two nodes at the end of the test.
 */
export function describeTwoNodes(
  database: string,
  env: () => Promise<Record<string, string>>,
  more?: (nodes: TwoNodes) => Promise<void>,
): void {
  describe(`two \`sluice serve\` processes on one ${database} and one Redis`, () => {
    let a: ServeProcess;
    let b: ServeProcess;

    beforeAll(async () => {
      const vars = { ...(await env()), SLUICE_LOG_LEVEL: "info" };
      [a, b] = await Promise.all([spawnServe([], vars), spawnServe([], vars)]);
      const created = await createRootWithCli(vars);
      expect(created.output).toContain('created admin "root"');
    }, 120_000);
    afterAll(async () => {
      await Promise.all([a?.stop(), b?.stop()]);
    });

    it("a change made through node A is enforced by node B within one second, and counters are shared", async () => {
      const token = await signIn(a.url);
      const key = (await call(a.url, "POST", "/v1/admin/apps", { token, body: { name: "web" } }))
        .body.apiKey;
      const limitAt = (url: string) =>
        call(url, "POST", "/v1/limit", { token: key, body: { policy: "shared", key: "k" } });

      let t0 = Date.now();
      expect(
        (
          await call(a.url, "POST", "/v1/admin/policies", {
            token,
            body: { name: "shared", rules: [{ limit: 4, period: "1m" }], apps: ["web"] },
          })
        ).status,
      ).toBe(201);
      await waitFor(async () => (await limitAt(b.url)).status === 200, 1000, 20);
      const created = Date.now() - t0;
      expect(created).toBeLessThan(1000);

      // Counters live in Redis: four allowed in total over both nodes (one was taken above).
      const verdicts = [];
      for (const url of [a.url, b.url, a.url, b.url])
        verdicts.push((await limitAt(url)).body.allowed);
      expect(verdicts).toEqual([true, true, true, false]);

      t0 = Date.now();
      expect(
        (
          await call(a.url, "PUT", "/v1/admin/policies/shared", {
            token,
            body: { rules: [{ limit: 100, period: "1m" }], apps: ["web"] },
          })
        ).status,
      ).toBe(200);
      await waitFor(async () => (await limitAt(b.url)).body.limit === 100, 1000, 20);
      const updated = Date.now() - t0;
      expect(updated).toBeLessThan(1000);
      console.info(`propagation A → B (${database}): create ${created} ms, update ${updated} ms`);

      t0 = Date.now();
      expect((await call(a.url, "DELETE", "/v1/admin/policies/shared", { token })).status).toBe(
        204,
      );
      await waitFor(async () => (await limitAt(b.url)).status === 404, 1000, 20);
      expect(Date.now() - t0).toBeLessThan(1000);

      // B serves the admin API from the same database: the session made on A works there.
      expect((await call(b.url, "GET", "/v1/admin/me", { token })).body.username).toBe("root");
      await more?.({ a, b, token, key });
    });
  });
}

/**
 * Stops the database under the running service `s` (by `stopDatabase`) once it has an app and
 * a policy: the policy still decides (the failed poll keeps the last good policies), and the
 * admin API answers 503 `database_unavailable`.
 */
export async function decisionsOutliveTheDatabase(
  s: TestService,
  stopDatabase: () => Promise<void>,
): Promise<void> {
  const key = await s.createApp("web");
  await s.createPolicy({ name: "api", rules: [{ limit: 5, period: "1m" }], apps: ["web"] });
  await stopDatabase();
  await s.sync(); // the failed poll keeps the last good policies
  const d = await call(s.url, "POST", "/v1/limit", {
    token: key,
    body: { policy: "api", key: "k" },
  });
  expect(d.status).toBe(200);
  expect(d.body.allowed).toBe(true);
  const admin = await s.call("GET", "/v1/admin/policies");
  expect(admin.status).toBe(503);
  expect(admin.body.error.code).toBe("database_unavailable");
}
