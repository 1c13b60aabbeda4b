/**
 * Deadlines for calls to dependencies: a call that has not settled by its deadline is answered
 * with a {@link DeadlineError} naming what did not answer, so no request (and no `/readyz`)
 * waits on a hung Redis or database for longer than it was told to.
 */

/** A dependency did not answer in time. */
export class DeadlineError extends Error {
  /** What did not answer (`redis`, `database`). */
  readonly what: string;
  /** The deadline that passed (ms). */
  readonly timeoutMs: number;
  constructor(what: string, timeoutMs: number) {
    super(`${what} did not answer within ${timeoutMs} ms`);
    this.name = "DeadlineError";
    this.what = what;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * Settles like `work`, or rejects with a {@link DeadlineError} after `timeoutMs`. The work itself
 * is not cancelled (its late result is dropped); pair this with the dependency's own timeout so
 * the work ends too.
 */
export function withDeadline<T>(work: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(what, timeoutMs)), timeoutMs);
    timer.unref();
  });
  // The work may still fail after the deadline answered: that rejection is not anyone's to handle.
  work.catch(() => {});
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}
