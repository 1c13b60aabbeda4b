import { type Algorithm, ceilMs } from "./types.js";

/**
 * Sliding log: every admitted request is remembered with its time and cost; a request passes
 * when the costs in the last P milliseconds, (now − P, now], plus its own fit in `limit`.
 * Exact in every interval of length P, at O(limit) memory per key.
 * State: [t1, cost1, t2, cost2, …] in time order.
 */
export const slidingLog: Algorithm = {
  capacity: (rule) => rule.limit,
  decide(state, nowMs, rule, cost) {
    const live = prune(state, nowMs, rule.periodMs);
    let used = 0;
    for (let i = 1; i < live.length; i += 2) used += live[i] ?? 0;
    if (used + cost <= rule.limit) {
      if (cost > 0) append(live, nowMs, cost);
      const last = live.length > 0 ? (live[live.length - 2] ?? nowMs) : nowMs;
      const ttl = live.length > 0 ? last + rule.periodMs - nowMs : 0;
      return {
        allowed: true,
        remaining: rule.limit - used - cost,
        resetAfterMs: ttl,
        retryAfterMs: 0,
        next: live.length > 0 ? live : null,
        ttlMs: ttl,
      };
    }
    // Entries leave the window at t + P, oldest first; wait until enough cost has left.
    const excess = used + cost - rule.limit;
    let freed = 0;
    let retry = 0;
    for (let i = 0; i < live.length; i += 2) {
      freed += live[i + 1] ?? 0;
      if (freed >= excess) {
        retry = (live[i] ?? 0) + rule.periodMs - nowMs;
        break;
      }
    }
    const last = live[live.length - 2] ?? nowMs;
    return {
      allowed: false,
      remaining: Math.max(0, rule.limit - used),
      resetAfterMs: last + rule.periodMs - nowMs,
      retryAfterMs: ceilMs(retry),
      next: state ? [...state] : null,
      ttlMs: last + rule.periodMs - nowMs,
    };
  },
  adjust(state, nowMs, rule, delta) {
    const live = prune(state, nowMs, rule.periodMs);
    if (delta > 0) {
      append(live, nowMs, delta);
    } else {
      // Refund from the newest entries backwards.
      let refund = -delta;
      for (let i = live.length - 2; i >= 0 && refund > 0; i -= 2) {
        const c = live[i + 1] ?? 0;
        const take = Math.min(c, refund);
        live[i + 1] = c - take;
        refund -= take;
      }
      for (let i = live.length - 2; i >= 0; i -= 2) if (live[i + 1] === 0) live.splice(i, 2);
    }
    if (live.length === 0) return { next: null, ttlMs: 0 };
    return { next: live, ttlMs: (live[live.length - 2] ?? nowMs) + rule.periodMs - nowMs };
  },
};

/** Entries still inside (now − P, now]. */
function prune(state: readonly number[] | undefined, nowMs: number, P: number): number[] {
  const out: number[] = [];
  if (state === undefined) return out;
  for (let i = 0; i + 1 < state.length; i += 2) {
    const t = state[i] ?? 0;
    if (t > nowMs - P) out.push(t, state[i + 1] ?? 0);
  }
  return out;
}

/** Add cost at `nowMs`, merging with an entry of the same millisecond. */
function append(live: number[], nowMs: number, cost: number): void {
  if (live.length > 0 && live[live.length - 2] === nowMs)
    live[live.length - 1] = (live[live.length - 1] ?? 0) + cost;
  else live.push(nowMs, cost);
}
