import { AdaptiveGate, DEFAULT_PRIORITY, PRIORITY_TIERS, type ReleaseOutcome } from "./adaptive.js";
import { type Clock, type Timers, systemClock, systemTimers } from "./clock.js";
import { type Decision, type DecisionReason, type RuleDecision, ruleDecision } from "./decision.js";
import { SluiceError, ValidationError, type ValidationIssue } from "./errors.js";
import { type Explanation, explainOn } from "./explain.js";
import {
  type Policy,
  type PolicyInput,
  type RuleInput,
  algorithmOf,
  definePolicy,
  ruleToInput,
  isResolvedPolicy,
  policyCapacity,
  policyToInput,
  policyWithRules,
} from "./policy.js";
import { type Store, type StoreDecision, type SyncStore, isSyncStore } from "./store.js";
import { MemoryStore } from "./stores/memory.js";
import {
  RATELIMIT_METRICS,
  type Tally,
  activeSpan,
  annotateActiveSpan,
  tallyFor,
} from "./telemetry.js";

/** Options of {@link createLimiter}. */
export interface LimiterOptions {
  /** Where counters live. Default: a new in-memory store. */
  store?: Store;
  /** The policy: its input form (validated here) or a policy from `definePolicy`. */
  policy: PolicyInput | Policy;
  /** Called when the store fails and `onStoreError` decided instead (for logs and metrics). */
  onError?: (error: unknown, policy: Policy) => void;
  /**
   * Warn when a key's use of a rule crosses this share of its capacity (0 < warnAt ≤ 1, e.g.
   * 0.8): once each time it crosses from below (for a window algorithm, once per window). The
   * warning is the span event `ratelimit.near_limit` on the active span and a call of
   * `onNearLimit`. Default: no warnings.
   */
  warnAt?: number;
  /** Told when a key crosses `warnAt`. Default: one line on `console.warn`. */
  onNearLimit?: (event: NearLimitEvent) => void;
  /**
   * Time source (epoch ms) of an adaptive policy's latency samples and priority line. Default:
   * the system clock. Inject one, with `timers`, in tests and simulations.
   */
  clock?: Clock;
  /** Timers of an adaptive policy's priority line (its waits' deadlines). Default: the runtime's. */
  timers?: Timers;
  /**
   * Per-key overrides: for each key named, rules that replace the policy's rules for that key
   * alone (the algorithm and every other field stay the policy's), counted on the key's own
   * state. Each is validated as the policy with those rules would be; a bad one throws a
   * `ValidationError` naming its field (`overrides.<key>.rules.0.limit`). Change them later with
   * {@link Limiter.setOverride} and {@link Limiter.deleteOverride}.
   */
  overrides?: { readonly [key: string]: OverrideInput };
}

/** One key's override (see {@link LimiterOptions.overrides}). */
export interface OverrideInput {
  /** The rules that replace the policy's for this key. */
  rules: RuleInput[];
}

/** A key crossing its policy's `warnAt` share of a rule (see {@link LimiterOptions.warnAt}). */
export interface NearLimitEvent {
  /** The policy's name. */
  readonly policy: string;
  /** The key (never in metrics; it is in this event, for the app's logs). */
  readonly key: string;
  /** The index of the rule whose share was crossed. */
  readonly rule: number;
  /** The share of the rule's capacity in use after the decision (0–1). */
  readonly used: number;
  /** The decision that crossed it. */
  readonly decision: Decision;
}

/** Options of one call. */
export interface LimitOptions {
  /** Units to charge: a positive integer, at most the policy's capacity. Default 1. */
  cost?: number;
  /**
   * A concurrency policy with `adaptive` only: the request's tier, 0 (critical), 1 (the
   * default), 2 (degradable) or 3 (sheddable). Lower tiers see a smaller share of the limit, so
   * they are shed first (docs/adaptive.md). Ignored by other policies.
   */
  priority?: number;
}

/** Options of {@link Limiter.acquire}. */
export interface AcquireOptions extends LimitOptions {
  /**
   * A concurrency policy with `adaptive` only: when the adaptive limit has no room for this
   * tier, wait up to this long (ms) in the priority line for a permit another request releases
   * (higher tiers first, then first come). Default 0: answer the denial at once.
   */
  maxWaitMs?: number;
}

/** Options of {@link Limiter.setCount}. */
export interface SetCountOptions {
  /** How long from now the window lasts (ms, a positive integer). Default: the rule's period. */
  windowMs?: number;
}

/**
 * A permit: one concurrency slot held from {@link Limiter.acquire} (or a concurrency
 * {@link Limiter.limit}) until it is released or its policy's period runs out. Its id is the
 * decision's `leaseId`.
 */
export interface Permit {
  /** The decision; when denied, no permit is held and `release` does nothing. */
  readonly decision: Decision;
  /**
   * Give the slot back; `true` when this call freed it. Safe to call more than once. Under an
   * `adaptive` policy the time since acquire is a latency sample; pass `{ dropped: true }` when
   * the work timed out or the backend answered "overloaded".
   */
  release(outcome?: ReleaseOutcome): Promise<boolean>;
}

/**
 * The first name of {@link Permit}.
 * @deprecated Use {@link Permit} (docs/ARCHITECTURE.md, Glossary).
 */
export type Lease = Permit;

/** A charge made before the real cost is known; settle it once the work is done. */
export interface Reservation {
  /** The decision for the estimate; when denied, nothing was charged. */
  readonly decision: Decision;
  /**
   * Charge the actual cost instead of the estimate: the difference is refunded or charged as
   * debt (which later requests wait out). Only the first settle/cancel counts.
   */
  settle(actual: number): Promise<void>;
  /** Refund the whole estimate. */
  cancel(): Promise<void>;
}

