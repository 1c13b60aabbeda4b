import {
  type Algorithm,
  type InPlaceAlgorithm,
  type ResolvedRule,
  type Step,
  concurrency,
} from "../algorithms/index.js";
import { type Clock, systemClock } from "../clock.js";
import { ruleDecision, ruleDecisions } from "../decision.js";
import { ValidationError } from "../errors.js";
import { type KeyState, adjustState, evaluate } from "../evaluate.js";
import { type Policy, algorithmOf } from "../policy.js";
import type { StoreDecision, StoreRequest, SyncStore } from "../store.js";

/** Options of {@link memoryStore}. */
export interface MemoryStoreOptions {
  /** Time source in epoch ms; inject one in tests and simulations. Default: the system clock. */
  now?: Clock;
  /**
   * Most keys held at once, over all policies. When full, room is made in the policy holding
   * the most keys, so a flood of new keys on one policy never evicts another policy's keys
   * while it holds more than they do: first an expired key, else, among the oldest few, the
   * one whose state expires soonest (the least limiting information lost). Default 1,000,000.
   */
  maxKeys?: number;
}

/**
 * How long the incremental sweep leaves an expired key alone, so that a key that comes back
 * soon (the usual case for an active client) reuses its entry instead of being deleted and
 * inserted again. A full store does not wait: it takes expired keys at once.
 */
const SWEEP_GRACE_MS = 1000;

/**
 * One policy's keys. Entries stay where they were first inserted (state is written in place),
 * and a cursor walks them round and round to drop expired ones a few at a time.
 */
abstract class Space<V> {
  readonly keys = new Map<string, V>();
  private cursor: Iterator<[string, V]> | undefined = undefined;

  /** Epoch ms after which the entry holds nothing (≤ now: as good as absent). */
  protected abstract expiry(value: V): number;
  /** Called when an entry leaves the map. */
  protected abstract free(value: V): void;

  /** Removes a key; returns whether it was there. */
  delete(key: string): boolean {
    const v = this.keys.get(key);
    if (v === undefined) return false;
    this.keys.delete(key);
    this.free(v);
    return true;
  }

  /**
   * Looks at up to `budget` entries from where the last look stopped (starting over at the
   * oldest at most once per call) and drops those expired for at least `graceMs`. Returns how many it dropped. A
   * persistent cursor steps over each hole that deletes leave in the Map's table once per pass,
   * instead of once per call.
   */
  sweep(nowMs: number, budget: number, graceMs = 0): number {
    const before = nowMs - graceMs;
    let dropped = 0;
    let restarted = false;
    for (let seen = 0; seen < budget; seen++) {
      const step = this.next(restarted);
      if (step === undefined) break;
      if (step.done === true) {
        restarted = true;
        continue;
      }
      const [key, value] = step.value;
      if (this.expiry(value) <= before) {
        this.keys.delete(key);
        this.free(value);
        dropped++;
      }
    }
    return dropped;
  }

  /** Drops, among the next `sample` entries at the cursor, the one that expires soonest. */
  evictOne(sample: number): boolean {
    let victim: [string, V] | undefined;
    let restarted = false;
    for (let seen = 0; seen < sample; seen++) {
      const step = this.next(restarted);
      if (step === undefined) break;
      if (step.done === true) {
        restarted = true;
        continue;
      }
      if (victim === undefined || this.expiry(step.value[1]) < this.expiry(victim[1]))
        victim = step.value;
    }
    if (victim === undefined) return false;
    this.keys.delete(victim[0]);
    this.free(victim[1]);
    return true;
  }

  /** The cursor's next step; at the end, a `done` step once, then (if restarted) undefined. */
  private next(restarted: boolean): IteratorResult<[string, V]> | undefined {
    const step = this.cursor?.next();
    if (step !== undefined && step.done !== true) return step;
    if (restarted || this.keys.size === 0) return undefined;
    this.cursor = this.keys.entries();
    return { done: true, value: undefined };
  }
}

