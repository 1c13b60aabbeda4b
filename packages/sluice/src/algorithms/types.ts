/**
 * The contract of an algorithm: a pure function of (state, now, rule, cost).
 *
 * State is a flat array of numbers so that the memory store can keep it compactly and each Lua
 * script can port the function line by line. `undefined` state means "never seen / expired":
 * every algorithm treats it as a fresh, fully replenished key.
 */

import type { CalendarWindow } from "../calendar.js";

/** A rule after validation: integers, milliseconds. */
export interface ResolvedRule {
  /** Requests (cost units) per period; for `concurrency`, permits in flight. */
  readonly limit: number;
  /** Period in milliseconds; for `concurrency`, the permit time-to-live. */
  readonly periodMs: number;
  /** Bucket capacity for `token-bucket` and `gcra` (defaults to `limit`); equals `limit` otherwise. */
  readonly burst: number;
  /**
   * A calendar rule's windows (`fixed-window` only): its windows are these, not
   * [k·periodMs, (k+1)·periodMs), and `periodMs` is the calendar's longest window.
   */
  readonly calendar?: CalendarWindow;
}

/** What one rule decided for one request. All times are whole milliseconds, counts whole units. */
export interface RuleOutcome {
  /** Whether this rule alone would admit the request. */
  readonly allowed: boolean;
  /** Requests of cost 1 this rule still admits right after this decision (≥ 0). */
  readonly remaining: number;
  /** Until this rule is fully replenished (or its window ends). */
  readonly resetAfterMs: number;
  /** 0 when allowed; otherwise the exact wait after which the same request would pass. */
  readonly retryAfterMs: number;
}

/** The result of {@link Algorithm.decide}: an outcome and the state to store if it is committed. */
export interface Step extends RuleOutcome {
  /** State after admitting the request; `null` when nothing needs storing. Ignored when denied. */
  readonly next: number[] | null;
  /** How long `next` must be kept (ms); after that it is equivalent to no state. */
  readonly ttlMs: number;
}

/** The result of {@link Algorithm.adjust}: the state after a forced charge or refund. */
export interface Adjusted {
  readonly next: number[] | null;
  readonly ttlMs: number;
}

/** One rate-limiting algorithm. Implementations are pure and never read a clock. */
export interface Algorithm {
  /**
   * How many numbers the state of one key holds under one rule, always the same (gcra 1,
   * token-bucket 2, fixed-window 2, sliding-window 3); 0 when it varies with traffic
   * (sliding-log, concurrency). Stores use it to lay state out without per-key objects.
   */
  readonly stateSize: number;
  /** Largest cost a single request can ever have under `rule` (larger is a validation error). */
  capacity(rule: ResolvedRule): number;
  /** Decide a request of `cost` (≥ 0; 0 only peeks) at `nowMs` against `state`. */
  decide(
    state: readonly number[] | undefined,
    nowMs: number,
    rule: ResolvedRule,
    cost: number,
  ): Step;
  /**
   * Charge `delta` unconditionally (positive: debt that later requests wait out; negative: refund,
   * never below an empty/full limiter). Used by reservations and refunds.
   */
  adjust(
    state: readonly number[] | undefined,
    nowMs: number,
    rule: ResolvedRule,
    delta: number,
  ): Adjusted;
}

/**
 * Floating-point tolerance in milliseconds/units. Rates such as 1000 ms / 3 are not exact in
 * binary; comparing with a tolerance keeps "wait exactly retryAfterMs and pass" true.
 * The Lua ports use the same constant.
 */
export const EPS = 1e-6;

/** Round a wait up to whole ms (a caller retrying earlier would be denied), tolerating float error. */
export function ceilMs(ms: number): number {
  return ms <= EPS ? 0 : Math.ceil(ms - EPS);
}

/** Round a count down (never promise more than is there), tolerating float error. */
export function floorUnits(units: number): number {
  return units <= 0 ? 0 : Math.floor(units + EPS);
}