/** Decides whether requests may pass under one policy. */
export interface Limiter {
  /** The validated policy. */
  readonly policy: Policy;
  /** The store in use. */
  readonly store: Store;
  /**
   * Resolves once the store can decide from its backend (Redis connected); rejects with a
   * `StoreError` when the first connection failed or did not come within the store's connect
   * budget. Optional: `limit()` itself waits for the first connection.
   */
  ready(): Promise<void>;
  /**
   * {@link Limiter.limit} when the answer is at hand — always over the memory store, and over
   * the Redis store when an allotment this process holds covers the request — else `undefined`
   * (nothing was charged: call `limit`). Throws on bad input.
   */
  tryLimitSync(key: string, options?: LimitOptions): Decision | undefined;
  /** Decide one request and charge it if allowed. Never rejects for a denial or (per `onStoreError`) a store failure. */
  limit(key: string, options?: LimitOptions): Promise<Decision>;
  /** What `limit` would answer (for `cost`, default 1) without charging; `remaining` is what is left now. */
  peek(key: string, options?: LimitOptions): Promise<Decision>;
  /**
   * Why `key` is (or is not) limited now, for a request of `cost` (default 1), charging nothing:
   * each rule's state, the rule that denies (or will deny first) and when it frees, a penalty
   * block, and what would answer the next decision (the store, the Redis store's deny cache, an
   * allotment this process holds). Built on `peek`. Rejects with a `ValidationError` naming
   * `key` or `cost` on bad input, and with the store's error when the store fails.
   */
  explain(key: string, options?: LimitOptions): Promise<Explanation>;
  /** Forget the key's counters and penalty. */
  reset(key: string): Promise<void>;
  /** Give back `cost` units charged earlier (e.g. to count only failed requests). */
  refund(key: string, cost?: number): Promise<void>;
  /** `concurrency`: take a permit; release it when the work is done. */
  acquire(key: string, options?: AcquireOptions): Promise<Permit>;
  /**
   * `concurrency`: release a permit by its id (`decision.leaseId`). Resolves `true` when the
   * permit was held and is now freed, `false` when it was unknown, already released or expired.
   * `outcome` as {@link Permit.release}'s.
   */
  release(key: string, leaseId: string, outcome?: ReleaseOutcome): Promise<boolean>;
  /**
   * An `adaptive` concurrency policy's figures in this process: the limit now, the permits in
   * flight and the RTT baseline (ms; NaN before the first sample). Undefined for other policies.
   */
  adaptiveState(): AdaptiveState | undefined;
  /** Charge an estimate now and settle the actual cost later (LLM tokens, bytes, rows). */
  reserve(key: string, estimate: number): Promise<Reservation>;
  /**
   * `fixed-window` policies with `windowStart: "first-request"` only: put the key's window at
   * `count` units — which may exceed the limit, and then holds the key denied until the window
   * ends — in a window that ends `windowMs` from now (default: the rule's period). A penalty
   * block is left as it is. For moderation tools and for counts
   * imported from elsewhere (rate-limiter-flexible's `set` and `block` are this).
   */
  setCount(key: string, count: number, options?: SetCountOptions): Promise<void>;
  /**
   * Gives `key` rules of its own in place of the policy's (a tenant's plan): the same policy —
   * algorithm, penalty, shadow, every other field — with these rules, counted on the key's own
   * state (the same store keys: with as many rules as the policy's, the key keeps its counts).
   * Validated as the policy with these rules would be: a bad override throws a
   * `ValidationError` naming its field (`overrides.<key>.rules.0.limit`) and leaves the key's
   * override, if any, as it was.
   */
  setOverride(key: string, rules: RuleInput[]): void;
  /** Removes `key`'s override (the policy's rules apply again); `true` when it had one. */
  deleteOverride(key: string): boolean;
  /** The rules of `key`'s override (as a policy's input writes them), or undefined when it has none. */
  override(key: string): RuleInput[] | undefined;
}

/** See {@link Limiter.adaptiveState}. */
export interface AdaptiveState {
  /** The limit priority 0 sees (the whole limit). */
  readonly limit: number;
  /** Permits this limiter holds. */
  readonly inFlight: number;
  /** The latency the backend gives without a queue of ours (ms), NaN before any sample. */
  readonly rttBaselineMs: number;
}

/**
 * A limiter over a store that decides in-process (the memory store, the default): besides the
 * {@link Limiter} methods it answers synchronously — for hot loops, per-message limits on
 * sockets, log throttling — with the same semantics and the same decisions.
 */
export interface SyncLimiter extends Limiter {
  readonly store: SyncStore;
  /** {@link Limiter.limit}, synchronously. Throws (instead of rejecting) on bad input. */
  limitSync(key: string, options?: LimitOptions): Decision;
  /** {@link Limiter.peek}, synchronously. */
  peekSync(key: string, options?: LimitOptions): Decision;
}

/**
 * Creates a limiter for one policy. Over the memory store (the default) the limiter is a
 * {@link SyncLimiter}.
 *
 * ```ts
 * const limiter = createLimiter({
 *   store: memoryStore(),
 *   policy: { name: "api", algorithm: "gcra", rules: [{ limit: 100, period: "1m", burst: 20 }] },
 * });
 * const d = await limiter.limit("user:42");
 * const now = limiter.limitSync("user:42"); // the same, without a promise
 * ```
 */
