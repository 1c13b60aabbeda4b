/**
 * A clock and timers that move only when a test says so: pass `time.now` as a `clock` and
 * `time.timers` as `timers`, then `await time.advance(ms)`. Timers due within the step fire in
 * order, each at its own time, and the code they wake (promise callbacks, which is all a memory
 * store needs) runs before the next one fires. Nothing waits for real time.
 */
import type { Timers } from "../../packages/sluice/src/clock.js";

interface Pending {
  readonly at: number;
  readonly seq: number;
  readonly callback: () => void;
}

/** Lets every queued promise callback run (one turn of the event loop; no real time passes). */
export function flushPromises(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export class ManualTime {
  private t: number;
  private seq = 0;
  private readonly pendingTimers = new Map<number, Pending>();
  private readonly watchers = new Set<{ test: () => boolean; resolve: () => void }>();

  /** Starts at `startMs` (epoch ms; default 2023-11-14T22:13:20Z). */
  constructor(startMs = 1_700_000_000_000) {
    this.t = startMs;
  }

  /** The current time, epoch ms: a {@link Clock}. */
  readonly now = (): number => this.t;

  /** Timers on this clock. Handles are numbers. */
  readonly timers: Timers = {
    setTimeout: (callback, ms) => {
      const seq = ++this.seq;
      this.pendingTimers.set(seq, { at: this.t + Math.max(0, ms), seq, callback });
      this.check();
      return seq;
    },
    clearTimeout: (handle) => {
      if (typeof handle === "number" && this.pendingTimers.delete(handle)) this.check();
    },
  };

  /** Timers scheduled and neither fired nor cleared. */
  get pending(): number {
    return this.pendingTimers.size;
  }

  /** The due times of the pending timers, as offsets from now, ascending. */
  dueIn(): number[] {
    return [...this.pendingTimers.values()].map((p) => p.at - this.t).sort((a, b) => a - b);
  }

  /**
   * Resolves once `test()` holds, checked now and whenever a timer is scheduled or cleared
   * (e.g. `time.until(() => time.pending === 3)`: three requests are waiting).
   */
  until(test: () => boolean): Promise<void> {
    if (test()) return Promise.resolve();
    return new Promise((resolve) => this.watchers.add({ test, resolve }));
  }

  /** Moves time forward by `ms`, firing every timer due by then in order. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      let next: Pending | undefined;
      for (const p of this.pendingTimers.values()) {
        if (p.at <= end && (!next || p.at < next.at || (p.at === next.at && p.seq < next.seq)))
          next = p;
      }
      if (!next) break;
      this.pendingTimers.delete(next.seq);
      this.t = Math.max(this.t, next.at);
      next.callback();
      this.check();
      await flushPromises();
    }
    this.t = end;
    await flushPromises();
  }

  private check(): void {
    for (const w of this.watchers) {
      if (w.test()) {
        this.watchers.delete(w);
        w.resolve();
      }
    }
  }
}