/**
 * An algorithm whose state grows with traffic (sliding-log) can also decide on a state array
 * the caller owns, changing it in place instead of copying it: a store that keeps one array per
 * key then does O(1) amortised work per decision instead of O(state). The answer is exactly
 * `decide`'s (which is defined as this on a copy).
 */
export interface InPlaceAlgorithm extends Algorithm {
  /** A new state array holding nothing, for `decideInPlace` on a key without state. */
  fresh(): number[];
  /**
   * `decide(state, nowMs, rule, cost)`, with `state` changed into the next state (pruned, and
   * charged when allowed). The result's `next` is `state` itself, or null when nothing is left.
   * Only for callers that commit the outcome: a peek or a multi-rule decision uses `decide`.
   */
  decideInPlace(state: number[], nowMs: number, rule: ResolvedRule, cost: number): Step;
}

/**
 * A decision's figures written into an object the caller owns and reuses: what
 * {@link FixedAlgorithm.decideAt} answers, so that a store deciding in place allocates nothing
 * for them. The fields of {@link Step} but `next`.
 */
export interface StepFigures {
  allowed: boolean;
  remaining: number;
  resetAfterMs: number;
  retryAfterMs: number;
  ttlMs: number;
}

/**
 * An algorithm whose state has a fixed size (gcra, token-bucket, fixed-window, sliding-window)
 * also decides over state held in the caller's numbers, allocating nothing: the memory store
 * keeps every key's state in one `Float64Array`. `decide` is defined as this function over a
 * copy ({@link fixedAlgorithm}), so the two cannot disagree.
 */
export interface FixedAlgorithm extends Algorithm {
  /**
   * `decide(state, nowMs, rule, cost)`, the state read from `data[at … at + stateSize)` (`has`
   * false: no state): the outcome goes to `out`, and when the request is admitted with a state
   * to keep, that state to `next[0 … stateSize)` and the answer is true. False: nothing to keep
   * (`decide`'s `next` null), or a denial (whose state is the one read).
   */
  decideAt(
    data: ArrayLike<number>,
    at: number,
    has: boolean,
    nowMs: number,
    rule: ResolvedRule,
    cost: number,
    out: StepFigures,
    next: number[],
  ): boolean;
}

/** True for an algorithm of fixed-size state, which decides in place. */
export function isFixedAlgorithm(alg: Algorithm): alg is FixedAlgorithm {
  return typeof (alg as Partial<FixedAlgorithm>).decideAt === "function";
}

/** The figures and next state of the last `decide` of a {@link fixedAlgorithm} (decisions never nest). */
const figures: StepFigures = {
  allowed: false,
  remaining: 0,
  resetAfterMs: 0,
  retryAfterMs: 0,
  ttlMs: 0,
};
const spare: number[] = [0, 0, 0, 0];

/**
 * A fixed-size algorithm from its in-place decision: `decide` is `decideAt` over a copy of the
 * state, with new arrays for `next` (a denial's `next` is a copy of the state).
 */
export function fixedAlgorithm(
  spec: Pick<FixedAlgorithm, "stateSize" | "capacity" | "adjust" | "decideAt">,
): FixedAlgorithm {
  const { stateSize, decideAt } = spec;
  return {
    ...spec,
    decide(state, nowMs, rule, cost) {
      const kept = decideAt(
        state ?? spare,
        0,
        state !== undefined,
        nowMs,
        rule,
        cost,
        figures,
        spare,
      );
      return {
        allowed: figures.allowed,
        remaining: figures.remaining,
        resetAfterMs: figures.resetAfterMs,
        retryAfterMs: figures.retryAfterMs,
        next: kept
          ? spare.slice(0, stateSize)
          : figures.allowed || state === undefined
            ? null
            : [...state],
        ttlMs: figures.ttlMs,
      };
    },
  };
}
