/**
 * `sluice/compat/rate-limiter-flexible` judged by rate-limiter-flexible itself: the same
 * scripted (and random) sequences of calls against the real library (from npm) and against the
 * face, comparing every value each call resolves or rejects with. Memory limiters run on fake
 * timers (both read Date.now), so times compare exactly; Redis limiters run on one real
 * redis-server and real time, so `msBeforeNext` compares within a stated tolerance.
 */
import fc from "fast-check";
import { Redis } from "ioredis";
import * as peer from "rate-limiter-flexible";
import * as face from "sluice/compat/rate-limiter-flexible";
import { afterEach, describe, expect, it, vi } from "vitest";
import { deadRedisClient } from "../../../../test/support/redis.js";
import { redisForSuite } from "../../../../test/support/redis-suite.js";
import { op, wait } from "./ops.js";

/** What a call came to: resolved or rejected, with a value comparable across the two. */
type Outcome = { resolved: unknown } | { rejected: unknown } | { error: string };

function view(v: unknown): unknown {
  if (v === null || v === undefined || typeof v !== "object") return v;
  if (v instanceof Error) return { error: true };
  if (typeof (v as { toJSON?: unknown }).toJSON === "function")
    return (v as { toJSON(): unknown }).toJSON();
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, view(x)]));
}

async function outcome(p: () => Promise<unknown>): Promise<Outcome> {
  try {
    return { resolved: view(await p()) };
  } catch (err) {
    return { rejected: view(err) };
  }
}

/**
 * `got` with each `msBeforeNext` replaced by `want`'s where the two are within `tolerance` ms
 * (Redis and real time: the two limiters are asked one after the other), for `toEqual`.
 */
function within(got: unknown, want: unknown, tolerance: number): unknown {
  if (!got || typeof got !== "object" || !want || typeof want !== "object") return got;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(got)) {
    const w = (want as Record<string, unknown>)[k];
    out[k] =
      k === "msBeforeNext" &&
      typeof v === "number" &&
      typeof w === "number" &&
      Math.abs(v - w) <= tolerance
        ? w
        : within(v, w, tolerance);
  }
  return out;
}

type AnyLimiter = {
  consume(k: string, p?: number, o?: face.ConsumeOptions): Promise<unknown>;
  penalty(k: string, p?: number, o?: face.ConsumeOptions): Promise<unknown>;
  reward(k: string, p?: number, o?: face.ConsumeOptions): Promise<unknown>;
  get(k: string): Promise<unknown>;
  set(k: string, p: number, s: number): Promise<unknown>;
  block(k: string, s: number): Promise<unknown>;
  delete(k: string): Promise<unknown>;
};

type Op =
  | { op: "consume" | "penalty" | "reward"; key: string; points: number; custom?: unknown }
  | { op: "get" | "delete"; key: string }
  | { op: "set"; key: string; points: number; sec: number }
  | { op: "block"; key: string; sec: number }
  | { op: "wait"; ms: number };

function call(l: AnyLimiter, o: Exclude<Op, { op: "wait" }>): Promise<unknown> {
  switch (o.op) {
    case "consume":
    case "penalty":
    case "reward":
      return o.custom === undefined
        ? l[o.op](o.key, o.points)
        : l[o.op](o.key, o.points, { customDuration: o.custom as number });
    case "get":
    case "delete":
      return l[o.op](o.key);
    case "set":
      return l.set(o.key, o.points, o.sec);
    case "block":
      return l.block(o.key, o.sec);
  }
}

const run = Date.now().toString(36);

/**
 * Keys at the edges: empty (a key of its own in rate-limiter-flexible, never another key's),
 * one that starts with the character sluice's empty key is made of, a long one, non-ASCII.
 */
const EDGE_KEYS = ["", "\u0000", "\u0000\u0000", "x".repeat(3000), "ключ🔑", "a b{c}"];

/** rate-limiter-flexible, typed as the face, for code that drives either. */
const P = peer as unknown as typeof face;

/** The options of a limiter that both libraries take, spelled the same. */
interface BothOptions {
  points: number;
  duration: number;
  blockDuration?: number;
  keyPrefix?: string;
  execEvenly?: boolean;
  inMemoryBlockOnConsumed?: number;
}

/** rate-limiter-flexible's RateLimiterMemory and the face's, with `options`. */
function memoryPair(options: BothOptions) {
  return [new peer.RateLimiterMemory(options), new face.RateLimiterMemory(options)] as const;
}

/**
 * `f` on rate-limiter-flexible's limiter `a`, then on the face's `b`: expects the same outcome
 * of both, and resolves to the face's.
 */
