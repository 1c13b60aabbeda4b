import { ValidationError } from "./errors.js";

/** A duration: integer milliseconds, or a string such as `"500ms"`, `"1s"`, `"1m"`, `"1h"`, `"1d"`. */
export type Duration = number | `${number}${"ms" | "s" | "m" | "h" | "d"}`;

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const PATTERN = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/;

/**
 * Parses a {@link Duration} into whole milliseconds, or returns an error message.
 * Fractions are allowed in strings (`"1.5s"`) as long as the result is a whole number of ms.
 */
export function parseDurationOrMessage(value: unknown): number | string {
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return `must be a finite number of milliseconds (got ${value})`;
    if (!Number.isInteger(value)) return `must be a whole number of milliseconds (got ${value})`;
    if (value <= 0) return `must be positive (got ${value})`;
    return value;
  }
  if (typeof value === "string") {
    const m = PATTERN.exec(value);
    if (!m)
      return `must be milliseconds or a string like "500ms", "1s", "1m", "1h", "1d" (got ${JSON.stringify(value)})`;
    const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
    if (!Number.isInteger(ms))
      return `must be a whole number of milliseconds (got ${JSON.stringify(value)})`;
    if (ms <= 0) return `must be positive (got ${JSON.stringify(value)})`;
    return ms;
  }
  return `must be milliseconds or a duration string (got ${value === null ? "null" : typeof value})`;
}

/** Parses a {@link Duration} into whole milliseconds; throws a {@link ValidationError} naming `field`. */
export function parseDuration(value: Duration, field = "duration"): number {
  const r = parseDurationOrMessage(value);
  if (typeof r === "string") {
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid duration", [
      { path: field, message: r },
    ]);
  }
  return r;
}

/** Formats milliseconds in the largest unit that divides them: 60000 → "1m". */
export function formatDuration(ms: number): string {
  for (const unit of ["d", "h", "m", "s"] as const) {
    if (ms % UNIT_MS[unit] === 0) return `${ms / UNIT_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}
