import { type Algorithm, type ResolvedRule, type Step, ceilMs } from "./types.js";

/** Concurrency's algorithm: `decide` also takes the new permit's id, and permits can be released. */
export interface ConcurrencyAlgorithm extends Algorithm {
  decide(
    state: readonly number[] | undefined,
    nowMs: number,
    rule: ResolvedRule,
    cost: number,
    permitId?: number,
  ): Step;
  release(
    state: readonly number[] | undefined,
    nowMs: number,
    permitId: number,
  ): { next: number[] | null; ttlMs: number; released: boolean };
}

/**
 * Concurrency: at most `limit` permits in flight. A permit is released by its holder or expires
 * `period` ms after it was taken, so a holder that crashed never blocks the key forever.
 * State: [permitId1, expiresAt1, cost1, …]. `decide` takes the new permit's id as a 5th argument.
 */
export const concurrency: ConcurrencyAlgorithm = {
  stateSize: 0,
  capacity: (rule) => rule.limit,
  decide(state, nowMs, rule, cost, permitId: number = 0) {
    if (cost > 0 && cost <= rule.limit && !hasLive(state, nowMs)) {
      // Nothing in flight (the common case): the new permit alone.
      return {
        allowed: true,
        remaining: rule.limit - cost,
        resetAfterMs: rule.periodMs,
        retryAfterMs: 0,
        next: [permitId, nowMs + rule.periodMs, cost],
        ttlMs: rule.periodMs,
      };
    }
    const live = prune(state, nowMs);
    const inFlight = sum(live);
    if (inFlight + cost <= rule.limit) {
      if (cost > 0) live.push(permitId, nowMs + rule.periodMs, cost);
      const ttl = maxExpiry(live) - nowMs;
      return {
        allowed: true,
        remaining: rule.limit - inFlight - cost,
        resetAfterMs: Math.max(0, ttl),
        retryAfterMs: 0,
        next: live.length > 0 ? live : null,
        ttlMs: Math.max(0, ttl),
      };
    }
    // If nobody releases, permits free up as they expire, earliest first.
    const expiries: Array<[number, number]> = [];
    for (let i = 0; i < live.length; i += 3) expiries.push([live[i + 1] ?? 0, live[i + 2] ?? 0]);
    expiries.sort((a, b) => a[0] - b[0]);
    let freed = 0;
    let retry = 0;
    for (const [exp, c] of expiries) {
      freed += c;
      if (inFlight - freed + cost <= rule.limit) {
        retry = exp - nowMs;
        break;
      }
    }
    return {
      allowed: false,
      remaining: Math.max(0, rule.limit - inFlight),
      resetAfterMs: maxExpiry(live) - nowMs,
      retryAfterMs: ceilMs(retry),
      next: state ? [...state] : null,
      ttlMs: maxExpiry(live) - nowMs,
    };
  },
  adjust(state, nowMs) {
    // Permits are not charged by amount; reservations do not apply to concurrency.
    const live = prune(state, nowMs);
    return { next: live.length > 0 ? live : null, ttlMs: Math.max(0, maxExpiry(live) - nowMs) };
  },
  release(state, nowMs, permitId) {
    if (state !== undefined && state.length === 3) {
      // One permit recorded (the common case): released if it is this one and still live.
      const released = state[0] === permitId && (state[1] ?? 0) > nowMs;
      if (released || (state[1] ?? 0) <= nowMs) return { next: null, ttlMs: 0, released };
    }
    const live = prune(state, nowMs);
    let released = false;
    for (let i = 0; i < live.length; i += 3) {
      if (live[i] === permitId) {
        live.splice(i, 3);
        released = true;
        break;
      }
    }
    return {
      next: live.length > 0 ? live : null,
      ttlMs: Math.max(0, maxExpiry(live) - nowMs),
      released,
    };
  },
};

function prune(state: readonly number[] | undefined, nowMs: number): number[] {
  const out: number[] = [];
  if (state === undefined) return out;
  for (let i = 0; i + 2 < state.length; i += 3) {
    if ((state[i + 1] ?? 0) > nowMs) out.push(state[i] ?? 0, state[i + 1] ?? 0, state[i + 2] ?? 0);
  }
  return out;
}

function hasLive(state: readonly number[] | undefined, nowMs: number): boolean {
  if (state === undefined) return false;
  for (let i = 1; i < state.length; i += 3) if ((state[i] ?? 0) > nowMs) return true;
  return false;
}

function sum(live: readonly number[]): number {
  let s = 0;
  for (let i = 2; i < live.length; i += 3) s += live[i] ?? 0;
  return s;
}

function maxExpiry(live: readonly number[]): number {
  let m = 0;
  for (let i = 1; i < live.length; i += 3) m = Math.max(m, live[i] ?? 0);
  return m;
}
