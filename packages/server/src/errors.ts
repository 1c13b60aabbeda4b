import { API_ERROR_CODES, type ApiErrorBody, type ApiErrorCode } from "@sluice/api";
import type { FastifyError } from "fastify";
import type { Logger } from "pino";
import { StoreError, type ValidationIssue, ValidationError } from "sluice";

export { API_ERROR_CODES } from "@sluice/api";
export type { ApiErrorBody, ApiErrorCode } from "@sluice/api";
import type { z } from "zod";

/** An error that becomes an HTTP response: status from its code, and issues naming fields. */
export class ApiError extends Error {
  /** Stable code, see {@link API_ERROR_CODES}. */
  readonly code: ApiErrorCode;
  /** For 400: every problem found, each with its field's dotted path. */
  readonly issues: ValidationIssue[] | undefined;
  /** Extra response headers (e.g. `Retry-After`, `WWW-Authenticate`). */
  readonly headers: Record<string, string>;
  /**
   * For 400: what was refused (`Invalid policy "api"`), the message without its list of
   * issues — for callers that print the issues themselves, such as the CLI.
   */
  readonly subject: string | undefined;

  constructor(
    code: ApiErrorCode,
    message: string,
    options: {
      issues?: ValidationIssue[];
      headers?: Record<string, string>;
      cause?: unknown;
      subject?: string;
    } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "ApiError";
    this.code = code;
    this.issues = options.issues;
    this.headers = options.headers ?? {};
    this.subject = options.subject;
  }

  /** The HTTP status. */
  get status(): number {
    return API_ERROR_CODES[this.code];
  }

  /** The JSON body. */
  toBody(): ApiErrorBody {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.issues ? { issues: this.issues } : {}),
      },
    };
  }
}

/** A 400 listing issues; the message names every field. */
export function invalid(subject: string, issues: ValidationIssue[]): ApiError {
  const detail = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ");
  return new ApiError("invalid_request", `${subject}: ${detail}`, { issues, subject });
}

/**
 * Converts zod issues into ours, with an optional path prefix. With `input`, a field that is
 * missing (rather than of the wrong type) is reported as "is required".
 */
export function zodIssues(error: z.ZodError, prefix = "", input?: unknown): ValidationIssue[] {
  return error.issues.map((i) => {
    const path = [prefix, ...i.path.map(String)].filter((s) => s !== "").join(".");
    let message = i.message;
    if (i.code === "invalid_type" && input !== undefined && valueAt(input, i.path) === undefined)
      message = "is required";
    if (i.code === "unrecognized_keys") message = `unknown field(s): ${i.keys.join(", ")}`;
    return { path, message };
  });
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = input;
  for (const k of path) {
    if (typeof v !== "object" || v === null) return undefined;
    v = (v as Record<PropertyKey, unknown>)[k];
  }
  return v;
}

/** Parses `value` with `schema` or throws a 400 naming each field. */
export function parseOr400<S extends z.ZodType>(
  schema: S,
  value: unknown,
  subject: string,
  prefix = "",
): z.output<S> {
  const r = schema.safeParse(value);
  if (!r.success) {
    if (value === undefined || value === null)
      throw invalid(subject, [{ path: prefix, message: "a JSON body is required" }]);
    throw invalid(subject, zodIssues(r.error, prefix, value));
  }
  return r.data;
}

/** Prefixes each issue's path (for items of a batch or an import file). */
export function prefixIssues(
  issues: readonly ValidationIssue[],
  prefix: string,
): ValidationIssue[] {
  return issues.map((i) => ({ path: i.path ? `${prefix}.${i.path}` : prefix, message: i.message }));
}

const DB_DOWN = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "57P01",
  "57P03",
  "57014", // query_canceled: statement_timeout
  "25006", // read_only_sql_transaction: a standby
  "53300", // too_many_connections
  "08000",
  "08001",
  "08003",
  "08006",
  // mysql2: the server closed the connection (it stopped, crashed, or killed the connection).
  "PROTOCOL_CONNECTION_LOST",
  "ER_CONNECTION_KILLED",
  // mysql2: no answer within the query's deadline (databaseTimeoutMs).
  "PROTOCOL_SEQUENCE_TIMEOUT",
]);

/**
 * SQLite result codes (and their extended forms, `SQLITE_READONLY_DBMOVED`…) that mean the file
 * cannot be used — read-only, locked, missing, full, unreadable — rather than a bug.
 */
const SQLITE_DOWN = /^SQLITE_(BUSY|LOCKED|READONLY|CANTOPEN|IOERR|FULL|PERM)(_|$)/;

