/**
 * sluice: exact, fast rate limiting for Node.
 * The public surface; everything else is internal.
 */
export { createLimiter } from "./limiter.js";
export type {
  AcquireOptions,
  AdaptiveState,
  Limiter,
  LimiterOptions,
  LimitOptions,
  Lease,
  NearLimitEvent,
  OverrideInput,
  Permit,
  Reservation,
  SetCountOptions,
  SyncLimiter,
} from "./limiter.js";
export * from "./policy-exports.js";
export type { ReleaseOutcome } from "./adaptive.js";
export {
  RATELIMIT_ATTRIBUTES,
  RATELIMIT_METRICS,
  TIMED_PER_SECOND,
  annotateSpan,
  useOpenTelemetry,
} from "./telemetry.js";
export type {
  MeterLike,
  ObservableLike,
  OpenTelemetryApi,
  SpanLike,
  TelemetryAttributes,
} from "./telemetry.js";
export type { Decision, DecisionReason, RuleDecision } from "./decision.js";
export type { AnsweredBy, DraftExplanation, Explanation, RuleExplanation } from "./explain.js";
export type { LocalAnswer, Store, StoreDecision, StoreRequest, SyncStore } from "./store.js";
export { isSyncStore } from "./store.js";
export { memoryStore, MemoryStore } from "./stores/memory.js";
export type { MemoryStoreOptions } from "./stores/memory.js";
export { ALGORITHMS, algorithms } from "./algorithms/index.js";
export type {
  AlgorithmName,
  Algorithm,
  ResolvedRule,
  RuleOutcome,
  Step,
  Adjusted,
} from "./algorithms/index.js";
export type { InPlaceAlgorithm } from "./algorithms/types.js";
export { parseDuration, formatDuration } from "./duration.js";
export type { Duration } from "./duration.js";
export {
  ERROR_CODES,
  SluiceError,
  ValidationError,
  StoreError,
  MiddlewareError,
  isSluiceError,
} from "./errors.js";
export type { ErrorCode, ValidationIssue, MiddlewareStage } from "./errors.js";
export type { Clock, Timers } from "./clock.js";
export type { Logger } from "./logger.js";
export { redisStore, RedisStore } from "./stores/redis.js";
export type {
  RedisStoreOptions,
  RedisClient,
  RedisClientLike,
  NodeRedisClientLike,
  NodeRedisClusterLike,
  NodeRedisSentinelLike,
} from "./stores/redis.js";
export type { AllotmentCounters, LeaseCounters } from "./stores/redis-allotments.js";
export { multiRegionStore, MultiRegionStore } from "./stores/multi-region.js";
export type {
  MultiRegionMode,
  MultiRegionStoreOptions,
  RegionStats,
} from "./stores/multi-region.js";
export { connectPolicies } from "./policies/client.js";
export type {
  ConnectPoliciesOptions,
  PolicyClient,
  PolicyClientStatus,
  PolicyUpdate,
  PolicyFetch,
  PolicyFetchInit,
  PolicyFetchResponse,
  RuntimeAbortSignal,
} from "./policies/types.js";
export { fileCache } from "./policies/file-cache.js";
export type { PolicyCache } from "./policies/file-cache.js";
export { VERSION } from "./version.js";
