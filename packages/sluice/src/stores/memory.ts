import { concurrency } from "../algorithms/index.js";
import { type Clock, systemClock } from "../clock.js";
import { ValidationError } from "../errors.js";
import { type KeyState, adjustState, evaluate } from "../evaluate.js";
import type { Policy } from "../policy.js";
import type { Store, StoreDecision, StoreRequest } from "../store.js";
import { gcra } from "../algorithms/gcra.js";

/** Options of {@link memoryStore}. */
export interface MemoryStoreOptions {
  /** Time source in epoch ms; inject one in tests and simulations. Default: the system clock. */
  now?: Clock;
  /**
   * Most keys held at once (over all policies); when full, an expired key is evicted if one is
   * found among the oldest, else the least recently written. Default 1,000,000.
   */
  maxKeys?: number;
}

/** A key's state with its expiry, or (single-rule GCRA without penalty) just its TAT. */
type Entry = number | { s: KeyState; e: number };

/** One policy's keys, in order of last write, and where the incremental sweep stands. */
class Space extends Map<string, Entry> {
  cursor: Iterator<[string, Entry]> | undefined = undefined;
}

/**
 * The in-memory store: zero setup, for one process (tests, a single server, the insurance
 * limiter). Decisions are synchronous inside, so `Promise.all` bursts are exact. No timer per
 * key: expired entries are dropped when touched or met by the incremental sweep on insert.
 */
export class MemoryStore implements Store {
  readonly kind = "memory";
  private readonly now: Clock;
  private readonly maxKeys: number;
  private readonly spaces = new Map<string, Space>();
  private byPolicy = new WeakMap<Policy, Space>();
  private size = 0;
  private leaseSeq = 0;

