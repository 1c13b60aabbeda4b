/**
 * The public names of policy.ts, listed once: `sluice` (index.ts) and `sluice/algorithms`
 * (algorithms/entry.ts) both hand them on.
 */
export {
  ADAPTIVE_ALGORITHMS,
  ALLOTMENT_ALGORITHMS,
  LEASE_ALGORITHMS,
  definePolicy,
  policyCapacity,
  policyToInput,
} from "./policy.js";
export type {
  AdaptiveAlgorithm,
  AdaptiveInput,
  AdaptiveSettings,
  AllotmentInput,
  AllotmentSettings,
  LeaseInput,
  LeaseSettings,
  OnStoreError,
  Policy,
  PolicyInput,
  Refill,
  RuleInput,
  WindowStart,
} from "./policy.js";
