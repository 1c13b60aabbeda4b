import { type Algorithm, ceilMs, fixedAlgorithm } from "./types.js";

/**
 * Fixed window: at most `limit` per aligned window [k·P, (k+1)·P), or — a calendar rule — per
 * window of its calendar (a day, week, month or year between local midnights: calendar.ts).
 * State: [windowStart, count]. Known weakness: a client can spend `limit` at the end of one
 * window and `limit` again at the start of the next (2× burst across the edge).
 */
export const fixedWindow: Algorithm = fixedAlgorithm({
  stateSize: 2,
  capacity: (rule) => rule.limit,
  decideAt(data, at, has, nowMs, rule, cost, out, next) {
    const c = rule.calendar;
    const start = c === undefined ? nowMs - (nowMs % rule.periodMs) : c.startAt(nowMs);
    const end = c === undefined ? start + rule.periodMs : c.endAt(nowMs);
    const count = has && data[at] === start ? (data[at + 1] ?? 0) : 0;
    const resetAfterMs = end - nowMs;
    out.resetAfterMs = resetAfterMs;
    out.ttlMs = resetAfterMs;
    if (count + cost <= rule.limit) {
      const used = count + cost;
      out.allowed = true;
      out.remaining = rule.limit - used;
      out.retryAfterMs = 0;
      next[0] = start;
      next[1] = used;
      return used > 0;
    }
    // The next window starts empty, and cost ≤ limit is validated, so the window end is exact.
    out.allowed = false;
    out.remaining = Math.max(0, rule.limit - count);
    out.retryAfterMs = ceilMs(end - nowMs);
    return false;
  },
  adjust(state, nowMs, rule, delta) {
    const c = rule.calendar;
    const start = c === undefined ? nowMs - (nowMs % rule.periodMs) : c.startAt(nowMs);
    const end = c === undefined ? start + rule.periodMs : c.endAt(nowMs);
    const count = state !== undefined && state[0] === start ? (state[1] ?? 0) : 0;
    const used = Math.max(0, count + delta);
    return { next: used > 0 ? [start, used] : null, ttlMs: end - nowMs };
  },
});

/**
 * Fixed window started by the first request: a key's window opens at its first charge and lasts
 * `period`; the first request after it ends opens the next one. At most `limit` per window, as
 * express-rate-limit's stores, rate-limiter-flexible and @nestjs/throttler count. A window stays
 * open until its end even when refunds bring its count back to 0. State: [windowStart, count]
 * (the layout of {@link fixedWindow}, whose aligned state this reads as a window that started at
 * its aligned start). With no window open, a cost-0 decision reports `resetAfterMs` 0.
 */
export const fixedWindowFromFirstRequest: Algorithm = fixedAlgorithm({
  stateSize: 2,
  capacity: (rule) => rule.limit,
  decideAt(data, at, has, nowMs, rule, cost, out, next) {
    const open = has && nowMs < (data[at] ?? 0) + rule.periodMs;
    const start = open ? data[at]! : nowMs;
    const count = open ? (data[at + 1] ?? 0) : 0;
    const end = start + rule.periodMs;
    out.ttlMs = end - nowMs;
    if (count + cost <= rule.limit) {
      const used = count + cost;
      const opens = open || used > 0;
      out.allowed = true;
      out.remaining = rule.limit - used;
      out.resetAfterMs = opens ? end - nowMs : 0;
      out.retryAfterMs = 0;
      next[0] = start;
      next[1] = used;
      return opens;
    }
    // Denied only inside an open window (cost ≤ limit is validated): the next one starts empty.
    out.allowed = false;
    out.remaining = Math.max(0, rule.limit - count);
    out.resetAfterMs = end - nowMs;
    out.retryAfterMs = ceilMs(end - nowMs);
    return false;
  },
  adjust(state, nowMs, rule, delta) {
    const open = state !== undefined && nowMs < (state[0] ?? 0) + rule.periodMs;
    const start = open ? state[0]! : nowMs;
    const used = Math.max(0, (open ? (state[1] ?? 0) : 0) + delta);
    return {
      next: open || used > 0 ? [start, used] : null,
      ttlMs: start + rule.periodMs - nowMs,
    };
  },
});
