/**
 * Error classes with stable codes. Every code is documented in docs/errors.md; a test fails
 * when one is missing there.
 */

/** Every code sluice can raise. */
export const ERROR_CODES = [
  "SLUICE_ERR_POLICY",
  "SLUICE_ERR_COST",
  "SLUICE_ERR_KEY",
  "SLUICE_ERR_OPTIONS",
  "SLUICE_ERR_UNSUPPORTED",
  "SLUICE_ERR_STORE",
  "SLUICE_ERR_STORE_TIMEOUT",
  "SLUICE_ERR_STORE_UNAVAILABLE",
  "SLUICE_ERR_CORRUPT_STATE",
  "SLUICE_ERR_POLICY_NOT_FOUND",
  "SLUICE_ERR_POLICY_SOURCE",
  "SLUICE_ERR_MIDDLEWARE",
] as const;

/** A sluice error code, see {@link ERROR_CODES}. */
export type ErrorCode = (typeof ERROR_CODES)[number];

/** One problem found while validating input: where (a dotted path) and what. */
export interface ValidationIssue {
  /** Dotted path of the offending field, e.g. `rules.0.limit`; empty for the whole value. */
  path: string;
  /** What is wrong, in words a user can act on. */
  message: string;
}

/** Base class of every error sluice throws; `code` is stable and documented. */
export class SluiceError extends Error {
  /** Stable, documented error code. */
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SluiceError";
    this.code = code;
  }
}

/** Bad input (policy, cost, key, options). Carries every issue found, each naming its field. */
export class ValidationError extends SluiceError {
  /** Every problem found, each with the field's path. */
  readonly issues: readonly ValidationIssue[];
  constructor(code: ErrorCode, subject: string, issues: readonly ValidationIssue[]) {
    const detail = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ");
    super(code, `${subject}: ${detail}`);
    this.name = "ValidationError";
    this.issues = issues;
  }
}

/** The counter store failed, timed out or is known to be down (circuit open). */
export class StoreError extends SluiceError {
  constructor(
    code: "SLUICE_ERR_STORE" | "SLUICE_ERR_STORE_TIMEOUT" | "SLUICE_ERR_STORE_UNAVAILABLE",
    message: string,
    options?: { cause?: unknown },
  ) {
    super(code, message, options);
    this.name = "StoreError";
  }
}

/** The function of the HTTP middleware's options that failed, as {@link MiddlewareError} names it. */
export type MiddlewareStage =
  "skip" | "limiter" | "key" | "cost" | "priority" | "strategy.body" | "decision";

/**
 * The HTTP middleware could not decide a request: a function of its options threw or gave a
 * value it cannot use (`stage` names which; `decision` is the limiter refusing what it was given,
 * e.g. a cost above the policy's capacity). The original error is the `cause`. The request is
 * answered with an `application/problem+json` body of `status`, and the middleware's `onError`
 * hears it.
 */
export class MiddlewareError extends SluiceError {
  /** Which function failed. */
  readonly stage: MiddlewareStage;
  /**
   * The status the request was answered with: 400 when the key function returned something
   * other than a string (what the client sent, e.g. `?k=a&k=b` read as an array), else 500.
   */
  readonly status: 400 | 500;
  constructor(
    stage: MiddlewareStage,
    message: string,
    options?: { cause?: unknown; status?: 400 | 500 },
  ) {
    super(
      "SLUICE_ERR_MIDDLEWARE",
      message,
      options && "cause" in options ? { cause: options.cause } : undefined,
    );
    this.name = "MiddlewareError";
    this.stage = stage;
    this.status = options?.status ?? 500;
  }
}

/** True when `err` is a {@link SluiceError} with the given code. */
export function isSluiceError(err: unknown, code?: ErrorCode): err is SluiceError {
  return err instanceof SluiceError && (code === undefined || err.code === code);
}