export function createLimiter(options: LimiterOptions & { store?: SyncStore }): SyncLimiter;
export function createLimiter(options: LimiterOptions): Limiter;
export function createLimiter(options: LimiterOptions): Limiter {
  if (typeof options !== "object" || options === null) {
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid limiter options", [
      { path: "", message: "must be an object" },
    ]);
  }
  const policy = isResolvedPolicy(options.policy) ? options.policy : definePolicy(options.policy);
  const warnings =
    options.warnAt === undefined
      ? undefined
      : nearLimitWarnings(options.warnAt, options.onNearLimit);
  const gate =
    policy.adaptive === undefined
      ? undefined
      : new AdaptiveGate(
          policy.adaptive,
          policy.rules[0]!.periodMs,
          options.clock ?? systemClock,
          options.timers ?? systemTimers,
        );
  const limiter = new PolicyLimiter(
    policy,
    options.store ?? new MemoryStore(),
    options.onError,
    warnings,
    gate,
  );
  const overrides = options.overrides;
  if (overrides !== undefined) {
    if (typeof overrides !== "object" || overrides === null || Array.isArray(overrides))
      throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid limiter options", [
        { path: "overrides", message: "must be an object of keys to { rules }" },
      ]);
    // Every bad override at once, each naming its field.
    const issues: ValidationIssue[] = [];
    for (const [key, override] of Object.entries(overrides)) {
      try {
        if (typeof override !== "object" || override === null)
          throw new ValidationError("SLUICE_ERR_POLICY", "Invalid override", [
            { path: `overrides.${key}`, message: "must be an object { rules }" },
          ]);
        limiter.setOverride(key, override.rules, `overrides.${key}`);
      } catch (err) {
        if (!(err instanceof ValidationError)) throw err;
        issues.push(...err.issues);
      }
    }
    if (issues.length > 0)
      throw new ValidationError(
        "SLUICE_ERR_POLICY",
        `Invalid overrides of policy "${policy.name}"`,
        issues,
      );
  }
  return limiter;
}

/** Most distinct rule sets a limiter keeps resolved for its overrides (overrides share them). */
const RESOLVED_RULE_SETS = 10_000;

class PolicyLimiter implements Limiter {
  private readonly capacity: number;
  /** The store when it decides synchronously. */
  private readonly sync: SyncStore | undefined;
  /** The insurance limiter, built for `instances` sharing the limit; rebuilt when that changes. */
  private insurance: { store: MemoryStore; policy: Policy; instances: number } | undefined;
  /**
   * Per-key overrides: the policy with the key's rules. A key without one costs one look-up
   * here; keys with the same rules share one policy object ({@link PolicyLimiter.resolved}).
   */
  readonly overrides = new Map<string, Policy>();
  /** The override policies made so far, by their rules as JSON: 100,000 keys on a few plans hold a few policies. */
  private readonly resolved = new Map<string, Policy>();

  /** This policy's decisions on this kind of store, for OpenTelemetry (telemetry.ts). */
  readonly tally: Tally;

  constructor(
    readonly policy: Policy,
    readonly store: Store,
    private readonly onError: ((error: unknown, policy: Policy) => void) | undefined,
    private readonly warnings?: NearLimitWarnings,
    private readonly gate?: AdaptiveGate,
  ) {
    this.capacity = policyCapacity(policy);
    this.sync = isSyncStore(store) ? store : undefined;
    this.tally = tallyFor(policy.name, store.kind, !COUNTING_POLICIES.has(policy));
    if (store.allotmentsHeld !== undefined) {
      const name = policy.name;
      this.tally.allotments = () => store.allotmentsHeld?.(name) ?? 0;
    }
    if (store.regionStats !== undefined) this.tally.regions = () => store.regionStats!(policy);
    if (gate !== undefined) this.tally.adaptive = () => this.adaptiveState()!;
  }

  ready(): Promise<void> {
    return this.store.ready?.() ?? Promise.resolve();
  }

