import { type Algorithm, ceilMs } from "./types.js";

/**
 * Fixed window: at most `limit` per aligned window [k·P, (k+1)·P).
 * State: [windowStart, count]. Known weakness: a client can spend `limit` at the end of one
 * window and `limit` again at the start of the next (2× burst across the edge).
 */
export const fixedWindow: Algorithm = {
  stateSize: 2,
  capacity: (rule) => rule.limit,
  decide(state, nowMs, rule, cost) {
    const start = nowMs - (nowMs % rule.periodMs);
    const end = start + rule.periodMs;
    const count = state !== undefined && state[0] === start ? (state[1] ?? 0) : 0;
    const resetAfterMs = end - nowMs;
    if (count + cost <= rule.limit) {
      const used = count + cost;
      return {
        allowed: true,
        remaining: rule.limit - used,
        resetAfterMs,
        retryAfterMs: 0,
        next: used > 0 ? [start, used] : null,
        ttlMs: resetAfterMs,
      };
    }
    // The next window starts empty, and cost ≤ limit is validated, so the window end is exact.
    return {
      allowed: false,
      remaining: Math.max(0, rule.limit - count),
      resetAfterMs,
      retryAfterMs: ceilMs(end - nowMs),
      next: state ? [...state] : null,
      ttlMs: resetAfterMs,
    };
  },
  adjust(state, nowMs, rule, delta) {
    const start = nowMs - (nowMs % rule.periodMs);
    const count = state !== undefined && state[0] === start ? (state[1] ?? 0) : 0;
    const used = Math.max(0, count + delta);
    return { next: used > 0 ? [start, used] : null, ttlMs: start + rule.periodMs - nowMs };
  },
};
