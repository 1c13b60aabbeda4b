import { type Algorithm, EPS, ceilMs, floorUnits } from "./types.js";

/**
 * Sliding window counter: two aligned window counters, previous and current, and the estimate
 * `prev · (1 − elapsed/P) + curr`, which assumes the previous window's requests were spread
 * evenly. O(1) memory; it can admit more or fewer than an exact log would, by at most the
 * previous window's unevenness. State: [currentWindowStart, prev, curr].
 */
export const slidingWindow: Algorithm = {
  stateSize: 3,
  capacity: (rule) => rule.limit,
  decide(state, nowMs, rule, cost) {
    const P = rule.periodMs;
    const start = nowMs - (nowMs % P);
    const [prev, curr] = counters(state, start, P);
    const elapsed = nowMs - start;
    const estimate = (prev * (P - elapsed)) / P + curr;
    if (estimate + cost <= rule.limit + EPS) {
      const after = curr + cost;
      return {
        allowed: true,
        remaining: floorUnits(rule.limit - estimate - cost),
        resetAfterMs: resetAfter(prev, after, start, nowMs, P),
        retryAfterMs: 0,
        next: prev > 0 || after > 0 ? [start, prev, after] : null,
        ttlMs: start + 2 * P - nowMs,
      };
    }
    return {
      allowed: false,
      remaining: floorUnits(rule.limit - estimate),
      resetAfterMs: resetAfter(prev, curr, start, nowMs, P),
      retryAfterMs: ceilMs(waitFor(prev, curr, cost, rule.limit, elapsed, P)),
      next: state ? [...state] : null,
      ttlMs: start + 2 * P - nowMs,
    };
  },
  adjust(state, nowMs, rule, delta) {
    const P = rule.periodMs;
    const start = nowMs - (nowMs % P);
    const [prev, curr] = counters(state, start, P);
    const after = Math.max(0, curr + delta);
    return {
      next: prev > 0 || after > 0 ? [start, prev, after] : null,
      ttlMs: start + 2 * P - nowMs,
    };
  },
};

/** (prev, curr) as seen from the window starting at `start`. */
function counters(
  state: readonly number[] | undefined,
  start: number,
  P: number,
): [number, number] {
  if (state === undefined) return [0, 0];
  const s = state[0] ?? 0;
  if (s === start) return [state[1] ?? 0, state[2] ?? 0];
  if (s === start - P) return [state[2] ?? 0, 0];
  return [0, 0];
}

/** Until the estimate falls to zero: the end of the window after the last non-empty one. */
function resetAfter(prev: number, curr: number, start: number, nowMs: number, P: number): number {
  if (curr > 0) return start + 2 * P - nowMs;
  if (prev > 0) return start + P - nowMs;
  return 0;
}

/**
 * The exact wait until `estimate + cost ≤ limit`, following the estimate as it decays: first
 * within the current window (prev's weight shrinks), then in the next (curr becomes prev).
 */
function waitFor(
  prev: number,
  curr: number,
  cost: number,
  limit: number,
  elapsed: number,
  P: number,
): number {
  const room = limit - curr - cost;
  if (room >= 0 && prev > 0) {
    // prev·(P − elapsed − t)/P ≤ room  ⇔  t ≥ P − elapsed − room·P/prev
    const t = P - elapsed - (room * P) / prev;
    if (t <= P - elapsed) return Math.max(0, t);
  }
  // In the next window: curr·(P − s)/P + cost ≤ limit  ⇔  s ≥ P − (limit − cost)·P/curr
  const s = curr > 0 ? Math.max(0, P - ((limit - cost) * P) / curr) : 0;
  return P - elapsed + s;
}
