/**
 * The framework-free types of the HTTP middleware. Every adapter turns its request into an
 * {@link HttpRequest} and shares one core ({@link RateLimitCore}).
 */
import type { Clock, Timers } from "../clock.js";
import type { Decision } from "../decision.js";
import type { MiddlewareError } from "../errors.js";
import type { Limiter } from "../limiter.js";
import type { HeaderFormat } from "./headers.js";
import type { IpGrouping, ProxyHeader, TrustProxy } from "./ip.js";

/**
 * A request as the core sees it, whatever the framework: the second argument of every request
 * function of the options (`key`, `skip`, `cost`, `limiter`, …), after the framework's own request.
 */
export interface HttpRequest<Raw = unknown> {
  /** `GET`, `POST`, … */
  readonly method: string;
  /** The path, without the query string. */
  readonly path: string;
  /** The route pattern when the framework knows it (`/users/:id`), else `undefined`. */
  readonly route: string | undefined;
  /** A request header (case-insensitive); repeated headers joined with `, `. */
  header(name: string): string | undefined;
  /**
   * The client address after the trusted-proxy walk, grouped by prefix (`203.0.113.7`,
   * `2001:db8:1:2::/64`); `unknown` when the server gave no peer address.
   */
  readonly ip: string;
  /** The client address after the trusted-proxy walk, in canonical form but not grouped; `undefined` when unknown. */
  readonly address: string | undefined;
  /** The socket's peer address as the server reported it. */
  readonly peer: string | undefined;
  /** The framework's own request (Express `req`, Koa `ctx`, Hono `c`, Fastify `request`, node `req`). */
  readonly raw: Raw;
}

/**
 * A function of the request, as every request callback of the options is: `req` is the
 * framework's own request (Express `req`, Fastify `request`, Koa `ctx`, Hono `c`, node:http
 * `req`), `http` the same request as sluice sees it (the client IP after the trusted-proxy walk,
 * the route pattern, headers).
 */
export type RequestFn<Raw, T> = (req: Raw, http: HttpRequest<Raw>) => T | Promise<T>;

/**
 * Maps a request to the identifier it is counted against. It receives the framework's own
 * request first (Express `req`, Fastify `request`, Koa `ctx`, Hono `c`, node:http `req`: write
 * it as you would for that framework) and sluice's framework-free view of it second (the client
 * IP after the trusted-proxy walk, the route pattern, headers). `undefined` or `""` means "no
 * identity here": the request is then counted against its client IP (never let through
 * unlimited, or leaving out an API key would escape the limit). Helpers for the common
 * identities: `keys` (./keys.ts).
 */
export type KeyFn<Raw = unknown> = (
  req: Raw,
  http: HttpRequest<Raw>,
) => string | undefined | Promise<string | undefined>;

/** Units a request costs: a positive integer no larger than the policy's capacity. */
export type CostFn<Raw = unknown> = RequestFn<Raw, number>;

/** A request's priority tier under an adaptive concurrency policy: an integer 0–3. */
export type PriorityFn<Raw = unknown> = RequestFn<Raw, number>;

/** True to leave a request unlimited (no decision, no headers). */
export type SkipFn<Raw = unknown> = RequestFn<Raw, boolean>;

/** A limiter chosen for one request, with an optional key function that overrides the middleware's. */
export interface Tier<Raw = unknown> {
  /** The limiter for this request. */
  readonly limiter: Limiter;
  /** The key for this tier (e.g. the user id for authenticated callers). Default: the middleware's `key`. */
  readonly key?: KeyFn<Raw>;
  /** The cost for this tier. Default: the middleware's `cost`. */
  readonly cost?: CostFn<Raw>;
}

/**
 * Chooses a limiter per request (tiers, per-route policies): return a limiter, a {@link Tier},
 * or `undefined` to leave the request unlimited.
 */
export type LimiterSelector<Raw = unknown> = RequestFn<Raw, Limiter | Tier<Raw> | undefined>;

/** What the middleware did with a request; passed to `onDecision`. */
export type RateLimitAction =
  /** Allowed at once. */
  | "allowed"
  /** Allowed after waiting in the key's queue (`wait` strategy). */
  | "waited"
  /** Denied with 429 (or 503 when the store failed and the policy fails closed). */
  | "rejected"
  /** Denied and handed to the fallback (`degrade` strategy). */
  | "degraded"
  /** Would have been denied, let through (`shadow` strategy, or a policy in shadow mode). */
  | "shadowed"
  /** The client disconnected while waiting. */
  | "aborted";

/** Everything known about one decision, for logs and metrics. */
export interface DecisionEvent<Raw = unknown> {
  /** What the middleware did. */
  readonly action: RateLimitAction;
  /** The limiter's decision (the last one, after waiting). */
  readonly decision: Decision;
  /** The key the request was counted against. */
  readonly key: string;
  /**
   * Time spent in the `wait` strategy's line, ms, by the middleware's `clock`: until the request
   * passed, was refused or its client left. 0 for a request that never joined a line.
   */
  readonly waitedMs: number;
  /** The request. */
  readonly request: HttpRequest<Raw>;
}

/** Respond 429 with an `application/problem+json` body (the default). */
export interface RejectStrategy<Raw = unknown> {
  readonly type: "reject";
  /** Replace the problem details object (serialised as JSON; a string is sent as text). Headers and status stay. */
  readonly body?: (decision: Decision, req: Raw, http: HttpRequest<Raw>) => unknown;
}

