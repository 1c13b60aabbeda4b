/**
 * `ShouldRateLimit`, independent of its transport (gRPC or `POST /json`): each request
 * descriptor is matched in its domain's tree (or takes Envoy's `limit` override), `replaces` and
 * `unlimited` are applied, and every limit left decides through its sluice limiter — the same
 * `createLimiter` and store as every other door of the service. The answer is the reference
 * service's: one status per descriptor in the request's order, OVER_LIMIT overall when any
 * descriptor is over (quota-mode descriptors only when all of them are), plus sluice's
 * rate-limit headers and a problem+json body for Envoy's 429.
 *
 * Each descriptor is decided on its own, as the reference service does: when one is over its
 * limit, the others that were within theirs are still counted. Unlike the reference service, a
 * request over a limit is not counted (a denial consumes nothing in sluice), and a request whose
 * hits can never fit the limit is over it without touching the counter.
 */
import {
  type Decision,
  type Limiter,
  type OnStoreError,
  type Policy,
  type RuleDecision,
  type Store,
  createLimiter,
  policyCapacity,
} from "sluice";
import {
  type HeaderFormat,
  type HeaderList,
  type ProblemDetails,
  quotaExceededProblem,
  rateLimitHeaders,
  retryAfterSeconds,
  storeUnavailableProblem,
  violatedPolicies,
  PROBLEM_CONTENT_TYPE,
} from "sluice/http";
import type { ValidationIssue } from "sluice";
import {
  type CompiledDomain,
  type CompiledLimit,
  type Entry,
  ENVOY_POLICY_PREFIX,
  descriptorIdentifier,
  descriptorPath,
  envoyPolicyName,
  limitPolicy,
  matchDescriptor,
} from "./compile.js";
import { type EnvoyUnit, UNIT_CODES, UNIT_SECONDS } from "./config.js";

/** `RateLimitResponse.Code`. */
export const CODE = Object.freeze({ UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 });
/** The `limit_remaining` of an unlimited descriptor, as the reference service answers it. */
export const MAX_UINT32 = 0xffff_ffff;

/** `envoy.type.v3.RateLimitUnit` (the override's unit; it has no WEEK). */
export const OVERRIDE_UNITS: Readonly<Record<number, EnvoyUnit>> = Object.freeze({
  1: "second",
  2: "minute",
  3: "hour",
  4: "day",
  5: "month",
  6: "year",
});

/** A descriptor of a request. */
export interface RlsDescriptor {
  readonly entries: readonly Entry[];
  /** Envoy's override: it replaces the configured limit. */
  readonly limit?: { readonly requestsPerUnit: number; readonly unit: number } | undefined;
  /** Hits of this descriptor; when set it wins over the request's (0: check, count nothing). */
  readonly hitsAddend?: number | undefined;
}

/** A `RateLimitRequest`. */
export interface RlsRequest {
  readonly domain: string;
  readonly descriptors: readonly RlsDescriptor[];
  /** Hits of the request; 0 means 1. */
  readonly hitsAddend: number;
}

/** `RateLimitResponse.DescriptorStatus`. */
export interface RlsStatus {
  readonly code: number;
  readonly currentLimit?: { requestsPerUnit: number; unit: number; name: string } | undefined;
  readonly limitRemaining: number;
  /** Whole seconds until the window (or the limiter) resets. */
  readonly durationUntilResetS?: number | undefined;
}

/** A `RateLimitResponse`, and what the HTTP door needs to choose its status. */
export interface RlsResponse {
  readonly overallCode: number;
  readonly statuses: readonly RlsStatus[];
  readonly responseHeadersToAdd: HeaderList;
  /** problem+json, when over limit. */
  readonly rawBody: Uint8Array | undefined;
  /** Over limit only because the counter store failed and the limits fail closed (`onStoreError: deny`). */
  readonly failedClosed: boolean;
}

/** A request that cannot be answered as sent: every problem, with its field. */
export class RlsInputError extends Error {
  constructor(readonly issues: readonly ValidationIssue[]) {
    super(`Invalid rate limit request: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`);
    this.name = "RlsInputError";
  }
}

