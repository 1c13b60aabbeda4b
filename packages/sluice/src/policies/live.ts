/**
 * A managed policy as it is enforced: its limiter, its `enabled` switch and its draft (run in
 * shadow on keys of its own). This is the one piece of logic the sluice service (its registry
 * and `POST /v1/limit`) and embedded policy clients (`connectPolicies`) share, so that a
 * decision for policy P and key K is the same whichever door it came through: the same
 * `definePolicy`, the same Redis keys (the policy's name), the same draft keys
 * (`sluice.draft.<id>`), the same disabled answer and the same draft counts.
 */
import type { Decision, RuleDecision } from "../decision.js";
import { ValidationError } from "../errors.js";
import type { Limiter } from "../limiter.js";
import { type Policy, type PolicyInput, definePolicy } from "../policy.js";

/**
 * Drafts count on keys of their own, under this reserved name and the draft's id
 * (`sluice.draft.7`), so that a draft never charges the enforced policy.
 */
export const DRAFT_POLICY_PREFIX = "sluice.draft.";

/**
 * A managed policy's document: sluice's policy input, plus what the service adds — `enabled`
 * (a disabled policy allows everything without counting; default true) and, in the service's
 * own store, the `apps` granted it (ignored here).
 */
export interface ManagedPolicyDocument extends PolicyInput {
  /** A disabled policy allows every request without counting (default true). */
  readonly enabled?: boolean;
  /** The apps granted the policy (the service's bookkeeping; not part of the limiter). */
  readonly apps?: readonly string[];
}

/** What a draft would have done on live traffic. */
export interface DraftStats {
  /** Requests evaluated against the draft. */
  evaluated: number;
  /** Requests the draft would have denied. */
  wouldDeny: number;
  /** Of those, how many the enforced version allowed (the change in behaviour). */
  wouldDenyNewly: number;
  /** Requests the draft would have allowed but the enforced version denied. */
  wouldAllowNewly: number;
}

/** A draft of a policy, as {@link livePolicy} is given it: its id and document. */
export interface DraftSource<D extends ManagedPolicyDocument = ManagedPolicyDocument> {
  readonly id: number;
  readonly doc: D;
}

/** The draft of a live policy, running in shadow on its own keys. */
export interface LiveDraft<D extends ManagedPolicyDocument = ManagedPolicyDocument> {
  readonly id: number;
  readonly doc: D;
  /** The draft's limiter, on the policy `sluice.draft.<id>` (never shadow: it reports what it would deny). */
  readonly limiter: Limiter;
  /** Counts not yet reported (the owner adds them to the shared totals and zeroes them). */
  readonly stats: DraftStats;
}

/** A managed policy as it is enforced. */
export interface LivePolicy<D extends ManagedPolicyDocument = ManagedPolicyDocument> {
  readonly doc: D;
  /** The policy's version (a new one for every change of its document). */
  readonly version: number;
  readonly policy: Policy;
  readonly limiter: Limiter;
  /** False when the document says `enabled: false`. */
  readonly enabled: boolean;
  readonly draft: LiveDraft<D> | undefined;
}

/** The sluice policy input of a managed document: without `enabled` and `apps`. */
export function policyInputOf(doc: ManagedPolicyDocument): PolicyInput {
  const { enabled: _enabled, apps: _apps, ...input } = doc;
  return input;
}

/** Zero counts. */
export function emptyDraftStats(): DraftStats {
  return { evaluated: 0, wouldDeny: 0, wouldDenyNewly: 0, wouldAllowNewly: 0 };
}

/**
 * Builds the live form of one policy version. Limiters are kept from `previous` when the
 * version (or the draft's id) did not change; otherwise new ones are made with `limiterFor`
 * on the same store — the keys depend only on the policy's name and algorithm, so a changed
 * limit keeps its counters. Throws a `ValidationError` when the document (or the draft's)
 * does not validate; the caller keeps its last good version then.
 */
