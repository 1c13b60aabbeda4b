/**
 * "Why was I limited": one key's state under a policy, now, charging nothing — each rule's
 * figures, which rule denies (or will deny first) and when it frees, a penalty block, and what
 * would answer the next decision (the store, or a structure in this process in front of it).
 * Built on the store's peek and its optional `explainLocal`; the limiter's `explain` is this.
 */
import type { DecisionReason } from "./decision.js";
import type { Policy } from "./policy.js";
import { type LocalAnswer, type Store, type StoreDecision, isSyncStore } from "./store.js";

/**
 * What would answer a decision for the key now:
 * - `store`: the store itself (the memory store; Redis, for the Redis store);
 * - `deny-cache`: the Redis store's deny cache — a denial Redis gave that still holds for this
 *   cost (the decision's `reason` would be `deny-cache`);
 * - `allotment`: an allotment of the key's capacity that this process holds (Redis is not asked).
 */
export type AnsweredBy = "store" | LocalAnswer;

/** One rule's state in an {@link Explanation}. */
export interface RuleExplanation {
  /** The rule's index in the policy. */
  readonly index: number;
  /** The rule's limit. */
  readonly limit: number;
  /** The rule's period in ms. */
  readonly periodMs: number;
  /** The rule's burst (capacity); equals `limit` for algorithms without one. */
  readonly burst: number;
  /** Requests of cost 1 this rule admits now (before the explained request), an integer ≥ 0. */
  readonly remaining: number;
  /** Until this rule is fully replenished or its window ends (ms). */
  readonly resetAfterMs: number;
  /** 0 when this rule admits the request; else the wait after which it would (ms). */
  readonly retryAfterMs: number;
  /** Whether this rule, alone, would deny a request of the explained cost now. */
  readonly denies: boolean;
}

/** The draft's answer beside the enforced version's, in a managed limiter's {@link Explanation}. */
export interface DraftExplanation {
  /** The draft's id: it counts on the policy `sluice.draft.<id>`, apart from the enforced version. */
  readonly id: number;
  /** Whether the draft would let the request pass now (it is never in shadow). */
  readonly allowedNow: boolean;
  /**
   * The draft's explanation, on its own keys; absent when the cost can never fit the draft's
   * rules (the draft denies every such request).
   */
  readonly explanation?: Explanation;
}

/**
 * Why a key is (or is not) limited under a policy, now: the answer of a limiter's
 * `explain(key, { cost })`. Nothing was charged to make it.
 */
export interface Explanation {
  /** The policy's name. */
  readonly policy: string;
  /** The identifier explained. */
  readonly key: string;
  /** The cost explained (default 1). */
  readonly cost: number;
  /**
   * Whether a request of `cost` would pass now, as `limit()` would answer: a shadow policy's
   * denial passes (`reason: "shadow"`), and so does every request of a disabled managed policy.
   */
  readonly allowedNow: boolean;
  /**
   * What `limit()` would report as its `reason` now: `blocked` (a penalty block), `deny-cache`,
   * `shadow`, `disabled`; absent for an ordinary answer.
   */
  readonly reason?: DecisionReason;
  /** Every rule's state, in policy order. */
  readonly rules: readonly RuleExplanation[];
  /**
   * The rule that denies now (of several, the one with the longest wait, as a decision reports
   * it); when every rule admits the request, the rule that will deny first: the least
   * `remaining`, ties to the longer period.
   */
  readonly denyingRule: number;
  /** Whether {@link Explanation.denyingRule} denies now (false: it is only the next to deny). */
  readonly denyingNow: boolean;
  /**
   * 0 when the request would pass now; else the wait until it would — the denying rules' and the
   * penalty block's, whichever is longer (what `limit()` reports as `retryAfterMs`).
   */
  readonly freesInMs: number;
  /** > 0 when the key serves a penalty block (`blockDuration`): the time until it ends (ms). */
  readonly blockedForMs: number;
  /** What would answer the next decision for the key: see {@link AnsweredBy}. */
  readonly answeredBy: AnsweredBy;
  /**
   * True when the key has a per-key override (`limiter.setOverride`): `rules` are the
   * override's, which replace the policy's for this key. Absent otherwise.
   */
  readonly override?: boolean;
  /**
   * Managed limiters only (`connectPolicies`, the sluice service): whether the policy is
   * enabled. A disabled policy allows every request without counting; `rules` still show the
   * counters as they stand.
   */
  readonly enabled?: boolean;
  /** Managed limiters only: the draft's answer for the same key and cost, when a draft exists. */
  readonly draft?: DraftExplanation;
}

/**
 * Explains `key` under `policy` over `store`, for a checked `key` and `cost`: what would answer
 * (asked first, as the next decision would meet it), then a peek. A store failure rejects.
 */
export function explainOn(
  policy: Policy,
  store: Store,
  key: string,
  cost: number,
): Promise<Explanation> {
  try {
    const answeredBy: AnsweredBy = store.explainLocal?.(policy, key, cost) ?? "store";
    if (isSyncStore(store))
      return Promise.resolve(
        explanationOf(policy, key, cost, store.peekSync(policy, key, cost), answeredBy),
      );
    return store
      .peek({ policy, key, cost })
      .then((sd) => explanationOf(policy, key, cost, sd, answeredBy));
  } catch (err) {
    return Promise.reject(err);
  }
}

/** The explanation of a store's peek of `cost` (a peek of an allowed request reports it charged). */
export function explanationOf(
  policy: Policy,
  key: string,
  cost: number,
  sd: StoreDecision,
  answeredBy: AnsweredBy,
): Explanation {
  const rules: RuleExplanation[] = sd.rules.map((r, index) => ({
    index,
    limit: r.limit,
    periodMs: r.periodMs,
    burst: r.burst,
    // An allowed peek reports every rule as if charged; a denied one, every rule as it is.
    remaining: sd.allowed ? r.remaining + cost : r.remaining,
    resetAfterMs: r.resetAfterMs,
    retryAfterMs: r.allowed ? 0 : r.retryAfterMs,
    denies: !r.allowed,
  }));
  let denying = -1;
  let wait = 0;
  for (const r of rules) {
    if (!r.denies) continue;
    if (denying < 0 || r.retryAfterMs > wait) denying = r.index;
    if (r.retryAfterMs > wait) wait = r.retryAfterMs;
  }
  const denyingNow = denying >= 0;
  if (!denyingNow) {
    denying = 0;
    for (const r of rules) {
      const best = rules[denying]!;
      if (
        r.remaining < best.remaining ||
        (r.remaining === best.remaining && r.periodMs > best.periodMs)
      )
        denying = r.index;
    }
  }
  const passes = sd.allowed && sd.blockedForMs === 0;
  const shadowed = !passes && policy.shadow;
  const allowedNow = passes || shadowed;
  const reason: DecisionReason | undefined = shadowed
    ? "shadow"
    : passes
      ? undefined
      : answeredBy === "deny-cache"
        ? "deny-cache"
        : sd.blockedForMs > 0
          ? "blocked"
          : undefined;
  return {
    policy: policy.name,
    key,
    cost,
    allowedNow,
    ...(reason !== undefined ? { reason } : {}),
    rules,
    denyingRule: denying,
    denyingNow,
    freesInMs: allowedNow ? 0 : Math.max(wait, sd.blockedForMs),
    blockedForMs: sd.blockedForMs,
    answeredBy,
  };
}
