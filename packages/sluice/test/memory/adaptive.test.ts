import { describe, expect, it } from "vitest";
import { ValidationError, createLimiter, definePolicy, policyToInput } from "sluice";
import type { AdaptiveSettings, Permit, PolicyInput } from "sluice";
import {
  AimdController,
  Gradient2Controller,
  VegasController,
  type WindowSample,
} from "../../src/adaptive.js";
import { ManualTime, flushPromises } from "../../../../test/support/manual-time.js";

/** The issues of a policy definePolicy refuses, as "path: message". */
function issuesOf(input: unknown): string[] {
  try {
    definePolicy(input as PolicyInput);
  } catch (err) {
    if (err instanceof ValidationError) return err.issues.map((i) => `${i.path}: ${i.message}`);
    throw err;
  }
  throw new Error("the policy was accepted");
}

const concurrencyPolicy = (adaptive: unknown, limit = 100) => ({
  name: "backend",
  algorithm: "concurrency",
  rules: [{ limit, period: "30s" }],
  adaptive,
});

describe("policy field adaptive", () => {
  it("resolves the defaults: gradient2, min 1, max the rule's limit, initial min, reserve 0.2", () => {
    const p = definePolicy(concurrencyPolicy({}) as PolicyInput);
    expect(p.adaptive).toEqual({
      algorithm: "gradient2",
      min: 1,
      max: 100,
      initial: 1,
      reserve: 0.2,
    });
    const q = definePolicy(
      concurrencyPolicy({ algorithm: "vegas", min: 2, max: 50, initial: 5 }) as PolicyInput,
    );
    expect(policyToInput(q).adaptive).toEqual({ algorithm: "vegas", min: 2, max: 50, initial: 5 });
    expect(definePolicy(policyToInput(q)).adaptive).toEqual(q.adaptive);
  });

  it("refuses min above max, naming adaptive.min", () => {
    expect(issuesOf(concurrencyPolicy({ min: 20, max: 10 }))).toEqual([
      "adaptive.min: must be at most adaptive.max (got min 20, max 10)",
    ]);
  });

  it("refuses an initial outside [min, max], naming adaptive.initial", () => {
    expect(issuesOf(concurrencyPolicy({ min: 5, max: 10, initial: 11 }))).toEqual([
      "adaptive.initial: must be within [min, max] = [5, 10] (got 11)",
    ]);
    expect(issuesOf(concurrencyPolicy({ min: 5, initial: 2 }))).toEqual([
      "adaptive.initial: must be within [min, max] = [5, 100] (got 2)",
    ]);
  });

  it("refuses an unknown algorithm, naming adaptive.algorithm", () => {
    expect(issuesOf(concurrencyPolicy({ algorithm: "bbr" }))).toEqual([
      "adaptive.algorithm: algorithm must be one of gradient2, vegas, aimd",
    ]);
  });

  it("refuses a max above the rule's limit, and bad numbers and fields, by name", () => {
    expect(issuesOf(concurrencyPolicy({ max: 200 }))).toEqual([
      "adaptive.max: must be at most the rule's limit, 100, the ceiling the store enforces (got 200)",
    ]);
    expect(issuesOf(concurrencyPolicy({ min: 0, reserve: 1, speed: 2 }))).toEqual(
      expect.arrayContaining([
        "adaptive.min: min must be a positive integer (got 0)",
        "adaptive.reserve: reserve must be at most 0.9 (a share of the limit)",
        "adaptive: unknown field(s): speed",
      ]),
    );
    expect(issuesOf(concurrencyPolicy(5))).toEqual([
      "adaptive: adaptive must be an object { algorithm, min, max, initial }",
    ]);
  });

  it("refuses adaptive on a policy that is not concurrency", () => {
    expect(
      issuesOf({
        name: "api",
        algorithm: "gcra",
        rules: [{ limit: 10, period: "1s" }],
        adaptive: {},
      }),
    ).toEqual([
      "adaptive: adaptive applies only to concurrency, not gcra (it moves a limit of permits in flight)",
    ]);
  });
});

const settings = (over: Partial<AdaptiveSettings> = {}): AdaptiveSettings => ({
  algorithm: "gradient2",
  min: 1,
  max: 1000,
  initial: 20,
  reserve: 0.2,
  ...over,
});

