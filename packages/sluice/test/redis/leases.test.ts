/**
 * Leases (docs/leases.md): hot keys decided in memory from capacity debited in Redis first.
 * Never over the limit across real processes (standalone and Cluster), bounded under-admission
 * with uneven demand, hot keys cost few script calls, cold keys take no lease, and a Redis
 * killed while leases are held: they keep deciding until they end, then onStoreError; a
 * restarted (empty) Redis grants no lease until the old ones have ended.
 */
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import {
  ALLOTMENT_ALGORITHMS,
  type AlgorithmName,
  type AllotmentCounters,
  type AllotmentInput,
  type AllotmentSettings,
  LEASE_ALGORITHMS,
  type Lease,
  type LeaseCounters,
  type LeaseInput,
  type LeaseSettings,
  type Permit,
  type PolicyInput,
  type RedisStore,
  createLimiter,
  redisStore,
} from "../../src/index.js";
import { identifierTag, slotOfTag, tagForSlot } from "../../src/stores/redis-keys.js";
import { waitFor } from "../../../../test/support/ports.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { redisAndClusterForSuite } from "../../../../test/support/redis-suite.js";
import { type Workers, startWorkers } from "./workers.js";

const run = Date.now().toString(36);
const LEASED: readonly AlgorithmName[] = ["gcra", "token-bucket", "fixed-window", "concurrency"];

const redis = redisAndClusterForSuite();
let admin: Redis;
let clusterAdmin: Cluster;
let standalone: Workers;
let clustered: Workers;

