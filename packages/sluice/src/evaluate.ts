import { type RuleOutcome, concurrency } from "./algorithms/index.js";
import { type Policy, algorithmOf } from "./policy.js";

/** A key's whole state in a store that keeps state in JS: per-rule states and a penalty block. */
export interface KeyState {
  /** One state per rule (undefined: fresh). */
  states: Array<number[] | undefined>;
  /** Epoch ms until which the key is blocked (0: not blocked). */
  blockUntil: number;
}

/** The result of {@link evaluate}. */
export interface Evaluation {
  readonly allowed: boolean;
  readonly rules: RuleOutcome[];
  readonly blockedForMs: number;
  /** The state to store (when `changed`), and how long to keep it. */
  readonly next: KeyState;
  readonly ttlMs: number;
  readonly changed: boolean;
}

/**
 * Multi-rule decision over JS-held state: every rule decides; the request passes only if all
 * pass, and only then are all charged. A denial changes nothing but may start a penalty block.
 * The Redis script (`lua/sluice.lua`) is a port of this function. For `concurrency`, `leaseId`
 * is the id of the permit an allowed request takes (a decision's `leaseId`, as a number).
 */
export function evaluate(
  policy: Policy,
  current: KeyState | undefined,
  nowMs: number,
  cost: number,
  commit: boolean,
  leaseId = 0,
): Evaluation {
  const alg = algorithmOf(policy);
  const n = policy.rules.length;
  const rules: RuleOutcome[] = new Array(n);
  const nextStates: Array<number[] | undefined> = new Array(n);
  let allowed = true;
  let ttl = 0;
  for (let i = 0; i < n; i++) {
    const rule = policy.rules[i]!;
    const step =
      policy.algorithm === "concurrency"
        ? concurrency.decide(current?.states[i], nowMs, rule, cost, leaseId)
        : alg.decide(current?.states[i], nowMs, rule, cost);
    rules[i] = {
      allowed: step.allowed,
      remaining: step.remaining,
      resetAfterMs: step.resetAfterMs,
      retryAfterMs: step.retryAfterMs,
    };
    nextStates[i] = step.next ?? undefined;
    if (!step.allowed) allowed = false;
    if (step.ttlMs > ttl) ttl = step.ttlMs;
  }
  const blockUntil = current !== undefined && current.blockUntil > nowMs ? current.blockUntil : 0;
  if (!allowed || blockUntil > 0) {
    // Nothing is charged: a rule that would have passed reports what it has now (cost 0),
    // not what it would have had after the charge.
    for (let i = 0; i < n; i++) {
      if (!rules[i]!.allowed) continue;
      const now0 = alg.decide(current?.states[i], nowMs, policy.rules[i]!, 0);
      rules[i] = {
        allowed: true,
        remaining: now0.remaining,
        resetAfterMs: now0.resetAfterMs,
        retryAfterMs: 0,
      };
    }
  }
  if (blockUntil > 0) {
    return {
      allowed: false,
      rules,
      blockedForMs: blockUntil - nowMs,
      next: current!,
      ttlMs: blockUntil - nowMs,
      changed: false,
    };
  }
  const effect = effectOf(policy, allowed, cost, commit);
  if (allowed) {
    const next: KeyState = { states: nextStates, blockUntil: 0 };
    return { allowed, rules, blockedForMs: 0, next, ttlMs: ttl, changed: effect === CHARGE };
  }
  if (effect === BLOCK) {
    const block = startBlock(policy, current, nowMs, rules, ttl);
    return {
      allowed,
      rules,
      blockedForMs: policy.blockMs,
      next: block.next,
      ttlMs: block.ttlMs,
      changed: true,
    };
  }
  return {
    allowed,
    rules,
    blockedForMs: 0,
    next: current ?? { states: [], blockUntil: 0 },
    ttlMs: ttl,
    changed: false,
  };
}

/** What a decision does to its key: nothing, charge it (its rules' next states), block it. */
export type Effect = typeof KEEP | typeof CHARGE | typeof BLOCK;
/** The key is left as it was. */
export const KEEP = 0;
/** The key takes every rule's next state (an admitted request that costs something). */
export const CHARGE = 1;
/** The key starts the policy's penalty block ({@link startBlock}). */
export const BLOCK = 2;