const window = (rttMs: number, maxInFlight: number, dropped = 0): WindowSample => ({
  rttMs,
  dropped,
  count: 50,
  maxInFlight,
});

describe("the controllers' limit movement", () => {
  for (const [name, Controller] of [
    ["gradient2", Gradient2Controller],
    ["vegas", VegasController],
    ["aimd", AimdController],
  ] as const) {
    describe(name, () => {
      it("grows while latency holds at the baseline and the limit is used", () => {
        const c = new Controller(settings());
        for (let i = 0; i < 20; i++) c.update(window(10, Math.floor(c.limit)));
        expect(c.limit).toBeGreaterThan(25);
        expect(c.rttBaselineMs).toBe(10);
      });

      it("holds when traffic uses under half the limit (nothing learnt of more)", () => {
        const c = new Controller(settings());
        for (let i = 0; i < 20; i++) c.update(window(10, 5));
        expect(c.limit).toBe(20);
      });

      it("shrinks when latency doubles, and the baseline stays where it was", () => {
        const c = new Controller(settings());
        c.update(window(10, 20));
        const before = c.limit;
        for (let i = 0; i < 10; i++) c.update(window(25, Math.floor(c.limit)));
        expect(c.limit).toBeLessThan(before * 0.8);
        expect(c.rttBaselineMs).toBe(10);
      });

      it("backs off on drops", () => {
        const c = new Controller(settings({ initial: 100 }));
        c.update(window(10, 100));
        const before = c.limit;
        c.update(window(10, 100, 25));
        expect(c.limit).toBeLessThan(before);
      });

      it("stays within [min, max]", () => {
        const c = new Controller(settings({ min: 4, max: 30, initial: 10 }));
        for (let i = 0; i < 200; i++) c.update(window(10, 30));
        expect(c.limit).toBe(30);
        for (let i = 0; i < 200; i++) c.update(window(10, 30, 50));
        expect(c.limit).toBe(4);
      });
    });
  }

  it("gradient2: a modest standing overload never lifts the baseline or the limit (Netflix#134)", () => {
    const c = new Gradient2Controller(settings({ initial: 8 }));
    // A backend whose latency is 50% over its own past 8 in flight (a queue), for ten minutes of
    // windows, the limit always in use.
    for (let i = 0; i < 6000; i++) c.update(window(c.limit > 8 ? 15 : 10, Math.floor(c.limit)));
    expect(c.rttBaselineMs).toBe(10);
    expect(c.limit).toBeLessThan(10);
  });

  it("gradient2: the baseline follows a slower backend once the limit is at its floor", () => {
    const c = new Gradient2Controller(settings({ min: 2, initial: 2 }));
    c.update(window(10, 2));
    for (let i = 0; i < 100; i++) c.update(window(30, 2));
    expect(c.rttBaselineMs).toBeGreaterThan(29);
    expect(c.limit).toBeGreaterThan(2);
  });
});

/** A limiter of an adaptive policy on a manual clock. */
function adaptiveLimiter(adaptive: Record<string, unknown>, time: ManualTime) {
  return createLimiter({
    policy: concurrencyPolicy(adaptive, 1000) as PolicyInput,
    clock: time.now,
    timers: time.timers,
  });
}

