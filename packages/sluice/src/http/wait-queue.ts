/**
 * The `wait` strategy: one FIFO line of waiting requests per (limiter, key). The head of a line
 * sleeps until its retry time and asks the limiter again; a request whose turn cannot come
 * before its deadline leaves with a denial. Time comes only from the injected clock and timers
 * (the middleware's `clock` and `timers` options), so a test drives a whole wait without real
 * time passing.
 */
import type { Clock, Timers } from "../clock.js";
import type { Decision } from "../decision.js";
import type { Limiter } from "../limiter.js";
import type { AbortSignalLike } from "./types.js";

/** One request under the `wait` strategy. */
export interface WaitRequest {
  readonly limiter: Limiter;
  readonly key: string;
  readonly cost: number;
  /** Longest time the request may be held, ms. */
  readonly maxWaitMs: number;
  /** Most requests one line holds; a request finding it full is denied at once. */
  readonly maxQueue: number;
  /** Aborted when the client goes away. */
  readonly signal: AbortSignalLike | undefined;
  /** Epoch-ms clock of the request's middleware: its deadline and retry times. */
  readonly clock: Clock;
}

/** How a request under the `wait` strategy ended. */
export type WaitResult =
  /**
   * Allowed or denied (`decision.allowed`), at once or after a stay in the line (`queued`: it
   * joined the line, whether it then passed, reached its deadline or learnt it could not pass in time).
   */
  | { readonly kind: "decided"; readonly decision: Decision; readonly queued: boolean }
  /** The client went away while waiting; `decision` is the last one known for the key. */
  | { readonly kind: "aborted"; readonly decision: Decision };

/**
 * How a stay in the line ended; `decision` is the last one made for the request, if any, and
 * `queued` false when it never joined (the line was full, or the client had already gone).
 */
type Turn =
  | { kind: "allowed" | "timeout" | "aborted"; decision: Decision | undefined; queued: boolean }
  | { kind: "error"; error: unknown };

interface Waiter {
  readonly cost: number;
  readonly clock: Clock;
  readonly deadline: number;
  nextTryAt: number;
  last: Decision | undefined;
  /** The client went away; the drain loop settles it when it is the head. */
  aborted: boolean;
  done: boolean;
  settle(turn: Turn): void;
}

class Line {
  readonly waiters: Waiter[] = [];
  running = false;
  interrupt: (() => void) | undefined;
  /** Makes the head retry now (a permit was released or units refunded). */
  wake(): void {
    const head = this.waiters[0];
    if (head) head.nextTryAt = 0;
    this.interrupt?.();
  }
}

/** Poll interval of a line waiting for a concurrency slot. */
export const CONCURRENCY_POLL_MS = 100;

/**
 * How long the head of a line sleeps before asking again: the decision's retry time; for a
 * concurrency policy at most {@link CONCURRENCY_POLL_MS}, since a slot freed by another process
 * wakes nobody here (one released by this process wakes the line at once).
 */
function retryDelay(limiter: Limiter, d: Decision): number {
  const ms = Math.max(1, d.retryAfterMs);
  return limiter.policy.algorithm === "concurrency" ? Math.min(ms, CONCURRENCY_POLL_MS) : ms;
}

/** The lines of every (limiter, key) that share one set of timers. */
export class WaitQueues {
  private readonly lines = new WeakMap<Limiter, Map<string, Line>>();

  constructor(private readonly timers: Timers) {}

  /**
   * Decides a request under the `wait` strategy. A request that finds others waiting for its
   * key joins the end of the line without asking first, so it never overtakes them. Otherwise
   * it asks once; if denied, it waits when its retry time is within `maxWaitMs` (for a
   * concurrency policy, always: a slot may free up long before its permit would expire).
   * Rejects only when the limiter throws (an invalid cost).
   */
  async decide(req: WaitRequest): Promise<WaitResult> {
    const { limiter, key, cost } = req;
    if (this.waiting(limiter, key)) {
      const turn = await this.enqueue(req, undefined);
      if (turn.kind === "aborted")
        return { kind: "aborted", decision: turn.decision ?? (await limiter.peek(key)) };
      if (turn.decision !== undefined)
        return { kind: "decided", decision: turn.decision, queued: turn.queued };
      // Timed out (or the line was full) before its first try: nothing was charged. Report the
      // key as it is now, but as the denial it is, even if the bucket shows room that the
      // requests ahead in the line will take.
      const now = await limiter.peek(key);
      const decision = now.allowed
        ? { ...now, allowed: false, retryAfterMs: Math.max(now.retryAfterMs, 1) }
        : now;
      return { kind: "decided", decision, queued: turn.queued };
    }
    const first = await limiter.limit(key, { cost });
    const worthWaiting =
      !first.allowed &&
      first.reason !== "store-error" &&
      (limiter.policy.algorithm === "concurrency" ||
        (first.retryAfterMs <= req.maxWaitMs && first.retryAfterMs > 0));
    if (!worthWaiting) return { kind: "decided", decision: first, queued: false };
    const turn = await this.enqueue(req, first);
    if (turn.kind === "aborted") return { kind: "aborted", decision: turn.decision ?? first };
    return { kind: "decided", decision: turn.decision ?? first, queued: turn.queued };
  }

