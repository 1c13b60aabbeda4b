/**
 * Adaptive concurrency over Redis (docs/adaptive.md, "Over Redis"): each process adapts its own
 * limit; the rule's limit is the ceiling Redis enforces on the sum of every process's permits.
 * Two limiters over two stores on one redis-server stand for two processes.
 */
import { afterAll, describe, expect, it } from "vitest";
import { type Limiter, redisStore } from "sluice";
import { createLimiter } from "sluice";
import { redisForSuite } from "../../../../test/support/redis-suite.js";

const redis = redisForSuite();

describe("an adaptive concurrency policy over Redis", () => {
  const stores: Array<{ close(): Promise<void> }> = [];
  afterAll(async () => {
    for (const s of stores) await s.close();
  });

  function processOf(name: string, clock: () => number): Limiter {
    const store = redisStore({ client: redis.client, heartbeatMs: 0 });
    stores.push(store);
    return createLimiter({
      store,
      clock,
      policy: {
        name,
        algorithm: "concurrency",
        rules: [{ limit: 6, period: "1m" }],
        adaptive: { min: 1, max: 6, initial: 6, reserve: 0 },
      },
    });
  }

  it("adapts per process, and Redis caps the processes' sum at the rule's limit", async () => {
    let t = 1_700_000_000_000;
    const clock = () => t;
    const a = processOf("adaptive-redis", clock);
    const b = processOf("adaptive-redis", clock);
    const fromA = await Promise.all(Array.from({ length: 4 }, () => a.acquire("backend")));
    expect(fromA.every((p) => p.decision.allowed)).toBe(true);
    const fromB = [];
    for (let i = 0; i < 3; i++) fromB.push(await b.acquire("backend"));
    // B's own limit (6) has room; Redis's ceiling (6 in all) has 2.
    expect(fromB.map((p) => p.decision.allowed)).toEqual([true, true, false]);
    expect(a.adaptiveState()).toMatchObject({ limit: 6, inFlight: 4 });
    expect(b.adaptiveState()).toMatchObject({ limit: 6, inFlight: 2 });
    t += 25;
    expect(await fromA[0]!.release()).toBe(true);
    expect((await b.acquire("backend")).decision.allowed).toBe(true);
    expect(a.adaptiveState()!.inFlight).toBe(3);
    expect(b.adaptiveState()!.inFlight).toBe(3);
  });

  it("a process's limit moves from its own samples: drops back one off, not the other", async () => {
    let t = 1_700_000_000_000;
    const clock = () => t;
    const a = processOf("adaptive-redis-2", clock);
    const b = processOf("adaptive-redis-2", clock);
    for (let round = 0; round < 8; round++) {
      const pa = await Promise.all(Array.from({ length: 3 }, () => a.acquire("backend")));
      const pb = await Promise.all(Array.from({ length: 3 }, () => b.acquire("backend")));
      t += 20;
      await Promise.all(pa.map((p) => p.release({ dropped: true })));
      await Promise.all(pb.map((p) => p.release()));
    }
    expect(a.adaptiveState()!.limit).toBeLessThan(6);
    expect(b.adaptiveState()!.limit).toBe(6);
  });
});
