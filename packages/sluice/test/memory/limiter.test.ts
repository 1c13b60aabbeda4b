import { describe, expect, it } from "vitest";
import { type Store, StoreError, createLimiter, memoryStore } from "../../src/index.js";

const T0 = 1_700_006_400_000;

/** A store whose every call fails (a unit-level stand-in; real outages are tested against Redis). */
function brokenStore(instances?: number): Store {
  const fail = () => Promise.reject(new StoreError("SLUICE_ERR_STORE", "connection refused"));
  return {
    kind: "broken",
    decide: fail,
    peek: fail,
    adjust: fail,
    release: fail,
    reset: fail,
    liveInstances: () => instances,
  };
}

describe("limiter", () => {
  it("is exact under a Promise.all burst", async () => {
    for (const algorithm of [
      "gcra",
      "token-bucket",
      "fixed-window",
      "sliding-window",
      "sliding-log",
      "concurrency",
    ] as const) {
      const limiter = createLimiter({
        policy: { name: "burst", algorithm, rules: [{ limit: 5, period: "1m" }] },
      });
      const ds = await Promise.all(Array.from({ length: 1000 }, () => limiter.limit("hot")));
      expect(ds.filter((d) => d.allowed).length, algorithm).toBe(5);
    }
  });

  it("reserve → settle charges the difference; cancel refunds", async () => {
    let t = T0;
    const limiter = createLimiter({
      store: memoryStore({ now: () => t }),
      policy: { name: "tokens", algorithm: "token-bucket", rules: [{ limit: 1000, period: "1m" }] },
    });
    const r1 = await limiter.reserve("llm", 100);
    expect(r1.decision).toMatchObject({ allowed: true, remaining: 900 });
    await r1.settle(40); // refund 60
    expect((await limiter.peek("llm")).remaining).toBe(960);
    await r1.settle(1000); // only the first settle counts
    expect((await limiter.peek("llm")).remaining).toBe(960);
    const r2 = await limiter.reserve("llm", 500);
    await r2.cancel();
    expect((await limiter.peek("llm")).remaining).toBe(960);
    const r3 = await limiter.reserve("llm", 10);
    await r3.settle(1960); // 1950 more than estimated: debt
    const d = await limiter.limit("llm");
    expect(d.allowed).toBe(false);
    // 1000 − 40 − 1960 = −1000 tokens; one more needs 1001 tokens at 1000/min.
    expect(d.retryAfterMs).toBe(60_060);
    t += 60_060;
    expect((await limiter.limit("llm")).allowed).toBe(true);
    await expect(r3.settle(-1)).rejects.toThrow(/actual: must be a whole number/);
  });

  it("a denied reservation charges nothing and settles to nothing", async () => {
    const limiter = createLimiter({ policy: { name: "r", rules: [{ limit: 5, period: "1m" }] } });
    await limiter.limit("k", { cost: 5 });
    const r = await limiter.reserve("k", 3);
    expect(r.decision.allowed).toBe(false);
    await r.settle(3);
    await r.cancel();
    expect((await limiter.peek("k")).remaining).toBe(0);
  });

  it("acquire/release leases for concurrency", async () => {
    const limiter = createLimiter({
      policy: { name: "c", algorithm: "concurrency", rules: [{ limit: 2, period: "30s" }] },
    });
    const a = await limiter.acquire("db");
    const b = await limiter.acquire("db");
    const c = await limiter.acquire("db");
    expect([a, b, c].map((l) => l.decision.allowed)).toEqual([true, true, false]);
    expect(a.decision.leaseId).toBeTypeOf("string");
    await a.release();
    await a.release();
    expect((await limiter.acquire("db")).decision.allowed).toBe(true);
    expect((await limiter.acquire("db")).decision.allowed).toBe(false);
    await expect(
      createLimiter({ policy: { name: "g", rules: [{ limit: 1, period: 1000 }] } }).acquire("x"),
    ).rejects.toThrow(/needs a concurrency policy/);
  });

  it("onStoreError: allow and deny decide with reason store-error; the error hook sees the cause", async () => {
    const seen: unknown[] = [];
    const open = createLimiter({
      store: brokenStore(),
      policy: { name: "o", rules: [{ limit: 1, period: "1s" }] },
      onError: (e) => seen.push(e),
    });
    expect(await open.limit("k")).toMatchObject({
      allowed: true,
      reason: "store-error",
      remaining: 0,
      retryAfterMs: 0,
    });
    const closed = createLimiter({
      store: brokenStore(),
      policy: { name: "c", rules: [{ limit: 1, period: "1s" }], onStoreError: "deny" },
    });
    expect(await closed.limit("k")).toMatchObject({ allowed: false, reason: "store-error" });
    expect(seen).toHaveLength(1);
    expect((seen[0] as StoreError).code).toBe("SLUICE_ERR_STORE");
  });

  it("onStoreError: insurance enforces this instance's share", async () => {
    const limiter = createLimiter({
      store: brokenStore(4),
      policy: { name: "i", rules: [{ limit: 20, period: "1m" }], onStoreError: "insurance" },
    });
    const ds = await Promise.all(Array.from({ length: 10 }, () => limiter.limit("k")));
    expect(ds.filter((d) => d.allowed).length).toBe(5); // 20 / 4 instances
    expect(ds.every((d) => d.reason === "insurance")).toBe(true);
    const fixed = createLimiter({
      store: brokenStore(4),
      policy: {
        name: "j",
        rules: [{ limit: 20, period: "1m" }],
        onStoreError: "insurance",
        insuranceInstances: 10,
      },
    });
    const fs = await Promise.all(Array.from({ length: 10 }, () => fixed.limit("k")));
    expect(fs.filter((d) => d.allowed).length).toBe(2);
  });

  it("validation errors are thrown, never turned into decisions", async () => {
    const limiter = createLimiter({
      store: brokenStore(),
      policy: { name: "v", rules: [{ limit: 5, period: "1s" }] },
    });
    await expect(limiter.limit("k", { cost: 6 })).rejects.toMatchObject({
      code: "SLUICE_ERR_COST",
      message: expect.stringMatching(/cost: 6 can never fit policy "v", whose capacity is 5/),
    });
    await expect(limiter.limit("k", { cost: -1 })).rejects.toMatchObject({
      code: "SLUICE_ERR_COST",
    });
    await expect(limiter.limit(42 as never)).rejects.toMatchObject({ code: "SLUICE_ERR_KEY" });
    expect(() =>
      createLimiter({ policy: { name: "bad", rules: [{ limit: 0, period: "1s" }] } }),
    ).toThrow(/rules\.0\.limit/);
  });

  it("a multi-rule decision reports every rule", async () => {
    const limiter = createLimiter({
      policy: {
        name: "m",
        rules: [
          { limit: 10, period: "1s" },
          { limit: 100, period: "1h" },
        ],
      },
    });
    const d = await limiter.limit("k");
    expect(d.rules.map((r) => [r.limit, r.periodMs, r.remaining])).toEqual([
      [10, 1000, 9],
      [100, 3_600_000, 99],
    ]);
  });
});