/** What each draft of a domain would have done, counted per request (see {@link LiveEnvoyDraft}). */
export interface EnvoyDraftStats {
  evaluated: number;
  wouldDeny: number;
  wouldDenyNewly: number;
  wouldAllowNewly: number;
}

/** A domain's draft, evaluated in shadow beside the enforced configuration. */
export interface LiveEnvoyDraft {
  readonly id: number;
  readonly compiled: CompiledDomain;
  /** This node's counts not yet added to the shared totals. */
  readonly stats: EnvoyDraftStats;
}

/** A domain as a node serves it. */
export interface LiveEnvoyDomain {
  readonly version: number;
  readonly compiled: CompiledDomain;
  readonly draft: LiveEnvoyDraft | undefined;
}

/** Metrics the service records (labels stay bounded: configured domains and descriptor paths). */
export interface RlsMetrics {
  /** Per descriptor limit: `ok`, `over_limit`, `shadow`, `store_error`, `unlimited`. */
  descriptor(domain: string, path: string, outcome: string): void;
  /** Per request: `ok`, `over_limit`, `invalid`. */
  request(domain: string, code: string): void;
  /** Per request evaluated by a domain's draft: `ok`, `over_limit`. */
  draft(domain: string, code: string): void;
}

/** Options of {@link RateLimitService}. */
export interface RateLimitServiceOptions {
  /** The live domain of a name (from the node's registry). */
  readonly domain: (name: string) => LiveEnvoyDomain | undefined;
  /** The node's counter store (for Envoy's overrides). */
  readonly store: Store;
  /** Rate-limit headers in `response_headers_to_add`: a format of sluice's, or none. */
  readonly headers: HeaderFormat | false;
  /** Now, in epoch ms (headers, and windows when the store cannot be asked). */
  readonly now: () => number;
  readonly metrics?: RlsMetrics | undefined;
  /** Told when a limiter's `onStoreError` decided because the store failed. */
  readonly onStoreError?: ((err: unknown, policy: Policy) => void) | undefined;
  /** Told when a draft could not be evaluated (its answer never changes the response). */
  readonly onDraftError?: ((err: unknown, domain: string) => void) | undefined;
}

/** What one descriptor came to. */
interface Outcome {
  readonly limit: CompiledLimit | undefined;
  readonly status: RlsStatus;
  /** The decision, with the limit's display name as its policy (for headers and bodies). */
  readonly decision: Decision | undefined;
  /** OVER_LIMIT (a shadow limit never is). */
  readonly over: boolean;
  /** Over because the store failed and the limit fails closed. */
  readonly failedClosed: boolean;
}

/** Most Envoy overrides kept as ready limiters (least recently made dropped first). */
const MAX_OVERRIDES = 1000;

/** The reference service's answer for a descriptor without a limit. */
const NO_LIMIT: RlsStatus = Object.freeze({ code: CODE.OK, limitRemaining: 0 });
const UNLIMITED: RlsStatus = Object.freeze({ code: CODE.OK, limitRemaining: MAX_UINT32 });

/** The name a limit shows in headers and problem bodies: its `name`, else its descriptor path. */
export function displayName(limit: CompiledLimit): string {
  return limit.name ?? limit.path;
}

/** Answers `ShouldRateLimit` requests for a node. */
export class RateLimitService {
  private readonly overrides = new Map<string, CompiledLimit>();

  constructor(private readonly options: RateLimitServiceOptions) {}

