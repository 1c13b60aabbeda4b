/**
 * A policy's stable limiter, as `PolicyClient.limiter(name)` hands it out: every call goes to
 * the policy's current version (swapped in whole by the client), decided as the service decides
 * (`decideLive`: enabled switch, draft in shadow), and counted for the client's reports.
 */
import type { ReleaseOutcome } from "../adaptive.js";
import type { Decision } from "../decision.js";
import { SluiceError, ValidationError } from "../errors.js";
import type { Explanation } from "../explain.js";
import {
  type AdaptiveState,
  type LimitOptions,
  type Limiter,
  type Permit,
  type Reservation,
  type SetCountOptions,
  checkSettle,
  overridesOf,
  permitOf,
} from "../limiter.js";
import { type Policy, type RuleInput, policyCapacity } from "../policy.js";
import type { Store } from "../store.js";
import type { DraftHooks } from "./live-document.js";
import { type LivePolicy, decideLive, disabledDecision } from "./live.js";
import { explainLive } from "./live-explain.js";

/** What a managed limiter asks of the client that made it. */
export interface LimiterOwner {
  /** The set in force (replaced whole, never changed in place). */
  readonly live: ReadonlyMap<string, LivePolicy>;
  /** The store every version decides on. */
  readonly store: Store;
  /** Told when a draft could not be evaluated. */
  readonly hooks: DraftHooks;
  /** The error for a policy that is not granted (never a silent allow). */
  notFound(name: string): SluiceError;
}

/** A policy's stable limiter: every call goes to the policy's current version. */
export class ManagedLimiter implements Limiter {
  /** Decisions since the last report, by `outcome|reason`. */
  counts = new Map<string, number>();
  /** The last version seen (its policy answers `policy` after a revocation). */
  private last: LivePolicy;

  constructor(
    private readonly client: LimiterOwner,
    readonly name: string,
    first: LivePolicy,
  ) {
    this.last = first;
  }

  private current(): LivePolicy {
    const live = this.client.live.get(this.name);
    if (!live) throw this.client.notFound(this.name);
    this.last = live;
    return live;
  }

  /** The current version's policy (the last one seen when the policy is no longer granted). */
  get policy(): Policy {
    return (this.client.live.get(this.name) ?? this.last).policy;
  }

  get store(): Store {
    return this.client.store;
  }

  ready(): Promise<void> {
    return this.client.store.ready?.() ?? Promise.resolve();
  }

  tryLimitSync(key: string, options?: LimitOptions): Decision | undefined {
    const live = this.current();
    if (!live.enabled || live.draft !== undefined) return undefined;
    const d = live.limiter.tryLimitSync(key, options);
    if (d !== undefined) {
      const k = `${d.allowed ? "allowed" : "denied"}|${d.reason ?? ""}`;
      this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
    }
    return d;
  }

  limit(key: string, options?: LimitOptions): Promise<Decision> {
    let live: LivePolicy;
    let cost: number;
    try {
      live = this.current();
      cost = options?.cost ?? 1;
      // The limiter checks key and cost; a disabled policy has no limiter call, so check here.
      if (!live.enabled) checkInput(policyOf(live, key), key, cost);
    } catch (err) {
      return Promise.reject(err);
    }
    return decideLive(live, key, cost, this.client.hooks).then((d) => {
      const k = `${d.allowed ? "allowed" : "denied"}|${d.reason ?? ""}`;
      this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
      return d;
    });
  }

  peek(key: string, options?: LimitOptions): Promise<Decision> {
    try {
      const live = this.current();
      if (!live.enabled) {
        const cost = options?.cost ?? 1;
        checkInput(policyOf(live, key), key, cost);
        return Promise.resolve(disabledDecision(live.policy, cost));
      }
      return live.limiter.peek(key, options);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  explain(key: string, options?: LimitOptions): Promise<Explanation> {
    try {
      return explainLive(this.current(), key, options);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  async reset(key: string): Promise<void> {
    await this.current().limiter.reset(key);
  }

  async refund(key: string, cost?: number): Promise<void> {
    await this.current().limiter.refund(key, cost);
  }

  adaptiveState(): AdaptiveState | undefined {
    return this.current().limiter.adaptiveState();
  }

  async acquire(key: string, options?: LimitOptions): Promise<Permit> {
    const live = this.current();
    if (live.policy.algorithm !== "concurrency") return live.limiter.acquire(key, options);
    return permitOf(await this.limit(key, options), (id) => this.release(key, id));
  }

  async release(key: string, leaseId: string, outcome?: ReleaseOutcome): Promise<boolean> {
    return this.current().limiter.release(key, leaseId, outcome);
  }

  async setCount(key: string, count: number, options?: SetCountOptions): Promise<void> {
    await this.current().limiter.setCount(key, count, options);
  }

  /** Throws `SLUICE_ERR_UNSUPPORTED`: a managed policy's overrides are set in the service. */
  setOverride(_key: string, _rules: RuleInput[]): void {
    throw overridesAreTheServices(this.name);
  }

  /** Throws `SLUICE_ERR_UNSUPPORTED`: a managed policy's overrides are set in the service. */
  deleteOverride(_key: string): boolean {
    throw overridesAreTheServices(this.name);
  }

  /** The key's override as the service last sent it, or undefined. */
  override(key: string): RuleInput[] | undefined {
    return this.current().limiter.override(key);
  }

  async reserve(key: string, estimate: number): Promise<Reservation> {
    const live = this.current();
    if (live.enabled) return live.limiter.reserve(key, estimate);
    checkInput(policyOf(live, key), key, estimate);
    const decision = disabledDecision(live.policy, estimate);
    return {
      decision,
      settle: async (actual: number) => checkSettle(actual),
      cancel: async () => {},
    };
  }
}

/** The policy a key is decided by: its override's, else the live policy. */
function policyOf(live: LivePolicy, key: string): Policy {
  return overridesOf(live.limiter)?.get(key) ?? live.policy;
}

/** A managed policy's overrides are the service's: they are set there, never in a client. */
function overridesAreTheServices(name: string): SluiceError {
  return new SluiceError(
    "SLUICE_ERR_UNSUPPORTED",
    `the overrides of managed policy "${name}" are set in the sluice service (PUT /v1/admin/policies/${name}/overrides/{key}), which every client applies within a second`,
  );
}

/** The key and cost checks of a limiter, for a disabled policy (which calls none). */
function checkInput(policy: Policy, key: unknown, cost: unknown): void {
  if (typeof key !== "string" || key.length === 0)
    throw new ValidationError("SLUICE_ERR_KEY", "Invalid key", [
      {
        path: "key",
        message: `must be a non-empty string (got ${typeof key === "string" ? "an empty string" : typeof key})`,
      },
    ]);
  if (typeof cost !== "number" || !Number.isInteger(cost) || cost <= 0)
    throw new ValidationError("SLUICE_ERR_COST", "Invalid cost", [
      {
        path: "cost",
        message: `must be a positive integer (got ${typeof cost === "number" ? String(cost) : typeof cost})`,
      },
    ]);
  const capacity = policyCapacity(policy);
  if (cost > capacity)
    throw new ValidationError("SLUICE_ERR_COST", "Invalid cost", [
      {
        path: "cost",
        message: `${cost} can never fit policy "${policy.name}", whose capacity is ${capacity}`,
      },
    ]);
}
