/**
 * `sluice/algorithms`: the pure decision code, without stores, timers or Node APIs, for
 * simulators, property tests and browsers (the admin page's simulator runs it).
 *
 * - one function per algorithm (`algorithms[name].decide(state, nowMs, rule, cost)`), see
 *   README.md beside this file for the terms;
 * - `evaluate(policy, state, nowMs, cost, commit)`: a multi-rule decision over a key's state,
 *   exactly as the memory store makes it (and as the Redis script ports it);
 * - `definePolicy` and the errors it throws, to build the `Policy` that `evaluate` takes.
 *
 * ```ts
 * import { definePolicy, evaluate, type KeyState } from "sluice/algorithms";
 * const policy = definePolicy({ name: "api", rules: [{ limit: 2, period: "1s" }] });
 * let state: KeyState | undefined;
 * for (const t of [0, 10, 20, 1000]) {
 *   const ev = evaluate(policy, state, t, 1, true);
 *   if (ev.changed) state = ev.next;
 *   console.log(t, ev.allowed); // 0 true, 10 true, 20 false, 1000 true
 * }
 * ```
 *
 * A state is kept for `ttlMs` after it changed; past that it must be treated as no state
 * (`undefined`), as the stores do.
 */
export * from "./index.js";
export { evaluate } from "../evaluate.js";
export type { Evaluation, KeyState } from "../evaluate.js";
export * from "../policy-exports.js";
export { parseDuration, formatDuration } from "../duration.js";
export type { Duration } from "../duration.js";
export { ERROR_CODES, SluiceError, ValidationError, isSluiceError } from "../errors.js";
export type { ErrorCode, ValidationIssue } from "../errors.js";
