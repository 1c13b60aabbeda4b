/**
 * `sluice/service`: internal to `@sluice/server` — no part of sluice's public API, and no
 * promise of stability between versions. It holds what the sluice service and the library's
 * own `connectPolicies` share to enforce a versioned document the same way at every door: the
 * generic live document (its version's live form, its draft evaluated in shadow on keys of its
 * own, the draft counts), which the service's Envoy domains instantiate too, and its policy
 * kind (the limiter, the `enabled` switch), so that the service needs nothing of the library's
 * root entry point beyond what every user has. Applications use `connectPolicies` from `sluice`
 * instead.
 */
export {
  DRAFT_POLICY_PREFIX,
  buildLive,
  buildLiveSet,
  draftPolicyPrefix,
  emptyDraftStats,
  restoreDraftStats,
  shadowDraft,
  takeDraftStats,
} from "./policies/live-document.js";
export type {
  DraftHooks,
  DraftSource,
  DraftStats,
  LiveDocument,
  LiveDocumentDraft,
  LiveKind,
  LiveSource,
  TakenDraftStats,
  WithDraft,
} from "./policies/live-document.js";
export { decideLive, disabledDecision, policyLiveKind, policyInputOf } from "./policies/live.js";
export { explainLive } from "./policies/live-explain.js";
export { carryOverrides, overridesOf } from "./limiter.js";
export { policyWithRules } from "./policy.js";
export type {
  LiveDraft,
  LivePolicy,
  ManagedPolicyDocument,
  PolicyDraftForm,
  PolicyForm,
} from "./policies/live.js";
