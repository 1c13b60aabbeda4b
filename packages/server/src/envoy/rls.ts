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
  type SyncLimiter,
  createLimiter,
  isSyncStore,
  policyCapacity,
} from "sluice";
import {
  type HeaderFormat,
  type HeaderList,
  type ProblemDetails,
  githubHeaders,
  quotaExceededProblem,
  ratelimitPolicyValue,
  ratelimitValue,
  retryAfterSeconds,
  storeUnavailableProblem,
  violatedPolicies,
  PROBLEM_CONTENT_TYPE,
} from "sluice/http";
import type { ValidationIssue } from "sluice";
import { type DraftHooks, shadowDraft } from "sluice/service";
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
import type { LiveEnvoyDomain, LiveEnvoyDraft } from "./live.js";
import type { CounterChild } from "../metrics.js";

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
  /** What each descriptor came to, in the request's order (for its span). */
  readonly outcomes?: readonly RlsOutcome[];
  /** The decision the answer's headers come from: any over the limit, else the least remaining. */
  readonly deciding?: Decision | undefined;
}

/** What one descriptor of a request came to, as its span shows it. */
export interface RlsOutcome {
  /** The limiter's decision (its policy is the limit's policy name); undefined: no limit decided. */
  readonly decision: Decision | undefined;
}

/** A request that cannot be answered as sent: every problem, with its field. */
export class RlsInputError extends Error {
  constructor(readonly issues: readonly ValidationIssue[]) {
    super(`Invalid rate limit request: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`);
    this.name = "RlsInputError";
  }
}

/**
 * Metrics the service records (labels stay bounded: configured domains and descriptor paths).
 * Each function gives the counter of one set of labels; the service asks once per limit (or
 * domain) and label and keeps it, so a call labels nothing.
 */
export interface RlsMetrics {
  /** Per descriptor limit: `ok`, `over_limit`, `shadow`, `store_error`, `unlimited`. */
  descriptor(domain: string, path: string, outcome: string): CounterChild;
  /** Per request: `ok`, `over_limit`, `invalid`. */
  request(domain: string, code: string): CounterChild;
  /** Per request evaluated by a domain's draft: `ok`, `over_limit`. */
  draft(domain: string, code: string): CounterChild;
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
interface Outcome extends RlsOutcome {
  readonly limit: CompiledLimit | undefined;
  readonly status: RlsStatus;
  /** OVER_LIMIT (a shadow limit never is). */
  readonly over: boolean;
  /** Over because the store failed and the limit fails closed. */
  readonly failedClosed: boolean;
}

/** A descriptor limit matched by a request, and the identifier it counts. */
interface Found {
  readonly limit: CompiledLimit;
  readonly identifier: string;
}

/**
 * What is constant per compiled limit, made when the limit first decides: nothing of it is
 * rebuilt per call.
 */
interface LimitFacts {
  /** Its display name ({@link displayName}). */
  readonly name: string;
  /** The policy's capacity (0 for a limit of 0). */
  readonly capacity: number;
  /** The limiter, when its store decides synchronously (the memory store). */
  readonly sync: SyncLimiter | undefined;
  /** `current_limit` of each rule: one object per rule, so the codec encodes it once. */
  readonly currentLimits: ReadonlyArray<NonNullable<RlsStatus["currentLimit"]>>;
  /** The descriptor metric's counters, by outcome (made on first use). */
  readonly counters: Map<string, CounterChild>;
  /** `RateLimit-Policy` and the rules it was made for (a decision's limit, period and burst). */
  policyHeader: { readonly value: string; readonly rules: readonly RuleDecision[] } | undefined;
}

/** The request metric's counters of one domain. */
interface RequestCounters {
  readonly ok: CounterChild | undefined;
  readonly overLimit: CounterChild | undefined;
  readonly invalid: CounterChild | undefined;
}

/** Most Envoy overrides kept as ready limiters (least recently made dropped first). */
const MAX_OVERRIDES = 1000;

/** The reference service's answer for a descriptor without a limit. */
const NO_LIMIT: RlsStatus = Object.freeze({ code: CODE.OK, limitRemaining: 0 });
const UNLIMITED: RlsStatus = Object.freeze({ code: CODE.OK, limitRemaining: MAX_UINT32 });
const NO_OUTCOME: Outcome = Object.freeze({
  limit: undefined,
  status: NO_LIMIT,
  decision: undefined,
  over: false,
  failedClosed: false,
});
/** The label of requests to a domain that is not configured. */
const UNKNOWN_DOMAIN = "(unknown)";

/** The name a limit shows in headers and problem bodies: its `name`, else its descriptor path. */
export function displayName(limit: CompiledLimit): string {
  return limit.name ?? limit.path;
}

/** A decision as headers and problem bodies show it: under the limit's display name. */
function named(limit: CompiledLimit, d: Decision): Decision {
  return { ...d, policy: displayName(limit) };
}

/** Whether a limit found for a request is dropped by a `replaces` of any limit found. */
function isReplaced(limit: CompiledLimit, found: ReadonlyArray<Found | undefined>): boolean {
  const name = limit.name;
  if (name === undefined) return false;
  for (const f of found) if (f !== undefined && f.limit.replaces.includes(name)) return true;
  return false;
}

/** Whether two decisions' rules have the same limit, period and burst (what `RateLimit-Policy` shows). */
function sameRules(a: readonly RuleDecision[], b: readonly RuleDecision[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.limit !== y.limit || x.periodMs !== y.periodMs || x.burst !== y.burst) return false;
  }
  return true;
}

