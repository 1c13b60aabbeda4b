/**
 * The package's public types: the module's options and what the decorators take.
 */
import type { ExecutionContext } from "@nestjs/common";
import type { Clock, Decision, Policy, PolicyClient, PolicyInput, Store } from "sluice";
import type { HeaderFormat } from "sluice/http";

/**
 * Whom a request counts for (the identifier of `limiter.limit(key)`), from Nest's execution
 * context: a user id, an API key, a tenant. `undefined` (or `""`) falls back to the next
 * source: the decorator's, then `@RateLimitKey`, the module's `key`, then the context's own
 * identity (the client IP for HTTP and GraphQL over HTTP, the connection for WebSockets and
 * GraphQL subscriptions, the pattern and identity field for microservices).
 */
export type KeyFunction = (
  context: ExecutionContext,
) => string | undefined | Promise<string | undefined>;

/** Units a request charges: a positive integer, at most the policy's capacity. */
export type CostFunction = (context: ExecutionContext) => number | Promise<number>;

/**
 * The actual cost of a request once its handler answered (`value`: what it returned or
 * emitted last): the difference to the estimate charged by the guard is refunded, or charged as
 * debt that later requests wait out (sluice's reserve/settle).
 */
export type SettleFunction = (value: unknown, context: ExecutionContext) => number;

/** The second argument of `@RateLimit`. */
export interface RateLimitOptions {
  /** Whom this policy counts the request for (before `@RateLimitKey` and the module's `key`). */
  key?: KeyFunction;
  /** Units charged to this policy: a number or a function (before `@RateLimitCost`). Default 1. */
  cost?: number | CostFunction;
}

/** The second argument of `@RateLimitCost`. */
export interface RateLimitCostOptions {
  /**
   * The actual cost once the handler answered; the guard's charge was the estimate. Needs the
   * module's interceptor, which `SluiceModule` registers globally (`APP_INTERCEPTOR`) unless
   * `guard: "manual"` — then add `@UseInterceptors(SluiceInterceptor)` beside the guard.
   */
  settle?: SettleFunction;
}

/** What every context type of Nest is to the guard. */
export type ContextKind = "http" | "graphql" | "ws" | "rpc";

/**
 * The policies a module enforces: a list from code (each a policy input, validated, or a policy
 * from `definePolicy`), or the client of `connectPolicies` — the sluice service's policies,
 * which change without a deploy.
 */
export type PolicySource = ReadonlyArray<PolicyInput | Policy> | PolicyClient;

/** Options of `SluiceModule.forRoot` (and what `forRootAsync`'s factory returns). */
export interface SluiceModuleOptions {
  /** The policies, by name: from code, or `await connectPolicies({ … })`. */
  policies: PolicySource;
  /**
   * Where counters live (e.g. `redisStore({ client })` to share limits among instances). Default:
   * a memory store of this module capped at `maxKeys` keys. Policies from `connectPolicies` use
   * the client's own store; this one holds the policies given inline to `@RateLimit`.
   */
  store?: Store;
  /**
   * The default memory store's cap on keys held at once, over all policies: memory stays
   * bounded whatever the number of clients (when full, the store makes room as
   * `memoryStore`'s `maxKeys` says). Default 100,000 (about 10–35 MB). Only without `store`.
   */
  maxKeys?: number;
  /** The default memory store's clock (epoch ms), for tests. Only without `store`. */
  clock?: Clock;
  /**
   * Policies every handler the guard runs on is limited by, besides its own `@RateLimit`
   * (as @nestjs/throttler's throttlers are). `@SkipRateLimit()` skips them all,
   * `@SkipRateLimit("name")` one. Default: none — only handlers with `@RateLimit` are limited.
   */
  defaultPolicies?: readonly string[];
  /**
   * Whom requests count for when neither the decorator nor `@RateLimitKey` says (see
   * {@link KeyFunction}). Default: the context's own identity.
   */
  key?: KeyFunction;
  /**
   * The rate-limit headers of HTTP answers (sluice's): `"ietf"` (`RateLimit-Policy`,
   * `RateLimit`), `"github"` (`X-RateLimit-*`), `"both"`, or `false` for none. `Retry-After` is
   * sent with every 429 regardless. Default `"ietf"`.
   */
  headers?: HeaderFormat | false;
  /**
   * Where a microservice request's caller is named: a field of its gRPC metadata, of its
   * headers (NATS, RabbitMQ, Kafka), or of its payload (TCP, which has neither), read in that
   * order. Default `"clientId"`. Without it, a TCP caller counts by its address.
   */
  rpcIdentity?: string;
  /**
   * The `code` of a denial outside HTTP: GraphQL's `extensions.code`, the `code` of a
   * `WsException`'s or `RpcException`'s error. Default `"RATE_LIMITED"`.
   */
  errorCode?: string;
  /**
   * `"global"` (default): the guard and the settle interceptor run on every handler of the app
   * (`APP_GUARD`, `APP_INTERCEPTOR`). `"manual"`: only where `@UseGuards(SluiceGuard)` (and
   * `@UseInterceptors(SluiceInterceptor)`) say.
   */
  guard?: "global" | "manual";
  /** Told when the guard denies a request (for logs and metrics). */
  onDenied?: (event: DeniedEvent) => void;
}

/** What `onDenied` is told. */
export interface DeniedEvent {
  /** The context the request came through. */
  readonly kind: ContextKind;
  /** `Controller.handler` (or `Resolver.field`, `Gateway.handler`). */
  readonly handler: string;
  /** The denials (each policy that refused), the one with the longest wait first. */
  readonly decisions: readonly Decision[];
}

/** Options of `SluiceModule.forRootAsync`. */
export interface SluiceModuleAsyncOptions {
  /** Modules whose providers the factory needs (e.g. `ConfigModule`). */
  imports?: ReadonlyArray<unknown>;
  /** Makes the options; may be async (e.g. awaits `connectPolicies`). */
  useFactory: (...args: never[]) => SluiceModuleOptions | Promise<SluiceModuleOptions>;
  /** The providers handed to `useFactory`, in order. */
  inject?: ReadonlyArray<unknown>;
  /** As in `forRoot`: `"manual"` registers neither the guard nor the interceptor globally. */
  guard?: "global" | "manual";
}
