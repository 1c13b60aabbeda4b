/**
 * The conformance table: scenarios as data, run against every store by `run.ts`.
 *
 * Each scenario has a policy and a list of steps at times relative to t0 (t0 is aligned to a
 * day, so every window boundary falls on a round offset). A step calls one limiter operation
 * and states what the decision must be. Expected values are worked out by hand from the
 * definitions in DESIGN.md §2; the comments show the arithmetic.
 */
import type { PolicyInput } from "../../src/index.js";

/** What a step's decision must show (only the fields given are checked). */
export interface Expect {
  allowed?: boolean;
  remaining?: number;
  retryAfterMs?: number;
  resetAfterMs?: number;
  limit?: number;
  /** Index of the reported rule. */
  rule?: number;
  /** `null` means "no reason". */
  reason?: string | null;
  /** Per-rule checks, by index. */
  rules?: Array<{ allowed?: boolean; remaining?: number; retryAfterMs?: number } | undefined>;
}

/** One operation at one time. */
export interface Step {
  /** ms after t0. */
  at: number;
  /**
   * Limiter operation; default `limit`. `adjust` charges `cost` unconditionally (negative
   * refunds); `setCount` puts the key at `count` in a window of `windowMs`.
   */
  op?: "limit" | "peek" | "reset" | "refund" | "adjust" | "release" | "setCount";
  key?: string;
  cost?: number;
  /** For `setCount`. */
  count?: number;
  /** For `setCount` (default: the period). */
  windowMs?: number;
  /** Name under which to remember a concurrency lease (op `limit`), or which lease to release. */
  lease?: string;
  expect?: Expect;
  /** The operation must throw a SluiceError with this code. */
  throws?: string;
}

/** A named scenario. The runner gives the policy a unique name per run. */
export interface Scenario {
  name: string;
  /**
   * The time (epoch ms) of `at: 0`, for scenarios that need a date (calendar windows); the
   * day-aligned `T0` of play.ts by default.
   */
  t0?: number;
  policy: Omit<PolicyInput, "name">;
  steps: Step[];
}

/** `n` limit calls at `at`, expecting remaining to count down from `from` (allowed). */
function fill(at: number, n: number, from: number, extra: Expect = {}, key?: string): Step[] {
  return Array.from({ length: n }, (_, i) => ({
    at,
    ...(key ? { key } : {}),
    expect: { allowed: true, remaining: from - i, ...extra },
  }));
}

