import {
  type Algorithm,
  EPS,
  type ResolvedRule,
  ceilMs,
  fixedAlgorithm,
  floorUnits,
} from "./types.js";

/**
 * Token bucket with lazy refill: a bucket of capacity `burst` refills continuously at
 * limit/period tokens per ms; a request takes `cost` tokens. Nothing runs between requests:
 * the refill since the last request is computed when the next one arrives.
 * State: [tokens, lastRefillMs]. Tokens may go negative after a forced charge (debt).
 */
export const tokenBucket: Algorithm = fixedAlgorithm({
  stateSize: 2,
  capacity: (rule) => rule.burst,
  decideAt(data, at, has, nowMs, rule, cost, out, next) {
    const rate = rule.limit / rule.periodMs;
    const tokens = refill(data, at, has, nowMs, rule.burst, rate);
    if (tokens >= cost - EPS) {
      const left = tokens - cost;
      const fullIn = (rule.burst - left) / rate;
      out.allowed = true;
      out.remaining = floorUnits(left);
      out.resetAfterMs = ceilMs(fullIn);
      out.retryAfterMs = 0;
      out.ttlMs = ceilMs(fullIn);
      next[0] = left;
      next[1] = nowMs;
      return fullIn > EPS;
    }
    out.allowed = false;
    out.remaining = floorUnits(tokens);
    out.resetAfterMs = ceilMs((rule.burst - tokens) / rate);
    // Tokens arrive at `rate`; the request passes once `cost` of them are there.
    out.retryAfterMs = ceilMs((cost - tokens) / rate);
    out.ttlMs = ceilMs((rule.burst - tokens) / rate);
    return false;
  },
  adjust(state, nowMs, rule, delta) {
    const rate = rule.limit / rule.periodMs;
    const tokens = refill(state ?? [], 0, state !== undefined, nowMs, rule.burst, rate);
    const left = Math.min(rule.burst, tokens - delta);
    const fullIn = (rule.burst - left) / rate;
    return { next: fullIn > EPS ? [left, nowMs] : null, ttlMs: ceilMs(fullIn) };
  },
});

/** The tokens of the bucket at `data[at…]` (`has` false: none, a full bucket) at `nowMs`. */
function refill(
  data: ArrayLike<number>,
  at: number,
  has: boolean,
  nowMs: number,
  burst: number,
  rate: number,
): number {
  if (!has) return burst;
  const tokens = data[at] ?? burst;
  const elapsed = Math.max(0, nowMs - (data[at + 1] ?? nowMs));
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
export const tokenBucketInterval: Algorithm = fixedAlgorithm({
  stateSize: 3,
  capacity: (rule) => rule.burst,
  decideAt(data, at, has, nowMs, rule, cost, out, next) {
    const b = caughtUp(data, at, has, nowMs, rule);
    if (b.tokens >= cost) {
      const left = b.tokens - cost;
      const full = refillMs(rule.burst - left, rule);
      out.allowed = true;
      out.remaining = floorUnits(left);
      out.resetAfterMs = Math.max(0, b.refilledAt + full - nowMs);
      out.retryAfterMs = 0;
      out.ttlMs = full;
      next[0] = left;
      next[1] = b.refilledAt;
      next[2] = nowMs + full;
      return full > 0;
    }
    out.allowed = false;
    out.remaining = floorUnits(b.tokens);
    out.resetAfterMs = b.refilledAt + refillMs(rule.burst - b.tokens, rule) - nowMs;
    // The tokens come at the anchor's steps: the first step that brings `cost` of them.
    out.retryAfterMs = b.refilledAt + refillMs(cost - b.tokens, rule) - nowMs;
    out.ttlMs = b.live ? data[at + 2]! - nowMs : 0;
    return false;
  },
  adjust(state, nowMs, rule, delta) {
    const b = caughtUp(state ?? [], 0, state !== undefined, nowMs, rule);
    const left = Math.min(rule.burst, b.tokens - delta);
    const full = refillMs(rule.burst - left, rule);
    if (full > 0) return { next: [left, b.refilledAt, nowMs + full], ttlMs: full };
    // Full: the key keeps its anchor and expiry (a fresh one has nothing to keep).
    if (b.live) return { next: [left, b.refilledAt, state![2]!], ttlMs: state![2]! - nowMs };
    return { next: null, ttlMs: 0 };
  },
});

/** What {@link caughtUp} answers (one object, rewritten by each call: decisions never nest). */
const bucket = { tokens: 0, refilledAt: 0, live: false };

/**
 * A refill-by-interval bucket at `nowMs` (state at `data[at…]`; `has` false: none): its state
 * caught up by the whole periods since its anchor (`live`), or a full one anchored now when it
 * has none or it expired.
 */
function caughtUp(
  data: ArrayLike<number>,
  at: number,
  has: boolean,
  nowMs: number,
  rule: ResolvedRule,
): { readonly tokens: number; readonly refilledAt: number; readonly live: boolean } {
  // (A state without its expiry, NaN, counts as expired.)
  if (!has || !(nowMs < data[at + 2]!)) {
    bucket.tokens = rule.burst;
    bucket.refilledAt = nowMs;
    bucket.live = false;
    return bucket;
  }
  let tokens = data[at]!;
  let refilledAt = data[at + 1]!;
  if (nowMs >= refilledAt + rule.periodMs) {
    const steps = Math.floor((nowMs - refilledAt) / rule.periodMs);
    tokens = Math.min(rule.burst, tokens + steps * rule.limit);
    refilledAt += steps * rule.periodMs;
  }
  bucket.tokens = tokens;
  bucket.refilledAt = refilledAt;
  bucket.live = true;
  return bucket;
}

/** How long whole refill steps take to bring `missing` tokens (0 when none are missing). */
function refillMs(missing: number, rule: ResolvedRule): number {
  return missing > 0 ? Math.ceil(missing / rule.limit) * rule.periodMs : 0;
}
