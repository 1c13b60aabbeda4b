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
  ruleToInput,
} from "./policy.js";
export { CALENDARS } from "./calendar.js";
export type { CalendarUnit, CalendarWindow } from "./calendar.js";
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
  PeriodRuleInput,
  CalendarRuleInput,
  WindowStart,
} from "./policy.js";
