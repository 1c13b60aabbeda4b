/**
 * `sluice/service`: internal to `@sluice/server` — no part of sluice's public API, and no
 * promise of stability between versions. It holds what the sluice service and the library's
 * own `connectPolicies` share to enforce a managed policy the same way at every door (its
 * limiter, its `enabled` switch, its draft evaluated in shadow on keys of its own, the draft
 * counts), so that the service needs nothing of the library's root entry point beyond what
 * every user has. Applications use `connectPolicies` from `sluice` instead.
 */
export {
  DRAFT_POLICY_PREFIX,
  decideLive,
  disabledDecision,
  emptyDraftStats,
  livePolicy,
  policyInputOf,
  restoreDraftStats,
  takeDraftStats,
} from "./policies/live.js";
export type {
  DecideLiveHooks,
  DraftSource,
  DraftStats,
  LiveDraft,
  LivePolicy,
  ManagedPolicyDocument,
  TakenDraftStats,
  WithDraft,
} from "./policies/live.js";
