/**
 * 100,000 per-key overrides on one policy, on SQLite and PostgreSQL: how long a node takes to
 * load them and how much heap each holds (measured after a full GC, printed for the docs), and
 * that changing one of them moves that one alone — read, applied and sent to embedded clients —
 * without reloading the policy. Overrides on 1,000 distinct plans (keys on the same rules share
 * one resolved policy).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { type PolicyClient, connectPolicies, memoryStore } from "sluice";
import { overridesOf } from "sluice/service";
import { afterAll, beforeAll, expect, it } from "vitest";
import { writeTransaction } from "../src/repository/common.js";
import { forEachDatabase } from "./databases.js";
import { waitFor } from "../../../test/support/ports.js";
import { type TestService, call, startService } from "./helpers.js";

const OVERRIDES = 100_000;
const PLANS = 1000;

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const heapAfterGc = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

forEachDatabase(
  (database) => {
    let s: TestService;
    let other: TestService | undefined;
    let appKey: string;
    let client: PolicyClient | undefined;
    let dataDir: string;
    let databaseUrl: string | undefined;
    const figures: Record<string, number> = {};

    beforeAll(async () => {
      databaseUrl = await database().fresh();
      dataDir = mkdtempSync(join(tmpdir(), "sluice-overrides-scale-"));
      s = await startService({
        ...(databaseUrl ? { databaseUrl } : {}),
        dataDir,
        values: { pollIntervalMs: 10_000 },
      });
      appKey = await s.createApp("web");
      await s.createPolicy({
        name: "plan",
        algorithm: "gcra",
        rules: [{ limit: 10, period: "1m" }],
        apps: ["web"],
      });
      // 100,000 rows in one write (as an import would): no note per row, so nodes read them
      // whole, once.
      const db = s.service.context.repo.database.db;
      await writeTransaction(db, async (trx) => {
        for (let from = 0; from < OVERRIDES; from += 2000) {
          const rows = [];
          for (let i = from; i < Math.min(OVERRIDES, from + 2000); i++)
            rows.push({
              policy: "plan",
              ident: `tenant:${i}`,
              rules: JSON.stringify([{ limit: 100 + (i % PLANS), period: "1m" }]),
              revision: 0,
              updated_by: "test",
              updated_at: new Date().toISOString(),
            });
          await trx.insertInto("policy_overrides").values(rows).execute();
        }
      });
    }, 300_000);
    afterAll(async () => {
      console.log(`overrides at scale on ${database().name}: ${JSON.stringify(figures)}`);
      await client?.close();
      await s?.close();
      await other?.close();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it(`loads ${OVERRIDES.toLocaleString("en")} overrides on a node (time and heap per override after GC)`, async () => {
      const registry = s.service.context.registry;
      const before = heapAfterGc();
      const started = performance.now();
      await registry.reload();
      figures.reloadMs = Math.round(performance.now() - started);
      figures.heapBytesPerOverride = Math.round((heapAfterGc() - before) / OVERRIDES);
      expect(overridesOf(registry.get("plan")!.limiter)!.size).toBe(OVERRIDES);
      expect(registry.lastLoad).toMatchObject({
        whole: true,
        read: { overrides: OVERRIDES },
        built: { overrides: OVERRIDES },
      });
      // A node started on the database: its start loads them all.
      const t0 = performance.now();
      other = await startService({
        ...(databaseUrl ? { databaseUrl } : {}),
        dataDir,
        // Its last kept-alive connection (the embedded client's) then ends within a second of
        // the close, not the default 72 s.
        values: { pollIntervalMs: 250, keepAliveTimeoutMs: 1000 },
      });
      figures.nodeStartMs = Math.round(performance.now() - t0);
      expect(overridesOf(other.service.context.registry.get("plan")!.limiter)!.size).toBe(
        OVERRIDES,
      );
      const limit = async (key: string) =>
        (
          await call(other!.url, "POST", "/v1/limit", {
            token: appKey,
            body: { policy: "plan", key },
          })
        ).body.limit as number;
      expect(await limit("tenant:42")).toBe(142);
      expect(await limit("tenant:99999")).toBe(100 + (99_999 % PLANS));
      expect(await limit("nobody")).toBe(10);
    }, 300_000);

    it("a client gets them all once, then one change as one override", async () => {
      const t0 = performance.now();
      client = await connectPolicies({
        url: other!.url,
        apiKey: appKey,
        store: memoryStore(),
        waitMs: 5000,
      });
      figures.clientConnectMs = Math.round(performance.now() - t0);
      expect(client.limiter("plan").override("tenant:7")).toEqual([{ limit: 107, period: 60_000 }]);
      const revision = other!.service.context.registry.currentRevision;

      const r = await s.call("PUT", "/v1/admin/policies/plan/overrides/tenant:7", {
        body: { rules: [{ limit: 5, period: "1m" }] },
      });
      expect(r.status).toBe(200);
      // The writer read and applied that one override, not the policy.
      expect(s.service.context.registry.lastLoad).toMatchObject({
        whole: false,
        read: { policies: 0, overrides: 1 },
        built: { policies: 0, overrides: 1 },
      });
      const changed = performance.now();
      await waitFor(() => client!.limiter("plan").override("tenant:7")?.[0]?.limit === 5, 1000, 10);
      figures.changeToClientMs = Math.round(performance.now() - changed);
      expect(other!.service.context.registry.lastLoad).toMatchObject({
        whole: false,
        read: { policies: 0, overrides: 1 },
        built: { policies: 0, overrides: 1 },
      });
      // What a client that ran `revision` is sent: the one override.
      const set = await call(other!.url, "GET", `/v1/policies?revision=${revision}`, {
        token: appKey,
      });
      expect(set.body.overrides).toEqual({
        whole: false,
        items: [{ policy: "plan", key: "tenant:7", rules: [{ limit: 5, period: 60_000 }] }],
      });
      expect(client.limiter("plan").override("tenant:8")).toEqual([{ limit: 108, period: 60_000 }]);
    }, 60_000);
  },
  (kind) => kind.name !== "mysql",
);
