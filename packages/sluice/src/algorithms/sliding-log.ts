import { type InPlaceAlgorithm, type ResolvedRule, type Step, ceilMs } from "./types.js";

/**
 * Sliding log: every admitted request is remembered with its time and cost; a request passes
 * when the costs in the last P milliseconds, (now − P, now], plus its own fit in `limit`.
 * Exact in every interval of length P, at O(limit) memory per key.
 *
 * State: [total, first, t1, cost1, t2, cost2, …]: the admitted requests in time order (requests
 * of the same millisecond merged) from index `first` on, and the sum of their costs. A decision
 * only looks at the entries that have just left the window, not at the whole log: they are
 * skipped by moving `first`, and the dead space before it is dropped once it is half the array.
 */
export const slidingLog: InPlaceAlgorithm = {
  stateSize: 0,
  capacity: (rule) => rule.limit,
  fresh: () => [0, 2],
  decide(state, nowMs, rule, cost) {
    return decideInPlace(state === undefined ? [0, 2] : state.slice(), nowMs, rule, cost);
  },
  decideInPlace(state, nowMs, rule, cost) {
    return decideInPlace(state, nowMs, rule, cost);
  },
  adjust(state, nowMs, rule, delta) {
    const log = state === undefined ? [0, 2] : state.slice();
    prune(log, nowMs, rule.periodMs);
    if (delta > 0) {
      append(log, nowMs, delta);
    } else {
      // Refund from the newest entries backwards.
      let refund = -delta;
      for (let i = log.length - 2; i >= log[1]! && refund > 0; i -= 2) {
        const c = log[i + 1]!;
        const take = Math.min(c, refund);
        log[i + 1] = c - take;
        log[0] = log[0]! - take;
        refund -= take;
      }
      for (let i = log.length - 2; i >= log[1]!; i -= 2) if (log[i + 1] === 0) log.splice(i, 2);
    }
    if (log.length <= log[1]!) return { next: null, ttlMs: 0 };
    return { next: log, ttlMs: log[log.length - 2]! + rule.periodMs - nowMs };
  },
};

/** `decide` over a log the caller owns: the log is pruned, and charged when allowed. */
function decideInPlace(log: number[], nowMs: number, rule: ResolvedRule, cost: number): Step {
  const P = rule.periodMs;
  prune(log, nowMs, P);
  const used = log[0]!;
  if (used + cost <= rule.limit) {
    if (cost > 0) append(log, nowMs, cost);
    const empty = log.length <= log[1]!;
    const ttl = empty ? 0 : log[log.length - 2]! + P - nowMs;
    return {
      allowed: true,
      remaining: rule.limit - used - cost,
      resetAfterMs: ttl,
      retryAfterMs: 0,
      next: empty ? null : log,
      ttlMs: ttl,
    };
  }
  // Entries leave the window at t + P, oldest first; wait until enough cost has left.
  const excess = used + cost - rule.limit;
  let freed = 0;
  let retry = 0;
  for (let i = log[1]!; i < log.length; i += 2) {
    freed += log[i + 1]!;
    if (freed >= excess) {
      retry = log[i]! + P - nowMs;
      break;
    }
  }
  const last = log.length > log[1]! ? log[log.length - 2]! : nowMs;
  return {
    allowed: false,
    remaining: Math.max(0, rule.limit - used),
    resetAfterMs: last + P - nowMs,
    retryAfterMs: ceilMs(retry),
    next: log.length > log[1]! ? log : null,
    ttlMs: last + P - nowMs,
  };
}

/** Drops the entries that left (now − P, now], oldest first, keeping the total. */
function prune(log: number[], nowMs: number, P: number): void {
  const first = log[1]!;
  let k = first;
  while (k < log.length && log[k]! <= nowMs - P) {
    log[0] = log[0]! - log[k + 1]!;
    k += 2;
  }
  if (k === first) return;
  if (k >= log.length) {
    log.length = 2;
    log[1] = 2;
  } else if ((k - 2) * 2 > log.length) {
    // The dead space is half the array: move the log back to the front.
    log.copyWithin(2, k);
    log.length -= k - 2;
    log[1] = 2;
  } else log[1] = k;
}

/** Add cost at `nowMs`, merging with an entry of the same millisecond. */
function append(log: number[], nowMs: number, cost: number): void {
  const n = log.length;
  if (n > log[1]! && log[n - 2] === nowMs) log[n - 1] = log[n - 1]! + cost;
  else log.push(nowMs, cost);
  log[0] = log[0]! + cost;
}
