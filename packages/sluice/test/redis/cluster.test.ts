/**
 * The Redis store on a 6-node Cluster (3 masters, 3 replicas): conformance (through every
 * client), slot grouping, a master's death.
 */
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisStore, createLimiter } from "../../src/index.js";
import { CLIENTS } from "../../../../test/support/redis-clients.js";
import { waitFor } from "../../../../test/support/ports.js";
import { clientForSuite, clusterForSuite } from "../../../../test/support/redis-suite.js";
import { runConformance } from "../conformance/run.js";
import { Owned } from "./helpers.js";

const redis = clusterForSuite();
const owned = new Owned();
afterAll(() => owned.close());

function make(now?: () => number): RedisStore {
  return owned.store({
    client: redis.client,
    heartbeatMs: 0,
    ...(now ? { now, denyCache: false } : {}),
  });
}

runConformance("redis cluster", (now) => make(now), { lease: true });

// The conformance table on a Cluster through each client (test/support/redis-clients.ts).
describe.each(CLIENTS)("$name", (kind) => {
  const c = clientForSuite(kind, () => kind.cluster(redis.cluster.startupNodes));
  runConformance(`redis cluster (${kind.name})`, (now) =>
    owned.store({ client: c.client, heartbeatMs: 0, now, denyCache: false }),
  );
});

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

describe("cluster failover", () => {
  // Last in the file: it kills a master.
  it("a master dies during traffic: its replica takes over, calls keep resolving, exact afterwards", async () => {
    const failover = new Cluster([...redis.cluster.startupNodes], {
      clusterRetryStrategy: () => 100,
    });
    failover.on("error", () => {});
    const s = owned.store({
      client: failover,
      heartbeatMs: 0,
      timeoutMs: 1000,
      breakerFailures: 3,
      probeIntervalMs: 100,
    });
    const name = `cf${Date.now().toString(36)}`;
    const traffic = createLimiter({
      store: s,
      policy: { name, rules: [{ limit: 1_000_000, period: "1h" }] },
    });
    // The master that owns the slot of identifier "victim".
    const slot = Number(await redis.client.cluster("KEYSLOT", `{victim}`));
    const owner = redis.cluster.nodes.find((n) => n.port === portOfSlot(slot));
    expect(owner).toBeDefined();
    let stop = false;
    const reasons: Array<string | undefined> = [];
    const failures: unknown[] = [];
    const loop = (async () => {
      while (!stop) {
        await traffic.limit("victim").then(
          (d) => reasons.push(d.reason),
          (e: unknown) => failures.push(e),
        );
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await waitFor(() => reasons.length > 20, 10_000, 10);
    owner!.kill();
    const at = reasons.length;
    // While the slot has no master, onStoreError ("allow") answers; after cluster-node-timeout
    // (2 s) the replica is promoted and decisions come from Redis again.
    await waitFor(() => reasons.slice(at).includes("store-error"), 30_000, 20);
    const down = reasons.length;
    await waitFor(
      () => reasons.length > down + 5 && reasons.slice(-5).every((r) => r === undefined),
      30_000,
      50,
    );
    stop = true;
    await loop;
    expect(failures).toEqual([]);
    const exact = createLimiter({
      store: s,
      policy: { name: `${name}-x`, rules: [{ limit: 5, period: "1h" }], onStoreError: "deny" },
    });
    const ds = await Promise.all(Array.from({ length: 50 }, () => exact.limit("victim")));
    expect(ds.filter((d) => d.allowed)).toHaveLength(5);
    await s.close();
    failover.disconnect();
  }, 60_000);
});

let slotMap: Array<[number, number, number]> = [];
function portOfSlot(slot: number): number | undefined {
  return slotMap.find(([a, b]) => slot >= a && slot <= b)?.[2];
}
beforeAll(async () => {
  const probe = new Redis(redis.cluster.startupNodes[0]!.port, "127.0.0.1");
  const slots = await probe.cluster("SLOTS");
  // Each entry: first slot, last slot, then the nodes serving it (the master first).
  slotMap = slots.map(([a, b, master]) => [a, b, master![1]]);
  probe.disconnect();
});