/** Answers `ShouldRateLimit` requests for a node. */
export class RateLimitService {
  private readonly overrides = new Map<string, CompiledLimit>();
  private readonly facts = new WeakMap<CompiledLimit, LimitFacts>();
  private readonly requestCounters = new WeakMap<CompiledDomain, RequestCounters>();
  private readonly draftHooks = new WeakMap<CompiledDomain, DraftHooks>();
  private unknownCounters: RequestCounters | undefined;

  constructor(private readonly options: RateLimitServiceOptions) {}

  /**
   * Decides a request. Rejects with {@link RlsInputError} for a request that cannot be answered
   * (no domain, no descriptors, an override without a unit); never for a store failure, which
   * each limit's `onStoreError` decides.
   */
  async shouldRateLimit(req: RlsRequest): Promise<RlsResponse> {
    return this.answer(req);
  }

  /**
   * {@link shouldRateLimit}, answered at once when it can be: when every limit the request
   * touches decides synchronously (the memory store) and the domain has no draft, the response
   * itself, else a promise of it. Throws {@link RlsInputError} (or rejects with it).
   */
  answer(req: RlsRequest): RlsResponse | Promise<RlsResponse> {
    const live = this.options.domain(req.domain);
    const counters = this.countersOf(live?.compiled);
    if (!answerable(req)) {
      counters.invalid?.inc();
      throw new RlsInputError(checkRequest(req));
    }
    const draft = live?.draft;
    if (draft) return this.withDraft(live, draft, req, counters);
    const r = this.evaluate(live?.compiled, req, true);
    if (r instanceof Promise) return r.then((res) => countRequest(counters, res));
    return countRequest(counters, r);
  }

  /** The enforced domain and its draft, side by side (the draft's answer is only counted). */
  private withDraft(
    live: LiveEnvoyDomain,
    draft: LiveEnvoyDraft,
    req: RlsRequest,
    counters: RequestCounters,
  ): Promise<RlsResponse> {
    let enforced: RlsResponse | Promise<RlsResponse>;
    try {
      enforced = this.evaluate(live.compiled, req, true);
    } catch (err) {
      return Promise.reject(err);
    }
    return shadowDraft(
      draft.stats,
      enforced,
      () => this.evaluate(draft.compiled, req, false),
      allows,
      this.draftHooksOf(live.compiled),
    ).then((res) => countRequest(counters, res));
  }

