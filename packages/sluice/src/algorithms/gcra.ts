import { type Algorithm, type ResolvedRule, ceilMs, fixedAlgorithm } from "./types.js";

/**
 * GCRA, the generic cell rate algorithm (as in redis-cell), the default.
 *
 * Requests are "cells" that should arrive one emission interval T = period/limit apart. The
 * state is one number, the theoretical arrival time (TAT): when the key would be back to empty
 * if requests had arrived exactly on schedule. The delay variation tolerance τ = T·burst is how
 * far ahead of schedule a caller may run: a request passes when its new TAT is at most τ ahead
 * of now. Same behaviour as a token bucket of capacity `burst`, with one stored value.
 *
 * Time is counted in whole microseconds (TAT and T), so that adding T over and over is exact:
 * a TAT of an epoch-sized time kept in milliseconds as a double would drift by rounding (about
 * 2⁻¹³ ms per addition) and, say, let only 6 of a burst of 7 through. T is rounded up to a whole
 * µs (never faster than the rule), and τ is `burst` of those, so a full burst always fits.
 * State: [tat in µs].
 */
export const gcra: Algorithm = fixedAlgorithm({
  stateSize: 1,
  capacity: (rule) => rule.burst,
  decideAt(data, at, has, nowMs, rule, cost, out, next) {
    const T = intervalUs(rule);
    // Cells of T µs, shown as time at the rule's exact rate: a full burst of 3/s reports 1000 ms,
    // not the 1000.002 ms that 3 rounded-up intervals add up to. (Waits are never shortened.)
    const exact = (rule.periodMs * 1000) / rule.limit / T;
    const tau = T * rule.burst;
    const now = nowMs * 1000;
    const tat = Math.max(has ? (data[at] ?? now) : now, now);
    const newTat = tat + cost * T;
    const allowAt = newTat - tau;
    if (allowAt <= now) {
      out.allowed = true;
      out.remaining = Math.max(0, Math.floor((now + tau - newTat) / T));
      out.resetAfterMs = ceilMs(((newTat - now) * exact) / 1000);
      out.retryAfterMs = 0;
      out.ttlMs = ceilUsToMs(newTat - now);
      next[0] = newTat;
      return newTat > now;
    }
    out.allowed = false;
    out.remaining = Math.max(0, Math.floor((now + tau - tat) / T));
    out.resetAfterMs = ceilMs(((tat - now) * exact) / 1000);
    // Round up, otherwise a fast caller retries a fraction of a ms too early and is denied.
    out.retryAfterMs = ceilUsToMs(allowAt - now);
    out.ttlMs = ceilUsToMs(tat - now);
    return false;
  },
  adjust(state, nowMs, rule, delta) {
    const now = nowMs * 1000;
    const newTat = Math.max(state?.[0] ?? now, now) + delta * intervalUs(rule);
    return newTat > now
      ? { next: [newTat], ttlMs: ceilUsToMs(newTat - now) }
      : { next: null, ttlMs: 0 };
  },
});

/** The emission interval period/limit in whole µs, rounded up (exactly, in integers). */
export function intervalUs(rule: ResolvedRule): number {
  const periodUs = rule.periodMs * 1000;
  const q = Math.floor(periodUs / rule.limit);
  return q * rule.limit >= periodUs ? q : q + 1;
}

/** A duration in µs as whole ms, rounded up (a caller waiting less would be early). */
function ceilUsToMs(us: number): number {
  return us <= 0 ? 0 : Math.ceil(us / 1000);
}