/**
 * Keys of an algorithm whose state has a fixed size (gcra, token-bucket, fixed-window,
 * sliding-window). Each key owns a slot of `stride` numbers in one Float64Array, and the Map
 * holds only the slot's offset, so deciding writes numbers in place and allocates nothing that
 * outlives the call. Slot layout: [expiresAt, blockUntil?, rule 0's state, rule 1's state, …]; a
 * rule without state has NaN as its first number. A single-rule GCRA policy without penalty
 * (the most common policy) keeps only its TAT (in µs), which is also its expiry.
 */
class FixedSpace extends Space<number> {
  data: Float64Array;
  readonly stride: number;
  /** Offset of blockUntil in a slot, or -1. */
  readonly blockAt: number;
  /** Offset of rule 0's state in a slot. */
  readonly rulesAt: number;
  private readonly freed: number[] = [];
  private top = 0;

  constructor(
    readonly alg: Algorithm,
    readonly size: number,
    rules: number,
    hasBlock: boolean,
    /** Single-rule GCRA without penalty: the slot is the TAT alone. */
    readonly compact: boolean,
  ) {
    super();
    this.blockAt = hasBlock ? 1 : -1;
    this.rulesAt = compact ? 0 : hasBlock ? 2 : 1;
    this.stride = compact ? 1 : this.rulesAt + rules * size;
    this.data = new Float64Array(this.stride * 64);
  }

  /** Epoch ms after which the slot holds nothing (a compact slot is a TAT in µs). */
  protected expiry(offset: number): number {
    return this.compact ? this.data[offset]! / 1000 : this.data[offset]!;
  }

  /** Whether the slot at `offset` still holds state at `nowMs`. */
  live(offset: number, nowMs: number): boolean {
    return this.expiry(offset) > nowMs;
  }

  /** Marks the slot as holding nothing from `nowMs` on (it is reused or swept later). */
  expire(offset: number, nowMs: number): void {
    this.data[offset] = this.compact ? nowMs * 1000 : nowMs;
  }

  protected free(offset: number): void {
    this.freed.push(offset);
  }

  /** A free slot's offset (the array grows by doubling). */
  alloc(): number {
    const reused = this.freed.pop();
    if (reused !== undefined) return reused;
    const offset = this.top;
    this.top += this.stride;
    if (this.top > this.data.length) {
      const bigger = new Float64Array(this.data.length * 2);
      bigger.set(this.data);
      this.data = bigger;
    }
    return offset;
  }

  /** Rule `i`'s state at `offset` as an array, or undefined when it has none. */
  ruleState(offset: number, i: number): number[] | undefined {
    const at = offset + this.rulesAt + i * this.size;
    const d = this.data;
    if (Number.isNaN(d[at])) return undefined;
    const s = new Array<number>(this.size);
    for (let j = 0; j < this.size; j++) s[j] = d[at + j]!;
    return s;
  }

  /** Writes rule `i`'s state (undefined/null: none). */
  setRuleState(offset: number, i: number, state: readonly number[] | null | undefined): void {
    const at = offset + this.rulesAt + i * this.size;
    const d = this.data;
    if (state === null || state === undefined) d[at] = NaN;
    else for (let j = 0; j < this.size; j++) d[at + j] = state[j]!;
  }

  /** The whole key state at `offset` (for the multi-rule path). */
  keyState(offset: number, rules: number): KeyState {
    const states = new Array<number[] | undefined>(rules);
    for (let i = 0; i < rules; i++) states[i] = this.ruleState(offset, i);
    return { states, blockUntil: this.blockAt >= 0 ? this.data[offset + this.blockAt]! : 0 };
  }

  /** Writes a whole key state, live until `expiresAt`. */
  setKeyState(offset: number, next: KeyState, rules: number, expiresAt: number): void {
    this.data[offset] = expiresAt;
    if (this.blockAt >= 0) this.data[offset + this.blockAt] = next.blockUntil;
    for (let i = 0; i < rules; i++) this.setRuleState(offset, i, next.states[i]);
  }
}

/** A key's state and expiry, for algorithms whose state grows with traffic. */
interface Entry {
  e: number;
  s: KeyState;
}

