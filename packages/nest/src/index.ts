/**
 * `@sluice/nest`: NestJS-native rate limiting over sluice — `SluiceModule`, the decorators
 * (`@RateLimit`, `@SkipRateLimit`, `@RateLimitKey`, `@RateLimitCost`) and one guard for HTTP
 * (Express, Fastify), GraphQL (queries, mutations, subscriptions), WebSocket gateways and
 * microservices. docs/nest.md has the guide and the way over from @nestjs/throttler.
 */
export { SluiceModule } from "./module.js";
export { SluiceGuard } from "./guard.js";
export { SluiceInterceptor } from "./settle.js";
export { SluiceLimits } from "./limits.js";
export { SluiceWsExceptionFilter } from "./ws-filter.js";
export { SluiceHttpExceptionFilter } from "./http-filter.js";
export { RateLimit, RateLimitCost, RateLimitKey, SkipRateLimit } from "./decorators.js";
export type { ClassOrMethodDecorator } from "./decorators.js";
export { RateLimitedException } from "./contexts.js";
export type { DenialNumbers } from "./contexts.js";
export type { Charge, CombinedDecision } from "./decide.js";
export { SLUICE_OPTIONS, DEFAULT_ERROR_CODE, DEFAULT_MAX_KEYS } from "./constants.js";
export type {
  ContextKind,
  CostFunction,
  DeniedEvent,
  KeyFunction,
  PolicySource,
  RateLimitCostOptions,
  RateLimitOptions,
  SettleFunction,
  SluiceModuleAsyncOptions,
  SluiceModuleOptions,
} from "./types.js";