function sameOutcome(a: AnyLimiter, b: AnyLimiter) {
  return async (f: (l: AnyLimiter) => Promise<unknown>): Promise<Outcome> => {
    const [x, y] = [await outcome(() => f(a)), await outcome(() => f(b))];
    expect(y).toEqual(x);
    return y;
  };
}

/**
 * Each of `ops` on rate-limiter-flexible's limiter `a`, then on the face's `b`: the same
 * outcome, each `msBeforeNext` within `tolerance` ms ({@link within}).
 */
async function sameAnswers(
  a: AnyLimiter,
  b: AnyLimiter,
  ops: readonly Op[],
  tolerance: number,
): Promise<void> {
  for (const [i, o] of ops.entries()) {
    if (o.op === "wait") continue;
    const x = await outcome(() => call(a, o));
    const y = await outcome(() => call(b, o));
    expect(within(y, x, tolerance), `op ${i} ${JSON.stringify(o)}`).toEqual(x);
  }
}

describe("RateLimiterMemory against rate-limiter-flexible's (fake time: exact)", () => {
  afterEach(() => vi.useRealTimers());

  const optionSets = [
    { points: 5, duration: 10 },
    { points: 3, duration: 5, blockDuration: 20 },
    { points: 2, duration: 0 },
    { points: 4, duration: 1, keyPrefix: "other" },
  ];

  const opArb = (points: number): fc.Arbitrary<Op> => {
    const key = fc.constantFrom("a", "b", "c", ...EDGE_KEYS);
    // Whole points, 0, and fractions (the memory limiter keeps counts whole: 1.5 counts 1).
    const n = fc.oneof(
      { weight: 6, arbitrary: fc.integer({ min: 1, max: points + 2 }) },
      { weight: 1, arbitrary: fc.constant(0) },
      { weight: 1, arbitrary: fc.constantFrom(0.5, 1.5, 2.75) },
    );
    // customDuration: none mostly; negative is `duration`, 0 forever, fractions to the ms.
    const custom = fc.option(fc.constantFrom(-1, 0, 1, 2.5, 7, 30, null), {
      nil: undefined,
      freq: 2,
    });
    const change = (op: "consume" | "penalty" | "reward") =>
      fc.record(
        { op: fc.constant(op), key, points: n, custom },
        { requiredKeys: ["op", "key", "points"] },
      );
    return fc.oneof(
      { weight: 8, arbitrary: change("consume") },
      { weight: 2, arbitrary: change("penalty") },
      { weight: 2, arbitrary: change("reward") },
      {
        weight: 3,
        arbitrary: fc.record({ op: fc.constantFrom("get" as const, "delete" as const), key }),
      },
      op(1, "set", {
        key,
        points: fc.integer({ min: 1, max: points + 3 }),
        // (Not −1: rate-limiter-flexible's memory limiter then keeps the key forever while
        // answering `duration`; its Redis limiter, and sluice, use `duration`.)
        sec: fc.constantFrom(0, 1, 3, 30),
      }),
      op(1, "block", { key, sec: fc.constantFrom(0, 2, 15) }),
      wait(4, 6000),
    );
  };

  it.each(optionSets)("random sequences give the same answers: %o", async (options) => {
    let compared = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb(options.points), { minLength: 5, maxLength: 60 }),
        async (ops) => {
          vi.useFakeTimers({ now: 1_700_000_000_000 });
          try {
            const [a, b] = memoryPair(options);
            for (const [i, o] of ops.entries()) {
              if (o.op === "wait") {
                await vi.advanceTimersByTimeAsync(o.ms);
                continue;
              }
              // rate-limiter-flexible lets a reward take a count below zero; sluice stops at zero
              // (a documented difference), so rewards here give back at most what was consumed.
              if (o.op === "reward" && o.points > 0) {
                const now = (await a.get(o.key)) as peer.RateLimiterRes | null;
                if (!now || now.consumedPoints < Math.ceil(o.points)) continue;
              }
              const [x, y] = [await outcome(() => call(a, o)), await outcome(() => call(b, o))];
              expect(
                y,
                `op ${i} ${JSON.stringify(o)} of ${JSON.stringify(ops.slice(0, i))}`,
              ).toEqual(x);
              compared++;
            }
          } finally {
            vi.useRealTimers();
          }
        },
      ),
      { numRuns: 60 },
    );
    expect(compared).toBeGreaterThan(300);
  });

  it("a scripted login lockout: consume past points, block, blocked consumes, expiry", async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const opts = { points: 3, duration: 60, blockDuration: 300, keyPrefix: "login" };
    const [a, b] = memoryPair(opts);
    const both = sameOutcome(a, b);
    for (let i = 0; i < 3; i++) await both((l) => l.consume("user@x"));
    await vi.advanceTimersByTimeAsync(1000);
    // The 4th passes `points`: rejected, and blocked for 300 s.
    expect(await both((l) => l.consume("user@x"))).toEqual({
      rejected: {
        remainingPoints: 0,
        msBeforeNext: 300_000,
        consumedPoints: 4,
        isFirstInDuration: true,
      },
    });
    await vi.advanceTimersByTimeAsync(100_000);
    expect(await both((l) => l.consume("user@x", 2))).toEqual({
      rejected: {
        remainingPoints: 0,
        msBeforeNext: 200_000,
        consumedPoints: 6,
        isFirstInDuration: false,
      },
    });
    await both((l) => l.get("user@x"));
    await vi.advanceTimersByTimeAsync(200_000);
    // The block is over and the key with it.
    expect(await both((l) => l.get("user@x"))).toEqual({ resolved: null });
    expect(await both((l) => l.consume("user@x"))).toEqual({
      resolved: {
        remainingPoints: 2,
        msBeforeNext: 60_000,
        consumedPoints: 1,
        isFirstInDuration: true,
      },
    });
    await both((l) => l.delete("user@x"));
    await both((l) => l.delete("user@x"));
  });

  it("execEvenly delays allowed actions by the same formula (the same resolve times)", async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const opts = { points: 4, duration: 2, execEvenly: true };
    const [a, b] = memoryPair(opts);
    const t0 = Date.now();
    const times: Array<[string, number, unknown]> = [];
    const track = (who: string, p: Promise<unknown>) =>
      p.then(
        (v) => times.push([who, Date.now() - t0, view(v)]),
        (e: unknown) => times.push([who, Date.now() - t0, { rejected: view(e) }]),
      );
    const pending: Array<Promise<unknown>> = [];
    for (let i = 0; i < 5; i++) {
      pending.push(track("peer", a.consume("k")), track("face", b.consume("k")));
      await vi.advanceTimersByTimeAsync(10);
    }
    await vi.advanceTimersByTimeAsync(5000);
    await Promise.all(pending);
    const of = (who: string) => times.filter((t) => t[0] === who).map((t) => t.slice(1));
    expect(of("face")).toEqual(of("peer"));
    expect(of("peer").some(([ms]) => (ms as number) >= 500)).toBe(true);
  });

  it("differs on purpose: a reward never takes the count below zero", async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const [a, b] = memoryPair({ points: 2, duration: 10 });
    await a.consume("k");
    await b.consume("k");
    expect((await a.reward("k", 3)).consumedPoints).toBe(-2);
    expect((await b.reward("k", 3)).consumedPoints).toBe(0);
    // rate-limiter-flexible now lets 4 through this duration; sluice 2, the limit.
    expect((await a.consume("k", 4)).consumedPoints).toBe(2);
    await expect(b.consume("k", 4)).rejects.toMatchObject({ consumedPoints: 4 });
  });

  it("customDuration: the window a change opens lasts it; an open window keeps its end", async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const opts = { points: 3, duration: 60, blockDuration: 20 };
    const [a, b] = memoryPair(opts);
    const both = sameOutcome(a, b);
    expect(await both((l) => l.consume("k", 1, { customDuration: 5 }))).toEqual({
      resolved: {
        remainingPoints: 2,
        msBeforeNext: 5000,
        consumedPoints: 1,
        isFirstInDuration: true,
      },
    });
    await vi.advanceTimersByTimeAsync(1000);
    // Open: its end stays, whatever this call's customDuration.
    expect(await both((l) => l.consume("k", 1, { customDuration: 100 }))).toEqual({
      resolved: {
        remainingPoints: 1,
        msBeforeNext: 4000,
        consumedPoints: 2,
        isFirstInDuration: false,
      },
    });
    await both((l) => l.penalty("k", 1));
    await both((l) => l.get("k"));
    // Over points: blocked for blockDuration, as without customDuration.
    await both((l) => l.consume("k", 1, { customDuration: 5 }));
    await vi.advanceTimersByTimeAsync(20_000);
    expect(await both((l) => l.get("k"))).toEqual({ resolved: null });
    // 0: forever; negative: `duration`; null: forever (rate-limiter-flexible reads `>= 0`).
    expect(await both((l) => l.consume("forever", 1, { customDuration: 0 }))).toMatchObject({
      resolved: { msBeforeNext: -1 },
    });
    expect(await both((l) => l.penalty("neg", 2, { customDuration: -1 }))).toMatchObject({
      resolved: { msBeforeNext: 60_000 },
    });
    expect(
      await both((l) => l.consume("null", 1, { customDuration: null as unknown as number })),
    ).toMatchObject({ resolved: { msBeforeNext: -1 } });
    expect(await both((l) => l.penalty("r", 1, { customDuration: 2.5 }))).toMatchObject({
      resolved: { msBeforeNext: 2500 },
    });
    await vi.advanceTimersByTimeAsync(2500);
    expect(await both((l) => l.get("r"))).toEqual({ resolved: null });
  });

  it("edge keys and points answer as rate-limiter-flexible's memory limiter", async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const opts = { points: 4, duration: 10 };
    const [a, b] = memoryPair(opts);
    const both = sameOutcome(a, b);
    // Each edge key counts on its own: "" is never "\u0000" nor any other.
    for (const [i, key] of EDGE_KEYS.entries()) {
      for (let n = 0; n <= i; n++) await both((l) => l.consume(key));
      expect(await both((l) => l.get(key))).toMatchObject({ resolved: { consumedPoints: i + 1 } });
    }
    // 0 points open a window at 0; fractions count rounded down, as its counts are whole.
    expect(await both((l) => l.consume("zero", 0))).toEqual({
      resolved: {
        remainingPoints: 4,
        msBeforeNext: 10_000,
        consumedPoints: 0,
        isFirstInDuration: true,
      },
    });
    expect(await both((l) => l.consume("half", 0.5))).toMatchObject({
      resolved: { consumedPoints: 0 },
    });
    expect(await both((l) => l.consume("half", 1.5))).toMatchObject({
      resolved: { consumedPoints: 1 },
    });
    expect(await both((l) => l.penalty("half", 2.5))).toMatchObject({
      resolved: { consumedPoints: 3 },
    });
    expect(await both((l) => l.reward("half", 1.5))).toMatchObject({
      resolved: { consumedPoints: 1 },
    });
    // set answers the points as given, and keeps them rounded down.
    expect(await both((l) => l.set("half", 2.9, 5))).toMatchObject({
      resolved: { consumedPoints: 2.9 },
    });
    expect(await both((l) => l.get("half"))).toMatchObject({ resolved: { consumedPoints: 2 } });
    await both((l) => l.reward("fresh", 0));
    await both((l) => l.get("fresh"));
  });

  it("differs on purpose: a negative consume stops at zero; digit strings are numbers", async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const [a, b] = memoryPair({ points: 2, duration: 10 });
    expect((await a.consume("k", -1)).consumedPoints).toBe(-1);
    expect((await b.consume("k", -1)).consumedPoints).toBe(0);
    await a.consume("s", 1);
    await b.consume("s", 1);
    // rate-limiter-flexible's memory limiter appends a string to the count: 1 and "2" make 12.
    await expect(a.consume("s", "2" as unknown as number)).rejects.toMatchObject({
      consumedPoints: 12,
    });
    expect((await b.consume("s", "1" as unknown as number)).consumedPoints).toBe(2);
  });

  it("refuses points that are not numbers, with a clear error", async () => {
    const b = new face.RateLimiterMemory({ points: 2, duration: 10 });
    await expect(b.consume("k", Number.NaN)).rejects.toThrow(/points: must be a whole number/);
    await expect(b.consume("k", "1.5" as unknown as number)).rejects.toThrow(
      /points: must be a whole number \(got "1\.5"\)/,
    );
    expect(() => new face.RateLimiterMemory({ points: Number.NaN, duration: 1 })).toThrow(
      /points: must be set and must be a finite number/,
    );
    expect(() => new face.RateLimiterMemory({ points: 1, duration: -1 })).toThrow(/duration/);
    expect(() => new face.RateLimiterMemory({ points: 1, duration: 1, keyPrefix: "a b" })).toThrow(
      /keyPrefix: must be 1–128 letters/,
    );
  });
});