  /** Makes the head of the key's line ask again now (this process released a slot or refunded units). */
  wake(limiter: Limiter, key: string): void {
    this.lines.get(limiter)?.get(key)?.wake();
  }

  /** True while requests wait for the key. */
  waiting(limiter: Limiter, key: string): boolean {
    return (this.lines.get(limiter)?.get(key)?.waiters.length ?? 0) > 0;
  }

  private linesOf(limiter: Limiter): Map<string, Line> {
    let m = this.lines.get(limiter);
    if (!m) this.lines.set(limiter, (m = new Map()));
    return m;
  }

  /** Waits in the key's line until the request may pass, its deadline passes, or the client leaves. */
  private enqueue(
    req: WaitRequest,
    first: Decision | undefined,
  ): Promise<Turn & { kind: "allowed" | "timeout" | "aborted" }> {
    const { limiter, key, signal } = req;
    const map = this.linesOf(limiter);
    let found = map.get(key);
    if (!found) map.set(key, (found = new Line()));
    const line = found;
    if (line.waiters.length >= req.maxQueue)
      return Promise.resolve({ kind: "timeout", decision: first, queued: false });
    const now = req.clock();
    const timers = this.timers;
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        cost: req.cost,
        clock: req.clock,
        deadline: now + req.maxWaitMs,
        nextTryAt: first ? now + retryDelay(limiter, first) : now,
        last: first,
        aborted: false,
        done: false,
        settle: (turn) => {
          if (w.done) return;
          w.done = true;
          timers.clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          if (turn.kind === "error") reject(turn.error);
          else resolve(turn as Turn & { kind: "allowed" | "timeout" | "aborted" });
        },
      };
      const leave = (kind: "timeout" | "aborted") => {
        const i = line.waiters.indexOf(w);
        if (kind === "aborted") w.aborted = true;
        if (i === 0) {
          line.interrupt?.(); // the drain loop sees the deadline or the abort and settles it
          return;
        }
        if (i > 0) line.waiters.splice(i, 1);
        w.settle({ kind, decision: w.last, queued: true });
      };
      const onAbort = () => leave("aborted");
      // One ms past the deadline, so that the clock reads at least the deadline when it fires.
      const timer = timers.setTimeout(() => leave("timeout"), req.maxWaitMs + 1);
      if (signal?.aborted) {
        if (line.waiters.length === 0 && !line.running && map.get(key) === line) map.delete(key);
        w.settle({ kind: "aborted", decision: first, queued: false });
        return;
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      line.waiters.push(w);
      if (!line.running) void this.drain(limiter, key, line);
    });
  }

  private async drain(limiter: Limiter, key: string, line: Line): Promise<void> {
    line.running = true;
    try {
      while (line.waiters.length > 0) {
        const w = line.waiters[0]!;
        if (w.done) {
          line.waiters.shift();
          continue;
        }
        if (w.aborted) {
          line.waiters.shift();
          w.settle({ kind: "aborted", decision: w.last, queued: true });
          continue;
        }
        const now = w.clock();
        if (now >= w.deadline) {
          line.waiters.shift();
          w.settle({ kind: "timeout", decision: w.last, queued: true });
          continue;
        }
        if (w.nextTryAt > now) {
          await this.sleep(Math.min(w.nextTryAt, w.deadline) - now, line);
          continue;
        }
        let d: Decision;
        try {
          d = await limiter.limit(key, { cost: w.cost });
        } catch (error) {
          line.waiters.shift();
          w.settle({ kind: "error", error });
          continue;
        }
        if (w.done || w.aborted) {
          // The client left while the decision was in flight: give back what it took.
          line.waiters.shift();
          w.settle({ kind: "aborted", decision: d, queued: true });
          if (d.allowed && d.reason === undefined) {
            if (d.leaseId !== undefined)
              await limiter.release(key, d.leaseId).catch(() => undefined);
            else await limiter.refund(key, w.cost).catch(() => undefined);
          }
          continue;
        }
        w.last = d;
        if (d.allowed) {
          line.waiters.shift();
          w.settle({ kind: "allowed", decision: d, queued: true });
          continue;
        }
        const after = w.clock();
        const concurrency = limiter.policy.algorithm === "concurrency";
        if (d.reason === "store-error" || (!concurrency && after + d.retryAfterMs > w.deadline)) {
          line.waiters.shift();
          w.settle({ kind: "timeout", decision: d, queued: true });
          continue;
        }
        w.nextTryAt = after + retryDelay(limiter, d);
      }
    } finally {
      line.running = false;
      const map = this.linesOf(limiter);
      if (line.waiters.length === 0 && map.get(key) === line) map.delete(key);
    }
  }

  /** Sleeps `ms` on the timers, or until the line is interrupted. */
  private sleep(ms: number, line: Line): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.timers.clearTimeout(t);
        line.interrupt = undefined;
        resolve();
      };
      const t = this.timers.setTimeout(done, Math.max(0, ms));
      line.interrupt = done;
    });
  }
}

const shared = new WeakMap<Timers, WaitQueues>();

/**
 * The lines shared by every middleware that uses these timers (the system's, unless injected):
 * two middlewares with the same limiter queue a key's requests in one line.
 */
export function waitQueuesFor(timers: Timers): WaitQueues {
  let q = shared.get(timers);
  if (!q) shared.set(timers, (q = new WaitQueues(timers)));
  return q;
}
