/**
 * The middleware's options, validated once into a frozen, fully resolved form by the options
 * helper (../options.ts): every problem is collected and thrown together as one
 * `ValidationError` (`SLUICE_ERR_OPTIONS`) naming each field.
 */
import { type Clock, type Timers, systemClock } from "../clock.js";
import type { Decision } from "../decision.js";
import { type MiddlewareError, ValidationError, type ValidationIssue } from "../errors.js";
import type { Limiter } from "../limiter.js";
import { type Problem, hasShape, option, resolveOptions } from "../options.js";
import { HEADER_FORMATS, type HeaderFormat } from "./headers.js";
import { type Cidr, type ProxyHeader, type TrustFn, compileTrust, parseCidrList } from "./ip.js";
import type { KeyFn } from "./types.js";
import type {
  CostFn,
  DecisionEvent,
  HttpRequest,
  LimiterSelector,
  RateLimitOptions,
  PriorityFn,
  SkipFn,
  Strategy,
} from "./types.js";

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
  readonly priority: PriorityFn<Raw> | undefined;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly grouping: { readonly ipv4Prefix: number; readonly ipv6Prefix: number };
}

/** True for a limiter from `createLimiter` (as opposed to a selector function or a tier). */
export function isLimiter(v: unknown): v is Limiter {
  return typeof v === "object" && hasShape(v, { limit: "function", policy: "object" });
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

/**
 * What a public parser of ip.ts (which throws a `ValidationError` naming `field` and its
 * entries) answers, as a field's check answers: the value, or its problems inside the field.
 */
function parsedAs<T>(field: string, parse: () => T): T | Problem {
  try {
    return parse();
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    return {
      problems: err.issues.map((i) => ({
        path: i.path === field ? "" : i.path.slice(field.length + 1),
        message: i.message,
      })),
    };
  }
}

const MUST_BE_A_FUNCTION = "must be a function";

/**
 * Every option of {@link RateLimitOptions} and how it is checked, in the order problems are
 * reported. Typed as a map over the options' keys, so a new option cannot be forgotten here (the
 * map would not compile) and an unknown one is caught at run time.
 */
export const OPTIONS = {
  limiter: option.required<Limiter | LimiterSelector<unknown>>((v) =>
    isLimiter(v) || typeof v === "function"
      ? (v as Limiter | LimiterSelector<unknown>)
      : {
          problem:
            "is required: a limiter from createLimiter(), or a function of the request returning one",
        },
  ),
  key: option.fn<KeyFn<unknown>>(MUST_BE_A_FUNCTION),
  skip: option.fn<SkipFn<unknown>>(MUST_BE_A_FUNCTION),
  onDecision: option.fn<(e: DecisionEvent<unknown>) => void>(MUST_BE_A_FUNCTION),
  onError: option.fn<(error: MiddlewareError, req: unknown) => void>(
    MUST_BE_A_FUNCTION,
    defaultErrorLog,
  ),
  cost: option.fn<CostFn<unknown>>(MUST_BE_A_FUNCTION),
  priority: option.fn<PriorityFn<unknown>>(MUST_BE_A_FUNCTION),
  clock: option.fn<Clock>(MUST_BE_A_FUNCTION, systemClock),
  timers: option.timers(),
  headers: option.oneOf(
    [...HEADER_FORMATS, false],
    "both",
    `must be one of ${HEADER_FORMATS.join(", ")} or false`,
  ),
  proxyHeader: option.oneOf(
    ["x-forwarded-for", "forwarded"],
    "x-forwarded-for",
    'must be "x-forwarded-for" or "forwarded"',
  ),
  countOnly: option.oneOf(["failed", "successful"], undefined, 'must be "failed" or "successful"'),
  ipv4Prefix: option.int(0, 32, 32, "must be a whole number 0–32"),
  ipv6Prefix: option.int(0, 64, 128, "must be a whole number 0–128"),
  strategy: option.custom(strategyOf, { type: "reject", body: undefined }),
  trustProxy: option.custom<TrustFn>(
    (v) => parsedAs("trustProxy", () => compileTrust(v as Parameters<typeof compileTrust>[0])),
    () => false,
  ),
  allowList: option.custom<readonly Cidr[]>(
    (v) =>
      Array.isArray(v)
        ? parsedAs("allowList", () => parseCidrList(v as string[], "allowList"))
        : { problem: "must be a list of IPs, CIDRs or names (loopback, linklocal, uniquelocal)" },
    [],
  ),
} satisfies { readonly [K in keyof Required<RateLimitOptions>]: unknown };

/** Validates the middleware's options; throws a `ValidationError` listing every problem. */
export function resolveRateLimitOptions<Raw, Fallback>(
  options: RateLimitOptions<Raw, Fallback>,
): ResolvedOptions<Raw, Fallback> {
  const o = resolveOptions("Invalid rateLimit options", OPTIONS, options, {
    notAnObject: "must be an object with at least `limiter`",
    across: (r, fail) => {
      if (
        isLimiter(r.limiter) &&
        r.limiter.policy.algorithm === "concurrency" &&
        r.countOnly !== undefined
      )
        fail(
          "countOnly",
          "does not apply to a concurrency policy (its slots are released when the response ends)",
        );
    },
  });
  const limiter = o.limiter;
  return Object.freeze({
    selector: (isLimiter(limiter) ? () => limiter : limiter) as LimiterSelector<Raw>,
    key: o.key,
    headers: o.headers,
    trust: o.trustProxy,
    proxyHeader: o.proxyHeader,
    strategy: o.strategy as ResolvedStrategy<Raw, Fallback>,
    skip: o.skip,
    allow: o.allowList,
    countOnly: o.countOnly,
    onDecision: o.onDecision,
    onError: o.onError,
    cost: o.cost,
    priority: o.priority,
    clock: o.clock,
    timers: o.timers,
    grouping: Object.freeze({ ipv4Prefix: o.ipv4Prefix, ipv6Prefix: o.ipv6Prefix }),
  });
}

/** The `strategy` option with its defaults filled in, or its problems (paths inside it). */
function strategyOf(input: unknown): ResolvedStrategy<unknown, unknown> | Problem {
  const s = input as Strategy<unknown, unknown>;
  if (s === "reject") return { type: "reject", body: undefined };
  if (s === "shadow") return { type: "shadow", onDeny: defaultShadowLog };
  if (typeof s !== "object" || s === null)
    return {
      problem:
        'must be "reject", "shadow", or an object with type reject | wait | degrade | shadow',
    };
  const problems: ValidationIssue[] = [];
  const fail = (path: string, message: string) => problems.push({ path, message });
  let resolved: ResolvedStrategy<unknown, unknown>;
  switch (s.type) {
    case "reject":
      if (s.body !== undefined && typeof s.body !== "function") fail("body", MUST_BE_A_FUNCTION);
      resolved = { type: "reject", body: s.body };
      break;
    case "shadow":
      if (s.onDeny !== undefined && typeof s.onDeny !== "function")
        fail("onDeny", MUST_BE_A_FUNCTION);
      resolved = { type: "shadow", onDeny: s.onDeny ?? defaultShadowLog };
      break;
    case "degrade":
      if (typeof s.fallback !== "function")
        fail("fallback", "must be a function (the fallback handler)");
      resolved = { type: "degrade", fallback: s.fallback };
      break;
    case "wait": {
      const maxQueue = s.maxQueue ?? 1000;
      if (typeof s.maxWaitMs !== "number" || !Number.isFinite(s.maxWaitMs) || s.maxWaitMs <= 0)
        fail("maxWaitMs", `must be a positive number of ms (got ${String(s.maxWaitMs)})`);
      if (!Number.isInteger(maxQueue) || maxQueue < 1)
        fail("maxQueue", `must be a positive integer (got ${String(maxQueue)})`);
      resolved = { type: "wait", maxWaitMs: s.maxWaitMs, maxQueue };
      break;
    }
    default:
      return { problems: [{ path: "type", message: "must be reject, wait, degrade or shadow" }] };
  }
  return problems.length > 0 ? { problems } : resolved;
}