export const scenarios: Scenario[] = [
  // ─── GCRA ───────────────────────────────────────────────────────────────────────────────
  {
    name: "gcra: burst of limit, then one every T; retryAfterMs exact",
    // T = 1000/5 = 200 ms, τ = 5·T = 1000 ms.
    policy: { algorithm: "gcra", rules: [{ limit: 5, period: "1s" }] },
    steps: [
      {
        at: 0,
        expect: {
          allowed: true,
          remaining: 4,
          resetAfterMs: 200,
          retryAfterMs: 0,
          limit: 5,
          reason: null,
        },
      },
      { at: 0, expect: { remaining: 3, resetAfterMs: 400 } },
      { at: 0, expect: { remaining: 2, resetAfterMs: 600 } },
      { at: 0, expect: { remaining: 1, resetAfterMs: 800 } },
      { at: 0, expect: { remaining: 0, resetAfterMs: 1000 } },
      // TAT = 1000; the next cell is due at TAT + T − τ = 200.
      { at: 0, expect: { allowed: false, remaining: 0, retryAfterMs: 200, resetAfterMs: 1000 } },
      { at: 199, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 200, expect: { allowed: true, remaining: 0, resetAfterMs: 1000 } },
      // Idle for a full period: back to full.
      { at: 1200, expect: { allowed: true, remaining: 4, resetAfterMs: 200 } },
    ],
  },
  {
    name: "gcra: burst smaller than limit (100/min, burst 20)",
    // T = 600 ms, τ = 20·600 = 12000 ms.
    policy: { algorithm: "gcra", rules: [{ limit: 100, period: "1m", burst: 20 }] },
    steps: [
      ...fill(0, 20, 19),
      {
        at: 0,
        expect: {
          allowed: false,
          remaining: 0,
          retryAfterMs: 600,
          resetAfterMs: 12000,
          limit: 100,
        },
      },
      { at: 599, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 600, expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: "gcra: cost > 1",
    // T = 100, τ = 1000.
    policy: { algorithm: "gcra", rules: [{ limit: 10, period: "1s" }] },
    steps: [
      { at: 0, cost: 4, expect: { allowed: true, remaining: 6, resetAfterMs: 400 } },
      { at: 0, cost: 4, expect: { allowed: true, remaining: 2, resetAfterMs: 800 } },
      // TAT 800 + 400 − 1000 = 200 ms to wait; 2 units left now.
      { at: 0, cost: 4, expect: { allowed: false, remaining: 2, retryAfterMs: 200 } },
      { at: 0, cost: 2, expect: { allowed: true, remaining: 0 } },
      { at: 0, cost: 11, throws: "SLUICE_ERR_COST" },
      { at: 0, cost: 0, throws: "SLUICE_ERR_COST" },
      { at: 0, cost: 1.5, throws: "SLUICE_ERR_COST" },
    ],
  },
  {
    name: "gcra: fractional emission interval (3/s) rounds waits up",
    // T = 333.33… ms: waits round up so that retrying after retryAfterMs passes.
    policy: { algorithm: "gcra", rules: [{ limit: 3, period: "1s" }] },
    steps: [
      { at: 0, expect: { remaining: 2, resetAfterMs: 334 } },
      { at: 0, expect: { remaining: 1, resetAfterMs: 667 } },
      { at: 0, expect: { remaining: 0, resetAfterMs: 1000 } },
      { at: 0, expect: { allowed: false, retryAfterMs: 334 } },
      { at: 333, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 334, expect: { allowed: true, remaining: 0, resetAfterMs: 1000 } },
    ],
  },
  {
    name: "gcra: a full burst passes at epoch-sized times (7 per hour: no rounding drift)",
    // T = 3600000/7 ms = 514285.714… ms. Adding T to an epoch time in ms as a double rounds at
    // each step (2^-13 ms), and 7 steps overshoot τ: sluice counts T in whole µs (rounded up,
    // 514285715 µs) and τ as 7 of those, so the 7th always fits.
    policy: { algorithm: "gcra", rules: [{ limit: 7, period: "1h" }] },
    steps: [
      ...fill(0, 7, 6),
      {
        at: 0,
        expect: { allowed: false, remaining: 0, retryAfterMs: 514_286, resetAfterMs: 3_600_000 },
      },
      { at: 514_285, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 514_286, expect: { allowed: true, remaining: 0 } },
    ],
  },
  // ─── Token bucket ───────────────────────────────────────────────────────────────────────
  {
    name: "token-bucket: capacity, lazy refill, exact retry",
    // rate = 5/1000 tokens per ms; capacity 5.
    policy: { algorithm: "token-bucket", rules: [{ limit: 5, period: "1s" }] },
    steps: [
      ...fill(0, 5, 4),
      { at: 0, expect: { allowed: false, remaining: 0, retryAfterMs: 200, resetAfterMs: 1000 } },
      { at: 199, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 200, expect: { allowed: true, remaining: 0, resetAfterMs: 1000 } },
      // 600 ms later 3 tokens are back.
      { at: 800, expect: { allowed: true, remaining: 2, resetAfterMs: 600 } },
    ],
  },
  {
    name: "token-bucket: burst and cost",
    // 60/min refills one token per second, capacity 10.
    policy: { algorithm: "token-bucket", rules: [{ limit: 60, period: "1m", burst: 10 }] },
    steps: [
      { at: 0, cost: 10, expect: { allowed: true, remaining: 0, resetAfterMs: 10000, limit: 60 } },
      { at: 0, cost: 3, expect: { allowed: false, retryAfterMs: 3000 } },
      { at: 2999, cost: 3, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 3000, cost: 3, expect: { allowed: true, remaining: 0 } },
      { at: 3000, cost: 11, throws: "SLUICE_ERR_COST" },
    ],
  },
  {
    name: "token-bucket: fractional rate (3/s)",
    policy: { algorithm: "token-bucket", rules: [{ limit: 3, period: "1s" }] },
    steps: [
      ...fill(0, 3, 2),
      { at: 0, expect: { allowed: false, retryAfterMs: 334 } },
      { at: 333, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 334, expect: { allowed: true, remaining: 0 } },
    ],
  },
  // ─── Token bucket refilled by interval (`refill: "interval"`, as @upstash/ratelimit) ────
  // State [tokens, refilledAt, expiresAt]: a key's first charge fills the bucket and anchors
  // its refills there; every whole period after the anchor adds `limit` tokens at once (up to
  // `burst`) and moves the anchor by that many periods. A write keeps the key for
  // ceil((burst − left)/limit) periods from now; after that the next request anchors anew.
  {
    name: "token-bucket (interval refill): whole steps at the anchor, nothing in between; retry exact",
    policy: {
      algorithm: "token-bucket",
      refill: "interval",
      rules: [{ limit: 2, period: "1s", burst: 5 }],
    },
    steps: [
      // Anchor 0. resetAfterMs = 0 + ceil((5 − left)/2)·1000 − now.
      { at: 0, expect: { allowed: true, remaining: 4, resetAfterMs: 1000, retryAfterMs: 0 } },
      { at: 0, expect: { allowed: true, remaining: 3, resetAfterMs: 1000 } },
      { at: 0, expect: { allowed: true, remaining: 2, resetAfterMs: 2000 } },
      { at: 0, expect: { allowed: true, remaining: 1, resetAfterMs: 2000, limit: 2 } },
      { at: 0, expect: { allowed: true, remaining: 0, resetAfterMs: 3000 } },
      // Empty: the next tokens come at the anchor + 1 period.
      { at: 0, expect: { allowed: false, remaining: 0, retryAfterMs: 1000, resetAfterMs: 3000 } },
      // A continuous bucket would hold 1.998 tokens by now; this one holds none.
      { at: 999, expect: { allowed: false, remaining: 0, retryAfterMs: 1, resetAfterMs: 2001 } },
      // Two tokens at once; anchor 1000.
      { at: 1000, expect: { allowed: true, remaining: 1, resetAfterMs: 2000 } },
      { at: 1500, expect: { allowed: true, remaining: 0, resetAfterMs: 2500 } },
      // Refusals take nothing and move nothing.
      { at: 1600, expect: { allowed: false, retryAfterMs: 400, resetAfterMs: 2400 } },
      { at: 1999, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 2000, expect: { allowed: true, remaining: 1, resetAfterMs: 2000 } },
      { at: 2000, cost: 6, throws: "SLUICE_ERR_COST" },
    ],
  },
  {
    name: "token-bucket (interval refill): cost > 1, a catch-up of several steps stops at burst",
    policy: {
      algorithm: "token-bucket",
      refill: "interval",
      rules: [{ limit: 3, period: "10s", burst: 4 }],
    },
    steps: [
      // Anchor 0; ceil(4/3) = 2 periods to full. The key is kept 20 s (until 20000).
      { at: 0, cost: 4, expect: { allowed: true, remaining: 0, resetAfterMs: 20000 } },
      { at: 0, cost: 2, expect: { allowed: false, remaining: 0, retryAfterMs: 10000 } },
      // One step (anchor 10000): 3 tokens, not 4.
      {
        at: 15000,
        cost: 4,
        expect: { allowed: false, remaining: 3, retryAfterMs: 5000, resetAfterMs: 5000 },
      },
      // Kept until 15000 + 20000 = 35000; full again at 10000 + 20000 = 30000.
      { at: 15000, cost: 3, expect: { allowed: true, remaining: 0, resetAfterMs: 15000 } },
      // Two steps (anchor 30000): 0 + 2·3 = 6, capped at 4.
      { at: 32000, cost: 4, expect: { allowed: true, remaining: 0, resetAfterMs: 18000 } },
      { at: 32000, expect: { allowed: false, remaining: 0, retryAfterMs: 8000 } },
      { at: 32000, cost: 5, throws: "SLUICE_ERR_COST" },
    ],
  },
  {
    name: "token-bucket (interval refill): the anchor holds while the key lives, and starts anew once it expired",
    policy: {
      algorithm: "token-bucket",
      refill: "interval",
      rules: [{ limit: 1, period: "1s", burst: 2 }],
    },
    steps: [
      // Key a. Anchor 0, kept until 1000; then kept until 500 + 2·1000 = 2500.
      { at: 0, key: "a", expect: { allowed: true, remaining: 1, resetAfterMs: 1000 } },
      { at: 500, key: "a", expect: { allowed: true, remaining: 0, resetAfterMs: 1500 } },
      // Full since 2000 but still kept: anchor 2000 (not now), kept until 3400.
      { at: 2400, key: "a", expect: { allowed: true, remaining: 1, resetAfterMs: 600 } },
      // Anchor 3000; kept until 4399.
      { at: 3399, key: "a", expect: { allowed: true, remaining: 1, resetAfterMs: 601 } },
      // Expired at 4399: anchored anew at 4399.
      { at: 4399, key: "a", expect: { allowed: true, remaining: 1, resetAfterMs: 1000 } },
      // Key b, the same until 3399; a millisecond before the expiry the anchor is 4000.
      { at: 0, key: "b", expect: { allowed: true, remaining: 1 } },
      { at: 500, key: "b", expect: { allowed: true, remaining: 0 } },
      { at: 2400, key: "b", expect: { allowed: true, remaining: 1 } },
      { at: 3399, key: "b", expect: { allowed: true, remaining: 1 } },
      { at: 4398, key: "b", expect: { allowed: true, remaining: 1, resetAfterMs: 602 } },
      { at: 4398, key: "b", expect: { allowed: true, remaining: 0, resetAfterMs: 1602 } },
      { at: 4398, key: "b", expect: { allowed: false, retryAfterMs: 602 } },
    ],
  },
  {
    name: "token-bucket (interval refill): refunds stop at burst and never move the anchor; peek",
    policy: {
      algorithm: "token-bucket",
      refill: "interval",
      rules: [{ limit: 2, period: "1s", burst: 3 }],
    },
    steps: [
      // A fresh key: full (a peek reports it as if charged: 1 token back after 1 period).
      { at: 0, op: "peek", expect: { allowed: true, remaining: 3, resetAfterMs: 1000 } },
      // Anchor 0, kept until 2000.
      { at: 0, cost: 3, expect: { allowed: true, remaining: 0, resetAfterMs: 2000 } },
      // 1 back: kept until 100 + ceil(2/2)·1000 = 1100.
      { at: 100, op: "refund", cost: 1 },
      { at: 200, op: "peek", expect: { allowed: true, remaining: 1, resetAfterMs: 1800 } },
      // Full (not 11): the key keeps its anchor and its expiry (1100).
      { at: 300, op: "adjust", cost: -10 },
      // Still kept: one step, anchor 1000.
      { at: 1050, expect: { allowed: true, remaining: 2, resetAfterMs: 950 } },
      { at: 1050, cost: 2, expect: { allowed: true, remaining: 0, resetAfterMs: 1950 } },
      { at: 1050, expect: { allowed: false, remaining: 0, retryAfterMs: 950 } },
      { at: 2000, expect: { allowed: true, remaining: 1, resetAfterMs: 1000 } },
      // A forced charge past empty is a debt that whole steps pay off: −3 + 2 + 2 = 1 at 4000.
      { at: 2000, op: "adjust", cost: 4 },
      { at: 2000, expect: { allowed: false, remaining: 0, retryAfterMs: 2000 } },
      { at: 3999, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 4000, expect: { allowed: true, remaining: 0, resetAfterMs: 2000 } },
    ],
  },
  {
    name: "token-bucket (interval refill): two rules, each with its own anchor and expiry",
    policy: {
      algorithm: "token-bucket",
      refill: "interval",
      rules: [
        { limit: 1, period: "1s", burst: 1 },
        { limit: 10, period: "1m" },
      ],
    },
    steps: [
      { at: 0, expect: { allowed: true, remaining: 0, rule: 0, resetAfterMs: 1000 } },
      // Rule 0's state expired at 1000 (rule 1's lives on): anchored anew at 1500.
      {
        at: 1500,
        expect: {
          allowed: true,
          rule: 0,
          resetAfterMs: 1000,
          rules: [{ remaining: 0 }, { remaining: 8 }],
        },
      },
      {
        at: 1500,
        expect: { allowed: false, rule: 0, retryAfterMs: 1000, rules: [{}, { remaining: 8 }] },
      },
    ],
  },
  // ─── Fixed window ───────────────────────────────────────────────────────────────────────
  {
    name: "fixed-window: limit per aligned window, retry at the window end",
    policy: { algorithm: "fixed-window", rules: [{ limit: 5, period: "1s" }] },
    steps: [
      ...fill(0, 5, 4, { resetAfterMs: 1000 }),
      { at: 0, expect: { allowed: false, remaining: 0, retryAfterMs: 1000, resetAfterMs: 1000 } },
      { at: 500, expect: { allowed: false, retryAfterMs: 500, resetAfterMs: 500 } },
      { at: 999, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 1000, expect: { allowed: true, remaining: 4, resetAfterMs: 1000 } },
    ],
  },
  {
    name: "fixed-window: the known 2× burst at the window edge",
    policy: { algorithm: "fixed-window", rules: [{ limit: 5, period: "1s" }] },
    steps: [
      ...fill(999, 5, 4, { resetAfterMs: 1 }),
      { at: 999, expect: { allowed: false, retryAfterMs: 1 } },
      // Two milliseconds, ten requests: the weakness sliding windows exist to fix.
      ...fill(1000, 5, 4, { resetAfterMs: 1000 }),
      { at: 1000, expect: { allowed: false, retryAfterMs: 1000 } },
    ],
  },
  {
    name: "fixed-window: cost > 1",
    policy: { algorithm: "fixed-window", rules: [{ limit: 10, period: "1m" }] },
    steps: [
      { at: 0, cost: 7, expect: { allowed: true, remaining: 3 } },
      { at: 1000, cost: 4, expect: { allowed: false, remaining: 3, retryAfterMs: 59000 } },
      { at: 1000, cost: 3, expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: "fixed-window (first-request): a key's window opens with its first request",
    policy: {
      algorithm: "fixed-window",
      windowStart: "first-request",
      rules: [{ limit: 3, period: "1s" }],
    },
    steps: [
      // Nothing open yet: full. (A peek reports the window the request would open.)
      { at: 100, op: "peek", expect: { allowed: true, remaining: 3, resetAfterMs: 1000 } },
      { at: 250, expect: { allowed: true, remaining: 2, resetAfterMs: 1000 } },
      { at: 500, expect: { allowed: true, remaining: 1, resetAfterMs: 750 } },
      { at: 900, expect: { allowed: true, remaining: 0, resetAfterMs: 350 } },
      // The window is [250, 1250), not the aligned [0, 1000).
      { at: 1000, expect: { allowed: false, remaining: 0, retryAfterMs: 250, resetAfterMs: 250 } },
      { at: 1249, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 1250, expect: { allowed: true, remaining: 2, resetAfterMs: 1000 } },
      { at: 1300, key: "other", expect: { allowed: true, remaining: 2, resetAfterMs: 1000 } },
      { at: 2249, expect: { allowed: true, remaining: 1, resetAfterMs: 1 } },
      // Idle past the window's end: the next request opens a new one.
      { at: 5000, expect: { allowed: true, remaining: 2, resetAfterMs: 1000 } },
    ],
  },
  {
    name: "fixed-window (first-request): cost, refunds and forced charges past the limit",
    policy: {
      algorithm: "fixed-window",
      windowStart: "first-request",
      rules: [{ limit: 5, period: "10s" }],
    },
    steps: [
      { at: 0, cost: 3, expect: { allowed: true, remaining: 2, resetAfterMs: 10000 } },
      // 3 + 4 = 7 counted: over the limit until the window ends.
      { at: 100, op: "adjust", cost: 4 },
      { at: 200, expect: { allowed: false, remaining: 0, retryAfterMs: 9800 } },
      { at: 300, op: "refund", cost: 3 },
      { at: 400, expect: { allowed: true, remaining: 0, resetAfterMs: 9600 } },
      // Never below nothing; the window stays open, empty, until its end.
      { at: 500, op: "adjust", cost: -10 },
      { at: 600, op: "peek", expect: { allowed: true, remaining: 5, resetAfterMs: 9400 } },
      { at: 700, expect: { allowed: true, remaining: 4, resetAfterMs: 9300 } },
      { at: 10000, expect: { allowed: true, remaining: 4, resetAfterMs: 10000 } },
      { at: 800, cost: 6, throws: "SLUICE_ERR_COST" },
    ],
  },
  {
    name: "fixed-window (first-request): setCount puts the count and the window's end",
    policy: {
      algorithm: "fixed-window",
      windowStart: "first-request",
      rules: [{ limit: 5, period: "1m" }],
    },
    steps: [
      { at: 0, expect: { allowed: true, remaining: 4 } },
      // 9 counted until 1000 + 5000.
      { at: 1000, op: "setCount", count: 9, windowMs: 5000 },
      {
        at: 1000,
        expect: { allowed: false, remaining: 0, retryAfterMs: 5000, resetAfterMs: 5000 },
      },
      { at: 2000, op: "peek", expect: { allowed: false, retryAfterMs: 4000 } },
      { at: 6000, expect: { allowed: true, remaining: 4, resetAfterMs: 60000 } },
      // A window holding 0 until 7000 + 60000.
      { at: 7000, op: "setCount", count: 0 },
      { at: 7500, op: "peek", expect: { allowed: true, remaining: 5, resetAfterMs: 59500 } },
      // Without windowMs, the window is the period.
      { at: 8000, op: "setCount", count: 5 },
      { at: 8000, expect: { allowed: false, retryAfterMs: 60000 } },
      { at: 8000, op: "setCount", count: 2, windowMs: 100 },
      { at: 8000, expect: { allowed: true, remaining: 2, resetAfterMs: 100 } },
      { at: 8100, expect: { allowed: true, remaining: 4, resetAfterMs: 60000 } },
      { at: 9000, op: "setCount", count: -1, throws: "SLUICE_ERR_OPTIONS" },
      { at: 9000, op: "setCount", count: 1.5, throws: "SLUICE_ERR_OPTIONS" },
      { at: 9000, op: "setCount", count: 1, windowMs: 0, throws: "SLUICE_ERR_OPTIONS" },
    ],
  },
  {
    name: "fixed-window (first-request): two rules and a penalty block",
    policy: {
      algorithm: "fixed-window",
      windowStart: "first-request",
      rules: [
        { limit: 2, period: "1s" },
        { limit: 3, period: "10s" },
      ],
      blockDuration: "5s",
    },
    steps: [
      { at: 0, expect: { allowed: true, remaining: 1, rule: 0 } },
      { at: 100, expect: { allowed: true, remaining: 0, rule: 0 } },
      // Rule 0 is full: denied, and the block starts.
      { at: 200, expect: { allowed: false, retryAfterMs: 5000, reason: "blocked" } },
      { at: 5199, expect: { allowed: false, retryAfterMs: 1, reason: "blocked" } },
      // Rule 0's window [0, 1000) is over; rule 1's [0, 10000) holds 2 of 3.
      {
        at: 5200,
        expect: {
          allowed: true,
          remaining: 0,
          rule: 1,
          rules: [{ remaining: 1 }, { remaining: 0 }],
        },
      },
      { at: 5300, expect: { allowed: false, retryAfterMs: 5000, reason: "blocked" } },
      {
        at: 10300,
        expect: { allowed: true, remaining: 1, rules: [{ remaining: 1 }, { remaining: 2 }] },
      },
      { at: 10300, op: "setCount", count: 1, throws: "SLUICE_ERR_OPTIONS" },
      { at: 10300, op: "setCount", count: 3, windowMs: 1000 },
      { at: 10400, expect: { allowed: false, reason: "blocked", retryAfterMs: 5000 } },
    ],
  },
  {
    name: "resetOnBlock: the denial that starts a block forgets the counts (sliding-log)",
    // 3 per 10 s, a 2 s block that forgets: fresh when the block ends, well inside the period.
    policy: {
      algorithm: "sliding-log",
      rules: [{ limit: 3, period: "10s" }],
      blockDuration: "2s",
      resetOnBlock: true,
    },
    steps: [
      ...fill(0, 3, 2),
      { at: 100, expect: { allowed: false, reason: "blocked", retryAfterMs: 2000 } },
      { at: 2099, expect: { allowed: false, reason: "blocked", retryAfterMs: 1 } },
      // Without resetOnBlock the three hits of t = 0 would count until t = 10000.
      ...fill(2100, 3, 2, { resetAfterMs: 10000 }),
      { at: 2200, expect: { allowed: false, reason: "blocked", retryAfterMs: 2000 } },
    ],
  },
  {
    name: "resetOnBlock on windows and buckets: fresh after the block (gcra, two rules)",
    policy: {
      algorithm: "gcra",
      rules: [
        { limit: 2, period: "1s" },
        { limit: 4, period: "1m" },
      ],
      blockDuration: "5s",
      resetOnBlock: true,
    },
    steps: [
      { at: 0, expect: { allowed: true } },
      { at: 0, expect: { allowed: true } },
      { at: 0, expect: { allowed: false, reason: "blocked", retryAfterMs: 5000 } },
      // The minute rule forgot its 2: 4 pass again (2 at once, the burst of the first rule).
      { at: 5000, expect: { allowed: true, rules: [{ remaining: 1 }, { remaining: 3 }] } },
    ],
  },
  {
    name: "setCount applies only to first-request fixed windows",
    policy: { algorithm: "fixed-window", rules: [{ limit: 5, period: "1s" }] },
    steps: [{ at: 0, op: "setCount", count: 1, throws: "SLUICE_ERR_UNSUPPORTED" }],
  },
  // ─── Sliding window ─────────────────────────────────────────────────────────────────────
  {
    name: "sliding-window: the weighted estimate and its exact retry",
    policy: { algorithm: "sliding-window", rules: [{ limit: 10, period: "1s" }] },
    steps: [
      ...fill(0, 10, 9, { resetAfterMs: 2000 }),
      // curr = 10: in the next window, 10·(1000 − s)/1000 + 1 ≤ 10 ⇔ s ≥ 100 → 1000 + 100.
      { at: 0, expect: { allowed: false, remaining: 0, retryAfterMs: 1100, resetAfterMs: 2000 } },
      // Half-way through the next window the estimate is 10·0.5 = 5.
      ...fill(1500, 5, 4, { resetAfterMs: 1500 }),
      // estimate 5 + 5 = 10; prev's weight must fall to 4: 10·(500 − t)/1000 ≤ 4 ⇔ t ≥ 100.
      { at: 1500, expect: { allowed: false, remaining: 0, retryAfterMs: 100 } },
      { at: 1599, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 1600, expect: { allowed: true, remaining: 0 } },
      // Two windows later, nothing is left of either counter.
      { at: 3000, expect: { allowed: true, remaining: 9, resetAfterMs: 2000 } },
    ],
  },
  {
    name: "sliding-window: smooths the fixed window's edge burst",
    policy: { algorithm: "sliding-window", rules: [{ limit: 10, period: "1s" }] },
    steps: [
      ...fill(999, 10, 9),
      // At 1000 the previous window still weighs 10·(1000/1000) = 10: nothing passes.
      { at: 1000, expect: { allowed: false, remaining: 0, retryAfterMs: 100 } },
      // At 1100 the estimate is 9: exactly one passes.
      { at: 1100, expect: { allowed: true, remaining: 0 } },
      { at: 1100, expect: { allowed: false, retryAfterMs: 100 } },
    ],
  },
  {
    name: "sliding-window: a refund after the window turned takes back from the window it was charged in",
    policy: { algorithm: "sliding-window", rules: [{ limit: 10, period: "1s" }] },
    steps: [
      ...fill(999, 10, 9),
      // The window turned at 1000: the current counter is empty, the ten are in the previous
      // one. Refunding 5 there takes them back from it (prev 10 → 5): the estimate at 1000 is
      // 5·(1000/1000) = 5, so five pass.
      { at: 1000, op: "refund", cost: 5 },
      ...fill(1000, 5, 4),
      { at: 1000, expect: { allowed: false, remaining: 0 } },
    ],
  },
  // ─── Sliding log ────────────────────────────────────────────────────────────────────────
  {
    name: "sliding-log: exact over every interval of length P",
    policy: { algorithm: "sliding-log", rules: [{ limit: 3, period: "1s" }] },
    steps: [
      { at: 0, expect: { allowed: true, remaining: 2, resetAfterMs: 1000 } },
      { at: 100, expect: { allowed: true, remaining: 1, resetAfterMs: 1000 } },
      { at: 200, expect: { allowed: true, remaining: 0, resetAfterMs: 1000 } },
      // The entry at 0 leaves the log at 1000.
      { at: 300, expect: { allowed: false, remaining: 0, retryAfterMs: 700, resetAfterMs: 900 } },
      { at: 999, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 1000, expect: { allowed: true, remaining: 0, resetAfterMs: 1000 } },
      { at: 1000, expect: { allowed: false, retryAfterMs: 100 } },
    ],
  },
  {
    name: "sliding-log: cost > 1 waits for enough cost to leave",
    policy: { algorithm: "sliding-log", rules: [{ limit: 5, period: "1s" }] },
    steps: [
      { at: 0, cost: 3, expect: { allowed: true, remaining: 2 } },
      { at: 100, cost: 2, expect: { allowed: true, remaining: 0 } },
      { at: 200, cost: 3, expect: { allowed: false, retryAfterMs: 800 } },
      { at: 200, cost: 5, expect: { allowed: false, retryAfterMs: 900 } },
      { at: 1000, cost: 3, expect: { allowed: true, remaining: 0 } },
    ],
  },
  // ─── Multi-rule ─────────────────────────────────────────────────────────────────────────
  {
    name: "multi-rule: 1/s AND 5/min (the reference documents' example)",
    policy: {
      algorithm: "sliding-log",
      rules: [
        { limit: 1, period: "1s" },
        { limit: 5, period: "1m" },
      ],
    },
    steps: [
      {
        at: 0,
        expect: {
          allowed: true,
          remaining: 0,
          rule: 0,
          rules: [{ remaining: 0 }, { remaining: 4 }],
        },
      },
      { at: 0, expect: { allowed: false, retryAfterMs: 1000, rule: 0, limit: 1 } },
      { at: 1000, expect: { allowed: true } },
      { at: 2000, expect: { allowed: true } },
      { at: 3000, expect: { allowed: true } },
      { at: 4000, expect: { allowed: true, rules: [{ remaining: 0 }, { remaining: 0 }] } },
      // Now the per-minute rule denies: the first entry leaves at 60000.
      { at: 5000, expect: { allowed: false, retryAfterMs: 55000, rule: 1, limit: 5 } },
      { at: 59999, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 60000, expect: { allowed: true } },
    ],
  },
  {
    name: "multi-rule: all or nothing — a denial charges no rule",
    policy: {
      algorithm: "fixed-window",
      rules: [
        { limit: 2, period: "1s" },
        { limit: 3, period: "10s" },
      ],
    },
    steps: [
      { at: 0, expect: { allowed: true } },
      { at: 0, expect: { allowed: true, remaining: 0 } },
      // Denied by the first rule; the 10 s rule is not charged: it still has 1, and a rule
      // that passed reports what it has now, not what it would have had after the charge.
      {
        at: 0,
        expect: {
          allowed: false,
          rule: 0,
          retryAfterMs: 1000,
          remaining: 0,
          rules: [
            { allowed: false, remaining: 0 },
            { allowed: true, remaining: 1 },
          ],
        },
      },
      { at: 1000, expect: { allowed: true, remaining: 0, rule: 1 } },
      // Denied by the 10 s rule; the 1 s rule, with one left, must stay uncharged each time.
      {
        at: 1000,
        expect: {
          allowed: false,
          rule: 1,
          retryAfterMs: 9000,
          rules: [{ allowed: true, remaining: 1 }, { allowed: false }],
        },
      },
      {
        at: 1000,
        expect: {
          allowed: false,
          rule: 1,
          rules: [{ allowed: true, remaining: 1 }, { allowed: false }],
        },
      },
      { at: 10000, expect: { allowed: true } },
    ],
  },
  {
    name: "multi-rule gcra: the longest wait is reported",
    policy: {
      algorithm: "gcra",
      rules: [
        { limit: 2, period: "1s" },
        { limit: 4, period: "1h" },
      ],
    },
    steps: [
      ...fill(0, 2, 1),
      { at: 0, expect: { allowed: false, rule: 0, retryAfterMs: 500 } },
      { at: 500, expect: { allowed: true } },
      // Both rules are at 0 remaining: the tie goes to the one that takes longer to refill.
      { at: 1000, expect: { allowed: true, remaining: 0, rule: 1 } },
      { at: 2000, expect: { allowed: false, rule: 1, limit: 4, retryAfterMs: 898000 } },
    ],
  },
  // ─── Penalty block ──────────────────────────────────────────────────────────────────────
  {
    name: "blockDuration: a denial blocks the key for the penalty",
    policy: { algorithm: "gcra", rules: [{ limit: 2, period: "1s" }], blockDuration: "5s" },
    steps: [
      ...fill(0, 2, 1),
      { at: 0, expect: { allowed: false, retryAfterMs: 5000, reason: "blocked" } },
      // The rule alone would allow now (and reports its 2 left); the block does not.
      {
        at: 1000,
        expect: {
          allowed: false,
          retryAfterMs: 4000,
          reason: "blocked",
          rules: [{ allowed: true, remaining: 2 }],
        },
      },
      { at: 4999, expect: { allowed: false, retryAfterMs: 1 } },
      { at: 5000, expect: { allowed: true, remaining: 1, reason: null } },
    ],
  },
  {
    name: "blockDuration: the natural wait wins when it is longer",
    policy: {
      algorithm: "fixed-window",
      rules: [{ limit: 1, period: "1m" }],
      blockDuration: "10s",
    },
    steps: [
      { at: 0, expect: { allowed: true } },
      { at: 0, expect: { allowed: false, retryAfterMs: 60000, reason: "blocked" } },
      // The first block is over, but this denial starts another; the window end is still later.
      { at: 10000, expect: { allowed: false, retryAfterMs: 50000, reason: "blocked" } },
      { at: 60000, expect: { allowed: true } },
    ],
  },
  // ─── Peek, reset, refund, adjust ────────────────────────────────────────────────────────
  {
    name: "peek reads without consuming",
    policy: { algorithm: "gcra", rules: [{ limit: 5, period: "1s" }] },
    steps: [
      { at: 0, op: "peek", expect: { allowed: true, remaining: 5 } },
      ...fill(0, 2, 4),
      { at: 0, op: "peek", expect: { allowed: true, remaining: 3 } },
      { at: 0, op: "peek", expect: { allowed: true, remaining: 3 } },
      { at: 0, expect: { allowed: true, remaining: 2 } },
      ...fill(0, 2, 1),
      { at: 0, op: "peek", expect: { allowed: false, remaining: 0, retryAfterMs: 200 } },
    ],
  },
  {
    name: "peek on every algorithm's fresh key",
    policy: { algorithm: "sliding-window", rules: [{ limit: 4, period: "1s" }] },
    steps: [
      { at: 0, op: "peek", expect: { allowed: true, remaining: 4 } },
      { at: 0, expect: { remaining: 3 } },
      { at: 0, op: "peek", expect: { allowed: true, remaining: 3 } },
    ],
  },
  {
    name: "reset forgets the key",
    policy: { algorithm: "sliding-log", rules: [{ limit: 2, period: "1h" }], blockDuration: "1h" },
    steps: [
      ...fill(0, 2, 1),
      { at: 0, expect: { allowed: false, reason: "blocked" } },
      { at: 0, op: "reset" },
      { at: 0, expect: { allowed: true, remaining: 1, reason: null } },
    ],
  },
  {
    name: "keys are independent",
    policy: { algorithm: "fixed-window", rules: [{ limit: 1, period: "1s" }] },
    steps: [
      { at: 0, key: "a", expect: { allowed: true } },
      { at: 0, key: "a", expect: { allowed: false } },
      { at: 0, key: "b", expect: { allowed: true } },
      { at: 0, key: "ünïcødé 🚦 with spaces", expect: { allowed: true } },
      { at: 0, key: "x".repeat(1000), expect: { allowed: true } },
      { at: 0, key: "x".repeat(1000), expect: { allowed: false } },
      { at: 0, key: "", throws: "SLUICE_ERR_KEY" },
    ],
  },
  {
    name: "refund gives units back (fixed-window)",
    policy: { algorithm: "fixed-window", rules: [{ limit: 3, period: "1s" }] },
    steps: [
      ...fill(0, 3, 2),
      { at: 0, op: "refund", cost: 1 },
      { at: 0, expect: { allowed: true, remaining: 0 } },
      { at: 0, expect: { allowed: false } },
    ],
  },
  {
    name: "adjust: debt is waited out (gcra)",
    // T = 100, τ = 1000. Charge 2, then 10 more as debt: TAT = 1200.
    policy: { algorithm: "gcra", rules: [{ limit: 10, period: "1s" }] },
    steps: [
      { at: 0, cost: 2, expect: { allowed: true, remaining: 8 } },
      { at: 0, op: "adjust", cost: 10 },
      { at: 0, expect: { allowed: false, remaining: 0, retryAfterMs: 300 } },
      { at: 300, expect: { allowed: true, remaining: 0 } },
    ],
  },
  {
    name: "adjust: a refund returns tokens (token-bucket)",
    policy: { algorithm: "token-bucket", rules: [{ limit: 5, period: "1s" }] },
    steps: [
      { at: 0, cost: 5, expect: { allowed: true, remaining: 0 } },
      { at: 0, op: "adjust", cost: -3 },
      { at: 0, cost: 3, expect: { allowed: true, remaining: 0 } },
      { at: 0, expect: { allowed: false, retryAfterMs: 200 } },
    ],
  },
  {
    name: "adjust: debt and refund on windows and logs",
    policy: { algorithm: "sliding-log", rules: [{ limit: 4, period: "1s" }] },
    steps: [
      { at: 0, cost: 2, expect: { allowed: true, remaining: 2 } },
      { at: 100, op: "adjust", cost: 2 },
      { at: 100, expect: { allowed: false, retryAfterMs: 900 } },
      { at: 200, op: "adjust", cost: -3 },
      { at: 200, expect: { allowed: true, remaining: 2 } },
    ],
  },
  // ─── Concurrency ────────────────────────────────────────────────────────────────────────
  {
    name: "concurrency: leases in flight, release and expiry",
    // At most 2 in flight; a lease not released expires 10 s after it was taken.
    policy: { algorithm: "concurrency", rules: [{ limit: 2, period: "10s" }] },
    steps: [
      { at: 0, lease: "a", expect: { allowed: true, remaining: 1, resetAfterMs: 10000 } },
      { at: 100, lease: "b", expect: { allowed: true, remaining: 0 } },
      { at: 200, lease: "c", expect: { allowed: false, remaining: 0, retryAfterMs: 9800 } },
      { at: 300, op: "release", lease: "a" },
      { at: 300, op: "release", lease: "a" },
      { at: 300, lease: "d", expect: { allowed: true, remaining: 0 } },
      { at: 400, lease: "e", expect: { allowed: false, retryAfterMs: 9700 } },
      // b (taken at 100) expires at 10100 without a release.
      { at: 10099, lease: "f", expect: { allowed: false, retryAfterMs: 1 } },
      { at: 10100, lease: "g", expect: { allowed: true, remaining: 0 } },
    ],
  },
  // ─── Calendar windows (the calendar dimension) ──────────────────────────────────────────
  // fixed-window per day, ISO week, month or year between local midnights of a time zone
  // (src/calendar.ts); each scenario starts at a date (t0), the expected waits are the
  // distance to the local midnight that ends the window.
  {
    name: "calendar month in America/New_York: 3 pass at 23:30 on Jan 31, the 4th waits 30 min",
    // Jan 31 23:30 EST = Feb 1 04:30 UTC; January's window ends at Feb 1 00:00 EST (05:00 UTC).
    t0: Date.UTC(2026, 1, 1, 4, 30),
    policy: {
      algorithm: "fixed-window",
      rules: [{ limit: 3, calendar: "month", timeZone: "America/New_York" }],
    },
    steps: [
      ...fill(0, 3, 2, { resetAfterMs: 1_800_000, limit: 3 }),
      { at: 0, expect: { allowed: false, remaining: 0, retryAfterMs: 1_800_000 } },
      { at: 1_799_999, expect: { allowed: false, retryAfterMs: 1 } },
      // February starts afresh; its window is 28 days (EST throughout).
      { at: 1_800_000, expect: { allowed: true, remaining: 2, resetAfterMs: 28 * 86_400_000 } },
    ],
  },
  {
    name: "calendar month anchored on the 31st: February's window ends Feb 28, March's Mar 31",
    t0: Date.UTC(2026, 1, 27),
    policy: {
      algorithm: "fixed-window",
      rules: [{ limit: 1, calendar: "month", anchor: 31 }],
    },
    steps: [
      // The window [Jan 31, Feb 28) ends in a day.
      { at: 0, expect: { allowed: true, remaining: 0, resetAfterMs: 86_400_000 } },
      { at: 0, expect: { allowed: false, retryAfterMs: 86_400_000 } },
      // [Feb 28, Mar 31): 31 days.
      { at: 86_400_000, expect: { allowed: true, resetAfterMs: 31 * 86_400_000 } },
      { at: 86_400_000, expect: { allowed: false, retryAfterMs: 31 * 86_400_000 } },
    ],
  },
  {
    name: "calendar day in Europe/Berlin: 2026-03-29 has 23 hours, 2026-10-25 has 25",
    // 2026-03-29 00:00 CET = 2026-03-28 23:00 UTC; the clocks go forward at 02:00.
    t0: Date.UTC(2026, 2, 28, 23),
    policy: {
      algorithm: "fixed-window",
      rules: [{ limit: 2, calendar: "day", timeZone: "Europe/Berlin" }],
    },
    steps: [
      ...fill(0, 2, 1, { resetAfterMs: 23 * 3_600_000 }),
      // Noon UTC: 11 hours to local midnight.
      { at: 13 * 3_600_000, expect: { allowed: false, retryAfterMs: 10 * 3_600_000 } },
      { at: 23 * 3_600_000, expect: { allowed: true, remaining: 1, resetAfterMs: 86_400_000 } },
      // 2026-10-25 00:00 CEST = 2026-10-24 22:00 UTC: the clocks go back at 03:00.
      {
        at: Date.UTC(2026, 9, 24, 22) - Date.UTC(2026, 2, 28, 23),
        expect: { allowed: true, remaining: 1, resetAfterMs: 25 * 3_600_000 },
      },
    ],
  },
  {
    name: "calendar ISO week in Asia/Tokyo: from Saturday noon to Monday 00:00 JST",
    // Saturday 2026-11-28 12:00 JST = 03:00 UTC; the week ends Monday 00:00 JST (Sunday 15:00 UTC).
    t0: Date.UTC(2026, 10, 28, 3),
    policy: {
      algorithm: "fixed-window",
      rules: [{ limit: 1, calendar: "week", timeZone: "Asia/Tokyo" }],
    },
    steps: [
      { at: 0, expect: { allowed: true, remaining: 0, resetAfterMs: 36 * 3_600_000 } },
      { at: 0, expect: { allowed: false, retryAfterMs: 36 * 3_600_000 } },
      { at: 36 * 3_600_000, expect: { allowed: true, resetAfterMs: 7 * 86_400_000 } },
    ],
  },
  {
    name: "calendar year from 04-01, with a per-minute rule: all or nothing, refunds",
    // 2027-03-31 23:59 UTC: a minute before the year (from April 1) and the minute end.
    t0: Date.UTC(2027, 2, 31, 23, 59),
    policy: {
      algorithm: "fixed-window",
      rules: [
        { limit: 2, period: "1m" },
        { limit: 3, calendar: "year", anchor: "04-01" },
      ],
    },
    steps: [
      { at: 0, expect: { allowed: true, rules: [{ remaining: 1 }, { remaining: 2 }] } },
      { at: 0, expect: { allowed: true, rules: [{ remaining: 0 }, { remaining: 1 }] } },
      // Denied by the minute; the year is not charged.
      {
        at: 0,
        expect: {
          allowed: false,
          rule: 0,
          retryAfterMs: 60_000,
          rules: [{ allowed: false }, { allowed: true, remaining: 1 }],
        },
      },
      // A new minute and a new year (from 2027-04-01: 366 days, it holds Feb 29 2028).
      {
        at: 60_000,
        expect: {
          allowed: true,
          resetAfterMs: 60_000,
          rules: [{ remaining: 1 }, { remaining: 2, retryAfterMs: 0 }],
        },
      },
      { at: 60_000, op: "refund" },
      { at: 60_000, op: "peek", expect: { rules: [{ remaining: 2 }, { remaining: 3 }] } },
      { at: 60_000, op: "adjust", cost: 3 },
      {
        at: 120_000,
        expect: { allowed: false, rule: 1, retryAfterMs: 366 * 86_400_000 - 60_000 },
      },
    ],
  },
  // ─── Shadow ─────────────────────────────────────────────────────────────────────────────
  {
    name: "shadow: everything passes, would-be denials are marked",
    policy: { algorithm: "fixed-window", rules: [{ limit: 1, period: "1s" }], shadow: true },
    steps: [
      { at: 0, expect: { allowed: true, remaining: 0, reason: null } },
      { at: 0, expect: { allowed: true, retryAfterMs: 0, reason: "shadow" } },
      { at: 1000, expect: { allowed: true, reason: null } },
    ],
  },
];
