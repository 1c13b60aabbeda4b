import { describe, expect, it } from "vitest";
import {
  ALGORITHMS,
  type Decision,
  type PolicyInput,
  type Store,
  StoreError,
  type SyncLimiter,
  ValidationError,
  createLimiter,
  definePolicy,
  memoryStore,
} from "../../src/index.js";

const T0 = 1_700_006_400_000;

/** A decision without its permit id, `leaseId` (each store numbers its own permits). */
function strip(d: Decision): Omit<Decision, "leaseId"> {
  const { leaseId: _, ...rest } = d;
  return rest;
}

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
    for (const algorithm of ALGORITHMS) {
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
      remaining: 0, // a limit of 1, less this request: what the policy admits at most
      retryAfterMs: 0,
    });
    const closed = createLimiter({
      store: brokenStore(),
      policy: { name: "c", rules: [{ limit: 1, period: "1s" }], onStoreError: "deny" },
    });
    expect(await closed.limit("k")).toMatchObject({
      allowed: false,
      reason: "store-error",
      remaining: 0,
      retryAfterMs: 0,
    });
    expect(seen).toHaveLength(1);
    expect((seen[0] as StoreError).code).toBe("SLUICE_ERR_STORE");
  });

  it("failing open, remaining is what the policy admits at most, never 'exhausted'; failing closed, 0", async () => {
    const policy: PolicyInput = {
      name: "two",
      rules: [
        { limit: 10, period: "1s", burst: 4 },
        { limit: 100, period: "1h" },
      ],
    };
    const open = createLimiter({ store: brokenStore(), policy });
    const d = await open.limit("k", { cost: 3 });
    expect(d).toMatchObject({ allowed: true, reason: "store-error", remaining: 1, limit: 10 });
    expect(d.rules.map((r) => [r.allowed, r.remaining, r.resetAfterMs])).toEqual([
      [true, 1, 0],
      [true, 97, 0],
    ]);
    // A peek charges nothing: the capacity itself.
    expect((await open.peek("k", { cost: 3 })).remaining).toBe(4);
    const conc = createLimiter({
      store: brokenStore(),
      policy: { name: "slots", algorithm: "concurrency", rules: [{ limit: 5, period: "1m" }] },
    });
    expect((await conc.limit("k")).remaining).toBe(4);
    const closed = createLimiter({
      store: brokenStore(),
      policy: { ...policy, onStoreError: "deny" },
    });
    const c = await closed.limit("k", { cost: 3 });
    expect(c).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 0 });
    expect(c.rules.map((r) => r.remaining)).toEqual([0, 0]);
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

  it("insurance keeps a token bucket's refill (interval: the next tokens a whole period on)", async () => {
    const limiter = createLimiter({
      store: brokenStore(2),
      policy: {
        name: "steps",
        algorithm: "token-bucket",
        refill: "interval",
        rules: [{ limit: 4, period: "1m", burst: 8 }],
        onStoreError: "insurance",
      },
    });
    // The share: 2 a minute, 4 at once. Continuous refill would give one back in 30 s.
    const ds = await Promise.all(Array.from({ length: 5 }, () => limiter.limit("k")));
    expect(ds.map((d) => d.allowed)).toEqual([true, true, true, true, false]);
    expect(ds[4]!.reason).toBe("insurance");
    expect(ds[4]!.retryAfterMs).toBeGreaterThan(59_000);
  });

  it("insurance: a cost above this instance's share is denied and charges nothing", async () => {
    const limiter = createLimiter({
      store: brokenStore(4),
      policy: { name: "share", rules: [{ limit: 20, period: "1m" }], onStoreError: "insurance" },
    });
    // The share is 20 / 4 = 5: a cost of 8 can never fit it.
    const big = await limiter.limit("k", { cost: 8 });
    expect(big).toMatchObject({
      allowed: false,
      reason: "insurance",
      cost: 8,
      limit: 5,
      remaining: 5,
      retryAfterMs: 60_000,
    });
    expect(big.rules[0]).toMatchObject({ allowed: false, remaining: 5 });
    // Nothing was charged: the whole share is still there.
    expect(await limiter.limit("k", { cost: 5 })).toMatchObject({
      allowed: true,
      remaining: 0,
      reason: "insurance",
    });
  });

  it("recognises definePolicy's results exactly: a look-alike is validated", () => {
    const lookAlike = Object.freeze({
      name: "fake",
      algorithm: "gcra",
      rules: Object.freeze([Object.freeze({ limit: 0, periodMs: 1000, burst: 0 })]),
      blockMs: 0,
      onStoreError: "allow",
      insuranceInstances: 0,
      shadow: false,
      description: "",
    });
    expect(() => createLimiter({ policy: lookAlike as never })).toThrow(
      expect.objectContaining({ code: "SLUICE_ERR_POLICY" }),
    );
    const real = definePolicy({ name: "real", rules: [{ limit: 1, period: "1s" }] });
    expect(createLimiter({ policy: real }).policy).toBe(real);
  });

  it("limitSync and peekSync decide synchronously over the memory store", async () => {
    let t = T0;
    const limiter = createLimiter({
      store: memoryStore({ now: () => t }),
      policy: { name: "sync", rules: [{ limit: 2, period: "1s" }] },
    });
    expect(limiter.limitSync("k")).toMatchObject({ allowed: true, remaining: 1 });
    expect(limiter.peekSync("k")).toMatchObject({ allowed: true, remaining: 1 });
    expect((await limiter.limit("k")).remaining).toBe(0);
    expect(limiter.limitSync("k")).toMatchObject({ allowed: false, retryAfterMs: 500 });
    t += 500;
    expect(limiter.limitSync("k").allowed).toBe(true);
    expect(() => limiter.limitSync("")).toThrow(
      expect.objectContaining({ code: "SLUICE_ERR_KEY" }),
    );
    expect(() => limiter.limitSync("k", { cost: 3 })).toThrow(
      expect.objectContaining({ code: "SLUICE_ERR_COST" }),
    );
    // The default store is the memory store, so the default limiter is synchronous too.
    const dflt = createLimiter({ policy: { name: "d", rules: [{ limit: 1, period: "1s" }] } });
    expect(dflt.limitSync("k").allowed).toBe(true);
    // Over a store that decides elsewhere, limitSync says what to use instead.
    const remote = createLimiter({
      store: brokenStore(),
      policy: { name: "r", rules: [{ limit: 1, period: "1s" }] },
    }) as unknown as SyncLimiter;
    expect(() => remote.limitSync("k")).toThrow(
      /limitSync\(\) needs a store that decides in-process.*use limit\(\)/,
    );
  });

  it("every face of a decision answers as the others: limit, limitSync, tryLimitSync; peek, peekSync", async () => {
    let t = T0;
    for (const algorithm of ALGORITHMS) {
      const policy: PolicyInput = {
        name: `faces-${algorithm}`,
        algorithm,
        rules: [{ limit: 3, period: "1s" }],
      };
      // Three limiters over three stores of one clock, each deciding through other faces.
      const [a, b, c] = [0, 1, 2].map(() =>
        createLimiter({ store: memoryStore({ now: () => t }), policy }),
      ) as [SyncLimiter, SyncLimiter, SyncLimiter];
      for (let i = 0; i < 40; i++) {
        t += (i * 137) % 300;
        const cost = 1 + (i % 2);
        const viaLimit = strip(await a.limit("k", { cost }));
        expect(strip(b.limitSync("k", { cost })), `${algorithm} call ${i}`).toEqual(viaLimit);
        expect(strip(c.tryLimitSync("k", { cost })!), `${algorithm} call ${i}`).toEqual(viaLimit);
        const peeked = strip(await a.peek("k", { cost }));
        expect(strip(b.peekSync("k", { cost })), `${algorithm} peek ${i}`).toEqual(peeked);
        expect(strip(c.peekSync("k", { cost })), `${algorithm} peek ${i}`).toEqual(peeked);
      }
    }
  });

  it("a store failure: the awaited faces decide by onStoreError, the synchronous ones throw it", async () => {
    const failure = new StoreError("SLUICE_ERR_STORE", "disk on fire");
    const store = memoryStore();
    const failing = Object.assign(Object.create(store) as typeof store, {
      decideSync: () => {
        throw failure;
      },
      peekSync: () => {
        throw failure;
      },
    });
    const seen: unknown[] = [];
    const limiter = createLimiter({
      store: failing,
      policy: { name: "failing", rules: [{ limit: 5, period: "1s" }] },
      onError: (e) => seen.push(e),
    });
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, reason: "store-error" });
    expect(await limiter.peek("k")).toMatchObject({ allowed: true, reason: "store-error" });
    expect(seen).toEqual([failure, failure]);
    expect(() => limiter.limitSync("k")).toThrow(failure);
    expect(() => limiter.tryLimitSync("k")).toThrow(failure);
    expect(() => limiter.peekSync("k")).toThrow(failure);
    // Bad input rejects the awaited faces and throws from the synchronous ones, store or not.
    await expect(limiter.limit("")).rejects.toMatchObject({ code: "SLUICE_ERR_KEY" });
    await expect(limiter.peek("k", { cost: 9 })).rejects.toMatchObject({ code: "SLUICE_ERR_COST" });
    expect(() => limiter.tryLimitSync("k", { cost: 0 })).toThrow(
      expect.objectContaining({ code: "SLUICE_ERR_COST" }),
    );
    // A validation error from the store is never turned into a decision.
    const refusing = Object.assign(Object.create(store) as typeof store, {
      decideSync: () => {
        throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid", [{ path: "x", message: "no" }]);
      },
    });
    const strict = createLimiter({
      store: refusing,
      policy: { name: "strict", rules: [{ limit: 5, period: "1s" }] },
    });
    await expect(strict.limit("k")).rejects.toMatchObject({ code: "SLUICE_ERR_OPTIONS" });
  });

  it("over a store that decides asynchronously: the faces answer as over the memory store, or say they cannot", async () => {
    let t = T0;
    const policy: PolicyInput = { name: "remote", rules: [{ limit: 2, period: "1s" }] };
    const inner = memoryStore({ now: () => t });
    const reference = createLimiter({ store: memoryStore({ now: () => t }), policy });
    // The memory store seen through the Store port only: every answer a promise.
    const remote = (decideLocal?: Store["decideLocal"]): Store => ({
      kind: "remote",
      decide: (req) => inner.decide(req),
      peek: (req) => inner.peek(req),
      adjust: (p, k, d) => inner.adjust(p, k, d),
      release: (p, k, id) => inner.release(p, k, id),
      reset: (p, k) => inner.reset(p, k),
      ...(decideLocal === undefined ? {} : { decideLocal }),
    });
    const limiter = createLimiter({ store: remote(), policy }) as unknown as SyncLimiter;
    for (let i = 0; i < 4; i++) {
      t += 300;
      expect(strip(await limiter.peek("k")), `peek ${i}`).toEqual(strip(reference.peekSync("k")));
      expect(strip(await limiter.limit("k")), `limit ${i}`).toEqual(
        strip(reference.limitSync("k")),
      );
      // Nothing decided at once: the caller is told to ask limit().
      expect(limiter.tryLimitSync("k"), `tryLimitSync ${i}`).toBeUndefined();
    }
    expect(() => limiter.peekSync("k")).toThrow(
      /peekSync\(\) needs a store that decides in-process.*use peek\(\)/,
    );
    // A store that decides some requests at once (a Redis store's lease) answers tryLimitSync.
    const local = createLimiter({
      store: remote((p, k, cost) => (k === "here" ? inner.decideSync(p, k, cost) : undefined)),
      policy,
    }) as unknown as SyncLimiter;
    expect(local.tryLimitSync("elsewhere")).toBeUndefined();
    expect(strip(local.tryLimitSync("here")!)).toEqual(strip(reference.limitSync("here")));
    // A store that throws instead of rejecting is a store failure all the same.
    const seen: unknown[] = [];
    const failure = new StoreError("SLUICE_ERR_STORE", "thrown, not rejected");
    const throwing = createLimiter({
      store: {
        ...remote(),
        decide: () => {
          throw failure;
        },
        peek: () => {
          throw failure;
        },
      },
      policy: { ...policy, onStoreError: "deny" },
      onError: (e) => seen.push(e),
    });
    expect(await throwing.limit("k")).toMatchObject({ allowed: false, reason: "store-error" });
    expect(await throwing.peek("k")).toMatchObject({ allowed: false, reason: "store-error" });
    expect(seen).toEqual([failure, failure]);
  });

  it("a decision stays as it was returned: later decisions change none of its objects", () => {
    let t = T0;
    for (const algorithm of ALGORITHMS) {
      const limiter = createLimiter({
        store: memoryStore({ now: () => t }),
        policy: { name: `kept-${algorithm}`, algorithm, rules: [{ limit: 3, period: "1s" }] },
      });
      const first = limiter.limitSync("k");
      const copy = structuredClone(first);
      const later = [limiter.limitSync("k"), limiter.peekSync("k"), limiter.limitSync("other")];
      t += 10;
      later.push(limiter.limitSync("k"), limiter.limitSync("k"));
      expect(first, algorithm).toEqual(copy);
      for (const d of later) {
        expect(d, algorithm).not.toBe(first);
        expect(d.rules, algorithm).not.toBe(first.rules);
        expect(d.rules[0], algorithm).not.toBe(first.rules[0]);
      }
    }
  });

  it("release says whether it freed a lease", async () => {
    const limiter = createLimiter({
      policy: { name: "rel", algorithm: "concurrency", rules: [{ limit: 1, period: "1m" }] },
    });
    const lease = await limiter.acquire("k");
    expect(lease.decision.allowed).toBe(true);
    expect(await limiter.release("k", "no-such-lease")).toBe(false);
    expect(await lease.release()).toBe(true);
    expect(await lease.release()).toBe(false);
    expect(await limiter.release("k", lease.decision.leaseId!)).toBe(false);
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

  it("a flood of new keys on one policy never evicts another policy's keys", async () => {
    const t = T0;
    const store = memoryStore({ now: () => t, maxKeys: 100 });
    const web = createLimiter({
      store,
      policy: { name: "web", rules: [{ limit: 10, period: "1h" }] },
    });
    const mobile = createLimiter({
      store,
      policy: { name: "mobile", rules: [{ limit: 10, period: "1h" }] },
    });
    // web's client is exhausted.
    for (let i = 0; i < 10; i++) await web.limit("victim");
    expect((await web.limit("victim")).allowed).toBe(false);
    // mobile floods with 1,000 distinct keys (10× the store).
    for (let i = 0; i < 1000; i++) await mobile.limit(`flood-${i}`);
    expect(store.keyCount).toBe(100);
    // web sends 20 new keys of its own: room is taken from mobile, which holds the most.
    for (let i = 0; i < 20; i++) await web.limit(`web-${i}`);
    expect(store.keyCount).toBe(100);
    expect(await web.peek("victim")).toMatchObject({ allowed: false, remaining: 0 });
    expect((await web.peek("web-0")).remaining).toBe(9);
  });

  it("evicts, among the oldest keys, the one whose state expires soonest", async () => {
    let t = T0;
    const store = memoryStore({ now: () => t, maxKeys: 3 });
    const p = createLimiter({ store, policy: { name: "p", rules: [{ limit: 2, period: "1h" }] } });
    await p.limit("a"); // TAT +30 min
    await p.limit("b");
    await p.limit("b"); // TAT +60 min
    await p.limit("c");
    await p.limit("c"); // TAT +60 min
    t += 1000;
    await p.limit("d"); // full: a holds the least
    expect((await p.peek("a")).remaining).toBe(2);
    expect((await p.peek("b")).remaining).toBe(0);
    expect((await p.peek("c")).remaining).toBe(0);
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

  it("checks its options as the other stores do: every problem named, unknown ones too", () => {
    expect(() =>
      memoryStore({ maxKey: 10, now: 5, maxKeys: 1.5 } as unknown as Parameters<
        typeof memoryStore
      >[0]),
    ).toThrow(
      /^Invalid memoryStore options: maxKey: unknown option; now: must be a function returning epoch ms; maxKeys: must be a positive integer \(got 1\.5\)$/,
    );
  });
});