/** Keys of sliding-log and concurrency policies: one small object per key, updated in place. */
class VarSpace extends Space<Entry> {
  constructor(readonly alg: Algorithm) {
    super();
  }

  protected expiry(entry: Entry): number {
    return entry.e;
  }
  protected free(): void {}
}

/**
 * The in-memory store: zero setup, for one process (tests, a single server, the insurance
 * limiter). It decides synchronously (a {@link SyncStore}), so `Promise.all` bursts are exact
 * and `limitSync` works. No timer per key: expired entries are dropped when met by the
 * incremental sweep on insert, or reused in place.
 */
export class MemoryStore implements SyncStore {
  readonly kind = "memory";
  private readonly now: Clock;
  private readonly maxKeys: number;
  private readonly spaces = new Map<string, FixedSpace | VarSpace>();
  private byPolicy = new WeakMap<Policy, FixedSpace | VarSpace>();
  private lastPolicy: Policy | undefined;
  private lastSpace: FixedSpace | VarSpace | undefined;
  private size = 0;
  private leaseSeq = 0;
  /** Where {@link makeRoom} looks for expired keys in other policies next. */
  private rotation = 0;
  /** Reusable state arrays for the single-rule path, by size (algorithms never keep them). */
  private readonly scratch: number[][] = [[], [0], [0, 0], [0, 0, 0]];

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
    return Promise.resolve(this.decideSync(req.policy, req.key, req.cost));
  }

  peek(req: StoreRequest): Promise<StoreDecision> {
    return Promise.resolve(this.peekSync(req.policy, req.key, req.cost));
  }

  adjust(policy: Policy, key: string, delta: number): Promise<void> {
    this.adjustSync(policy, key, delta);
    return Promise.resolve();
  }

  release(policy: Policy, key: string, leaseId: string): Promise<boolean> {
    return Promise.resolve(this.releaseSync(policy, key, leaseId));
  }

  reset(policy: Policy, key: string): Promise<void> {
    this.resetSync(policy, key);
    return Promise.resolve();
  }

  decideSync(policy: Policy, key: string, cost: number): StoreDecision {
    return this.run(policy, key, cost, true);
  }

  peekSync(policy: Policy, key: string, cost: number): StoreDecision {
    return this.run(policy, key, cost, false);
  }

  adjustSync(policy: Policy, key: string, delta: number): void {
    const nowMs = this.now();
    const sp = this.space(policy);
    const n = policy.rules.length;
    if (sp instanceof FixedSpace) {
      let offset = sp.keys.get(key);
      const live = offset !== undefined && sp.live(offset, nowMs);
      if (sp.compact) {
        const rule = policy.rules[0]!;
        const a = sp.alg.adjust(live ? [sp.data[offset!]!] : undefined, nowMs, rule, delta);
        if (a.next !== null) {
          offset ??= this.insert(sp, key, nowMs);
          sp.data[offset] = a.next[0]!;
        } else if (offset !== undefined) sp.expire(offset, nowMs);
        return;
      }
      const a = adjustState(policy, live ? sp.keyState(offset!, n) : undefined, nowMs, delta);
      if (a.ttlMs > 0) {
        offset ??= this.insert(sp, key, nowMs);
        sp.setKeyState(offset, a.next, n, nowMs + a.ttlMs);
      } else if (offset !== undefined) sp.expire(offset, nowMs);
      return;
    }
    const entry = sp.keys.get(key);
    const a = adjustState(
      policy,
      entry !== undefined && entry.e > nowMs ? entry.s : undefined,
      nowMs,
      delta,
    );
    this.writeEntry(sp, key, entry, a.next, a.ttlMs, nowMs);
  }

  releaseSync(policy: Policy, key: string, leaseId: string): boolean {
    if (policy.algorithm !== "concurrency") return false;
    const nowMs = this.now();
    const sp = this.space(policy) as VarSpace;
    const entry = sp.keys.get(key);
    if (entry === undefined || entry.e <= nowMs) return false;
    const r = concurrency.release(entry.s.states[0], nowMs, Number(leaseId));
    if (!r.released) return false;
    // In place: concurrency has one rule; the penalty block, if any, is kept.
    const blockUntil = entry.s.blockUntil > nowMs ? entry.s.blockUntil : 0;
    entry.e = nowMs + Math.max(r.ttlMs, blockUntil - nowMs);
    // With nothing left and no block the entry has expired, and its array is kept for reuse.
    if (r.next !== null || blockUntil > 0) entry.s.states[0] = reuse(entry.s.states[0], r.next);
    return true;
  }

  resetSync(policy: Policy, key: string): void {
    if (this.space(policy).delete(key)) this.size--;
  }

  setCount(policy: Policy, key: string, count: number, windowMs: number): Promise<void> {
    this.setCountSync(policy, key, count, windowMs);
    return Promise.resolve();
  }

  setCountSync(policy: Policy, key: string, count: number, windowMs: number): void {
    const nowMs = this.now();
    const sp = this.space(policy);
    if (!(sp instanceof FixedSpace) || sp.compact) return;
    const n = policy.rules.length;
    let offset = sp.keys.get(key);
    const current =
      offset !== undefined && sp.live(offset, nowMs) ? sp.keyState(offset, n) : undefined;
    const blockUntil = current !== undefined && current.blockUntil > nowMs ? current.blockUntil : 0;
    const end = windowMs > 0 ? nowMs + windowMs : 0;
    // The window [end − period, end) for every rule: the layout of fixed-window's [start, count].
    const states = policy.rules.map((r) => (end > 0 ? [end - r.periodMs, count] : undefined));
    const expiresAt = Math.max(end, blockUntil);
    if (expiresAt > nowMs) {
      offset ??= this.insert(sp, key, nowMs);
      sp.setKeyState(offset, { states, blockUntil }, n, expiresAt);
    } else if (offset !== undefined) sp.expire(offset, nowMs);
  }

  close(): Promise<void> {
    this.spaces.clear();
    this.byPolicy = new WeakMap();
    this.lastPolicy = this.lastSpace = undefined;
    this.size = 0;
    return Promise.resolve();
  }

  private run(policy: Policy, key: string, cost: number, commit: boolean): StoreDecision {
    const nowMs = this.now();
    const sp = this.space(policy);
    if (sp instanceof FixedSpace) {
      if (sp.blockAt < 0 && policy.rules.length === 1)
        return this.runSingle(sp, policy.rules[0]!, key, cost, commit, nowMs);
      return this.runFixed(sp, policy, key, cost, commit, nowMs);
    }
    const entry = sp.keys.get(key);
    const current = entry !== undefined && entry.e > nowMs ? entry.s : undefined;
    const leaseId = policy.algorithm === "concurrency" && commit ? ++this.leaseSeq : 0;
    if (policy.rules.length === 1 && policy.blockMs === 0)
      return this.runSingleVar(
        sp,
        policy.rules[0]!,
        key,
        entry,
        current,
        cost,
        commit,
        nowMs,
        leaseId,
      );
    const ev = evaluate(policy, current, nowMs, cost, commit, leaseId);
    if (ev.changed) this.writeEntry(sp, key, entry, ev.next, ev.ttlMs, nowMs);
    const out: StoreDecision = {
      allowed: ev.allowed,
      rules: ruleDecisions(policy, ev.rules),
      blockedForMs: ev.blockedForMs,
    };
    return leaseId > 0 && ev.allowed && cost > 0 ? { ...out, leaseId: String(leaseId) } : out;
  }

  /**
   * One rule, no penalty: the rule's step is the decision (evaluate() for n = 1), with the
   * state read from and written to the key's slot in place.
   */
  private runSingle(
    sp: FixedSpace,
    rule: ResolvedRule,
    key: string,
    cost: number,
    commit: boolean,
    nowMs: number,
  ): StoreDecision {
    let offset = sp.keys.get(key);
    const d = sp.data;
    let state: number[] | undefined;
    if (offset !== undefined && sp.live(offset, nowMs)) {
      const at = offset + sp.rulesAt;
      if (!Number.isNaN(d[at])) {
        state = this.scratch[sp.size]!;
        for (let j = 0; j < sp.size; j++) state[j] = d[at + j]!;
      }
    }
    const step = sp.alg.decide(state, nowMs, rule, cost);
    if (commit && step.allowed && cost > 0) {
      const next = step.next;
      if (next !== null) {
        offset ??= this.insert(sp, key, nowMs);
        const data = sp.data; // insert may have grown it
        if (sp.compact) data[offset] = next[0]!;
        else {
          data[offset] = nowMs + step.ttlMs;
          for (let j = 0; j < sp.size; j++) data[offset + sp.rulesAt + j] = next[j]!;
        }
      } else if (offset !== undefined) {
        // Nothing left to remember: mark the slot expired (it is reused or swept later).
        sp.expire(offset, nowMs);
      }
    }
    return {
      allowed: step.allowed,
      rules: [ruleDecision(rule, step)],
      blockedForMs: 0,
    };
  }

  /** {@link runSingle} for sliding-log and concurrency: the key's entry is updated in place. */
  private runSingleVar(
    sp: VarSpace,
    rule: ResolvedRule,
    key: string,
    entry: Entry | undefined,
    current: KeyState | undefined,
    cost: number,
    commit: boolean,
    nowMs: number,
    leaseId: number,
  ): StoreDecision {
    const alg = sp.alg;
    let step: Step;
    if (leaseId > 0) step = concurrency.decide(current?.states[0], nowMs, rule, cost, leaseId);
    else if (commit && cost > 0 && "decideInPlace" in alg) {
      // The key's log is changed in place (and is the new state when allowed).
      const own = current?.states[0];
      step = (alg as InPlaceAlgorithm).decideInPlace(
        own ?? (alg as InPlaceAlgorithm).fresh(),
        nowMs,
        rule,
        cost,
      );
      if (step.allowed && entry !== undefined && own !== undefined) {
        entry.e = nowMs + step.ttlMs;
        if (step.next === null) entry.s.states[0] = undefined;
        return { allowed: true, rules: [ruleDecision(rule, step)], blockedForMs: 0 };
      }
    } else step = alg.decide(current?.states[0], nowMs, rule, cost);
    const rules = [ruleDecision(rule, step)];
    if (!commit || !step.allowed || cost <= 0)
      return { allowed: step.allowed, rules, blockedForMs: 0 };
    if (entry !== undefined) {
      entry.e = nowMs + step.ttlMs;
      if (entry.s.blockUntil !== 0 || entry.s.states.length !== 1)
        entry.s = { states: [undefined], blockUntil: 0 };
      entry.s.states[0] = reuse(entry.s.states[0], step.next);
    } else if (step.ttlMs > 0) {
      this.insert(sp, key, nowMs);
      sp.keys.set(key, {
        e: nowMs + step.ttlMs,
        s: { states: [step.next ?? undefined], blockUntil: 0 },
      });
    }
    return leaseId > 0
      ? { allowed: true, rules, blockedForMs: 0, leaseId: String(leaseId) }
      : { allowed: true, rules, blockedForMs: 0 };
  }

  /** Several rules or a penalty over fixed-size state: evaluate() on the key's slot. */
  private runFixed(
    sp: FixedSpace,
    policy: Policy,
    key: string,
    cost: number,
    commit: boolean,
    nowMs: number,
  ): StoreDecision {
    const n = policy.rules.length;
    let offset = sp.keys.get(key);
    const current =
      offset !== undefined && sp.live(offset, nowMs) ? sp.keyState(offset, n) : undefined;
    const ev = evaluate(policy, current, nowMs, cost, commit);
    if (ev.changed) {
      offset ??= this.insert(sp, key, nowMs);
      sp.setKeyState(offset, ev.next, n, nowMs + ev.ttlMs);
    }
    return {
      allowed: ev.allowed,
      rules: ruleDecisions(policy, ev.rules),
      blockedForMs: ev.blockedForMs,
    };
  }

  private writeEntry(
    sp: VarSpace,
    key: string,
    entry: Entry | undefined,
    next: KeyState,
    ttlMs: number,
    nowMs: number,
  ): void {
    if (entry !== undefined) {
      // In place: a key keeps its position, and its object is reused.
      entry.e = nowMs + ttlMs;
      entry.s = next;
      return;
    }
    if (ttlMs <= 0) return;
    this.insert(sp, key, nowMs);
    sp.keys.set(key, { e: nowMs + ttlMs, s: next });
  }

  /**
   * Makes room for a new key of `sp` and, for a fixed-size space, returns its slot. A new key
   * sweeps a little of its own policy's expired state; in a full store it takes room from the
   * policy holding the most keys (expired state first).
   */
  private insert(sp: FixedSpace, key: string, nowMs: number): number;
  private insert(sp: VarSpace, key: string, nowMs: number): void;
  private insert(sp: FixedSpace | VarSpace, key: string, nowMs: number): number | void {
    if (this.size >= this.maxKeys) this.makeRoom(sp, nowMs);
    else this.size -= sp.sweep(nowMs, 2, SWEEP_GRACE_MS);
    this.size++;
    if (sp instanceof FixedSpace) {
      const offset = sp.alloc();
      sp.keys.set(key, offset);
      return offset;
    }
  }

  /**
   * Frees one key for a new key of `sp` in a full store: an expired key (in `sp`, in the policy
   * holding the most keys, then in a few others in turn), else a live key of the policy holding
   * the most keys. Bounded work: at most 16 entries looked at per policy, 6 policies.
   */
  private makeRoom(sp: FixedSpace | VarSpace, nowMs: number): void {
    let largest: FixedSpace | VarSpace = sp;
    for (const other of this.spaces.values())
      if (other.keys.size > largest.keys.size) largest = other;
    let dropped = sp.sweep(nowMs, 16);
    if (dropped === 0 && largest !== sp) dropped = largest.sweep(nowMs, 16);
    if (dropped === 0 && this.spaces.size > (largest === sp ? 1 : 2)) {
      const all = [...this.spaces.values()];
      for (let i = 0; i < 4 && dropped === 0; i++) {
        const other = all[this.rotation++ % all.length]!;
        if (other !== sp && other !== largest) dropped = other.sweep(nowMs, 16);
      }
    }
    if (dropped === 0 && largest.evictOne(16)) dropped = 1;
    this.size -= dropped;
  }

  /** One space per policy shape, so a changed algorithm never reads another's state. */
  private space(policy: Policy): FixedSpace | VarSpace {
    // The policy of the last call first (a loop on one limiter), then a cache per policy object
    // (policies are frozen), and only then build the shape's id.
    if (policy === this.lastPolicy) return this.lastSpace!;
    let sp = this.byPolicy.get(policy);
    if (sp !== undefined) {
      this.lastPolicy = policy;
      this.lastSpace = sp;
      return sp;
    }
    const alg = algorithmOf(policy);
    const n = policy.rules.length;
    const hasBlock = policy.blockMs > 0;
    const compact = policy.algorithm === "gcra" && n === 1 && !hasBlock;
    const id = `${policy.name}\u0000${policy.algorithm}\u0000${policy.windowStart}\u0000${n}\u0000${hasBlock ? "b" : ""}`;
    sp = this.spaces.get(id);
    if (sp === undefined) {
      sp =
        alg.stateSize > 0
          ? new FixedSpace(alg, alg.stateSize, n, hasBlock, compact)
          : new VarSpace(alg);
      this.spaces.set(id, sp);
    }
    this.byPolicy.set(policy, sp);
    this.lastPolicy = policy;
    this.lastSpace = sp;
    return sp;
  }
}

/**
 * `next` stored in `kept`'s array when there is one: a key's state array then lives as long as
 * the key (no new array to promote to the old generation on every decision).
 */
function reuse(kept: number[] | undefined, next: readonly number[] | null): number[] | undefined {
  if (next === null) return undefined;
  if (kept === undefined) return next.slice();
  kept.length = next.length;
  for (let i = 0; i < next.length; i++) kept[i] = next[i]!;
  return kept;
}

/** Creates an in-memory store. See {@link MemoryStoreOptions}. */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  return new MemoryStore(options);
}