  /** The request counters of a domain (of unknown domains when undefined), labelled once. */
  private countersOf(domain: CompiledDomain | undefined): RequestCounters {
    if (domain === undefined)
      return (this.unknownCounters ??= requestCounters(this.options.metrics, UNKNOWN_DOMAIN));
    let c = this.requestCounters.get(domain);
    if (c === undefined) {
      c = requestCounters(this.options.metrics, domain.domain);
      this.requestCounters.set(domain, c);
    }
    return c;
  }

  /** What a domain's draft tells: its verdicts to the draft metric, its failures to the service. */
  private draftHooksOf(domain: CompiledDomain): DraftHooks {
    let h = this.draftHooks.get(domain);
    if (h === undefined) {
      const metrics = this.options.metrics;
      const ok = metrics?.draft(domain.domain, "ok");
      const overLimit = metrics?.draft(domain.domain, "over_limit");
      h = {
        onDraft: (allowed) => (allowed ? ok : overLimit)?.inc(),
        onDraftError: (err) => this.options.onDraftError?.(err, domain.domain),
      };
      this.draftHooks.set(domain, h);
    }
    return h;
  }

  /** The facts of a limit, made on its first decision. */
  private factsOf(limit: CompiledLimit): LimitFacts {
    let f = this.facts.get(limit);
    if (f === undefined) {
      const limiter = limit.limiter;
      const name = limit.name ?? "";
      f = {
        name: displayName(limit),
        capacity: limit.policy ? policyCapacity(limit.policy) : 0,
        sync:
          limiter !== undefined && isSyncStore(limiter.store)
            ? (limiter as SyncLimiter)
            : undefined,
        currentLimits: limit.rules.map((r) =>
          Object.freeze({
            requestsPerUnit: r.requestsPerUnit,
            unit: r.unit ? UNIT_CODES[r.unit] : 0,
            name,
          }),
        ),
        counters: new Map(),
        policyHeader: undefined,
      };
      this.facts.set(limit, f);
    }
    return f;
  }

  /** Counts a descriptor limit's outcome (its counter labelled on first use). */
  private count(domain: string, limit: CompiledLimit, facts: LimitFacts, outcome: string): void {
    const metrics = this.options.metrics;
    if (metrics === undefined) return;
    let c = facts.counters.get(outcome);
    if (c === undefined) {
      c = metrics.descriptor(domain, limit.path, outcome);
      facts.counters.set(outcome, c);
    }
    c.inc();
  }

  /**
   * Decides a request against one compiled domain (the enforced one or a draft): the response
   * itself when every descriptor was decided synchronously, else a promise of it.
   */
  private evaluate(
    domain: CompiledDomain | undefined,
    req: RlsRequest,
    record: boolean,
  ): RlsResponse | Promise<RlsResponse> {
    // Envoy's overrides count under the domain's prefix: a draft's own, else the enforced one's.
    const prefix = domain?.prefix ?? ENVOY_POLICY_PREFIX;
    const descriptors = req.descriptors;
    const n = descriptors.length;
    const found: Array<Found | undefined> = new Array<Found | undefined>(n);
    for (let i = 0; i < n; i++)
      found[i] = this.limitOf(domain, req.domain, descriptors[i]!, prefix);
    const outcomes: Array<Outcome | Promise<Outcome>> = new Array<Outcome | Promise<Outcome>>(n);
    let pending = false;
    for (let i = 0; i < n; i++) {
      const f = found[i];
      let o: Outcome | Promise<Outcome>;
      if (f === undefined) o = NO_OUTCOME;
      else if (f.limit.unlimited) {
        if (record) this.count(req.domain, f.limit, this.factsOf(f.limit), "unlimited");
        o = {
          limit: f.limit,
          status: UNLIMITED,
          decision: undefined,
          over: false,
          failedClosed: false,
        };
      } else if (isReplaced(f.limit, found)) o = NO_OUTCOME;
      else {
        const limit = f.limit;
        const facts = this.factsOf(limit);
        const hits = descriptors[i]!.hitsAddend ?? Math.max(1, req.hitsAddend);
        const decided = this.decide(limit, facts, f.identifier, hits);
        if (decided instanceof Promise) {
          pending = true;
          o = record
            ? decided.then((x) => {
                this.count(req.domain, limit, facts, outcomeLabel(x));
                return x;
              })
            : decided;
        } else {
          if (record) this.count(req.domain, limit, facts, outcomeLabel(decided));
          o = decided;
        }
      }
      outcomes[i] = o;
    }
    if (pending)
      return Promise.all(outcomes.map((o) => Promise.resolve(o))).then((all) => this.respond(all));
    return this.respond(outcomes as Outcome[]);
  }