// After redisAndClusterForSuite's beforeAll (hooks run in order); the clients and workers stop
// before Redis does (afterAll hooks run last registered first).
beforeAll(async () => {
  admin = new Redis(redis.server.url);
  clusterAdmin = new Cluster([...redis.cluster.startupNodes]);
  const nodes = JSON.stringify(redis.cluster.startupNodes);
  [standalone, clustered] = await Promise.all([
    startWorkers(Array.from({ length: 4 }, () => ({ REDIS_URL: redis.server.url }))),
    startWorkers(Array.from({ length: 4 }, () => ({ CLUSTER_NODES: nodes }))),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all([standalone?.stop(), clustered?.stop()]);
  admin?.disconnect();
  clusterAdmin?.disconnect();
});

/**
 * Ends the first epoch's wait (a fresh Redis grants no lease for one lease lifetime: see
 * lua/sluice.lua), as a Redis that has served leases before would be.
 */
async function oldEpoch(identifier: string): Promise<void> {
  await admin.set("sl:lease-epoch", "0");
  const tag = tagForSlot(slotOfTag(identifierTag(identifier)));
  await clusterAdmin.set(`sl:lease-epoch:{${tag}}`, "0");
}

function policyFor(alg: AlgorithmName, name: string, limit: number): PolicyInput {
  return {
    name,
    algorithm: alg,
    // Long windows: no window edge falls inside the test.
    rules: [{ limit, period: alg === "fixed-window" ? "24h" : "1h" }],
    onStoreError: "deny",
    lease: { maxShare: 0.2 },
  };
}

describe.each([
  ["standalone", () => standalone],
  ["cluster", () => clustered],
] as const)(
  "never over the limit on %s: 4 processes × 1,000 at one key, limit 500",
  (label, workers) => {
    it.each(LEASED)("%s: at most 500 and at least 490 admitted", async (alg) => {
      const key = `hot-${label}-${alg}`;
      await oldEpoch(key);
      const r = await workers().fire(policyFor(alg, `lx${run}-${label}-${alg}`, 500), key, 1000);
      expect(r.reasons["store-error"] ?? 0).toBe(0);
      expect(r.allowed).toBeLessThanOrEqual(500);
      expect(r.allowed).toBeGreaterThanOrEqual(490);
    });
  },
);

describe("uneven demand", () => {
  it("1:1:1:4 over several 1 s windows: each whole window admits ≥ 90% of its limit, never more", async () => {
    const key = "uneven";
    await oldEpoch(key);
    const policy: PolicyInput = {
      name: `lu${run}`,
      algorithm: "fixed-window",
      rules: [{ limit: 2000, period: "1s" }],
      onStoreError: "deny",
      lease: { maxShare: 0.1 },
    };
    // Demand: ~ (10+10+10+40) × 100 per second = 7,000/s against 2,000/s.
    const r = await standalone.pace(policy, key, [10, 10, 10, 40], {
      everyMs: 10,
      forMs: 4500,
      windowMs: 1000,
    });
    expect(r.reasons["store-error"] ?? 0).toBe(0);
    const windows = Object.keys(r.windows)
      .map(Number)
      .sort((a, b) => a - b);
    // Whole windows only: not the first and last, which the run cuts.
    const whole = windows.slice(1, -1);
    expect(whole.length).toBeGreaterThanOrEqual(2);
    for (const w of windows) expect(r.windows[w]).toBeLessThanOrEqual(2000);
    for (const w of whole) expect(r.windows[w]).toBeGreaterThanOrEqual(1800);
  }, 30_000);
});

describe("one process", () => {
  let client: Redis;
  let calls = 0;
  let store: RedisStore;

  beforeAll(() => {
    client = new Redis(redis.server.url);
    const call = client.call.bind(client);
    // Counts the script calls.
    client.call = ((command: string, args: Array<string | number>) => {
      if (command === "EVALSHA" || command === "EVAL") calls++;
      return call(command, args);
    }) as typeof client.call;
    store = redisStore({ client, heartbeatMs: 0 });
  });

  afterAll(async () => {
    await store.close();
    client.disconnect();
  });

  it("hot keys (100, 256 in flight): at most 2 script calls per 1,000 decisions, answered in memory", async () => {
    await oldEpoch("x");
    for (const alg of LEASED) {
      const limiter = createLimiter({
        store,
        policy: { ...policyFor(alg, `lh${run}-${alg}`, 1_000_000_000), lease: true },
      });
      const round = () =>
        Promise.all(Array.from({ length: 256 }, (_, i) => limiter.limit(`k${i % 100}`)));
      for (let i = 0; i < 20; i++) await round(); // warm: every key leased
      calls = 0;
      let decisions = 0;
      for (let i = 0; i < 200; i++) {
        const ds = await round();
        decisions += ds.length;
        expect(ds.every((d) => d.allowed && d.reason === undefined)).toBe(true);
      }
      expect([alg, calls / (decisions / 1000)]).toEqual([alg, expect.any(Number)]);
      expect(calls / (decisions / 1000), alg).toBeLessThanOrEqual(2);
    }
    const c = store.allotmentCounters!;
    expect(c.local).toBeGreaterThan(c.remote * 10);
  });

  it("a hot key over its limit: denials are answered in memory until Redis's retry time, not one call each", async () => {
    const limiter = createLimiter({
      store,
      policy: {
        name: `ld${run}`,
        algorithm: "fixed-window",
        rules: [{ limit: 100, period: "24h" }],
        lease: { hotAfter: 5 },
      },
    });
    const first = await Promise.all(Array.from({ length: 300 }, () => limiter.limit("flood")));
    expect(first.filter((d) => d.allowed)).toHaveLength(100);
    calls = 0;
    const flood = await Promise.all(Array.from({ length: 2000 }, () => limiter.limit("flood")));
    expect(flood.filter((d) => d.allowed)).toHaveLength(0);
    expect(flood.every((d) => d.retryAfterMs > 0)).toBe(true);
    expect(calls).toBeLessThanOrEqual(2);
    // A refund from this process lifts the remembered denial: the next request asks Redis.
    await limiter.refund("flood", 1);
    expect((await limiter.limit("flood")).allowed).toBe(true);
  });

  it("cold keys (round robin over 20,000) take no lease", async () => {
    const limiter = createLimiter({
      store,
      policy: { ...policyFor("gcra", `lc${run}`, 1_000_000), lease: true },
    });
    const taken = store.allotmentCounters!.taken;
    for (let i = 0; i < 20_000; i += 500)
      await Promise.all(Array.from({ length: 500 }, (_, j) => limiter.limit(`c${i + j}`)));
    expect(store.allotmentCounters!.taken).toBe(taken);
  });

  it("a hot key among a flood of cold keys (20,000) still takes its lease", async () => {
    await oldEpoch("x");
    const limiter = createLimiter({
      store,
      policy: { ...policyFor("gcra", `lf${run}`, 1_000_000), lease: true },
    });
    const taken = store.allotmentCounters?.taken ?? 0;
    // More new keys at once than a node counts (10,000): counting must go on after them.
    await Promise.all(Array.from({ length: 12_000 }, (_, j) => limiter.limit(`g${j}`)));
    // Each round: 500 new keys, then the hot key 25 times (more than `hotAfter` in the same
    // instant, so it is hot however slowly a busy machine runs the rounds).
    for (let i = 0; i < 20_000; i += 500)
      await Promise.all([
        ...Array.from({ length: 500 }, (_, j) => limiter.limit(`f${i + j}`)),
        ...Array.from({ length: 25 }, () => limiter.limit("hot")),
      ]);
    expect(store.allotmentCounters!.taken).toBeGreaterThan(taken);
    expect(limiter.tryLimitSync("hot")?.allowed).toBe(true);
  });

  it("tryLimitSync answers from a lease, and says so when it cannot", async () => {
    const limiter = createLimiter({
      store,
      policy: { ...policyFor("fixed-window", `ls${run}`, 1_000_000), lease: { hotAfter: 1 } },
    });
    expect(limiter.tryLimitSync("s")).toBeUndefined(); // nothing held yet
    // Busy enough for a lease that outlasts a round.
    for (let i = 0; i < 20; i++)
      await Promise.all(Array.from({ length: 100 }, () => limiter.limit("s")));
    const d = limiter.tryLimitSync("s");
    expect(d).toMatchObject({ allowed: true });
    expect(d!.reason).toBeUndefined();
  });

  it("the first names still work: leaseCounters is allotmentCounters, a Lease is a Permit, Lease* are Allotment*", async () => {
    const limiter = createLimiter({
      store,
      policy: { ...policyFor("gcra", `la${run}`, 1_000_000), lease: { hotAfter: 1 } },
    });
    await limiter.limit("alias");
    const counters = store.allotmentCounters;
    expect(counters?.remote).toBeGreaterThan(0);
    expect(store.leaseCounters).toBe(counters);
    expect(LEASE_ALGORITHMS).toBe(ALLOTMENT_ALGORITHMS);
    // The deprecated names are the new types (checked by `npm run typecheck`).
    expectTypeOf<Lease>().toEqualTypeOf<Permit>();
    expectTypeOf<LeaseInput>().toEqualTypeOf<AllotmentInput>();
    expectTypeOf<LeaseSettings>().toEqualTypeOf<AllotmentSettings>();
    expectTypeOf<LeaseCounters>().toEqualTypeOf<AllotmentCounters>();
    const slots = createLimiter({
      store,
      policy: { name: `lp${run}`, algorithm: "concurrency", rules: [{ limit: 1, period: "1h" }] },
    });
    const permit: Lease = await slots.acquire("alias");
    expect(permit.decision.leaseId).toEqual(expect.any(String));
    expect(await permit.release()).toBe(true);
  });

  it("a peek counts what this process holds unspent as remaining", async () => {
    const limiter = createLimiter({
      store,
      policy: { ...policyFor("fixed-window", `lp${run}`, 1000), lease: { hotAfter: 1 } },
    });
    for (let i = 0; i < 10; i++) await limiter.limit("p");
    expect((await limiter.peek("p")).remaining).toBe(990);
  });
});

describe("Redis killed while leases are held", () => {
  it("leases decide until they end, then onStoreError; a restarted Redis grants none until the old ones have ended", async () => {
    const own = await startRedis();
    const client = new Redis({ host: "127.0.0.1", port: own.port, retryStrategy: () => 50 });
    client.on("error", () => {});
    const store = redisStore({ client, heartbeatMs: 0, timeoutMs: 200 });
    const limiter = createLimiter({
      store,
      policy: {
        name: `lk${run}`,
        algorithm: "fixed-window",
        rules: [{ limit: 1_000_000, period: "24h" }],
        onStoreError: "deny",
        lease: { ttl: "1500ms", hotAfter: 1, maxShare: 0.5 },
      },
    });
    let restarted: RedisServer | undefined;
    try {
      await client.set("sl:lease-epoch", "0");
      for (let i = 0; i < 5; i++) await Promise.all([limiter.limit("k"), limiter.limit("k")]);
      expect(limiter.tryLimitSync("k")?.allowed).toBe(true);
      own.kill();
      // Decided from the lease while Redis is gone …
      const local = await Promise.all(Array.from({ length: 50 }, () => limiter.limit("k")));
      expect(local.every((d) => d.allowed && d.reason === undefined)).toBe(true);
      // … until it ends.
      await waitFor(async () => (await limiter.limit("k")).reason === "store-error", 10_000, 50);
      restarted = await startRedis([], own.port);
      await waitFor(async () => (await limiter.limit("k")).reason === undefined, 10_000, 50);
      const taken = store.allotmentCounters!.taken;
      // The restarted Redis has a new epoch: no lease for one lease lifetime.
      for (let i = 0; i < 20; i++) {
        const d = await limiter.limit("k");
        expect(d.reason).toBeUndefined();
      }
      expect(store.allotmentCounters!.taken).toBe(taken);
      const epoch = Number(await client.get("sl:lease-epoch"));
      expect(epoch).toBeGreaterThan(0);
      // Then leases again.
      await waitFor(
        async () => {
          await limiter.limit("k");
          return store.allotmentCounters!.taken > taken;
        },
        10_000,
        50,
      );
    } finally {
      await store.close();
      client.disconnect();
      await Promise.all([own.stop(), restarted?.stop()]);
    }
  });
});
