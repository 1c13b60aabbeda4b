import { type Algorithm, EPS, type ResolvedRule, ceilMs, floorUnits } from "./types.js";

/**
 * Token bucket with lazy refill: a bucket of capacity `burst` refills continuously at
 * limit/period tokens per ms; a request takes `cost` tokens. Nothing runs between requests:
 * the refill since the last request is computed when the next one arrives.
 * State: [tokens, lastRefillMs]. Tokens may go negative after a forced charge (debt).
 */
export const tokenBucket: Algorithm = {
  stateSize: 2,
  capacity: (rule) => rule.burst,
  decide(state, nowMs, rule, cost) {
    const rate = rule.limit / rule.periodMs;
    const tokens = refill(state, nowMs, rule.burst, rate);
    if (tokens >= cost - EPS) {
      const left = tokens - cost;
      const fullIn = (rule.burst - left) / rate;
      return {
        allowed: true,
        remaining: floorUnits(left),
        resetAfterMs: ceilMs(fullIn),
        retryAfterMs: 0,
        next: fullIn > EPS ? [left, nowMs] : null,
        ttlMs: ceilMs(fullIn),
      };
    }
    return {
      allowed: false,
      remaining: floorUnits(tokens),
      resetAfterMs: ceilMs((rule.burst - tokens) / rate),
      // Tokens arrive at `rate`; the request passes once `cost` of them are there.
      retryAfterMs: ceilMs((cost - tokens) / rate),
      next: state ? [...state] : null,
      ttlMs: ceilMs((rule.burst - tokens) / rate),
    };
  },
  adjust(state, nowMs, rule, delta) {
    const rate = rule.limit / rule.periodMs;
    const left = Math.min(rule.burst, refill(state, nowMs, rule.burst, rate) - delta);
    const fullIn = (rule.burst - left) / rate;
    return { next: fullIn > EPS ? [left, nowMs] : null, ttlMs: ceilMs(fullIn) };
  },
};

function refill(
  state: readonly number[] | undefined,
  nowMs: number,
  burst: number,
  rate: number,
): number {
  if (state === undefined) return burst;
  const tokens = state[0] ?? burst;
  const elapsed = Math.max(0, nowMs - (state[1] ?? nowMs));
  return Math.min(burst, tokens + elapsed * rate);
}

/**
 * Token bucket refilled by interval (a policy's `refill: "interval"`), as @upstash/ratelimit's
 * token bucket counts: a key's first charge finds the bucket full (`burst`) and anchors its
 * refills at that moment; each whole `period` after the anchor adds `limit` tokens at once (up
 * to `burst`) and moves the anchor by as many periods; nothing arrives in between. A charge
 * keeps the key for ceil((burst − left)/limit) periods from now (long enough to be full again,
 * counted from the charge, so a key may live on full, still at its anchor's phase); once it
 * expired, the next charge anchors anew. A refusal changes nothing. A refund stops at `burst`,
 * and one that fills the bucket keeps the key's anchor and expiry. State: [tokens, refilledAt,
 * expiresAt] (tokens may go negative after a forced charge: a debt that whole steps pay off).
 * The expiry is part of the state, so a store that keeps the state longer (a key of several
 * rules, a TTL with a margin) still treats it as gone from then on.
 */
export const tokenBucketInterval: Algorithm = {
  stateSize: 3,
  capacity: (rule) => rule.burst,
  decide(state, nowMs, rule, cost) {
    const b = caughtUp(state, nowMs, rule);
    if (b.tokens >= cost) {
      const left = b.tokens - cost;
      const full = refillMs(rule.burst - left, rule);
      return {
        allowed: true,
        remaining: floorUnits(left),
        resetAfterMs: Math.max(0, b.refilledAt + full - nowMs),
        retryAfterMs: 0,
        next: full > 0 ? [left, b.refilledAt, nowMs + full] : null,
        ttlMs: full,
      };
    }
    return {
      allowed: false,
      remaining: floorUnits(b.tokens),
      resetAfterMs: b.refilledAt + refillMs(rule.burst - b.tokens, rule) - nowMs,
      // The tokens come at the anchor's steps: the first step that brings `cost` of them.
      retryAfterMs: b.refilledAt + refillMs(cost - b.tokens, rule) - nowMs,
      next: state ? [...state] : null,
      ttlMs: b.live ? state![2]! - nowMs : 0,
    };
  },
  adjust(state, nowMs, rule, delta) {
    const b = caughtUp(state, nowMs, rule);
    const left = Math.min(rule.burst, b.tokens - delta);
    const full = refillMs(rule.burst - left, rule);
    if (full > 0) return { next: [left, b.refilledAt, nowMs + full], ttlMs: full };
    // Full: the key keeps its anchor and expiry (a fresh one has nothing to keep).
    if (b.live) return { next: [left, b.refilledAt, state![2]!], ttlMs: state![2]! - nowMs };
    return { next: null, ttlMs: 0 };
  },
};

/**
 * A refill-by-interval bucket at `nowMs`: its state caught up by the whole periods since its
 * anchor (`live`), or a full one anchored now when it has none or it expired.
 */
function caughtUp(
  state: readonly number[] | undefined,
  nowMs: number,
  rule: ResolvedRule,
): { tokens: number; refilledAt: number; live: boolean } {
  // (A state without its expiry, NaN, counts as expired.)
  if (state === undefined || !(nowMs < state[2]!))
    return { tokens: rule.burst, refilledAt: nowMs, live: false };
  let tokens = state[0]!;
  let refilledAt = state[1]!;
  if (nowMs >= refilledAt + rule.periodMs) {
    const steps = Math.floor((nowMs - refilledAt) / rule.periodMs);
    tokens = Math.min(rule.burst, tokens + steps * rule.limit);
    refilledAt += steps * rule.periodMs;
  }
  return { tokens, refilledAt, live: true };
}

/** How long whole refill steps take to bring `missing` tokens (0 when none are missing). */
function refillMs(missing: number, rule: ResolvedRule): number {
  return missing > 0 ? Math.ceil(missing / rule.limit) * rule.periodMs : 0;
}