describe("BurstyRateLimiter and RateLimiterQueue against rate-limiter-flexible's", () => {
  afterEach(() => vi.useRealTimers());

  it("BurstyRateLimiter: the burst limiter takes over; answers combine the same way", async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const make = (lib: typeof face) =>
      new lib.BurstyRateLimiter(
        new lib.RateLimiterMemory({ points: 2, duration: 1, keyPrefix: "rate" }),
        new lib.RateLimiterMemory({ points: 3, duration: 10, keyPrefix: "burst" }),
      );
    const a = make(P);
    const b = make(face);
    for (let i = 0; i < 8; i++) {
      expect(await outcome(() => b.consume("k"))).toEqual(await outcome(() => a.consume("k")));
      expect(await outcome(() => b.get("k"))).toEqual(await outcome(() => a.get("k")));
      await vi.advanceTimersByTimeAsync(300);
    }
    expect(b.points).toBe(2);
  });

  it("RateLimiterQueue: the same resolutions, in the same order, at the same times", async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const log: string[] = [];
    const drive = async (lib: typeof face, who: string) => {
      const q = new lib.RateLimiterQueue(new lib.RateLimiterMemory({ points: 2, duration: 1 }), {
        maxQueueSize: 3,
      });
      const t0 = Date.now();
      const all = [1, 1, 2, 1, 1, 1, 3].map((n, i) =>
        q.removeTokens(n, "user").then(
          (left) => log.push(`${who} ${i} ok ${left} at ${Date.now() - t0}`),
          (err: unknown) =>
            log.push(
              `${who} ${i} ${err instanceof Error ? `${err.name}: ${err.message}` : "?"} at ${Date.now() - t0}`,
            ),
        ),
      );
      await vi.advanceTimersByTimeAsync(10_000);
      await Promise.all(all);
      log.push(`${who} left ${await q.getTokensRemaining("user")}`);
    };
    await drive(P, "x");
    vi.setSystemTime(1_700_000_000_000);
    await drive(face, "x");
    const half = log.length / 2;
    expect(log.slice(half)).toEqual(log.slice(0, half));
    expect(log.some((l) => l.includes("CustomError: Requested tokens 3 exceeds maximum 2"))).toBe(
      true,
    );
    expect(log.some((l) => l.includes("reached it's maximum 3"))).toBe(true);
  });
});

