import type { ResolvedRule, RuleOutcome } from "./algorithms/types.js";
import type { Policy } from "./policy.js";

/**
 * Why a decision is unusual. Absent for an ordinary decision made by the store.
 * - `blocked`: the key is serving a penalty (`blockDuration`) after an earlier denial;
 * - `store-error`: the store failed and the policy's `onStoreError` (allow/deny) decided; the
 *   counters are unknown (see {@link Decision.remaining}), and `resetAfterMs`/`retryAfterMs` are 0;
 * - `insurance`: the store failed and the in-memory insurance limiter decided;
 * - `deny-cache`: answered locally: the key is known to be denied until its retry time;
 * - `shadow`: the policy is in shadow mode and would have denied this request;
 * - `disabled`: the policy is switched off (`enabled: false` in the sluice service): the
 *   request is allowed without counting, and every rule is reported untouched. Given by the
 *   service and by `connectPolicies`; a limiter from `createLimiter` never gives it.
 */
export type DecisionReason =
  "blocked" | "store-error" | "insurance" | "deny-cache" | "shadow" | "disabled";

/** One rule's part of a decision. */
export interface RuleDecision extends RuleOutcome {
  /** The rule's limit. */
  readonly limit: number;
  /** The rule's period in ms. */
  readonly periodMs: number;
  /** The rule's burst (capacity); equals `limit` for algorithms without one. */
  readonly burst: number;
}

/**
 * The answer to "may this request pass?". A value, never an exception: denials resolve too.
 *
 * `limit`, `remaining` and `resetAfterMs` are those of the reported rule: for a denial the rule
 * with the longest wait, for an allowed request the rule with the least remaining.
 */
export interface Decision {
  /** Whether the request may pass. */
  readonly allowed: boolean;
  /** The reported rule's limit (what `X-RateLimit-Limit` shows). */
  readonly limit: number;
  /**
   * Requests of cost 1 still allowed right after this decision, an integer ≥ 0 (least over all
   * rules). When the store failed (`reason: "store-error"`) the counters are unknown: failing
   * open it is what the policy admits at most (capacity less this cost), so an allowed request
   * never reads as exhausted; failing closed it is 0. Headers show no remaining then.
   */
  readonly remaining: number;
  /** Until the reported rule is fully replenished or its window ends (ms). */
  readonly resetAfterMs: number;
  /** 0 when allowed; when denied, the exact wait after which the same request would pass. */
  readonly retryAfterMs: number;
  /** The policy's name. */
  readonly policy: string;
  /** Index of the reported rule in {@link Decision.rules}. */
  readonly rule: number;
  /** Every rule's outcome, in policy order. */
  readonly rules: readonly RuleDecision[];
  /** The cost this decision was asked for. */
  readonly cost: number;
  /** Set when something unusual decided; see {@link DecisionReason}. */
  readonly reason?: DecisionReason;
  /**
   * For `concurrency`: the permit's id (release it with `limiter.release(key, leaseId)`). The
   * field keeps its first name: it is in every client and in the HTTP API.
   */
  readonly leaseId?: string;
}

/** A rule's outcome with the rule's figures, as a decision reports it (a new object). */
export function ruleDecision(rule: ResolvedRule, o: RuleOutcome): RuleDecision {
  return {
    limit: rule.limit,
    periodMs: rule.periodMs,
    burst: rule.burst,
    allowed: o.allowed,
    remaining: o.remaining,
    resetAfterMs: o.resetAfterMs,
    retryAfterMs: o.retryAfterMs,
  };
}

/** {@link ruleDecision} for every rule of `policy`. */
export function ruleDecisions(policy: Policy, outcomes: readonly RuleOutcome[]): RuleDecision[] {
  const out = new Array<RuleDecision>(outcomes.length);
  for (let i = 0; i < outcomes.length; i++) out[i] = ruleDecision(policy.rules[i]!, outcomes[i]!);
  return out;
}