  // The faces of one path (decideWith). Not `async`: the awaited path is one promise (already
  // resolved for a synchronous store), not a chain of them. Bad input rejects rather than throws.
  limit(key: string, options?: LimitOptions): Promise<Decision> {
    try {
      return Promise.resolve(this.decideWith(key, options, "limit"));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  tryLimitSync(key: string, options?: LimitOptions): Decision | undefined {
    return this.decideWith(key, options, "tryLimitSync");
  }

  limitSync(key: string, options?: LimitOptions): Decision {
    return this.decideWith(key, options, "limitSync");
  }

  peek(key: string, options?: LimitOptions): Promise<Decision> {
    try {
      return Promise.resolve(this.decideWith(key, options, "peek"));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  peekSync(key: string, options?: LimitOptions): Decision {
    return this.decideWith(key, options, "peekSync");
  }

  explain(key: string, options?: LimitOptions): Promise<Explanation> {
    try {
      const policy = this.overrides.get(key) ?? this.policy;
      const cost = options === undefined ? 1 : this.checkCost(options.cost ?? 1, "cost", policy);
      checkKey(key);
      const explained = explainOn(policy, this.store, key, cost);
      return policy === this.policy ? explained : explained.then((e) => ({ ...e, override: true }));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  async reset(key: string): Promise<void> {
    checkKey(key);
    await this.store.reset(this.overrides.get(key) ?? this.policy, key);
  }

  async refund(key: string, cost = 1): Promise<void> {
    checkKey(key);
    const policy = this.overrides.get(key) ?? this.policy;
    this.checkCost(cost, "cost", policy);
    await this.store.adjust(policy, key, -cost);
  }

  setOverride(key: string, rules: RuleInput[], field = `overrides.${key}`): void {
    checkKey(key);
    // Validated (and shared) before it replaces anything: a bad override leaves the key as it was.
    this.overrides.set(key, this.overridePolicy(rules, field));
  }

  deleteOverride(key: string): boolean {
    checkKey(key);
    return this.overrides.delete(key);
  }

  override(key: string): RuleInput[] | undefined {
    const policy = this.overrides.get(key);
    return policy === undefined ? undefined : policyToInput(policy).rules;
  }

  /**
   * The policy of an override's rules: made once per distinct set of rules (validated by
   * `definePolicy` as this policy with those rules), then shared by every key that has them.
   */
  overridePolicy(rules: unknown, field: string): Policy {
    let id: string | undefined;
    try {
      id = JSON.stringify(rules);
    } catch {
      // Not JSON (a cycle, a BigInt): validation says what is wrong with it.
    }
    const known = id === undefined ? undefined : this.resolved.get(id);
    if (known !== undefined) return known;
    const policy = policyWithRules(this.policy, rules, field);
    if (id !== undefined) {
      if (this.resolved.size >= RESOLVED_RULE_SETS) this.resolved.clear();
      this.resolved.set(id, policy);
    }
    return policy;
  }

  async acquire(key: string, options?: AcquireOptions): Promise<Permit> {
    if (this.policy.algorithm !== "concurrency") {
      throw new SluiceError(
        "SLUICE_ERR_UNSUPPORTED",
        `acquire() needs a concurrency policy; "${this.policy.name}" uses ${this.policy.algorithm}`,
      );
    }
    const maxWaitMs = checkMaxWait(options?.maxWaitMs);
    const release = (id: string, outcome?: ReleaseOutcome) => this.release(key, id, outcome);
    const d = await this.limit(key, options);
    const gate = this.gate;
    if (d.allowed || gate === undefined || maxWaitMs === 0 || !SHED.has(d))
      return permitOf(d, release);
    // Shed by the adaptive limit: wait in the priority line for a permit released here.
    const priority = this.checkPriority(options?.priority);
    const cost = options?.cost ?? 1;
    return new Promise<Permit>((resolve, reject) => {
      gate.wait(
        priority,
        maxWaitMs,
        () => {
          const started = this.tally.begin();
          try {
            const policy = this.overrides.get(key) ?? this.policy;
            const r = this.decideOnStore(policy, key, cost, true, "limit", started, gate, priority);
            void Promise.resolve(r).then((next) => resolve(permitOf(next!, release)), reject);
          } catch (err) {
            reject(err);
          }
        },
        () => resolve(permitOf(d, release)),
      );
    });
  }

  release(key: string, leaseId: string, outcome?: ReleaseOutcome): Promise<boolean> {
    try {
      checkKey(key);
      const policy = this.overrides.get(key) ?? this.policy;
      if (typeof leaseId !== "string" || leaseId === "") {
        throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid release", [
          { path: "leaseId", message: "must be a non-empty string" },
        ]);
      }
      if (outcome !== undefined && (typeof outcome !== "object" || outcome === null)) {
        throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid release", [
          { path: "outcome", message: "must be an object { dropped }" },
        ]);
      }
      this.tally.permitReleased();
      const released = this.store.release(policy, key, leaseId);
      // After the store's release (done at once in memory): a waiter let in next finds it free.
      this.gate?.released(leaseId, outcome);
      return released;
    } catch (err) {
      return Promise.reject(err);
    }
  }

  adaptiveState(): AdaptiveState | undefined {
    const gate = this.gate;
    if (gate === undefined) return undefined;
    return {
      limit: gate.limit,
      inFlight: gate.inFlight,
      rttBaselineMs: gate.controller.rttBaselineMs,
    };
  }

  async reserve(key: string, estimate: number): Promise<Reservation> {
    if (this.policy.algorithm === "concurrency") {
      throw new SluiceError(
        "SLUICE_ERR_UNSUPPORTED",
        `reserve() does not apply to concurrency policies ("${this.policy.name}"); use acquire()`,
      );
    }
    const decision = await this.limit(key, { cost: estimate });
    let done = !decision.allowed || decision.reason !== undefined;
    const settleBy = async (delta: number) => {
      if (done) return;
      done = true;
      // The key's policy as it is now: an override set meanwhile settles on the key's state.
      if (delta !== 0) await this.store.adjust(this.overrides.get(key) ?? this.policy, key, delta);
    };
    return {
      decision,
      settle: async (actual: number) => {
        checkSettle(actual);
        await settleBy(actual - estimate);
      },
      cancel: () => settleBy(-estimate),
    };
  }

  async setCount(key: string, count: number, options?: SetCountOptions): Promise<void> {
    checkKey(key);
    if (this.policy.windowStart !== "first-request") {
      throw new SluiceError(
        "SLUICE_ERR_UNSUPPORTED",
        `setCount() needs a fixed-window policy with windowStart "first-request"; "${this.policy.name}" uses ${this.policy.algorithm}${this.policy.algorithm === "fixed-window" ? " with aligned windows" : ""}`,
      );
    }
    const issues: ValidationIssue[] = [];
    if (typeof count !== "number" || !Number.isSafeInteger(count) || count < 0)
      issues.push({ path: "count", message: `must be a whole number ≥ 0 (got ${String(count)})` });
    const windowMs = options?.windowMs;
    if (
      windowMs !== undefined &&
      (typeof windowMs !== "number" || !Number.isSafeInteger(windowMs) || windowMs <= 0)
    )
      issues.push({
        path: "windowMs",
        message: `must be a positive integer (got ${String(windowMs)})`,
      });
    if (issues.length > 0)
      throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid setCount", issues);
    if (this.store.setCount === undefined) {
      throw new SluiceError(
        "SLUICE_ERR_UNSUPPORTED",
        `setCount() needs a store that implements it; the ${this.store.kind} store does not`,
      );
    }
    // One window for every rule: the given length, else each rule's own (a single rule's).
    const policy = this.overrides.get(key) ?? this.policy;
    const rules = policy.rules;
    if (windowMs !== undefined || rules.length === 1) {
      await this.store.setCount(policy, key, count, windowMs ?? rules[0]!.periodMs);
      return;
    }
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid setCount", [
      { path: "windowMs", message: "is required for a policy with several rules" },
    ]);
  }