  /** The response of a request's outcomes: the overall code, headers, the 429 body. */
  private respond(outcomes: readonly Outcome[]): RlsResponse {
    let overRate = false;
    let quota = 0;
    let quotaOver = 0;
    for (const o of outcomes) {
      const l = o.limit;
      if (l === undefined || l.unlimited) continue;
      if (l.quota) {
        quota++;
        if (o.over) quotaOver++;
      } else if (o.over) overRate = true;
    }
    const over = overRate || (quota > 0 && quotaOver === quota);

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
    const format = this.options.headers;
    if (chosen?.decision && format !== false) {
      const limit = chosen.limit!;
      const d = chosen.decision;
      if (format !== "ietf")
        headers.push(
          ...githubHeaders(d, { nowMs: this.options.now(), algorithm: limit.algorithm }),
        );
      if (format !== "github") this.ietfHeaders(headers, limit, d);
    }
    let rawBody: Uint8Array | undefined;
    let failedClosed = false;
    if (over) {
      const violating = outcomes.filter(
        (o) =>
          o.limit !== undefined &&
          !o.limit.unlimited &&
          o.over &&
          (overRate ? !o.limit.quota : true),
      );
      failedClosed = violating.every((o) => o.failedClosed);
      const problem = failedClosed
        ? storeUnavailableProblem(named(violating[0]!.limit!, violating[0]!.decision!))
        : overLimitProblem(
            violating.filter((o) => !o.failedClosed).map((o) => named(o.limit!, o.decision!)),
          );
      if (problem.retryAfter !== undefined)
        headers.push(["Retry-After", String(problem.retryAfter)]);
      headers.push(["Content-Type", PROBLEM_CONTENT_TYPE]);
      rawBody = Buffer.from(JSON.stringify(problem));
    }
    const statuses = new Array<RlsStatus>(outcomes.length);
    for (let i = 0; i < outcomes.length; i++) statuses[i] = outcomes[i]!.status;
    return {
      overallCode: over ? CODE.OVER_LIMIT : CODE.OK,
      statuses,
      responseHeadersToAdd: headers,
      rawBody,
      failedClosed,
      outcomes,
      deciding: chosen?.decision,
    };
  }