  /**
   * Decides a request. Throws {@link RlsInputError} for a request that cannot be answered
   * (no domain, no descriptors, an override without a unit); never for a store failure, which
   * each limit's `onStoreError` decides.
   */
  async shouldRateLimit(req: RlsRequest): Promise<RlsResponse> {
    const live = this.options.domain(req.domain);
    const label = live ? req.domain : "(unknown)";
    const issues = checkRequest(req);
    if (issues.length > 0) {
      this.options.metrics?.request(label, "invalid");
      throw new RlsInputError(issues);
    }
    const draft = live?.draft;
    const [response, draftResponse] = await Promise.all([
      this.evaluate(live?.compiled, req, ENVOY_POLICY_PREFIX, true),
      draft
        ? this.evaluate(draft.compiled, req, `sluice.draft.envoy.${draft.id}.`, false).catch(
            (err: unknown) => {
              this.options.onDraftError?.(err, req.domain);
              return undefined;
            },
          )
        : undefined,
    ]);
    this.options.metrics?.request(
      label,
      response.overallCode === CODE.OVER_LIMIT ? "over_limit" : "ok",
    );
    if (draft && draftResponse) {
      const draftDenies = draftResponse.overallCode === CODE.OVER_LIMIT;
      const liveDenies = response.overallCode === CODE.OVER_LIMIT;
      draft.stats.evaluated++;
      if (draftDenies) draft.stats.wouldDeny++;
      if (draftDenies && !liveDenies) draft.stats.wouldDenyNewly++;
      if (!draftDenies && liveDenies) draft.stats.wouldAllowNewly++;
      this.options.metrics?.draft(req.domain, draftDenies ? "over_limit" : "ok");
    }
    return response;
  }

  /** Decides a request against one compiled domain (the enforced one or a draft). */
  private async evaluate(
    domain: CompiledDomain | undefined,
    req: RlsRequest,
    prefix: string,
    record: boolean,
  ): Promise<RlsResponse> {
    const found = req.descriptors.map((d) => this.limitOf(domain, req.domain, d, prefix));
    // `replaces`: every limit found (unlimited ones too) may drop others by name.
    const replaced = new Set<string>();
    for (const f of found) for (const r of f?.limit.replaces ?? []) replaced.add(r);
    const outcomes = await Promise.all(
      req.descriptors.map(async (d, i): Promise<Outcome> => {
        const f = found[i];
        if (!f)
          return {
            limit: undefined,
            status: NO_LIMIT,
            decision: undefined,
            over: false,
            failedClosed: false,
          };
        const limit = f.limit;
        if (limit.unlimited) {
          if (record) this.options.metrics?.descriptor(req.domain, limit.path, "unlimited");
          return {
            limit,
            status: UNLIMITED,
            decision: undefined,
            over: false,
            failedClosed: false,
          };
        }
        if (limit.name !== undefined && replaced.has(limit.name))
          return {
            limit: undefined,
            status: NO_LIMIT,
            decision: undefined,
            over: false,
            failedClosed: false,
          };
        const hits = d.hitsAddend ?? Math.max(1, req.hitsAddend);
        const o = await this.decide(limit, f.identifier, hits);
        if (record) this.options.metrics?.descriptor(req.domain, limit.path, outcomeLabel(o));
        return o;
      }),
    );

    const limited = outcomes.filter((o) => o.limit !== undefined && !o.limit.unlimited);
    const quota = limited.filter((o) => o.limit!.quota);
    const overRate = limited.some((o) => o.over && !o.limit!.quota);
    const overQuota = quota.length > 0 && quota.every((o) => o.over);
    const over = overRate || overQuota;

    // The descriptor closest to its limit: the least remaining, and any over the limit wins
    // (the last one, as the reference service picks it).
    let chosen: Outcome | undefined;
    let least = MAX_UINT32;
    for (const o of outcomes) {
      if (o.decision && o.status.limitRemaining < least) {
        chosen = o;
        least = o.status.limitRemaining;
      }
      if (o.over && !o.limit!.quota) {
        chosen = o;
        least = 0;
      }
    }
    const headers: HeaderList = [];
    if (chosen?.decision && this.options.headers !== false) {
      const d = chosen.decision;
      headers.push(
        ...rateLimitHeaders(this.options.headers, d, {
          nowMs: this.options.now(),
          algorithm: chosen.limit!.algorithm,
        }),
      );
    }
    let rawBody: Uint8Array | undefined;
    let failedClosed = false;
    if (over) {
      const violating = limited.filter((o) => o.over && (overRate ? !o.limit!.quota : true));
      failedClosed = violating.every((o) => o.failedClosed);
      const problem = failedClosed
        ? storeUnavailableProblem(violating[0]!.decision!)
        : overLimitProblem(violating.filter((o) => !o.failedClosed).map((o) => o.decision!));
      if (problem.retryAfter !== undefined)
        headers.push(["Retry-After", String(problem.retryAfter)]);
      headers.push(["Content-Type", PROBLEM_CONTENT_TYPE]);
      rawBody = new TextEncoder().encode(JSON.stringify(problem));
    }
    return {
      overallCode: over ? CODE.OVER_LIMIT : CODE.OK,
      statuses: outcomes.map((o) => o.status),
      responseHeadersToAdd: headers,
      rawBody,
      failedClosed,
    };
  }