describe("memory store", () => {
  it("holds at most maxKeys, evicting expired keys first, then the oldest", async () => {
    let t = T0;
    const store = memoryStore({ now: () => t, maxKeys: 3 });
    const short = createLimiter({
      store,
      policy: { name: "short", rules: [{ limit: 1, period: "1s" }] },
    });
    const long = createLimiter({
      store,
      policy: { name: "long", rules: [{ limit: 1, period: "1h" }] },
    });
    await long.limit("a");
    await short.limit("x");
    await long.limit("b");
    expect(store.keyCount).toBe(3);
    t += 2000; // x has expired
    await long.limit("c");
    expect(store.keyCount).toBe(3);
    // a, b, c are still limited: the expired x made room.
    expect((await long.peek("a")).allowed).toBe(false);
    await long.limit("d"); // full of live keys: the oldest (a) goes
    expect(store.keyCount).toBe(3);
    expect((await long.peek("a")).allowed).toBe(true);
    expect((await long.peek("b")).allowed).toBe(false);
  });

  it("keeps policies apart, and a changed algorithm never reads another's state", async () => {
    const store = memoryStore();
    const a = createLimiter({
      store,
      policy: { name: "p", algorithm: "gcra", rules: [{ limit: 1, period: "1m" }] },
    });
    const b = createLimiter({
      store,
      policy: { name: "p", algorithm: "sliding-log", rules: [{ limit: 1, period: "1m" }] },
    });
    expect((await a.limit("k")).allowed).toBe(true);
    expect((await b.limit("k")).allowed).toBe(true);
    expect(() => memoryStore({ maxKeys: 0 })).toThrow(/maxKeys: must be a positive integer/);
  });
});
