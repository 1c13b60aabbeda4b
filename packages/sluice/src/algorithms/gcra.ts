import { type Algorithm, EPS, ceilMs, floorUnits } from "./types.js";

/**
 * GCRA, the generic cell rate algorithm (as in redis-cell), the default.
 *
 * Requests are "cells" that should arrive one emission interval T = period/limit apart. The
 * state is one number, the theoretical arrival time (TAT): when the key would be back to empty
 * if requests had arrived exactly on schedule. The delay variation tolerance τ = T·burst is how
 * far ahead of schedule a caller may run: a request passes when its new TAT is at most τ ahead
 * of now. Same behaviour as a token bucket of capacity `burst`, with one stored value.
 * State: [tat].
 */
export const gcra: Algorithm = {
  stateSize: 1,
  capacity: (rule) => rule.burst,
  decide(state, nowMs, rule, cost) {
    const T = rule.periodMs / rule.limit;
    const tau = T * rule.burst;
    const tat = Math.max(state?.[0] ?? nowMs, nowMs);
    const newTat = tat + cost * T;
    const allowAt = newTat - tau;
    if (allowAt <= nowMs + EPS) {
      return {
        allowed: true,
        remaining: floorUnits((nowMs + tau - newTat) / T),
        resetAfterMs: ceilMs(newTat - nowMs),
        retryAfterMs: 0,
        next: newTat > nowMs + EPS ? [newTat] : null,
        ttlMs: ceilMs(newTat - nowMs),
      };
    }
    return {
      allowed: false,
      remaining: floorUnits((nowMs + tau - tat) / T),
      resetAfterMs: ceilMs(tat - nowMs),
      // Round up, otherwise a fast caller retries a fraction of a ms too early and is denied.
      retryAfterMs: ceilMs(allowAt - nowMs),
      next: state ? [...state] : null,
      ttlMs: ceilMs(tat - nowMs),
    };
  },
  adjust(state, nowMs, rule, delta) {
    const T = rule.periodMs / rule.limit;
    const newTat = Math.max(state?.[0] ?? nowMs, nowMs) + delta * T;
    return newTat > nowMs + EPS
      ? { next: [newTat], ttlMs: ceilMs(newTat - nowMs) }
      : { next: null, ttlMs: 0 };
  },
};