describe("a limiter with an adaptive policy", () => {
  it("measures latency on its clock from acquire to release, and the limit follows it", async () => {
    const time = new ManualTime();
    const fast = adaptiveLimiter({ initial: 20, max: 100 }, time);
    const slowed = adaptiveLimiter({ initial: 20, max: 100 }, time);
    // Rounds of 15 permits held 10 ms; then the second limiter's are held 40 ms.
    for (let round = 0; round < 40; round++) {
      const a = await Promise.all(Array.from({ length: 15 }, () => fast.acquire("k")));
      const b = await Promise.all(Array.from({ length: 15 }, () => slowed.acquire("k")));
      expect(a.every((p) => p.decision.allowed)).toBe(true);
      await time.advance(10);
      await Promise.all(a.map((p) => p.release()));
      if (round >= 20) await time.advance(30);
      await Promise.all(b.map((p) => p.release()));
    }
    const f = fast.adaptiveState()!;
    const s = slowed.adaptiveState()!;
    expect(f.rttBaselineMs).toBeCloseTo(10, 0);
    expect(f.limit).toBeGreaterThan(20);
    expect(s.limit).toBeLessThan(f.limit);
    expect(f.inFlight).toBe(0);
  });

  it("release({ dropped: true }) backs the limit off; a plain release of the same time does not", async () => {
    const time = new ManualTime();
    const limiter = adaptiveLimiter({ initial: 50, max: 100 }, time);
    const hold = async (outcome?: { dropped: true }) => {
      const ps = await Promise.all(Array.from({ length: 40 }, () => limiter.acquire("k")));
      await time.advance(120);
      await Promise.all(ps.map((p) => p.release(outcome)));
    };
    for (let i = 0; i < 3; i++) await hold();
    const steady = limiter.adaptiveState()!.limit;
    expect(steady).toBeGreaterThanOrEqual(50);
    for (let i = 0; i < 3; i++) await hold({ dropped: true });
    expect(limiter.adaptiveState()!.limit).toBeLessThan(steady);
  });

  it("sheds the lowest tier first: each tier sees its share of the limit", async () => {
    const time = new ManualTime();
    const limiter = adaptiveLimiter({ min: 30, max: 30, initial: 30 }, time);
    const taken = async (priority: number) => {
      const got: Permit[] = [];
      for (;;) {
        const p = await limiter.acquire("k", { priority });
        if (!p.decision.allowed) return { got, denied: p.decision };
        got.push(p);
      }
    };
    const t3 = await taken(3);
    expect(t3.got).toHaveLength(24); // 30 less the 20% reserve
    expect(t3.denied.limit).toBe(24);
    expect(t3.denied.retryAfterMs).toBeGreaterThan(0);
    expect((await taken(2)).got).toHaveLength(2); // 26
    expect((await taken(1)).got).toHaveLength(2); // 28
    expect((await taken(0)).got).toHaveLength(2); // 30: the reserve is the top tier's
    expect(limiter.adaptiveState()!.inFlight).toBe(30);
    await t3.got[0]!.release();
    expect((await limiter.acquire("k", { priority: 3 })).decision.allowed).toBe(false);
    expect((await limiter.acquire("k", { priority: 0 })).decision.allowed).toBe(true);
  });

  it("the priority line serves the higher tier first, and a wait ends at its deadline", async () => {
    const time = new ManualTime();
    const limiter = adaptiveLimiter({ min: 2, max: 2, initial: 2 }, time);
    const held = [
      await limiter.acquire("k", { priority: 0 }),
      await limiter.acquire("k", { priority: 0 }),
    ];
    const low = limiter.acquire("k", { priority: 3, maxWaitMs: 50 });
    const high = limiter.acquire("k", { priority: 0, maxWaitMs: 50 });
    await flushPromises();
    await time.advance(5);
    await held[0]!.release();
    expect((await high).decision.allowed).toBe(true);
    await time.advance(50);
    const shed = await low;
    expect(shed.decision.allowed).toBe(false);
    expect(time.pending).toBe(0);
  });

  it("refuses a bad priority or maxWaitMs by name", async () => {
    const time = new ManualTime();
    const limiter = adaptiveLimiter({}, time);
    await expect(limiter.acquire("k", { priority: 4 })).rejects.toThrow(/priority/);
    await expect(limiter.acquire("k", { priority: 1.5 })).rejects.toMatchObject({
      issues: [{ path: "priority" }],
    });
    await expect(limiter.acquire("k", { maxWaitMs: -1 })).rejects.toMatchObject({
      issues: [{ path: "maxWaitMs" }],
    });
  });

  it("a permit lapsed past the period frees its slot and counts as a drop", async () => {
    const time = new ManualTime();
    const limiter = adaptiveLimiter({ min: 2, max: 2, initial: 2 }, time);
    await limiter.acquire("k", { priority: 0 });
    await limiter.acquire("k", { priority: 0 });
    expect((await limiter.acquire("k", { priority: 0 })).decision.allowed).toBe(false);
    await time.advance(30_000);
    expect(limiter.adaptiveState()!.inFlight).toBe(0);
    expect((await limiter.acquire("k", { priority: 0 })).decision.allowed).toBe(true);
  });
});
