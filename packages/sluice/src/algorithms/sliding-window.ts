import { type Algorithm, EPS, ceilMs, fixedAlgorithm, floorUnits } from "./types.js";

/**
 * Sliding window counter: two aligned window counters, previous and current, and the estimate
 * `prev · (1 − elapsed/P) + curr`, which assumes the previous window's requests were spread
 * evenly. O(1) memory; it can admit more or fewer than an exact log would, by at most the
 * previous window's unevenness. State: [currentWindowStart, prev, curr].
 */
export const slidingWindow: Algorithm = fixedAlgorithm({
  stateSize: 3,
  capacity: (rule) => rule.limit,
  decideAt(data, at, has, nowMs, rule, cost, out, next) {
    const P = rule.periodMs;
    const start = nowMs - (nowMs % P);
    const prev = previous(data, at, has, start, P);
    const curr = current(data, at, has, start);
    const elapsed = nowMs - start;
    const estimate = (prev * (P - elapsed)) / P + curr;
    out.ttlMs = start + 2 * P - nowMs;
    if (estimate + cost <= rule.limit + EPS) {
      const after = curr + cost;
      out.allowed = true;
      out.remaining = floorUnits(rule.limit - estimate - cost);
      out.resetAfterMs = resetAfter(prev, after, start, nowMs, P);
      out.retryAfterMs = 0;
      next[0] = start;
      next[1] = prev;
      next[2] = after;
      return prev > 0 || after > 0;
    }
    out.allowed = false;
    out.remaining = floorUnits(rule.limit - estimate);
    out.resetAfterMs = resetAfter(prev, curr, start, nowMs, P);
    out.retryAfterMs = ceilMs(waitFor(prev, curr, cost, rule.limit, elapsed, P));
    return false;
  },
  adjust(state, nowMs, rule, delta) {
    const P = rule.periodMs;
    const start = nowMs - (nowMs % P);
    const has = state !== undefined;
    const curr = current(state ?? [], 0, has, start) + delta;
    // A refund larger than the current window's count takes the rest back from the previous
    // window, where those units were charged (a request charged before the window turned).
    const prev = Math.max(0, previous(state ?? [], 0, has, start, P) + Math.min(0, curr));
    const after = Math.max(0, curr);
    return {
      next: prev > 0 || after > 0 ? [start, prev, after] : null,
      ttlMs: start + 2 * P - nowMs,
    };
  },
});

/** The previous window's count, seen from the window starting at `start` (state at `at`). */
function previous(
  data: ArrayLike<number>,
  at: number,
  has: boolean,
  start: number,
  P: number,
): number {
  if (!has) return 0;
  const s = data[at] ?? 0;
  if (s === start) return data[at + 1] ?? 0;
  return s === start - P ? (data[at + 2] ?? 0) : 0;
}

/** The current window's count, seen from the window starting at `start` (state at `at`). */
function current(data: ArrayLike<number>, at: number, has: boolean, start: number): number {
  return has && (data[at] ?? 0) === start ? (data[at + 2] ?? 0) : 0;
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
