/**
 * Bodies of rejected requests: RFC 9457 problem details with the IETF rate-limit draft's
 * problem types (`application/problem+json`).
 */
import type { Decision } from "../decision.js";
import type { MiddlewareStage } from "../errors.js";
import { retryAfterSeconds, ruleItemName, violatedPolicies } from "./headers.js";

/** The draft's problem type for a request over its quota (sent with 429). */
export const QUOTA_EXCEEDED_TYPE = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/** The draft's problem type for a temporary reduction of capacity (sent with 503 when the store failed and the policy fails closed). */
export const REDUCED_CAPACITY_TYPE =
  "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/** The media type of problem bodies. */
export const PROBLEM_CONTENT_TYPE = "application/problem+json";

/** A problem details object (RFC 9457) with the rate-limit draft's extension members. */
export interface ProblemDetails {
  /** The problem type URI. */
  readonly type: string;
  /** A short, fixed summary of the problem type. */
  readonly title: string;
  /** The HTTP status code. */
  readonly status: number;
  /** A human-readable explanation of this occurrence. */
  readonly detail: string;
  /** The draft's extension: names of the violated policies, as in `RateLimit-Policy`. */
  readonly "violated-policies": readonly string[];
  /** Seconds to wait before retrying, as in `Retry-After`; absent when unknown. */
  readonly retryAfter?: number;
}

/** The body of a 429: which policies were exceeded and how long to wait. */
export function quotaExceededProblem(d: Decision): ProblemDetails {
  const retryAfter = retryAfterSeconds(d);
  const violated = violatedPolicies(d);
  return {
    type: QUOTA_EXCEEDED_TYPE,
    title: "Request cannot be satisfied as assigned quota has been exceeded",
    status: 429,
    detail: `Rate limit exceeded (${violated.join(", ")}); retry in ${retryAfter} s.`,
    "violated-policies": violated,
    retryAfter,
  };
}

/**
 * The body of a 503 sent when an adaptive concurrency limit has no room for the request: the
 * backend is at the capacity the limit has found, and the client exceeded nothing.
 */
export function overloadedProblem(d: Decision): ProblemDetails {
  const retryAfter = retryAfterSeconds(d);
  return {
    type: REDUCED_CAPACITY_TYPE,
    title: "Request cannot be satisfied due to temporary server capacity constraints",
    status: 503,
    detail: `The server is at its concurrency limit (${d.limit} in flight for this priority); retry in ${retryAfter} s.`,
    "violated-policies": violatedPolicies(d),
    retryAfter,
  };
}

/**
 * The body of a 503 sent when the counter store failed and the policy fails closed
 * (`onStoreError: "deny"`): the client exceeded nothing, the server cannot check.
 */
export function storeUnavailableProblem(d: Decision): ProblemDetails {
  return {
    type: REDUCED_CAPACITY_TYPE,
    title: "Request cannot be satisfied due to temporary server capacity constraints",
    status: 503,
    detail:
      "The rate limiter cannot reach its store and is configured to deny requests until it can.",
    "violated-policies": d.rules.map((_, i) => ruleItemName(d, i)),
  };
}

/** A problem details object (RFC 9457) for a request the middleware could not decide. */
export interface ServerErrorProblem {
  /** `about:blank`: the problem is the status itself. */
  readonly type: "about:blank";
  /** The status's reason phrase. */
  readonly title: "Internal Server Error";
  /** 500. */
  readonly status: 500;
  /** Which function failed, never its error (the server's log has it). */
  readonly detail: string;
}

/**
 * The body of a 500 sent when a function of the middleware's options (key, cost, skip, limiter)
 * threw or gave an invalid value. It names the function, never the error, whose message may
 * hold what a client must not see; `onError` (default `console.error`) has the error itself.
 */
export function middlewareErrorProblem(stage: MiddlewareStage): ServerErrorProblem {
  const what =
    stage === "decision"
      ? "the limiter refused the key or cost it was given"
      : `its ${stage} function failed`;
  return {
    type: "about:blank",
    title: "Internal Server Error",
    status: 500,
    detail: `The rate limiter could not decide on this request: ${what}. The server's log has the error.`,
  };
}

/** A problem details object (RFC 9457) for a request the middleware could not identify. */
export interface BadRequestProblem {
  /** `about:blank`: the problem is the status itself. */
  readonly type: "about:blank";
  /** The status's reason phrase. */
  readonly title: "Bad Request";
  /** 400. */
  readonly status: 400;
  /** What the key function returned, by kind only (never its value). */
  readonly detail: string;
}

/**
 * The body of a 400 sent when the key function returned something other than a string,
 * `undefined` or `null`: what the client sent decides that (`?k=a&k=b` is an array in Express,
 * Fastify and Koa; `?k[x]=1` an object with Express 4's query parser), so it is the client's
 * request that cannot be identified. Names the kind of the result, never its content.
 */
export function invalidKeyProblem(result: unknown): BadRequestProblem {
  return {
    type: "about:blank",
    title: "Bad Request",
    status: 400,
    detail: `The rate limiter could not identify this request: its key function returned ${kindOf(result)}, not a string (a query parameter sent twice is read as an array, one in brackets as an object).`,
  };
}

/** `an array`, `an object`, `a number`, …: what a value is, without its content. */
function kindOf(v: unknown): string {
  if (Array.isArray(v)) return "an array";
  if (v === null) return "null";
  const t = typeof v;
  return t === "object" ? "an object" : `a ${t}`;
}