describe("RateLimiterUnion: atomic, unlike rate-limiter-flexible's", () => {
  afterEach(() => vi.useRealTimers());

  it("answers as rate-limiter-flexible's while every limiter has room", async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const make = (lib: typeof face) =>
      new lib.RateLimiterUnion(
        new lib.RateLimiterMemory({ points: 2, duration: 1, keyPrefix: "sec" }),
        new lib.RateLimiterMemory({ points: 5, duration: 60, keyPrefix: "min" }),
      );
    const a = make(P);
    const b = make(face);
    for (let i = 0; i < 2; i++) {
      expect(await outcome(() => b.consume("k"))).toEqual(await outcome(() => a.consume("k")));
      await vi.advanceTimersByTimeAsync(100);
    }
    // The third is rejected by "sec" alone, with the same figures, in both.
    const [x, y] = [await outcome(() => a.consume("k")), await outcome(() => b.consume("k"))];
    expect(Object.keys((y as { rejected: object }).rejected)).toEqual(["sec"]);
    expect((y as { rejected: { sec: { msBeforeNext: number } } }).rejected.sec.msBeforeNext).toBe(
      800,
    );
    expect((x as { rejected: { sec: { msBeforeNext: number } } }).rejected.sec.msBeforeNext).toBe(
      800,
    );
  });

  it("differs on purpose (rate-limiter-flexible #280): a rejection consumes from no limiter", async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const make = (lib: typeof face) =>
      new lib.RateLimiterUnion(
        new lib.RateLimiterMemory({ points: 2, duration: 10, keyPrefix: "short" }),
        new lib.RateLimiterMemory({ points: 3, duration: 100, keyPrefix: "long" }),
      );
    const a = make(P);
    const b = make(face);
    for (const u of [a, b]) {
      await u.consume("k");
      await u.consume("k");
      await expect(u.consume("k")).rejects.toHaveProperty("short");
    }
    await vi.advanceTimersByTimeAsync(10_000);
    // "short" has room again. rate-limiter-flexible counted the rejected attempt in "long"
    // (3 of 3): rejected. sluice charged nothing for it (2 of 3): allowed, all-or-nothing.
    await expect(a.consume("k")).rejects.toHaveProperty("long.consumedPoints", 4);
    expect(await b.consume("k")).toEqual({
      short: expect.objectContaining({ consumedPoints: 1 }),
      long: expect.objectContaining({ consumedPoints: 3, remainingPoints: 0 }),
    });
    await expect(b.consume("k")).rejects.toHaveProperty("long.consumedPoints", 3);
  });

  it("a request larger than a limiter's points is rejected by that limiter, as in rate-limiter-flexible", async () => {
    const make = (lib: typeof face) =>
      new lib.RateLimiterUnion(
        new lib.RateLimiterMemory({ points: 1, duration: 1, keyPrefix: "one" }),
        new lib.RateLimiterMemory({ points: 2, duration: 5, keyPrefix: "two" }),
      );
    const a = make(P);
    const b = make(face);
    for (const [points, rejectedBy] of [
      [2, ["one"]],
      [3, ["one", "two"]],
    ] as const) {
      const [x, y] = [
        await outcome(() => a.consume(`k${points}`, points)),
        await outcome(() => b.consume(`k${points}`, points)),
      ];
      expect(Object.keys((x as { rejected: object }).rejected)).toEqual(rejectedBy);
      expect(Object.keys((y as { rejected: object }).rejected)).toEqual(rejectedBy);
    }
    // Nothing was taken: the next request of 1 passes every limiter.
    expect(Object.keys(await b.consume("k2"))).toEqual(["one", "two"]);
  });

  it("refuses limiters it cannot decide at once, naming them", () => {
    expect(() => new face.RateLimiterUnion()).toThrow(/at least one limiter/);
    expect(
      () =>
        new face.RateLimiterUnion(
          new face.RateLimiterMemory({ points: 2, duration: 1, blockDuration: 5 }),
        ),
    ).toThrow(/limiters\.0: blockDuration and execEvenly are not supported/);
  });
});

