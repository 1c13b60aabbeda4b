/**
 * The framework-free HTTP surface (`sluice/http`, and re-exported by every adapter): header
 * builders, problem bodies, client-IP resolution, key helpers and the shared core.
 */
export {
  HEADER_FORMATS,
  IETF_DRAFT,
  headerBuilders,
  githubHeaders,
  ietfHeaders,
  ratelimitPolicyValue,
  ratelimitValue,
  rateLimitHeaders,
  retryAfterSeconds,
  violatedPolicies,
  ruleItemName,
  ceilSeconds,
} from "./headers.js";
export type { HeaderFormat, HeaderList, HeaderContext } from "./headers.js";
export {
  QUOTA_EXCEEDED_TYPE,
  REDUCED_CAPACITY_TYPE,
  PROBLEM_CONTENT_TYPE,
  quotaExceededProblem,
  storeUnavailableProblem,
  middlewareErrorProblem,
  invalidKeyProblem,
} from "./problem.js";
export type { BadRequestProblem, ProblemDetails, ServerErrorProblem } from "./problem.js";
export {
  NAMED_RANGES,
  parseIp,
  formatIp,
  maskIp,
  parseCidr,
  cidrContains,
  compileTrust,
  resolveClientIp,
  parseForwarded,
  ipIdentity,
} from "./ip.js";
export type {
  ParsedIp,
  Cidr,
  NamedRange,
  TrustProxy,
  TrustFn,
  ProxyHeader,
  IpGrouping,
} from "./ip.js";
export { keys, digest } from "./keys.js";
export type { KeyFn } from "./types.js";
export { RateLimitCore } from "./core.js";
export type { Outcome, RequestInput, Finish } from "./core.js";
export type {
  HttpRequest,
  RequestFn,
  CostFn,
  PriorityFn,
  SkipFn,
  Tier,
  LimiterSelector,
  RateLimitAction,
  DecisionEvent,
  RejectStrategy,
  WaitStrategy,
  DegradeStrategy,
  ShadowStrategy,
  Strategy,
  RateLimitOptions,
  AbortSignalLike,
} from "./types.js";
export type { Clock, Timers } from "../clock.js";
export { MiddlewareError } from "../errors.js";
export type { MiddlewareStage } from "../errors.js";
