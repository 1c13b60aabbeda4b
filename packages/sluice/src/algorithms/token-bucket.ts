import { type Algorithm, EPS, ceilMs, floorUnits } from "./types.js";

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