  /**
   * The one path of a decision (`commit`: limit, limitSync, tryLimitSync) or a peek, for each
   * face: checks the input (throws), asks the store, and builds the {@link Decision} — at once
   * over a synchronous store, else when the store answers. The awaited faces (`limit`, `peek`)
   * decide a store failure by `onStoreError`; the synchronous ones let it throw, and
   * `tryLimitSync` answers undefined when the store cannot decide at once.
   */
  private decideWith(key: string, options: LimitOptions | undefined, face: SyncFace): Decision;
  private decideWith(
    key: string,
    options: LimitOptions | undefined,
    face: "tryLimitSync",
  ): Decision | undefined;
  private decideWith(
    key: string,
    options: LimitOptions | undefined,
    face: AwaitedFace,
  ): Decision | Promise<Decision>;
  private decideWith(
    key: string,
    options: LimitOptions | undefined,
    face: Face,
  ): Decision | Promise<Decision> | undefined {
    // A key's override, else the policy: one look-up, none while the limiter has no override.
    const overrides = this.overrides;
    const policy = overrides.size === 0 ? this.policy : (overrides.get(key) ?? this.policy);
    const cost = options === undefined ? 1 : this.checkCost(options.cost ?? 1, "cost", policy);
    checkKey(key);
    const commit = face !== "peek" && face !== "peekSync";
    const gate = this.gate;
    if (gate !== undefined && commit) {
      const priority = this.checkPriority(options?.priority);
      // A decision is counted (and, in a sample, timed); a peek is not.
      const started = this.tally.begin();
      if (!gate.admits(priority))
        return this.counted(policy, this.shed(gate, priority, cost), key, started);
      gate.pending++;
      return this.decideOnStore(policy, key, cost, commit, face, started, gate, priority);
    }
    return this.decideOnStore(
      policy,
      key,
      cost,
      commit,
      face,
      commit ? this.tally.begin() : NOT_COUNTED,
    );
  }

  /**
   * {@link PolicyLimiter.decideWith} once the input is checked: the store's answer. Under an
   * adaptive policy (`gate`), a slot was counted as pending for it; it becomes the permit, or
   * is given back when the store refuses.
   */
  private decideOnStore(
    policy: Policy,
    key: string,
    cost: number,
    commit: boolean,
    face: Face,
    started: number,
    gate?: AdaptiveGate,
    priority = DEFAULT_PRIORITY,
  ): Decision | Promise<Decision> | undefined {
    if (gate !== undefined) {
      let r: Decision | Promise<Decision> | undefined;
      try {
        r = this.decideOnStore(policy, key, cost, commit, face, started);
      } catch (err) {
        gate.settled(undefined, priority);
        throw err;
      }
      if (r === undefined || !(r instanceof Promise)) return this.gated(gate, priority, r);
      return r.then(
        (d) => this.gated(gate, priority, d)!,
        (err: unknown) => {
          gate.settled(undefined, priority);
          throw err;
        },
      );
    }
    const sync = this.sync;
    if (sync !== undefined) {
      try {
        const sd = commit ? sync.decideSync(policy, key, cost) : sync.peekSync(policy, key, cost);
        return this.answer(policy, sd, key, cost, started);
      } catch (err) {
        // The synchronous faces let a store failure throw.
        if (face !== "limit" && face !== "peek") throw err;
        return this.onStoreFailure(policy, err, key, cost, started);
      }
    }
    if (face === "limitSync" || face === "peekSync") {
      throw new SluiceError(
        "SLUICE_ERR_UNSUPPORTED",
        `${face}() needs a store that decides in-process (the memory store); this limiter uses the ${this.store.kind} store: use ${face.replace("Sync", "")}()`,
      );
    }
    if (face === "tryLimitSync") {
      const sd = this.store.decideLocal?.(policy, key, cost);
      return sd === undefined
        ? undefined
        : this.counted(policy, this.finish(policy, sd, cost), key, started);
    }
    let pending: Promise<StoreDecision>;
    try {
      const req = { policy, key, cost };
      pending = commit ? this.store.decide(req) : this.store.peek(req);
    } catch (err) {
      // A store that throws instead of rejecting is a store failure all the same.
      return this.onStoreFailure(policy, err, key, cost, started);
    }
    return pending.then(
      (sd) => this.answer(policy, sd, key, cost, started),
      (err: unknown) => this.onStoreFailure(policy, err, key, cost, started),
    );
  }

  /**
   * The store's answer under an adaptive policy: an allowed permit is counted in flight, and
   * reports the tier's limit and what is left of it.
   */
  private gated(
    gate: AdaptiveGate,
    priority: number,
    d: Decision | undefined,
  ): Decision | undefined {
    const id = d !== undefined && d.allowed && d.reason === undefined ? d.leaseId : undefined;
    gate.settled(id, priority);
    if (d === undefined || id === undefined) return d;
    const limit = gate.limitFor(priority);
    const remaining = Math.max(0, Math.min(d.remaining, limit - gate.inFlight));
    const rule = { ...d.rules[0]!, limit, remaining };
    return { ...d, limit, remaining, rules: [rule] };
  }

