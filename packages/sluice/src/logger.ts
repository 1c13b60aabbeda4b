/**
 * Where sluice says the few things it says on its own: a store that can no longer decide (and
 * when it can again), a client outside the tested range. One line each, never one per call.
 */
import { type OptionField, hasShape, option } from "./options.js";

/**
 * What sluice writes to: any object with `warn(message)` — `console` (the default), a pino or
 * winston logger, or your own. Only the one-string form is used, which every logger takes.
 */
export interface Logger {
  /** A line that needs an operator's attention. */
  warn(message: string): void;
}

/** The default logger: the console's standard error. */
export const consoleLogger: Logger = {
  warn: (message) => console.warn(message),
};

/**
 * The `logger` option of a store's options schema (options.ts): a {@link Logger}, or `false`
 * for silence; the console when absent.
 */
export const loggerOption: OptionField<Logger | undefined> = option.custom<Logger | undefined>(
  (v) =>
    v === false
      ? undefined
      : hasShape(v, { warn: "function" })
        ? (v as Logger)
        : { problem: "must be an object with a warn(message) method, or false" },
  consoleLogger,
);
