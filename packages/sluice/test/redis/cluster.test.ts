/** The Redis store on a 6-node Cluster (3 masters, 3 replicas): conformance and slot grouping. */
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisStore, createLimiter, redisStore } from "../../src/index.js";
import { type RedisCluster, startCluster } from "../../../../test/support/redis-cluster.js";
import { runConformance } from "../conformance/run.js";

let cluster: RedisCluster;
let client: Cluster;
const stores: RedisStore[] = [];

beforeAll(async () => {
  cluster = await startCluster();
  client = new Cluster([...cluster.startupNodes]);
  await client.ping();
}, 120_000);

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  client?.disconnect();
  await cluster?.stop();
});

function make(now?: () => number): RedisStore {
  const s = redisStore({ client, heartbeatMs: 0, ...(now ? { now, denyCache: false } : {}) });
  stores.push(s);
  return s;
}

runConformance("redis cluster", (now) => make(now));

describe("cluster batching", () => {
  it("one tick of decisions over many identifiers (every slot group) is exact per identifier", async () => {
    const limiter = createLimiter({
      store: make(),
      policy: {
        name: `cb${Date.now().toString(36)}`,
        algorithm: "fixed-window",
        rules: [{ limit: 3, period: "24h" }],
        onStoreError: "deny",
      },
    });
    const ids = Array.from({ length: 200 }, (_, i) => `user-${i}`);
    const decisions = await Promise.all(
      ids.flatMap((id) => Array.from({ length: 5 }, () => limiter.limit(id))),
    );
    expect(decisions.filter((d) => d.reason === "store-error")).toHaveLength(0);
    const allowed = new Map<number, number>();
    decisions.forEach((d, i) => {
      const id = Math.floor(i / 5);
      if (d.allowed) allowed.set(id, (allowed.get(id) ?? 0) + 1);
    });
    expect([...allowed.values()].every((n) => n === 3)).toBe(true);
    expect(allowed.size).toBe(200);
  });

  it("a long identifier (hashed) and braces work in one slot", async () => {
    const limiter = createLimiter({
      store: make(),
      policy: {
        name: `ch${Date.now().toString(36)}`,
        rules: [
          { limit: 1, period: "1h" },
          { limit: 5, period: "1d" },
        ],
        onStoreError: "deny",
      },
    });
    for (const id of ["x".repeat(500), "a{b}c", "ünïcødé key"]) {
      expect((await limiter.limit(id)).allowed).toBe(true);
      const d = await limiter.limit(id);
      expect(d.allowed).toBe(false);
      expect(d.reason).toBeUndefined();
    }
  });
});