  /** The denial of a request the adaptive limit has no room for (its tier's share is in use). */
  private shed(gate: AdaptiveGate, priority: number, cost: number): Decision {
    const rule = this.policy.rules[0]!;
    const baseline = gate.controller.rttBaselineMs;
    // A permit frees about every baseline/limit ms; say one baseline, at least a millisecond.
    const retryAfterMs = Math.max(1, Math.ceil(Number.isNaN(baseline) ? 1 : baseline));
    const limit = gate.limitFor(priority);
    const r: RuleDecision = {
      ...ruleDecision(rule, {
        allowed: false,
        remaining: 0,
        resetAfterMs: retryAfterMs,
        retryAfterMs,
      }),
      limit,
    };
    const d = toDecision(this.policy, { allowed: false, rules: [r], blockedForMs: 0 }, cost);
    if (this.policy.shadow) return { ...d, allowed: true, retryAfterMs: 0, reason: "shadow" };
    SHED.add(d);
    return d;
  }

  private checkPriority(priority: unknown): number {
    if (priority === undefined) return DEFAULT_PRIORITY;
    if (
      typeof priority !== "number" ||
      !Number.isInteger(priority) ||
      priority < 0 ||
      priority >= PRIORITY_TIERS
    ) {
      throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid priority", [
        {
          path: "priority",
          message: `must be an integer from 0 (critical) to ${PRIORITY_TIERS - 1} (sheddable) (got ${String(priority)})`,
        },
      ]);
    }
    return priority;
  }

  /** The decision of a store's answer: a decision's (counted), or a peek's. */
  private answer(
    policy: Policy,
    sd: StoreDecision,
    key: string,
    cost: number,
    started: number,
  ): Decision {
    return started === NOT_COUNTED
      ? this.peeked(policy, sd, cost)
      : this.counted(policy, this.finish(policy, sd, cost), key, started);
  }

  /**
   * A decision made: counted in the policy's tally (timed when `started` ≥ 0), its permit
   * remembered, and a denial marked on the active span (an allowed one is the door's to mark:
   * the bare limiter's hot path stays a counter).
   */
  private counted(policy: Policy, d: Decision, key: string, started: number): Decision {
    const tally = this.tally;
    tally.count(d, started);
    if (d.leaseId !== undefined && d.allowed) tally.permitTaken(policy.rules[0]!.periodMs);
    if (!d.allowed || d.reason === "shadow") annotateActiveSpan(d);
    if (this.warnings !== undefined && d.allowed) this.warnings(policy, key, d);
    return d;
  }

  /** `cost` checked against `policy` (this policy, or a key's override). */
  private checkCost(cost: unknown, field: string, policy: Policy = this.policy): number {
    if (typeof cost !== "number" || !Number.isInteger(cost) || cost <= 0) {
      throw new ValidationError("SLUICE_ERR_COST", "Invalid cost", [
        {
          path: field,
          message: `must be a positive integer (got ${typeof cost === "number" ? String(cost) : typeof cost})`,
        },
      ]);
    }
    const capacity = policy === this.policy ? this.capacity : policyCapacity(policy);
    if (cost > capacity) {
      throw new ValidationError("SLUICE_ERR_COST", "Invalid cost", [
        {
          path: field,
          message: `${cost} can never fit policy "${policy.name}", whose capacity is ${capacity}${policy === this.policy ? "" : " for this key (its override)"}`,
        },
      ]);
    }
    return cost;
  }

  private finish(policy: Policy, sd: StoreDecision, cost: number): Decision {
    const reason: DecisionReason | undefined =
      sd.reason ?? (sd.blockedForMs > 0 ? "blocked" : undefined);
    const d = toDecision(policy, sd, cost, reason);
    if (policy.shadow && !d.allowed)
      return { ...d, allowed: true, retryAfterMs: 0, reason: "shadow" };
    return d;
  }

  /** A peek reports what is left now, before the hypothetical request. */
  private peeked(policy: Policy, sd: StoreDecision, cost: number): Decision {
    // A denial already reports every rule uncharged; an allowed peek reports every rule as if
    // charged.
    const rules = sd.allowed
      ? sd.rules.map((r) => ({ ...r, remaining: r.remaining + cost }))
      : sd.rules;
    return this.finish(policy, { ...sd, rules }, cost);
  }

  /** The decision when the store failed, by `onStoreError`; throws a `ValidationError` on. */
  private onStoreFailure(
    policy: Policy,
    err: unknown,
    key: string,
    cost: number,
    started: number,
  ): Decision {
    if (err instanceof ValidationError) throw err;
    const commit = started !== NOT_COUNTED;
    const d = this.failedDecision(policy, err, key, cost, commit);
    return commit ? this.counted(policy, d, key, started) : d;
  }

  /** {@link PolicyLimiter.onStoreFailure}'s decision. */
  private failedDecision(
    policy: Policy,
    err: unknown,
    key: string,
    cost: number,
    commit: boolean,
  ): Decision {
    try {
      this.onError?.(err, this.policy);
    } catch {
      // A throwing error hook must not turn a decision into a crash.
    }
    const mode = policy.onStoreError;
    // The insurance limiter keeps to the policy's rules (its share of them), override or not.
    if (mode === "insurance") return this.insured(key, cost, commit);
    const allowed = mode === "allow";
    const spec = algorithmOf(policy);
    // Nothing is known about the counters. Failing open, each rule reports what it admits at
    // most (its capacity, less this request's cost unless it is a peek): the limiter lets
    // requests through, so nothing reads as "exhausted". Failing closed, nothing passes: 0.
    // No reset and no wait are invented; headers show neither (see http/headers.ts).
    const rules: RuleDecision[] = policy.rules.map((r) =>
      ruleDecision(r, {
        allowed,
        remaining: allowed ? spec.capacity(r) - (commit ? cost : 0) : 0,
        resetAfterMs: 0,
        retryAfterMs: 0,
      }),
    );
    return toDecision(policy, { allowed, rules, blockedForMs: 0 }, cost, "store-error");
  }

  /**
   * Decides with the in-memory insurance limiter (this instance's share of each rule). A cost
   * larger than the share can never fit it: such a request is denied, charging nothing, with
   * `retryAfterMs` the longest rule period (by then the store may be back).
   */
  private insured(key: string, cost: number, commit: boolean): Decision {
    const { store, policy } = this.insuranceFor();
    const capacity = policyCapacity(policy);
    if (cost > capacity) {
      const now = store.peekSync(policy, key, 1);
      const rules = now.rules.map((r) => {
        const fits = cost <= algorithmOf(policy).capacity(r);
        return fits
          ? { ...r, remaining: r.remaining + 1 }
          : {
              ...r,
              allowed: false,
              remaining: r.remaining + (r.allowed ? 1 : 0),
              retryAfterMs: r.periodMs,
            };
      });
      return toDecision(
        policy,
        { allowed: false, rules, blockedForMs: 0 },
        cost,
        "insurance",
        this.policy.name,
      );
    }
    const sd = commit ? store.decideSync(policy, key, cost) : store.peekSync(policy, key, cost);
    return toDecision(policy, sd, cost, "insurance", this.policy.name);
  }

  /** The in-memory insurance limiter: this instance's share of each rule. */
  private insuranceFor(): { store: MemoryStore; policy: Policy } {
    const instances = Math.max(
      1,
      this.policy.insuranceInstances || this.store.liveInstances?.() || 1,
    );
    if (this.insurance?.instances !== instances) {
      const share = (n: number) => Math.max(1, Math.floor(n / instances));
      const policy = definePolicy({
        name: this.policy.name,
        algorithm: this.policy.algorithm,
        rules: this.policy.rules.map((r) => {
          const input = ruleToInput(r, false);
          input.limit = share(r.limit);
          if (this.policy.algorithm === "gcra" || this.policy.algorithm === "token-bucket")
            input.burst = share(r.burst);
          return input;
        }),
        ...(this.policy.algorithm === "fixed-window"
          ? { windowStart: this.policy.windowStart }
          : {}),
        ...(this.policy.algorithm === "token-bucket" ? { refill: this.policy.refill } : {}),
      });
      // Keep the counters across a change of share: only the policy is rebuilt.
      this.insurance = {
        store: this.insurance?.store ?? new MemoryStore({ maxKeys: 100_000 }),
        policy,
        instances,
      };
    }
    return this.insurance;
  }
}