export function livePolicy<D extends ManagedPolicyDocument>(
  doc: D,
  version: number,
  draft: DraftSource<D> | undefined,
  previous: LivePolicy<D> | undefined,
  limiterFor: (policy: Policy) => Limiter,
): LivePolicy<D> {
  const reuse =
    previous !== undefined && previous.version === version && previous.policy.name === doc.name;
  const policy = reuse ? previous.policy : definePolicy(policyInputOf(doc));
  const limiter = reuse ? previous.limiter : limiterFor(policy);
  let liveDraft: LiveDraft<D> | undefined;
  if (draft) {
    if (previous?.draft?.id === draft.id) {
      liveDraft = previous.draft;
    } else {
      const dp = definePolicy({
        ...policyInputOf(draft.doc),
        name: `${DRAFT_POLICY_PREFIX}${draft.id}`,
        shadow: false,
      });
      liveDraft = {
        id: draft.id,
        doc: draft.doc,
        limiter: limiterFor(dp),
        stats: emptyDraftStats(),
      };
    }
  }
  return { doc, version, policy, limiter, enabled: doc.enabled !== false, draft: liveDraft };
}

/** What {@link decideLive} tells its caller besides the decision. */
export interface DecideLiveHooks {
  /** The draft's verdict for this request (after its counts were taken). */
  onDraft?: (allowed: boolean) => void;
  /**
   * The draft could not be evaluated (a store error); the request is decided by the enforced
   * version alone and the draft counts nothing.
   */
  onDraftError?: (error: unknown) => void;
}

const NO_HOOKS: DecideLiveHooks = {};

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
  hooks: DecideLiveHooks = NO_HOOKS,
): Promise<Decision> {
  if (!live.enabled) return Promise.resolve(disabledDecision(live.policy, cost));
  // No options object for the common cost of 1 (the hot path).
  const options = cost === 1 ? undefined : { cost };
  const draft = live.draft;
  if (!draft) return live.limiter.limit(key, options);
  return Promise.all([
    live.limiter.limit(key, options),
    draft.limiter.limit(key, options).catch((err: unknown) => {
      // A cost the draft can never fit counts as a denial; anything else is not the caller's business.
      if (err instanceof ValidationError) return undefined;
      try {
        hooks.onDraftError?.(err);
      } catch {
        // A hook must not turn a decision into a failure.
      }
      return null;
    }),
  ]).then(([d, dd]) => {
    if (dd === null) return d;
    const draftAllowed = dd?.allowed ?? false;
    // The enforced verdict, shadow or not: what the enforced version would have done.
    const liveAllowed = d.allowed && d.reason !== "shadow";
    const s = draft.stats;
    s.evaluated++;
    if (!draftAllowed) s.wouldDeny++;
    if (!draftAllowed && liveAllowed) s.wouldDenyNewly++;
    if (draftAllowed && !liveAllowed) s.wouldAllowNewly++;
    try {
      hooks.onDraft?.(draftAllowed);
    } catch {
      // As above.
    }
    return d;
  });
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

/** Anything that may have a draft whose counts are taken: a live policy, or another kind's live form. */
export interface WithDraft {
  readonly draft?: { readonly id: number; readonly stats: DraftStats } | undefined;
}

/** One draft's counts taken by {@link takeDraftStats}. */
export interface TakenDraftStats<P extends WithDraft = LivePolicy> {
  /** What the draft belongs to. */
  readonly policy: P;
  readonly draft: NonNullable<P["draft"]>;
  /** The counts taken (the draft's own were zeroed). */
  readonly delta: DraftStats;
}

/**
 * Takes the unreported counts of every draft that has some, zeroing them, for the caller to
 * add to the shared totals; when that fails, {@link restoreDraftStats} puts them back for the
 * next time.
 */
export function takeDraftStats<P extends WithDraft>(policies: Iterable<P>): TakenDraftStats<P>[] {
  const taken: TakenDraftStats<P>[] = [];
  for (const live of policies) {
    const draft = live.draft as NonNullable<P["draft"]> | undefined;
    if (!draft || draft.stats.evaluated === 0) continue;
    const s = draft.stats;
    taken.push({ policy: live, draft, delta: { ...s } });
    s.evaluated = s.wouldDeny = s.wouldDenyNewly = s.wouldAllowNewly = 0;
  }
  return taken;
}

/** Adds counts taken by {@link takeDraftStats} back to their drafts (their report failed). */
export function restoreDraftStats(taken: Iterable<TakenDraftStats<WithDraft>>): void {
  for (const { draft, delta } of taken) {
    const s = draft.stats;
    s.evaluated += delta.evaluated;
    s.wouldDeny += delta.wouldDeny;
    s.wouldDenyNewly += delta.wouldDenyNewly;
    s.wouldAllowNewly += delta.wouldAllowNewly;
  }
}
