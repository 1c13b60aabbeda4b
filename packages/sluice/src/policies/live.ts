/**
 * A managed policy as it is enforced: the policy kind of a live document (live-document.ts) —
 * its limiter, its `enabled` switch, the apps granted it, and its draft's limiter (run in shadow
 * on keys of its own). This is what the sluice service (its registry and `POST /v1/limit`) and
 * embedded policy clients (`connectPolicies`) share, so that a decision for policy P and key K
 * is the same whichever door it came through: the same `definePolicy`, the same Redis keys (the
 * policy's name), the same draft keys (`sluice.draft.<id>`), the same disabled answer and the
 * same draft counts.
 */
import type { Decision, RuleDecision } from "../decision.js";
import { ValidationError } from "../errors.js";
import { type Limiter, carryOverrides, tallyOf } from "../limiter.js";
import { type Policy, type PolicyInput, definePolicy } from "../policy.js";
import {
  type DraftHooks,
  type LiveDocument,
  type LiveDocumentDraft,
  type LiveKind,
  NO_DRAFT_HOOKS,
  draftPolicyName,
  shadowDraft,
} from "./live-document.js";

/**
 * A managed policy's document: sluice's policy input, plus what the service adds — `enabled`
 * (a disabled policy allows everything without counting; default true) and the `apps` granted
 * it.
 */
export interface ManagedPolicyDocument extends PolicyInput {
  /** A disabled policy allows every request without counting (default true). */
  readonly enabled?: boolean;
  /** The apps granted the policy (the service's bookkeeping; not part of the limiter). */
  readonly apps?: readonly string[];
}

/** The live form of a policy's enforced version. */
export interface PolicyForm<D extends ManagedPolicyDocument = ManagedPolicyDocument> {
  readonly doc: D;
  readonly policy: Policy;
  readonly limiter: Limiter;
  /** False when the document says `enabled: false`. */
  readonly enabled: boolean;
  /** The apps granted the policy (what the service checks; empty in an embedded client). */
  readonly apps: ReadonlySet<string>;
}

/** The live form of a policy's draft. */
export interface PolicyDraftForm<D extends ManagedPolicyDocument = ManagedPolicyDocument> {
  readonly doc: D;
  /** The draft's limiter, on the policy `sluice.draft.<id>` (never shadow: it reports what it would deny). */
  readonly limiter: Limiter;
}

/** A managed policy as it is enforced, with its draft. */
export type LivePolicy<D extends ManagedPolicyDocument = ManagedPolicyDocument> = LiveDocument<
  PolicyForm<D>,
  PolicyDraftForm<D>
>;

/** The draft of a live policy, running in shadow on its own keys (`sluice.draft.<id>`). */
export type LiveDraft<D extends ManagedPolicyDocument = ManagedPolicyDocument> = LiveDocumentDraft<
  PolicyDraftForm<D>
>;

/** The sluice policy input of a managed document: without `enabled` and `apps`. */
export function policyInputOf(doc: ManagedPolicyDocument): PolicyInput {
  const { enabled: _enabled, apps: _apps, ...input } = doc;
  return input;
}

/**
 * The policy kind of a live document, its limiters made with `limiterFor` on one store. The
 * keys depend only on the policy's name and algorithm, so a new version of a policy keeps its
 * counters; a draft counts on `sluice.draft.<id>`. A new version takes over the per-key
 * overrides of the one before it (`onOverrideDropped` is told of one that does not validate on
 * it). Throws a `ValidationError` for a document that does not validate.
 */
export function policyLiveKind<D extends ManagedPolicyDocument>(
  limiterFor: (policy: Policy) => Limiter,
  onOverrideDropped?: (policy: string, key: string, error: unknown) => void,
): LiveKind<D, PolicyForm<D>, PolicyDraftForm<D>> {
  return {
    // A new version keeps the per-key overrides, made anew on its rules' policy (one that no
    // longer validates on it is left out, and told).
    carry: (next, previous) =>
      carryOverrides(previous.limiter, next.limiter, (key, error) =>
        onOverrideDropped?.(next.policy.name, key, error),
      ),
    live: (doc) => {
      const policy = definePolicy(policyInputOf(doc));
      return {
        doc,
        policy,
        limiter: limiterFor(policy),
        enabled: doc.enabled !== false,
        apps: new Set(doc.apps),
      };
    },
    draft: (doc, draftId) => ({
      doc,
      limiter: limiterFor(
        definePolicy({ ...policyInputOf(doc), name: draftPolicyName(draftId), shadow: false }),
      ),
    }),
  };
}

/**
 * Decides one request under a live policy, as the service does: a disabled policy allows it
 * without counting (`reason: "disabled"`); otherwise the enforced limiter decides and, when the
 * policy has a draft, the draft is evaluated beside it on its own keys and its counts are
 * taken (a cost the draft can never fit counts as a denial). Cost and key are checked by the
 * limiter; a bad one rejects with a `ValidationError`.
 */
export function decideLive(
  live: LivePolicy,
  key: string,
  cost: number,
  hooks: DraftHooks = NO_DRAFT_HOOKS,
): Promise<Decision> {
  if (!live.enabled) {
    const d = disabledDecision(live.policy, cost);
    tallyOf(live.limiter).count(d, -1);
    return Promise.resolve(d);
  }
  // No options object for the common cost of 1 (the hot path).
  const options = cost === 1 ? undefined : { cost };
  const draft = live.draft;
  if (!draft) return live.limiter.limit(key, options);
  return shadowDraft(
    draft.stats,
    live.limiter.limit(key, options),
    () => draft.limiter.limit(key, options).catch(neverFits),
    allows,
    hooks,
  );
}

/** A cost the draft can never fit is a denial (undefined); anything else, a draft that failed. */
function neverFits(err: unknown): undefined {
  if (err instanceof ValidationError) return undefined;
  throw err;
}

/** Whether a decision allows, as the enforced version would have: a shadow denial denies. */
function allows(d: Decision | undefined): boolean {
  return d !== undefined && d.allowed && d.reason !== "shadow";
}

/**
 * The answer for a disabled policy: allowed, nothing counted, `reason: "disabled"`. It keeps
 * the Decision's shape — one entry per rule, each untouched (`remaining` its full capacity),
 * and `rule` the one an allowed decision reports: least remaining, ties to the longer period.
 */
export function disabledDecision(policy: Policy, cost: number): Decision {
  const rules: RuleDecision[] = policy.rules.map((r) => ({
    allowed: true,
    remaining: r.burst,
    resetAfterMs: 0,
    retryAfterMs: 0,
    limit: r.limit,
    periodMs: r.periodMs,
    burst: r.burst,
  }));
  let rule = 0;
  rules.forEach((r, i) => {
    const best = rules[rule]!;
    if (
      r.remaining < best.remaining ||
      (r.remaining === best.remaining && r.periodMs > best.periodMs)
    )
      rule = i;
  });
  const reported = rules[rule]!;
  return {
    allowed: true,
    limit: reported.limit,
    remaining: reported.remaining,
    resetAfterMs: 0,
    retryAfterMs: 0,
    policy: policy.name,
    rule,
    rules,
    cost,
    reason: "disabled",
  };
}
