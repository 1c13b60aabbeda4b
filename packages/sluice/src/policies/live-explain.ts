/**
 * A managed policy's explanation, as the service and `connectPolicies` give it: the enforced
 * version's (a disabled policy allows everything, its counters shown as they stand), with the
 * draft's beside it, peeked on the draft's own keys (`sluice.draft.<id>`).
 */
import type { DecisionReason } from "../decision.js";
import { ValidationError } from "../errors.js";
import type { DraftExplanation, Explanation } from "../explain.js";
import type { LimitOptions } from "../limiter.js";
import type { LivePolicy } from "./live.js";

/**
 * Explains `key` under a live policy: the enforced version's limiter explains it (checking key
 * and cost: a bad one rejects with a `ValidationError` naming the field); `enabled` says whether
 * the policy is on; and when it has a draft, the draft's answer stands beside it (a cost the
 * draft can never fit: the draft denies, with no explanation).
 */
export async function explainLive(
  live: LivePolicy,
  key: string,
  options?: LimitOptions,
): Promise<Explanation> {
  const own = await live.limiter.explain(key, options);
  const enabled = live.enabled;
  const disabled: DecisionReason = "disabled";
  const base: Explanation = enabled
    ? { ...own, enabled }
    : { ...own, allowedNow: true, reason: disabled, freesInMs: 0, enabled };
  const draft = live.draft;
  if (draft === undefined) return base;
  const theirs = await draft.limiter.explain(key, options).catch((err: unknown) => {
    if (err instanceof ValidationError) return undefined;
    throw err;
  });
  const answer: DraftExplanation =
    theirs === undefined
      ? { id: draft.id, allowedNow: false }
      : { id: draft.id, allowedNow: theirs.allowedNow, explanation: theirs };
  return { ...base, draft: answer };
}