  /**
   * sluice/http's `ietfHeaders` of the decision under the limit's display name, without a copy
   * of the decision: `RateLimit-Policy` is made once per limit (again if a decision's rules
   * differ, as an insurance limiter's do) and `RateLimit` is left out when the store failed.
   */
  private ietfHeaders(headers: HeaderList, limit: CompiledLimit, d: Decision): void {
    const facts = this.factsOf(limit);
    // What the header builders read of a decision: its policy name and its rules.
    const view = { policy: facts.name, rules: d.rules } as Decision;
    const ctx = { algorithm: limit.algorithm };
    let policy = facts.policyHeader;
    if (policy === undefined || !sameRules(policy.rules, d.rules)) {
      policy = { value: ratelimitPolicyValue(view, ctx), rules: d.rules };
      facts.policyHeader = policy;
    }
    headers.push(["RateLimit-Policy", policy.value]);
    // As ietfHeaders: when the store failed, the counters are not known.
    if (d.reason !== "store-error") headers.push(["RateLimit", ratelimitValue(view, ctx)]);
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

  /**
   * One limit's decision for `hits` (0: check without counting): synchronous when the limit's
   * store decides synchronously, else a promise.
   */
  private decide(
    limit: CompiledLimit,
    facts: LimitFacts,
    identifier: string,
    hits: number,
  ): Outcome | Promise<Outcome> {
    // A limit of 0 requests: nothing ever fits.
    if (!limit.policy) return this.outcome(limit, facts, this.denyAll(limit, hits));
    const limiter = limit.limiter;
    if (!limiter) throw new Error(`limit ${limit.path} was compiled without a limiter`);
    const sync = facts.sync;
    if (hits === 0 || hits > facts.capacity) {
      // Only a look: 0 hits checks without counting; more hits than the limit holds can never
      // fit and are over the limit, counting nothing.
      const finish = (now: Decision) =>
        this.outcome(limit, facts, hits === 0 ? now : this.overCapacity(limit, now, hits));
      if (sync !== undefined) {
        try {
          return finish(sync.peekSync(identifier));
        } catch {
          // The awaited path answers a failure as the limiter's onStoreError says.
        }
      }
      return limiter.peek(identifier).then(finish);
    }
    const options = hits === 1 ? undefined : { cost: hits };
    if (sync !== undefined) {
      try {
        return this.outcome(limit, facts, sync.limitSync(identifier, options));
      } catch {
        // As above: the awaited path answers it.
      }
    }
    return limiter.limit(identifier, options).then((d) => this.outcome(limit, facts, d));
  }

  /** The answer for more hits than the limit holds: over, counting nothing (from a peek). */
  private overCapacity(limit: CompiledLimit, now: Decision, hits: number): Decision {
    if (now.reason === "store-error" && !now.allowed) return now;
    return {
      ...now,
      allowed: limit.shadow,
      remaining: 0,
      retryAfterMs: limit.shadow ? 0 : Math.max(now.resetAfterMs, 1),
      cost: hits,
      rules: now.rules.map((r) => ({ ...r, allowed: false })),
      ...(limit.shadow ? { reason: "shadow" as const } : {}),
    };
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

  private outcome(limit: CompiledLimit, facts: LimitFacts, d: Decision): Outcome {
    const over = !d.allowed;
    const shadowOver = d.reason === "shadow";
    const rule = facts.currentLimits[d.rule] !== undefined ? d.rule : 0;
    let durationUntilResetS: number | undefined;
    if (d.reason === "store-error") {
      // Nothing is known of the counters; a fixed window still ends when the clock says.
      if (limit.algorithm === "fixed-window") {
        const periodMs = limit.rules[rule]!.periodMs;
        const nowMs = this.options.now();
        durationUntilResetS = Math.ceil((periodMs - (nowMs % periodMs)) / 1000);
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
        currentLimit: facts.currentLimits[rule],
        limitRemaining:
          over || shadowOver ? 0 : Math.min(Math.max(0, Math.floor(d.remaining)), MAX_UINT32),
        durationUntilResetS,
      },
    };
  }
}

/** Whether a request can be answered (else {@link checkRequest} says why), without allocating. */
function answerable(req: RlsRequest): boolean {
  if (req.domain === "" || req.descriptors.length === 0) return false;
  for (const d of req.descriptors)
    if (d.limit && OVERRIDE_UNITS[d.limit.unit] === undefined) return false;
  return true;
}

/** Whether a response allows the request (what a draft's counts compare). */
function allows(res: RlsResponse): boolean {
  return res.overallCode !== CODE.OVER_LIMIT;
}

/** The request metric's counters of one domain label (made once per domain, on a cache miss). */
function requestCounters(metrics: RlsMetrics | undefined, label: string): RequestCounters {
  return {
    ok: metrics?.request(label, "ok"),
    overLimit: metrics?.request(label, "over_limit"),
    invalid: metrics?.request(label, "invalid"),
  };
}

/** Counts a request's response in its domain's request metric. */
function countRequest(counters: RequestCounters, res: RlsResponse): RlsResponse {
  (allows(res) ? counters.ok : counters.overLimit)?.inc();
  return res;
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