  /** The limit of a request descriptor (override or configured) and the identifier it counts. */
  private limitOf(
    domain: CompiledDomain | undefined,
    domainName: string,
    d: RlsDescriptor,
    prefix: string,
  ): { limit: CompiledLimit; identifier: string } | undefined {
    const match = domain ? matchDescriptor(domain, d.entries) : undefined;
    if (d.limit) {
      const unit = OVERRIDE_UNITS[d.limit.unit]!;
      // An override counts on the keys of the configured limit it stands in for (as the
      // reference service, whose counters do not depend on the limit), else on its own.
      const base = match?.limit;
      const elements = base?.elements ?? d.entries.map((e) => ({ key: e.key }));
      const name = base?.policy?.name ?? envoyPolicyName(prefix, domainName, elements);
      const onStoreError = base?.onStoreError ?? "allow";
      return {
        limit: this.override(
          name,
          domainName,
          elements,
          d.limit.requestsPerUnit,
          unit,
          onStoreError,
        ),
        identifier: descriptorIdentifier(d.entries, match?.shared),
      };
    }
    if (!match?.limit) return undefined;
    return { limit: match.limit, identifier: descriptorIdentifier(d.entries, match.shared) };
  }

  private override(
    name: string,
    domain: string,
    elements: CompiledLimit["elements"],
    requestsPerUnit: number,
    unit: EnvoyUnit,
    onStoreError: OnStoreError,
  ): CompiledLimit {
    const cacheKey = `${name}\u0000${requestsPerUnit}\u0000${unit}\u0000${onStoreError}`;
    const hit = this.overrides.get(cacheKey);
    if (hit) return hit;
    const path = descriptorPath(domain, elements);
    const rules = [
      { requestsPerUnit, periodMs: UNIT_SECONDS[unit] * 1000, unit, burst: undefined },
    ];
    const policy = limitPolicy({
      name,
      algorithm: "fixed-window",
      rules,
      shadow: false,
      onStoreError,
      description: `Envoy override for ${path}`,
    });
    const limit: CompiledLimit = {
      path,
      elements,
      name: undefined,
      replaces: [],
      unlimited: false,
      shadow: false,
      quota: false,
      onStoreError,
      rules,
      algorithm: "fixed-window",
      policy,
      limiter: policy ? this.limiter(policy) : undefined,
      override: true,
    };
    if (this.overrides.size >= MAX_OVERRIDES)
      this.overrides.delete(this.overrides.keys().next().value!);
    this.overrides.set(cacheKey, limit);
    return limit;
  }

  private limiter(policy: Policy): Limiter {
    const onError = this.options.onStoreError;
    return createLimiter({ store: this.options.store, policy, ...(onError ? { onError } : {}) });
  }

  /** One limit's decision for `hits` (0: check without counting). */
  private async decide(limit: CompiledLimit, identifier: string, hits: number): Promise<Outcome> {
    const named = (d: Decision): Decision => ({ ...d, policy: displayName(limit) });
    if (!limit.policy) {
      // A limit of 0 requests: nothing ever fits.
      return this.outcome(limit, named(this.denyAll(limit, hits)));
    }
    const limiter = limit.limiter;
    if (!limiter) throw new Error(`limit ${limit.path} was compiled without a limiter`);
    if (hits === 0) return this.outcome(limit, named(await limiter.peek(identifier)));
    if (hits > policyCapacity(limit.policy)) {
      // More hits than the limit holds can never fit: over the limit, and nothing counted.
      const now = await limiter.peek(identifier);
      const denied: Decision =
        now.reason === "store-error" && !now.allowed
          ? now
          : {
              ...now,
              allowed: limit.shadow,
              remaining: 0,
              retryAfterMs: limit.shadow ? 0 : Math.max(now.resetAfterMs, 1),
              cost: hits,
              rules: now.rules.map((r) => ({ ...r, allowed: false })),
              ...(limit.shadow ? { reason: "shadow" as const } : {}),
            };
      return this.outcome(limit, named(denied));
    }
    return this.outcome(limit, named(await limiter.limit(identifier, { cost: hits })));
  }