/** The faces of {@link PolicyLimiter.decideWith}: the awaited ones, and the synchronous ones. */
type AwaitedFace = "limit" | "peek";
type SyncFace = "limitSync" | "peekSync";
type Face = AwaitedFace | SyncFace | "tryLimitSync";

/** The denials the adaptive limit made (a request may wait in the priority line after one). */
const SHED = new WeakSet<Decision>();

/** Checks {@link AcquireOptions.maxWaitMs}: a whole number of ms ≥ 0. */
function checkMaxWait(ms: unknown): number {
  if (ms === undefined) return 0;
  if (typeof ms !== "number" || !Number.isSafeInteger(ms) || ms < 0) {
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid acquire", [
      { path: "maxWaitMs", message: `must be a whole number of ms ≥ 0 (got ${String(ms)})` },
    ]);
  }
  return ms;
}

/** `started` of a peek: not a decision, so neither counted nor timed. */
const NOT_COUNTED = -2;

function checkKey(key: unknown): asserts key is string {
  if (typeof key !== "string" || key.length === 0) {
    throw new ValidationError("SLUICE_ERR_KEY", "Invalid key", [
      {
        path: "key",
        message: `must be a non-empty string (got ${typeof key === "string" ? "an empty string" : typeof key})`,
      },
    ]);
  }
}

/** Builds a {@link Decision} from a store's answer: picks the reported rule, fills the totals. */
export function toDecision(
  policy: Policy,
  sd: StoreDecision,
  cost: number,
  reason?: DecisionReason,
  policyName = policy.name,
): Decision {
  const rules = sd.rules;
  let pick = 0;
  let remaining = rules[0]!.remaining;
  for (let i = 1; i < rules.length; i++) {
    const r = rules[i]!;
    if (r.remaining < remaining) remaining = r.remaining;
    const p = rules[pick]!;
    const better = sd.allowed
      ? r.remaining < p.remaining ||
        (r.remaining === p.remaining && r.resetAfterMs > p.resetAfterMs)
      : (!r.allowed && p.allowed) || (r.allowed === p.allowed && r.retryAfterMs > p.retryAfterMs);
    if (better) pick = i;
  }
  const reported = rules[pick]!;
  const allowed = sd.allowed;
  const resetAfterMs = allowed
    ? reported.resetAfterMs
    : Math.max(reported.resetAfterMs, sd.blockedForMs);
  const retryAfterMs = allowed ? 0 : Math.max(reported.retryAfterMs, sd.blockedForMs);
  const limit = reported.limit;
  const leaseId = sd.leaseId;
  // One object literal per shape (no spread): decisions are made at millions per second.
  if (reason === undefined) {
    if (leaseId === undefined) {
      return {
        allowed,
        limit,
        remaining,
        resetAfterMs,
        retryAfterMs,
        policy: policyName,
        rule: pick,
        rules,
        cost,
      };
    }
    return {
      allowed,
      limit,
      remaining,
      resetAfterMs,
      retryAfterMs,
      policy: policyName,
      rule: pick,
      rules,
      cost,
      leaseId,
    };
  }
  if (leaseId === undefined) {
    return {
      allowed,
      limit,
      remaining,
      resetAfterMs,
      retryAfterMs,
      policy: policyName,
      rule: pick,
      rules,
      cost,
      reason,
    };
  }
  return {
    allowed,
    limit,
    remaining,
    resetAfterMs,
    retryAfterMs,
    policy: policyName,
    rule: pick,
    rules,
    cost,
    reason,
    leaseId,
  };
}

