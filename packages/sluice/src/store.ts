import type { RuleDecision } from "./decision.js";
import type { Policy } from "./policy.js";

/** What a multi-region store has done for one policy, since it started (all in this process). */
export interface RegionStats {
  /** The most the regions together admit per window: the limit, plus (regions − 1) × borrow in bounded mode. */
  readonly bound: number;
  /** Calls to another region (asks for units, give-backs, settled borrowings). */
  readonly crossRegionCalls: number;
  /** Units debited from other regions' ledgers for this region's leases. */
  readonly unitsLeased: number;
  /**
   * Under-admission: units denied while the home was out of reach or a lease was being renewed,
   * plus leased units that lapsed unspent (they were debited, so nobody spent them).
   */
  readonly underAdmitted: number;
  /** Units admitted from the borrow ledger (bounded mode). */
  readonly borrowed: number;
}

/** One decision asked of a store. */
export interface StoreRequest {
  /** The resolved policy. */
  readonly policy: Policy;
  /** The identifier inside the policy (IP, user id, API key…). */
  readonly key: string;
  /** Units to charge; 0 is allowed for a peek. */
  readonly cost: number;
}

/**
 * A structure in the process, in front of a store's backend, that answers some decisions by
 * itself (see {@link Store.explainLocal}): the Redis store's deny cache, or an allotment of a
 * hot key's capacity that this process holds.
 */
export type LocalAnswer = "deny-cache" | "allotment";

/** What a store decided: the combined verdict and every rule's outcome. */
export interface StoreDecision {
  readonly allowed: boolean;
  /**
   * One outcome per rule, in policy order, with the rule's `limit`, `periodMs` and `burst`
   * (the limiter passes these objects on in the `Decision`: build new ones per call).
   */
  readonly rules: readonly RuleDecision[];
  /** > 0 when a penalty block is in force for the key: the time left (ms). */
  readonly blockedForMs: number;
  /** For `concurrency`, the id of the permit taken (the field keeps its first name). */
  readonly leaseId?: string;
  /** Set by a store that answered without consulting its backend (`deny-cache`). */
  readonly reason?: "deny-cache";
}

/**
 * The narrow port every counter store implements. Decision logic (reporting, shadow mode,
 * store-error handling) lives once in the limiter, not in each store.
 *
 * Contract: `decide` is atomic per request across every process sharing the store: all rules
 * of the policy are checked and, only if all pass, all are charged. A denial changes nothing,
 * except that it starts the policy's penalty block when one is set.
 * Failures reject with a `StoreError`.
 */
export interface Store {
  /** A short name for logs and metrics (`memory`, `redis`). */
  readonly kind: string;
  /** Decide and, if allowed, charge. */
  decide(req: StoreRequest): Promise<StoreDecision>;
  /**
   * A decision the store can make at once, without its backend (a Redis store's allotment), or
   * undefined: the caller then calls `decide`. Optional.
   */
  decideLocal?(policy: Policy, key: string, cost: number): StoreDecision | undefined;
  /**
   * Which of the store's local structures would answer a `decide` of `cost` for the key now,
   * without asking its backend — `"deny-cache"` (a denial it remembers), `"allotment"` (capacity
   * this process holds) — or undefined when the backend would. Charges nothing and changes
   * nothing (no counter, no heat, no expiry). Optional: a store without it answers every
   * decision itself (the limiter's `explain` reports `"store"`).
   */
  explainLocal?(policy: Policy, key: string, cost: number): LocalAnswer | undefined;
  /** Evaluate as `decide` would, without changing anything. */
  peek(req: StoreRequest): Promise<StoreDecision>;
  /** Charge `delta` units unconditionally (negative refunds) to every rule of the key. */
  adjust(policy: Policy, key: string, delta: number): Promise<void>;
  /**
   * Release a concurrency permit. Resolves `true` when the permit was held and is now freed,
   * `false` when it was unknown, already released or expired (a no-op).
   */
  release(policy: Policy, key: string, leaseId: string): Promise<boolean>;
  /** Forget everything about the key (counters and penalty block). */
  reset(policy: Policy, key: string): Promise<void>;
  /**
   * Resolves once the store can decide from its backend (for a Redis store: the client is
   * connected); rejects with a `StoreError` when it cannot within its connect budget. Stores
   * that need no connection leave it out.
   */
  ready?(): Promise<void>;
  /**
   * For `fixed-window` policies whose windows start at the first request: put every rule of the
   * key at `count` units (which may exceed the limit, or be 0) in a window that ends `windowMs`
   * from now. The penalty block is left as it is. Optional: a store
   * without it cannot serve a limiter's `setCount`.
   */
  setCount?(policy: Policy, key: string, count: number, windowMs: number): Promise<void>;
  /**
   * How many allotments (local shares of a policy's counters) this process holds for the
   * policy now, for the `ratelimit.allotments` gauge. Optional: only stores that take them.
   */
  allotmentsHeld?(policy: string): number;
  /**
   * A multi-region store's figures for the policy (the `ratelimit.region.*` instruments):
   * the bound it keeps and what it under-admitted and borrowed. Optional.
   */
  regionStats?(policy: Policy): RegionStats;
  /** How many instances share this store, when the store can tell (used by the insurance limiter). */
  liveInstances?(): number | undefined;
  /** Release resources (timers); does not close clients the caller owns. */
  close?(): Promise<void>;
}

/**
 * A store that decides synchronously, inside the calling process (the memory store). A limiter
 * over such a store also offers `limitSync` / `peekSync` (see {@link SyncLimiter}), and its
 * `limit` answers with a single already-resolved promise instead of a chain of them.
 *
 * The `*Sync` methods follow the same contract as their asynchronous namesakes; they throw
 * instead of rejecting.
 */
export interface SyncStore extends Store {
  /** {@link Store.decide}, synchronously. */
  decideSync(policy: Policy, key: string, cost: number): StoreDecision;
  /** {@link Store.peek}, synchronously. */
  peekSync(policy: Policy, key: string, cost: number): StoreDecision;
  /** {@link Store.adjust}, synchronously. */
  adjustSync(policy: Policy, key: string, delta: number): void;
  /** {@link Store.release}, synchronously. */
  releaseSync(policy: Policy, key: string, leaseId: string): boolean;
  /** {@link Store.reset}, synchronously. */
  resetSync(policy: Policy, key: string): void;
  /** {@link Store.setCount}, synchronously. */
  setCountSync?(policy: Policy, key: string, count: number, windowMs: number): void;
}

/** True when `store` implements {@link SyncStore}. */
export function isSyncStore(store: Store): store is SyncStore {
  return typeof (store as Partial<SyncStore>).decideSync === "function";
}