  /** The decision of a limit of 0: over, until the window ends. */
  private denyAll(limit: CompiledLimit, hits: number): Decision {
    const r = limit.rules[0]!;
    const nowMs = this.options.now();
    const resetAfterMs = r.periodMs - (nowMs % r.periodMs);
    const rule: RuleDecision = {
      allowed: false,
      remaining: 0,
      resetAfterMs,
      retryAfterMs: resetAfterMs,
      limit: 0,
      periodMs: r.periodMs,
      burst: 0,
    };
    return {
      allowed: limit.shadow,
      limit: 0,
      remaining: 0,
      resetAfterMs,
      retryAfterMs: limit.shadow ? 0 : resetAfterMs,
      policy: displayName(limit),
      rule: 0,
      rules: [rule],
      cost: hits,
      ...(limit.shadow ? { reason: "shadow" as const } : {}),
    };
  }

  private outcome(limit: CompiledLimit, d: Decision): Outcome {
    const over = !d.allowed;
    const shadowOver = d.reason === "shadow";
    const r = limit.rules[d.rule] ?? limit.rules[0]!;
    let durationUntilResetS: number | undefined;
    if (d.reason === "store-error") {
      // Nothing is known of the counters; a fixed window still ends when the clock says.
      if (limit.algorithm === "fixed-window") {
        const nowMs = this.options.now();
        durationUntilResetS = Math.ceil((r.periodMs - (nowMs % r.periodMs)) / 1000);
      }
    } else {
      durationUntilResetS = Math.ceil(Math.max(0, d.resetAfterMs) / 1000);
    }
    return {
      limit,
      decision: d,
      over,
      failedClosed: over && d.reason === "store-error",
      status: {
        code: over ? CODE.OVER_LIMIT : CODE.OK,
        currentLimit: {
          requestsPerUnit: r.requestsPerUnit,
          unit: r.unit ? UNIT_CODES[r.unit] : 0,
          name: limit.name ?? "",
        },
        limitRemaining:
          over || shadowOver ? 0 : Math.min(Math.max(0, Math.floor(d.remaining)), MAX_UINT32),
        durationUntilResetS,
      },
    };
  }
}

function outcomeLabel(o: Outcome): string {
  const reason = o.decision?.reason;
  if (reason === "store-error" || reason === "insurance") return "store_error";
  if (reason === "shadow") return "shadow";
  return o.over ? "over_limit" : "ok";
}

/** The problem body of Envoy's 429: every limit exceeded, and the longest wait. */
function overLimitProblem(decisions: readonly Decision[]): ProblemDetails {
  const first = quotaExceededProblem(decisions[0]!);
  if (decisions.length === 1) return first;
  const names = decisions.flatMap((d) => violatedPolicies(d));
  const retryAfter = Math.max(...decisions.map((d) => retryAfterSeconds(d)));
  return {
    ...first,
    detail: `Rate limit exceeded (${names.join(", ")}); retry in ${retryAfter} s.`,
    "violated-policies": names,
    retryAfter,
  };
}

/** Problems of a request that make it unanswerable, with their fields. */
export function checkRequest(req: RlsRequest): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  if (req.domain === "")
    issues.push({ path: "domain", message: "rate limit domain must not be empty" });
  if (req.descriptors.length === 0)
    issues.push({ path: "descriptors", message: "rate limit descriptor list must not be empty" });
  req.descriptors.forEach((d, i) => {
    if (d.limit && OVERRIDE_UNITS[d.limit.unit] === undefined)
      issues.push({
        path: `descriptors.${i}.limit.unit`,
        message: `must be SECOND, MINUTE, HOUR, DAY, MONTH or YEAR (got ${d.limit.unit === 0 ? "UNKNOWN" : d.limit.unit})`,
      });
  });
  return issues;
}