/** Refuses a reservation's `settle(actual)` that is not a whole number ≥ 0. */
export function checkSettle(actual: unknown): void {
  if (typeof actual !== "number" || !Number.isInteger(actual) || actual < 0) {
    throw new ValidationError("SLUICE_ERR_COST", "Invalid settle", [
      { path: "actual", message: `must be a whole number ≥ 0 (got ${String(actual)})` },
    ]);
  }
}

/**
 * The {@link Permit} of a concurrency decision: `release` gives the permit back through
 * `release(leaseId)` once (later calls, and a denied decision's, resolve `false`).
 */
export function permitOf(
  decision: Decision,
  release: (leaseId: string, outcome?: ReleaseOutcome) => Promise<boolean>,
): Permit {
  let released = decision.leaseId === undefined;
  return {
    decision,
    release: (outcome?: ReleaseOutcome) => {
      if (released) return Promise.resolve(false);
      released = true;
      return release(decision.leaseId!, outcome);
    },
  };
}

/** The `warnAt` check of a limiter: told every allowed decision (and its policy), warns on a crossing. */
type NearLimitWarnings = (policy: Policy, key: string, d: Decision) => void;

/**
 * The faces' counting policies (compat/shared.ts's `counterPolicy`): their limiters only count
 * (the face decides and tells its verdict to telemetry), so their answers are not decisions.
 */
export const COUNTING_POLICIES = new WeakSet<Policy>();

/**
 * The per-key overrides of a limiter `createLimiter` made (each key's policy: the limiter's with
 * the key's rules), or undefined for any other limiter. Read-only: change them through the
 * limiter.
 */
export function overridesOf(limiter: Limiter): ReadonlyMap<string, Policy> | undefined {
  return limiter instanceof PolicyLimiter ? limiter.overrides : undefined;
}

/**
 * Gives `to` (a new version of a policy) the overrides of `from` (the version before it): each
 * made anew on `to`'s policy, once per distinct set of rules. An override whose rules do not
 * validate on the new version is left out (the key gets the policy's rules) and `onDropped` is
 * told. Limiters `createLimiter` did not make are left as they are.
 */
export function carryOverrides(
  from: Limiter,
  to: Limiter,
  onDropped?: (key: string, error: unknown) => void,
): void {
  if (!(from instanceof PolicyLimiter) || !(to instanceof PolicyLimiter) || from === to) return;
  const made = new Map<Policy, Policy | { error: unknown }>();
  for (const [key, before] of from.overrides) {
    let after = made.get(before);
    if (after === undefined) {
      try {
        after = to.overridePolicy(policyToInput(before).rules, `overrides.${key}`);
      } catch (error) {
        after = { error };
      }
      made.set(before, after);
    }
    if ("error" in after) onDropped?.(key, after.error);
    else to.overrides.set(key, after);
  }
}

/** The tally a limiter counts in (its own, for sluice's limiters: no look-up). */
export function tallyOf(limiter: Limiter): Tally {
  return limiter instanceof PolicyLimiter
    ? limiter.tally
    : tallyFor(limiter.policy.name, limiter.store.kind);
}

/** The `warnAt` check (see {@link LimiterOptions.warnAt}); throws a `ValidationError` for a bad share. */
function nearLimitWarnings(
  warnAt: unknown,
  onNearLimit: ((event: NearLimitEvent) => void) | undefined,
): NearLimitWarnings {
  if (typeof warnAt !== "number" || !(warnAt > 0 && warnAt <= 1)) {
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid limiter options", [
      { path: "warnAt", message: `must be a number above 0 and at most 1 (got ${String(warnAt)})` },
    ]);
  }
  const tell = onNearLimit ?? defaultNearLimit;
  // Each rule's share, per policy (the limiter's, and each override's: they are few and shared).
  const thresholdsOf = new WeakMap<Policy, number[]>();
  return (policy, key, d) => {
    const spec = algorithmOf(policy);
    let thresholds = thresholdsOf.get(policy);
    if (thresholds === undefined) {
      thresholds = policy.rules.map((r) => warnAt * spec.capacity(r));
      thresholdsOf.set(policy, thresholds);
    }
    for (let i = 0; i < d.rules.length; i++) {
      const r = d.rules[i]!;
      const capacity = spec.capacity(policy.rules[i]!);
      const used = capacity - r.remaining;
      // Crossed by this decision: below the share before it, at or above it after.
      if (used >= thresholds[i]! && used - d.cost < thresholds[i]!) {
        const event: NearLimitEvent = {
          policy: d.policy,
          key,
          rule: i,
          used: used / capacity,
          decision: d,
        };
        activeSpan()?.addEvent(RATELIMIT_METRICS.NEAR_LIMIT_EVENT, {
          "ratelimit.policy": d.policy,
          "ratelimit.rule": i,
          "ratelimit.used": event.used,
        });
        try {
          tell(event);
        } catch {
          // A throwing hook must not turn a decision into a crash.
        }
        return;
      }
    }
  };
}

function defaultNearLimit(e: NearLimitEvent): void {
  console.warn(
    `sluice: key "${e.key}" of policy "${e.policy}" has used ${Math.round(e.used * 100)}% of rule ${e.rule}`,
  );
}