describe("RateLimiterRedis against rate-limiter-flexible's, on one redis-server", () => {
  const redis = redisForSuite();
  /** msBeforeNext may differ by this much: the two are asked one after the other, in real time. */
  const TOLERANCE = 50;
  /** How many of 300 concurrent calls of `consume` on `l` resolve. */
  const admitted = async (l: AnyLimiter, consume: (l: AnyLimiter) => Promise<unknown>) => {
    const rs = await Promise.allSettled(Array.from({ length: 300 }, () => consume(l)));
    return rs.filter((r) => r.status === "fulfilled").length;
  };
  /** rate-limiter-flexible's RateLimiterRedis and the face's, with `opts`, on the one server. */
  const redisPair = (opts: BothOptions) =>
    [
      new peer.RateLimiterRedis({ ...opts, storeClient: redis.client }),
      new face.RateLimiterRedis({ ...opts, storeClient: redis.client }),
    ] as const;

  it("a scripted sequence: consume, penalty, reward, get, set, block, delete, blockDuration", async () => {
    const opts = { points: 4, duration: 30, blockDuration: 60, keyPrefix: `seq${run}` };
    const [a, b] = redisPair(opts);
    const ops: Op[] = [
      { op: "get", key: "u" },
      { op: "consume", key: "u", points: 1 },
      { op: "consume", key: "u", points: 2 },
      { op: "get", key: "u" },
      { op: "penalty", key: "u", points: 1 },
      { op: "consume", key: "u", points: 1 },
      { op: "consume", key: "u", points: 1 },
      { op: "get", key: "u" },
      { op: "reward", key: "u", points: 2 },
      { op: "delete", key: "u" },
      { op: "delete", key: "u" },
      { op: "consume", key: "v", points: 3 },
      { op: "reward", key: "v", points: 1 },
      { op: "set", key: "v", points: 7, sec: 20 },
      { op: "consume", key: "v", points: 1 },
      { op: "get", key: "v" },
      { op: "block", key: "w", sec: 45 },
      { op: "consume", key: "w", points: 1 },
      { op: "block", key: "x", sec: 0 },
      { op: "get", key: "x" },
      { op: "set", key: "y", points: 2, sec: 0 },
      { op: "get", key: "y" },
      { op: "set", key: "z", points: 1, sec: -1 },
      { op: "get", key: "z" },
      { op: "consume", key: "z", points: 1 },
      // (Not down to 0: rate-limiter-flexible's Redis limiter's get then answers
      // isFirstInDuration true; its docs say get always answers false, as sluice does.)
      { op: "reward", key: "z", points: 1 },
      { op: "get", key: "z" },
    ];
    await sameAnswers(a, b, ops, TOLERANCE);
  });

  it("customDuration, edge keys and edge points: the same answers as rate-limiter-flexible's", async () => {
    const opts = { points: 4, duration: 30, blockDuration: 60, keyPrefix: `edge${run}` };
    const [a, b] = redisPair(opts);
    const ops: Op[] = [
      { op: "consume", key: "c", points: 1, custom: 5 },
      // Open: the window keeps its end, whatever this call's customDuration.
      { op: "consume", key: "c", points: 1, custom: 100 },
      { op: "get", key: "c" },
      { op: "penalty", key: "c", points: 1, custom: 2 },
      { op: "consume", key: "c", points: 2 },
      { op: "get", key: "c" },
      { op: "consume", key: "d", points: 1, custom: 0 },
      { op: "get", key: "d" },
      { op: "consume", key: "e", points: 1, custom: -1 },
      { op: "consume", key: "n", points: 1, custom: null },
      { op: "penalty", key: "f", points: 2, custom: 7 },
      { op: "reward", key: "f", points: 1, custom: 1 },
      { op: "get", key: "f" },
      { op: "consume", key: "s", points: 1, custom: "9" },
      ...EDGE_KEYS.flatMap((key, i): Op[] => [
        ...Array.from({ length: i + 1 }, () => ({ op: "consume" as const, key, points: 1 })),
        { op: "get", key },
      ]),
      { op: "delete", key: "" },
      { op: "get", key: "" },
      { op: "get", key: "\u0000" },
      // Fractions are refused by both; strings of digits are points (and the count is then
      // never equal to them: isFirstInDuration false).
      { op: "consume", key: "p", points: 1.5 },
      { op: "consume", key: "p", points: "2" as unknown as number },
      { op: "penalty", key: "p", points: "1" as unknown as number },
      { op: "get", key: "p" },
      { op: "set", key: "p", points: 2.5, sec: 10 },
      { op: "get", key: "p" },
    ];
    await sameAnswers(a, b, ops, TOLERANCE);
  });

  it("customDuration: the window ends then (real time, 1 s), and concurrent consumes admit exactly `points`", async () => {
    const opts = { points: 7, duration: 600, keyPrefix: `cdw${run}` };
    const [a, b] = redisPair(opts);
    const once = (l: AnyLimiter) => l.consume("hot", 1, { customDuration: 1 });
    const [x, y] = await Promise.all([admitted(a, once), admitted(b, once)]);
    expect(x).toBe(7);
    expect(y).toBe(7);
    expect((await b.get("hot"))?.consumedPoints).toBe(300);
    expect((await b.get("hot"))?.msBeforeNext).toBeLessThanOrEqual(1000);
    await new Promise((r) => setTimeout(r, 1100));
    expect(await b.get("hot")).toBeNull();
    expect(await a.get("hot")).toBeNull();
    // The next window is the limiter's own duration again, on both.
    const theirs = view(await a.consume("hot"));
    const ours = view(await b.consume("hot"));
    expect(within(ours, theirs, TOLERANCE)).toEqual(theirs);
    expect(theirs).toMatchObject({ consumedPoints: 1, isFirstInDuration: true });
  });

  it("rejectIfRedisNotReady: a client not ready yet rejects at once, as rate-limiter-flexible's", async () => {
    const connecting = new Redis(redis.server.url);
    try {
      const opts = { points: 2, duration: 30, keyPrefix: `nr${run}`, rejectIfRedisNotReady: true };
      const a = new peer.RateLimiterRedis({ ...opts, storeClient: connecting });
      const b = new face.RateLimiterRedis({ ...opts, storeClient: connecting });
      const insured = new face.RateLimiterRedis({
        ...opts,
        storeClient: connecting,
        insuranceLimiter: new face.RateLimiterMemory({ points: 2, duration: 30 }),
      });
      const calls: Array<(l: AnyLimiter) => Promise<unknown>> = [
        (l) => l.consume("k"),
        (l) => l.penalty("k"),
        (l) => l.reward("k"),
        (l) => l.get("k"),
        (l) => l.set("k", 1, 10),
        (l) => l.block("k", 10),
      ];
      for (const [i, f] of calls.entries()) {
        expect(connecting.status, `call ${i}`).not.toBe("ready");
        const [x, y] = await Promise.all([
          f(a).then(
            () => "resolved",
            (e: unknown) => (e as Error).message,
          ),
          f(b).then(
            () => "resolved",
            (e: unknown) => (e as Error).message,
          ),
        ]);
        expect(x, `call ${i}`).toBe("Redis connection is not ready");
        expect(y, `call ${i}`).toBe(x);
        // With an insurance limiter, it answers instead.
        await expect(f(insured)).resolves.toBeDefined();
      }
      expect(connecting.status).not.toBe("ready");
      await new Promise<void>((r) => connecting.once("ready", () => r()));
      const theirs = view(await a.consume("ready"));
      expect(within(view(await b.consume("ready2")), theirs, TOLERANCE)).toEqual(theirs);
    } finally {
      connecting.disconnect();
    }
  });

  it("differs on purpose: a key blocked or set forever stays so (as documented)", async () => {
    const opts = { points: 2, duration: 30, keyPrefix: `fvr${run}` };
    const [a, b] = redisPair(opts);
    await a.block("k", 0);
    await b.block("k", 0);
    // rate-limiter-flexible's Redis limiter gives the key `duration` on its next consume (its
    // script EXPIREs a key without TTL); its docs, its memory limiter and sluice keep it forever.
    await expect(a.consume("k")).rejects.toMatchObject({ consumedPoints: 4, msBeforeNext: 30_000 });
    await expect(b.consume("k")).rejects.toMatchObject({ consumedPoints: 4, msBeforeNext: -1 });
  });

  it("duration 0 keeps counts forever (msBeforeNext −1) on both", async () => {
    const opts = { points: 2, duration: 0, keyPrefix: `inf${run}` };
    const [a, b] = redisPair(opts);
    for (let i = 0; i < 4; i++)
      expect(await outcome(() => b.consume("k"))).toEqual(await outcome(() => a.consume("k")));
    expect(await outcome(() => b.get("k"))).toEqual(await outcome(() => a.get("k")));
  });

  it("inMemoryBlockOnConsumed answers from this process once a key is over", async () => {
    const opts = { points: 2, duration: 30, inMemoryBlockOnConsumed: 3, keyPrefix: `imb${run}` };
    const [a, b] = redisPair(opts);
    for (let i = 0; i < 5; i++) {
      const [x, y] = [await outcome(() => a.consume("k")), await outcome(() => b.consume("k"))];
      expect(within(y, x, TOLERANCE), `consume ${i}`).toEqual(x);
    }
    // Blocked in memory: the store was not asked (its count stayed at 3).
    expect((await b.get("k"))?.consumedPoints).toBe(3);
    b.deleteInMemoryBlockedAll();
    await expect(b.consume("k")).rejects.toMatchObject({ consumedPoints: 4 });
  });

  it("a window ends duration after the key's first consume (real time, 1 s)", async () => {
    const opts = { points: 1, duration: 1, keyPrefix: `win${run}` };
    const [a, b] = redisPair(opts);
    await Promise.all([a.consume("k"), b.consume("k")]);
    await expect(a.consume("k")).rejects.toBeInstanceOf(peer.RateLimiterRes);
    await expect(b.consume("k")).rejects.toBeInstanceOf(face.RateLimiterRes);
    await new Promise((r) => setTimeout(r, 1100));
    expect(view(await b.consume("k"))).toEqual(view(await a.consume("k")));
  });

  it("many concurrent consumes at a small limit admit exactly `points` on both", async () => {
    const opts = { points: 7, duration: 60, keyPrefix: `conc${run}` };
    const [a, b] = redisPair(opts);
    const once = (l: AnyLimiter) => l.consume("hot");
    const [x, y] = await Promise.all([admitted(a, once), admitted(b, once)]);
    expect(x).toBe(7);
    expect(y).toBe(7);
    expect((await b.get("hot"))?.consumedPoints).toBe(300);
  });

  it("a store failure rejects with an Error, or asks the insurance limiter", async () => {
    const dead = deadRedisClient();
    try {
      const bare = new face.RateLimiterRedis({
        storeClient: dead,
        points: 2,
        duration: 1,
        keyPrefix: `dead${run}`,
      });
      const err = await bare.consume("k").catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Error);
      expect(err).not.toBeInstanceOf(face.RateLimiterRes);
      const insurance = new face.RateLimiterMemory({ points: 1, duration: 1 });
      const insured = new face.RateLimiterRedis({
        storeClient: dead,
        points: 2,
        duration: 1,
        keyPrefix: `dead2${run}`,
        insuranceLimiter: insurance,
      });
      expect((await insured.consume("k")).consumedPoints).toBe(1);
      await expect(insured.consume("k")).rejects.toMatchObject({ consumedPoints: 2 });
      expect(await insured.get("k")).toMatchObject({ consumedPoints: 2 });
      expect(await insured.delete("k")).toBe(true);
    } finally {
      dead.disconnect();
    }
  });

  it("RateLimiterUnion over Redis: one decision, nothing consumed when one rejects", async () => {
    const short = new face.RateLimiterRedis({
      storeClient: redis.client,
      points: 1,
      duration: 60,
      keyPrefix: `us${run}`,
    });
    const long = new face.RateLimiterRedis({
      storeClient: redis.client,
      points: 5,
      duration: 600,
      keyPrefix: `ul${run}`,
    });
    const union = new face.RateLimiterUnion(short, long);
    const rs = await Promise.allSettled(Array.from({ length: 20 }, () => union.consume("k")));
    expect(rs.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const rejected = rs.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(Object.keys(rejected.reason as object)).toEqual([`us${run}`]);
    // The union's counts are in Redis under its own policy (one key per limiter's rule).
    const keys = await redis.client.keys(`sl:union:us${run}:ul${run}:*`);
    expect(keys.sort()).toEqual([
      `sl:union:us${run}:ul${run}:{k}:f0`,
      `sl:union:us${run}:ul${run}:{k}:f1`,
    ]);
    expect(await redis.client.get(keys.sort()[1]!)).toBe("1");
  });

  it("keys are sluice's: sl:<keyPrefix>:{<key>}:f0, holding the count, expiring with the window", async () => {
    const b = new face.RateLimiterRedis({
      storeClient: redis.client,
      points: 5,
      duration: 30,
      keyPrefix: `keys${run}`,
    });
    await b.consume("user:42", 3);
    expect(await redis.client.get(`sl:keys${run}:{user:42}:f0`)).toBe("3");
    const ttl = await redis.client.pttl(`sl:keys${run}:{user:42}:f0`);
    expect(ttl).toBeGreaterThan(29_000);
    expect(ttl).toBeLessThanOrEqual(30_000);
  });
});
