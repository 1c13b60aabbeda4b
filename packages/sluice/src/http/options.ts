/**
 * The middleware's options, validated once into a frozen, fully resolved form. Every problem is
 * collected and thrown together as one `ValidationError` (`SLUICE_ERR_OPTIONS`) naming each field.
 */
import {
  type Clock,
  TIMERS_MESSAGE,
  type Timers,
  isTimers,
  systemClock,
  systemTimers,
} from "../clock.js";
import type { Decision } from "../decision.js";
import { type MiddlewareError, ValidationError, type ValidationIssue } from "../errors.js";
import type { Limiter } from "../limiter.js";
import { HEADER_FORMATS, type HeaderFormat } from "./headers.js";
import { type Cidr, type ProxyHeader, type TrustFn, compileTrust, parseCidrList } from "./ip.js";
import type { KeyFn } from "./types.js";
import type {
  CostFn,
  DecisionEvent,
  HttpRequest,
  LimiterSelector,
  RateLimitOptions,
  SkipFn,
  Strategy,
} from "./types.js";

/**
 * Every option of {@link RateLimitOptions}. Typed as a map over the options' keys, so a new option
 * cannot be forgotten here (the map would not compile) and an unknown one is caught at run time.
 */
export const OPTION_KEYS: { readonly [K in keyof Required<RateLimitOptions>]: true } = {
  limiter: true,
  key: true,
  headers: true,
  trustProxy: true,
  proxyHeader: true,
  strategy: true,
  skip: true,
  allowList: true,
  countOnly: true,
  onDecision: true,
  onError: true,
  cost: true,
  clock: true,
  timers: true,
  ipv4Prefix: true,
  ipv6Prefix: true,
};

/** The strategy with its defaults filled in. */
export type ResolvedStrategy<Raw, Fallback> =
  | {
      readonly type: "reject";
      readonly body: ((d: Decision, req: Raw, http: HttpRequest<Raw>) => unknown) | undefined;
    }
  | { readonly type: "wait"; readonly maxWaitMs: number; readonly maxQueue: number }
  | { readonly type: "degrade"; readonly fallback: Fallback }
  | { readonly type: "shadow"; readonly onDeny: (event: DecisionEvent<Raw>) => void };

/** The middleware's options after validation: every default filled in, frozen. */
export interface ResolvedOptions<Raw, Fallback> {
  readonly selector: LimiterSelector<Raw>;
  readonly key: KeyFn<Raw> | undefined;
  readonly headers: HeaderFormat | false;
  readonly trust: TrustFn;
  readonly proxyHeader: ProxyHeader;
  readonly strategy: ResolvedStrategy<Raw, Fallback>;
  readonly skip: SkipFn<Raw> | undefined;
  readonly allow: readonly Cidr[];
  readonly countOnly: "failed" | "successful" | undefined;
  readonly onDecision: ((e: DecisionEvent<Raw>) => void) | undefined;
  readonly onError: (error: MiddlewareError, req: Raw) => void;
  readonly cost: CostFn<Raw> | undefined;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly grouping: { readonly ipv4Prefix: number; readonly ipv6Prefix: number };
}

/** True for a limiter from `createLimiter` (as opposed to a selector function or a tier). */
export function isLimiter(v: unknown): v is Limiter {
  return (
    typeof v === "object" &&
    v !== null &&
    typeof (v as Limiter).limit === "function" &&
    typeof (v as Limiter).policy === "object"
  );
}

function defaultShadowLog(e: DecisionEvent): void {
  console.warn(
    JSON.stringify({
      msg: "sluice: request would have been rate limited (shadow)",
      policy: e.decision.policy,
      key: e.key,
      retryAfterMs: e.decision.retryAfterMs,
      method: e.request.method,
      path: e.request.path,
    }),
  );
}

/**
 * The default `onError`: for a 500, the error, its cause and stack on stderr, as a server logs
 * one; for a 400 (what the client sent), one line, as the client's mistake needs no stack.
 */
function defaultErrorLog(error: MiddlewareError): void {
  if (error.status === 400) console.warn(`sluice: ${error.message}`);
  else console.error("sluice: rate limiting failed, answered 500:", error);
}

