/** A source of time in integer milliseconds since the epoch. */
export type Clock = () => number;

/** The system clock. The only place in sluice that reads it. */
export const systemClock: Clock = () => Date.now();

/**
 * A monotonic clock in ms (never goes back with the wall clock): for durations — deadlines,
 * round trips, leases. The only place in sluice that reads it.
 */
export const monoNow: Clock = () => performance.now();

/**
 * Timers, injectable beside a {@link Clock} so that tests drive waits without real time
 * passing. `setTimeout` calls `callback` once, about `ms` milliseconds later, and returns a
 * handle that `clearTimeout` cancels (calling it for a timer that already ran does nothing).
 */
export interface Timers {
  /** Schedules `callback` once after `ms` milliseconds; returns a handle for {@link Timers.clearTimeout}. */
  setTimeout(callback: () => void, ms: number): unknown;
  /** Cancels a timer by the handle `setTimeout` returned. */
  clearTimeout(handle: unknown): void;
}

/** The runtime's own timers (`globalThis.setTimeout` / `clearTimeout`). */
export const systemTimers: Timers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as Parameters<typeof clearTimeout>[0]),
};