/** True when `err` looks like the database being unreachable (rather than a bug). */
export function isDatabaseOutage(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  if (err instanceof Error && err.name === "DatabaseUnavailableError") return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && (DB_DOWN.has(code) || SQLITE_DOWN.test(code))) return true;
  const msg = (err as { message?: unknown }).message;
  return (
    typeof msg === "string" &&
    /Connection terminated|timeout exceeded when trying to connect|connect ECONNREFUSED|Query read timeout|Client was closed and is not queryable/i.test(
      msg,
    )
  );
}

/**
 * What is known to be wrong, in words, when the cause of a database outage is one the service
 * recognizes (a deleted or read-only file, a deadline); undefined otherwise.
 */
export function databaseOutageReason(err: unknown): string | undefined {
  if (!(err instanceof Error)) return undefined;
  // Its reason: callers are not told where the data lives (the log and /readyz's admins are).
  if (err.name === "DatabaseUnavailableError")
    return (err as Error & { reason?: string }).reason ?? err.message;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string" && code.startsWith("SQLITE_READONLY"))
    return "it is read-only (it refuses writes); check the file's permissions and the disk";
  if (code === "25006") return "it is read-only (a standby?)";
  if (
    code === "57014" ||
    code === "PROTOCOL_SEQUENCE_TIMEOUT" ||
    /Query read timeout|timeout exceeded when trying to connect/i.test(err.message)
  )
    return "it did not answer in time";
  return undefined;
}

/** What to tell the caller about a database outage: the reason when it is known. */
export function databaseOutageMessage(err: unknown): string {
  const reason = databaseOutageReason(err);
  return reason === undefined
    ? "the policy database is unavailable; retry later"
    : `the policy database is unavailable: ${reason}`;
}

const CLIENT_STATUS_CODES: Partial<Record<number, ApiErrorCode>> = {
  401: "unauthorized",
  404: "not_found",
  413: "payload_too_large",
  415: "unsupported_media_type",
};

/**
 * Maps anything thrown in a request to an {@link ApiError}: caller mistakes are 4xx, never 500.
 * `contentType` (the request's) names what was refused in a 415.
 */
export function toApiError(err: unknown, contentType?: string): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof ValidationError) {
    return new ApiError("invalid_request", err.message, { issues: [...err.issues], cause: err });
  }
  if (err instanceof StoreError)
    return new ApiError("store_unavailable", "the counter store is unavailable; retry later", {
      cause: err,
    });
  if (isDatabaseOutage(err))
    return new ApiError("database_unavailable", databaseOutageMessage(err), { cause: err });
  // Fastify's own 4xx (bad JSON, empty body, wrong content type, body too large…).
  const fe = err as Partial<FastifyError> | undefined;
  if (fe?.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE") return unsupportedMediaType(contentType);
  const status = typeof fe?.statusCode === "number" ? fe.statusCode : 500;
  if (status >= 400 && status < 500) {
    const code = CLIENT_STATUS_CODES[status] ?? "invalid_request";
    const message = fe?.message ?? "bad request";
    return new ApiError(code, message, {
      issues: code === "invalid_request" ? [{ path: "", message }] : undefined,
      cause: err,
    });
  }
  return new ApiError("internal", "internal error", { cause: err });
}

/** The 415 for a body whose type is not accepted, naming the type that was sent. */
export function unsupportedMediaType(contentType: string | undefined): ApiError {
  return new ApiError(
    "unsupported_media_type",
    `Content-Type ${contentType ? `"${contentType}"` : "(none)"} is not accepted: send JSON with Content-Type: application/json (or YAML with application/yaml to import policies)`,
  );
}

/**
 * Logs a request that failed with `e` (mapped from `err` by {@link toApiError}): the counter
 * store's outage at warn, any other 5xx but a shutting-down node's at error; 4xx not here
 * (the request line of {@link logRequest} says them).
 */
export function logRequestError(log: Logger, e: ApiError, err: unknown, url: string): void {
  if (e.code === "store_unavailable") log.warn({ err, url }, "counter store unavailable");
  else if (e.status >= 500 && e.code !== "shutting_down") log.error({ err, url }, "request failed");
}

/** The one log line of an answered request: at info when it failed (4xx, 5xx), else at debug. */
export function logRequest(
  log: Logger,
  method: string,
  url: string,
  status: number,
  ms: number,
): void {
  if (status >= 400 || log.isLevelEnabled("debug"))
    log[status >= 400 ? "info" : "debug"]({ method, url, status, ms: Math.round(ms) }, "request");
}