/** Hold the request until it may pass, in arrival order per key; reject when that would take longer than `maxWaitMs`. */
export interface WaitStrategy {
  readonly type: "wait";
  /** Longest time a request may be held, ms. A request whose wait is known to exceed it is rejected at once. */
  readonly maxWaitMs: number;
  /** Most requests queued per key (and limiter); more are rejected at once. Default 1000. */
  readonly maxQueue?: number;
}

/** Hand denied requests to a fallback (a cached or cheaper response). `Fallback` is the adapter's handler type. */
export interface DegradeStrategy<Fallback> {
  readonly type: "degrade";
  /** Serves the denied request; the rate-limit headers are already set (without `Retry-After`). */
  readonly fallback: Fallback;
}

/** Let denied requests pass; report them to `onDeny` (default: one JSON line on `console.warn`). */
export interface ShadowStrategy<Raw = unknown> {
  readonly type: "shadow";
  /** Called for each request that would have been denied. */
  readonly onDeny?: (event: DecisionEvent<Raw>) => void;
}

/** What to do with a request over its limit. A string is the strategy with its defaults. */
export type Strategy<Raw = unknown, Fallback = never> =
  | "reject"
  | "shadow"
  | RejectStrategy<Raw>
  | WaitStrategy
  | DegradeStrategy<Fallback>
  | ShadowStrategy<Raw>;

/** Options shared by every adapter. `Raw` is the framework's request, `Fallback` its handler type for `degrade`. */
export interface RateLimitOptions<Raw = unknown, Fallback = never> extends IpGrouping {
  /** The limiter (from `createLimiter`), or a function choosing one per request (tiers, per-route policies). */
  limiter: Limiter | LimiterSelector<Raw>;
  /**
   * Who the request counts against, from the framework's request: `(req) => req.user?.id`
   * (the framework-free view is the second argument). Default: the client IP (`keys.ip()`).
   */
  key?: KeyFn<Raw>;
  /** Which headers to send: `"github"`, `"ietf"`, `"both"` (default) or `false`. `Retry-After` is sent on every 429 regardless. */
  headers?: HeaderFormat | false;
  /** Which peers are proxies whose forwarding header is believed. Default `false`. See {@link TrustProxy}. */
  trustProxy?: TrustProxy;
  /** The forwarding header your proxies write: `x-forwarded-for` (default) or `forwarded` (RFC 7239). The other is ignored. */
  proxyHeader?: ProxyHeader;
  /** What to do over the limit. Default `"reject"`. */
  strategy?: Strategy<Raw, Fallback>;
  /** Leave matching requests unlimited (no decision, no headers). */
  skip?: SkipFn<Raw>;
  /** Client IPs/CIDRs (or `loopback`, `linklocal`, `uniquelocal`) that are never limited. */
  allowList?: readonly string[];
  /**
   * Count only some responses by refunding the others once the response is done:
   * `"failed"` keeps status ≥ 400 (and aborted responses), `"successful"` keeps status < 400.
   * Not available for concurrency policies.
   */
  countOnly?: "failed" | "successful";
  /** Called after every decision (logs, metrics). Exceptions thrown by it are ignored. */
  onDecision?: (event: DecisionEvent<Raw>) => void;
  /** Units a request costs (a positive integer). Default 1. */
  cost?: CostFn<Raw>;
  /**
   * The request's priority tier under an adaptive concurrency policy: 0 (critical), 1 (the
   * default), 2 (degradable), 3 (sheddable); lower tiers are shed first (docs/adaptive.md).
   * Ignored by other policies.
   */
  priority?: PriorityFn<Raw>;
  /**
   * Hears every request the middleware could not decide because one of the functions above
   * (`key`, `cost`, `skip`, `limiter`, `strategy.body`) threw or gave an invalid value: a
   * {@link MiddlewareError} (`SLUICE_ERR_MIDDLEWARE`) naming the function, with the original
   * error as its `cause`. The request is answered 500 with a problem+json body either way —
   * except a key function's result that is not a string (`?k=a&k=b` read as an array): that is
   * what the client sent, answered 400, and heard at most once a minute per route (by `clock`),
   * the message telling how many were not. Default: `console.error` with the stack for a 500,
   * one line on `console.warn` for a 400. Exceptions thrown by it are ignored.
   */
  onError?: (error: MiddlewareError, req: Raw) => void;
  /**
   * Epoch-ms clock for `X-RateLimit-Reset`, `waitedMs` and the `wait` strategy's deadlines and
   * retry times. Default `Date.now`. Inject the store's clock in tests.
   */
  clock?: Clock;
  /**
   * The timers the `wait` strategy sleeps on. Default the runtime's `setTimeout`/`clearTimeout`.
   * Inject them with `clock` in tests, and a wait runs without real time passing.
   */
  timers?: Timers;
}

/**
 * What the middleware needs of an `AbortSignal` (the web standard one and Node's both fit):
 * the client went away.
 */
export interface AbortSignalLike {
  /** True once aborted. */
  readonly aborted: boolean;
  /** Registers a listener for the `abort` event. */
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  /** Removes a listener registered with {@link AbortSignalLike.addEventListener}. */
  removeEventListener(type: "abort", listener: () => void): void;
}