/**
 * What a decision does to a key that is not blocked, once every rule has decided (`allowed`:
 * all of them admit the request): an admitted charge (cost > 0) is taken by every rule; a
 * denial changes nothing, except that it starts the policy's penalty block when it has one;
 * a peek (`commit` false) changes nothing. {@link evaluate} and the memory store's one-rule
 * paths, which decide without building a {@link KeyState}, both follow this.
 */
export function effectOf(policy: Policy, allowed: boolean, cost: number, commit: boolean): Effect {
  if (!commit) return KEEP;
  if (allowed) return cost > 0 ? CHARGE : KEEP;
  return policy.blockMs > 0 ? BLOCK : KEEP;
}

/**
 * What a denial that starts the policy's penalty block leaves (`ttlMs`: the rules' own): the
 * key blocked for `blockMs`, its counts kept — or, with `resetOnBlock`, forgotten (the key is
 * fresh when the block ends), and then no rule in `rules` waits longer than the block (they
 * are capped in place). Shared by {@link evaluate} and the memory store's one-rule path.
 */
export function startBlock(
  policy: Policy,
  current: KeyState | undefined,
  nowMs: number,
  rules: RuleOutcome[],
  ttlMs: number,
): { next: KeyState; ttlMs: number } {
  const blockMs = policy.blockMs;
  if (policy.resetOnBlock)
    for (let i = 0; i < rules.length; i++) {
      const r = rules[i]!;
      if (r.retryAfterMs > blockMs) rules[i] = { ...r, retryAfterMs: blockMs };
    }
  const next: KeyState = {
    states:
      policy.resetOnBlock || current === undefined
        ? new Array<number[] | undefined>(policy.rules.length).fill(undefined)
        : current.states,
    blockUntil: nowMs + blockMs,
  };
  return { next, ttlMs: Math.max(ttlMs, blockMs) };
}

/** Charge `delta` to every rule unconditionally. Returns the new state and its TTL. */
export function adjustState(
  policy: Policy,
  current: KeyState | undefined,
  nowMs: number,
  delta: number,
): { next: KeyState; ttlMs: number } {
  const alg = algorithmOf(policy);
  let ttl = current && current.blockUntil > nowMs ? current.blockUntil - nowMs : 0;
  const states = policy.rules.map((rule, i) => {
    const a = alg.adjust(current?.states[i], nowMs, rule, delta);
    if (a.ttlMs > ttl) ttl = a.ttlMs;
    return a.next ?? undefined;
  });
  return {
    next: { states, blockUntil: current && current.blockUntil > nowMs ? current.blockUntil : 0 },
    ttlMs: ttl,
  };
}

/**
 * `setCount` over JS-held state (first-request `fixed-window`): every rule's window is
 * [end − period, end) at `count` units, `end` being `windowMs` from now (no window when
 * `windowMs` is 0); a penalty block in force is kept. `ttlMs` 0: nothing left to keep.
 */
export function setCountState(
  policy: Policy,
  current: KeyState | undefined,
  nowMs: number,
  count: number,
  windowMs: number,
): { next: KeyState; ttlMs: number } {
  const blockUntil = current !== undefined && current.blockUntil > nowMs ? current.blockUntil : 0;
  const end = windowMs > 0 ? nowMs + windowMs : 0;
  // fixed-window's state is [window start, count].
  const states = policy.rules.map((r) => (end > 0 ? [end - r.periodMs, count] : undefined));
  return { next: { states, blockUntil }, ttlMs: Math.max(0, Math.max(end, blockUntil) - nowMs) };
}

/**
 * Releases a `concurrency` permit over JS-held state (one rule); a penalty block in force is
 * kept. `released` is false when the permit was unknown, already released or expired.
 */
export function releaseState(
  current: KeyState | undefined,
  nowMs: number,
  permitId: number,
): { next: KeyState; ttlMs: number; released: boolean } {
  const blockUntil = current !== undefined && current.blockUntil > nowMs ? current.blockUntil : 0;
  const r = concurrency.release(current?.states[0], nowMs, permitId);
  return {
    next: { states: [r.next ?? undefined], blockUntil },
    ttlMs: Math.max(r.ttlMs, blockUntil - nowMs),
    released: r.released,
  };
}