/** Validates the middleware's options; throws a `ValidationError` listing every problem. */
export function resolveOptions<Raw, Fallback>(
  options: RateLimitOptions<Raw, Fallback>,
): ResolvedOptions<Raw, Fallback> {
  const issues: ValidationIssue[] = [];
  const fail = (path: string, message: string) => issues.push({ path, message });
  if (typeof options !== "object" || options === null) {
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid rateLimit options", [
      { path: "", message: "must be an object with at least `limiter`" },
    ]);
  }
  const unknown = Object.keys(options).filter((k) => !Object.hasOwn(OPTION_KEYS, k));
  if (unknown.length > 0) fail("", `unknown option(s): ${unknown.join(", ")}`);
  const o = options;
  let selector: LimiterSelector<Raw>;
  if (isLimiter(o.limiter)) {
    const l = o.limiter;
    selector = () => l;
  } else if (typeof o.limiter === "function") {
    selector = o.limiter;
  } else {
    selector = () => undefined;
    fail(
      "limiter",
      "is required: a limiter from createLimiter(), or a function of the request returning one",
    );
  }
  for (const f of ["key", "skip", "onDecision", "onError", "cost", "clock"] as const) {
    if (o[f] !== undefined && typeof o[f] !== "function") fail(f, "must be a function");
  }
  const timers = o.timers ?? systemTimers;
  if (!isTimers(timers)) fail("timers", TIMERS_MESSAGE);
  const headers = o.headers ?? "both";
  if (headers !== false && !(HEADER_FORMATS as readonly unknown[]).includes(headers))
    fail("headers", `must be one of ${HEADER_FORMATS.join(", ")} or false`);
  if (
    o.proxyHeader !== undefined &&
    o.proxyHeader !== "x-forwarded-for" &&
    o.proxyHeader !== "forwarded"
  ) {
    fail("proxyHeader", 'must be "x-forwarded-for" or "forwarded"');
  }
  if (o.countOnly !== undefined && o.countOnly !== "failed" && o.countOnly !== "successful")
    fail("countOnly", 'must be "failed" or "successful"');
  const v4 = o.ipv4Prefix ?? 32;
  const v6 = o.ipv6Prefix ?? 64;
  if (!Number.isInteger(v4) || v4 < 0 || v4 > 32)
    fail("ipv4Prefix", `must be a whole number 0–32 (got ${String(v4)})`);
  if (!Number.isInteger(v6) || v6 < 0 || v6 > 128)
    fail("ipv6Prefix", `must be a whole number 0–128 (got ${String(v6)})`);
  const strategy = resolveStrategy(o.strategy, fail);
  if (
    isLimiter(o.limiter) &&
    o.limiter.policy.algorithm === "concurrency" &&
    o.countOnly !== undefined
  ) {
    fail(
      "countOnly",
      "does not apply to a concurrency policy (its slots are released when the response ends)",
    );
  }
  let trust: TrustFn = () => false;
  let allow: Cidr[] = [];
  try {
    trust = compileTrust(o.trustProxy);
    allow = o.allowList === undefined ? [] : parseCidrList(o.allowList, "allowList");
  } catch (err) {
    if (err instanceof ValidationError) issues.push(...err.issues);
    else throw err;
  }
  if (issues.length > 0)
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid rateLimit options", issues);
  return Object.freeze({
    selector,
    key: o.key,
    headers,
    trust,
    proxyHeader: o.proxyHeader ?? "x-forwarded-for",
    strategy,
    skip: o.skip,
    allow,
    countOnly: o.countOnly,
    onDecision: o.onDecision,
    onError: o.onError ?? defaultErrorLog,
    cost: o.cost,
    clock: o.clock ?? systemClock,
    timers,
    grouping: Object.freeze({ ipv4Prefix: v4, ipv6Prefix: v6 }),
  });
}

function resolveStrategy<Raw, Fallback>(
  input: Strategy<Raw, Fallback> | undefined,
  fail: (path: string, message: string) => void,
): ResolvedStrategy<Raw, Fallback> {
  const s = input ?? "reject";
  if (s === "reject") return { type: "reject", body: undefined };
  if (s === "shadow") return { type: "shadow", onDeny: defaultShadowLog };
  if (typeof s !== "object" || s === null) {
    fail(
      "strategy",
      'must be "reject", "shadow", or an object with type reject | wait | degrade | shadow',
    );
    return { type: "reject", body: undefined };
  }
  switch (s.type) {
    case "reject":
      if (s.body !== undefined && typeof s.body !== "function")
        fail("strategy.body", "must be a function");
      return { type: "reject", body: s.body };
    case "shadow":
      if (s.onDeny !== undefined && typeof s.onDeny !== "function")
        fail("strategy.onDeny", "must be a function");
      return { type: "shadow", onDeny: s.onDeny ?? defaultShadowLog };
    case "degrade":
      if (typeof s.fallback !== "function")
        fail("strategy.fallback", "must be a function (the fallback handler)");
      return { type: "degrade", fallback: s.fallback };
    case "wait": {
      const maxQueue = s.maxQueue ?? 1000;
      if (typeof s.maxWaitMs !== "number" || !Number.isFinite(s.maxWaitMs) || s.maxWaitMs <= 0)
        fail("strategy.maxWaitMs", `must be a positive number of ms (got ${String(s.maxWaitMs)})`);
      if (!Number.isInteger(maxQueue) || maxQueue < 1)
        fail("strategy.maxQueue", `must be a positive integer (got ${String(maxQueue)})`);
      return { type: "wait", maxWaitMs: s.maxWaitMs, maxQueue };
    }
    default:
      fail("strategy.type", "must be reject, wait, degrade or shadow");
      return { type: "reject", body: undefined };
  }
}