  constructor(options: MemoryStoreOptions = {}) {
    const maxKeys = options.maxKeys ?? 1_000_000;
    if (!Number.isInteger(maxKeys) || maxKeys < 1) {
      throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid memoryStore options", [
        { path: "maxKeys", message: `must be a positive integer (got ${String(maxKeys)})` },
      ]);
    }
    this.now = options.now ?? systemClock;
    this.maxKeys = maxKeys;
  }

  /** Keys currently held (including expired ones not yet swept). */
  get keyCount(): number {
    return this.size;
  }

  decide(req: StoreRequest): Promise<StoreDecision> {
    return Promise.resolve(this.decideSync(req, true));
  }

  peek(req: StoreRequest): Promise<StoreDecision> {
    return Promise.resolve(this.decideSync(req, false));
  }

  /** The synchronous core of {@link MemoryStore.decide}. */
  decideSync(req: StoreRequest, commit: boolean): StoreDecision {
    const { policy, key, cost } = req;
    const nowMs = this.now();
    const space = this.space(policy);
    const entry = space.get(key);
    if (typeof entry === "number" || (entry === undefined && isCompact(policy))) {
      // Fast path: one GCRA rule, no penalty; the entry is the TAT and expires with it.
      const step = gcra.decide(
        entry !== undefined && entry > nowMs ? [entry] : undefined,
        nowMs,
        policy.rules[0]!,
        cost,
      );
      if (commit && step.allowed && cost > 0)
        this.write(space, key, entry, step.next ? step.next[0]! : undefined, nowMs);
      const outcome = {
        allowed: step.allowed,
        remaining: step.remaining,
        resetAfterMs: step.resetAfterMs,
        retryAfterMs: step.retryAfterMs,
      };
      return { allowed: step.allowed, rules: [outcome], blockedForMs: 0 };
    }
    const current = entry !== undefined && entry.e > nowMs ? entry.s : undefined;
    const leaseId = policy.algorithm === "concurrency" && commit ? ++this.leaseSeq : 0;
    const ev = evaluate(policy, current, nowMs, cost, commit, leaseId);
    if (ev.changed) this.write(space, key, entry, { s: ev.next, e: nowMs + ev.ttlMs }, nowMs);
    const out: StoreDecision = {
      allowed: ev.allowed,
      rules: ev.rules,
      blockedForMs: ev.blockedForMs,
    };
    return leaseId > 0 && ev.allowed && cost > 0 ? { ...out, leaseId: String(leaseId) } : out;
  }

  adjust(policy: Policy, key: string, delta: number): Promise<void> {
    const nowMs = this.now();
    const space = this.space(policy);
    const entry = space.get(key);
    if (typeof entry === "number" || (entry === undefined && isCompact(policy))) {
      const a = gcra.adjust(
        entry !== undefined && entry > nowMs ? [entry] : undefined,
        nowMs,
        policy.rules[0]!,
        delta,
      );
      this.write(space, key, entry, a.next ? a.next[0]! : undefined, nowMs);
    } else {
      const current = entry !== undefined && entry.e > nowMs ? entry.s : undefined;
      const a = adjustState(policy, current, nowMs, delta);
      this.write(
        space,
        key,
        entry,
        a.ttlMs > 0 ? { s: a.next, e: nowMs + a.ttlMs } : undefined,
        nowMs,
      );
    }
    return Promise.resolve();
  }

  release(policy: Policy, key: string, leaseId: string): Promise<void> {
    const nowMs = this.now();
    const space = this.space(policy);
    const entry = space.get(key);
    if (entry === undefined || typeof entry === "number" || policy.algorithm !== "concurrency")
      return Promise.resolve();
    const r = concurrency.release(entry.s.states[0], nowMs, Number(leaseId));
    const blockUntil = entry.s.blockUntil > nowMs ? entry.s.blockUntil : 0;
    const ttl = Math.max(r.ttlMs, blockUntil - nowMs);
    this.write(
      space,
      key,
      entry,
      ttl > 0 ? { s: { states: [r.next ?? undefined], blockUntil }, e: nowMs + ttl } : undefined,
      nowMs,
    );
    return Promise.resolve();
  }

  reset(policy: Policy, key: string): Promise<void> {
    const space = this.space(policy);
    if (space.delete(key)) this.size--;
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.spaces.clear();
    this.byPolicy = new WeakMap();
    this.size = 0;
    return Promise.resolve();
  }

  /** One map per policy shape, so a changed algorithm never reads another's state. */
  private space(policy: Policy): Space {
    // Policies are frozen: cache the space per policy object instead of building its id each call.
    let space = this.byPolicy.get(policy);
    if (space !== undefined) return space;
    const id = `${policy.name}\u0000${policy.algorithm}\u0000${policy.rules.length}\u0000${isCompact(policy) ? "c" : "g"}`;
    space = this.spaces.get(id);
    if (space === undefined) {
      space = new Space();
      this.spaces.set(id, space);
    }
    this.byPolicy.set(policy, space);
    return space;
  }

  private write(
    space: Space,
    key: string,
    old: Entry | undefined,
    next: Entry | undefined,
    nowMs: number,
  ): void {
    if (old !== undefined) {
      // Delete and re-insert: Map order then runs from least to most recently written.
      space.delete(key);
      this.size--;
    }
    if (next === undefined) return;
    if (old === undefined) {
      // Only a new key grows the Map: make room, or sweep a little. Rewriting a key (the common
      // case) needs neither, and skipping the sweep there saves ~10% of a decision.
      if (this.size >= this.maxKeys) this.evict(space, nowMs);
      else this.sweep(space, nowMs, 2);
    }
    space.set(key, next);
    this.size++;
  }

  /**
   * Drop up to `budget` expired entries among the oldest of `space`, continuing from where the
   * last sweep stopped. A fresh iterator per call would restart at the front of the Map's
   * table, where every delete-and-reinsert leaves a hole that the iterator must step over:
   * that made each write cost O(holes) (about 70k decisions/s at 100k keys). The persistent
   * cursor steps over each hole once per pass.
   */
  private sweep(space: Space, nowMs: number, budget: number): number {
    let dropped = 0;
    let restarted = false;
    for (let seen = 0; seen < budget; seen++) {
      let step = space.cursor?.next();
      if (step === undefined || step.done === true) {
        // End of a pass: start the next one at the oldest entry, at most once per call.
        if (restarted) break;
        restarted = true;
        space.cursor = space.entries();
        step = space.cursor.next();
        if (step.done === true) break;
      }
      const k = step.value[0];
      if (expiry(step.value[1]) <= nowMs) {
        space.delete(k);
        this.size--;
        dropped++;
      }
    }
    return dropped;
  }

  /** Make room for one key: an expired one among the next 16 the sweep meets in each policy, else the oldest. */
  private evict(space: Space, nowMs: number): void {
    if (this.sweep(space, nowMs, 16) > 0) return;
    for (const other of this.spaces.values())
      if (other !== space && this.sweep(other, nowMs, 16) > 0) return;
    let victim = space;
    if (victim.size === 0) {
      for (const s of this.spaces.values()) if (s.size > victim.size) victim = s;
    }
    const oldest = victim.keys().next();
    if (!oldest.done) {
      victim.delete(oldest.value);
      this.size--;
    }
  }
}

function isCompact(policy: Policy): boolean {
  return policy.algorithm === "gcra" && policy.rules.length === 1 && policy.blockMs === 0;
}

function expiry(e: Entry): number {
  return typeof e === "number" ? e : e.e;
}

/** Creates an in-memory store. See {@link MemoryStoreOptions}. */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  return new MemoryStore(options);
}
