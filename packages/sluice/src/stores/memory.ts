import { concurrency } from "../algorithms/index.js";
import {
  type Algorithm,
  type FixedAlgorithm,
  type InPlaceAlgorithm,
  type ResolvedRule,
  type RuleOutcome,
  type Step,
  type StepFigures,
  isFixedAlgorithm,
} from "../algorithms/types.js";
import { type Clock, systemClock } from "../clock.js";
import { ruleDecision, ruleDecisions } from "../decision.js";
import {
  BLOCK,
  CHARGE,
  type Evaluation,
  type KeyState,
  adjustState,
  effectOf,
  evaluate,
  setCountState,
  startBlock,
} from "../evaluate.js";
import { type Policy, algorithmOf } from "../policy.js";
import type { StoreDecision, StoreRequest, SyncStore } from "../store.js";
import { option, resolveOptions } from "../options.js";
import { MAX_RAW_IDENTIFIER, identifierTag } from "./redis-keys.js";

/** Options of {@link memoryStore}. */
export interface MemoryStoreOptions {
  /** Time source in epoch ms; inject one in tests and simulations. Default: the system clock. */
  now?: Clock;
  /**
   * Most keys held at once, over all policies. When full, room is made in the policy holding
   * the most keys, so a flood of new keys on one policy never evicts another policy's keys
   * while it holds more than they do. Within it an expired key goes first, then the oldest key
   * with at least half of its limit left, then one with less, and an exhausted key (denied,
   * blocked, or its last unit taken) only when no other is left. Default 1,000,000.
   *
   * A key longer than 64 characters is held by its digest (28 characters, the name the Redis
   * store gives it), so the cap bounds bytes too: a key held costs about 70–125 B of heap
   * (sliding-log and concurrency: 300–350 B, more with long logs), whatever its length, and a
   * flood of new keys into a full store does not add to it.
   */
  maxKeys?: number;
}

/** The options, checked once (options.ts): every problem named, unknown options caught. */
const OPTIONS = {
  now: option.fn<Clock>("must be a function returning epoch ms", systemClock),
  maxKeys: option.int(1, 1_000_000, Number.MAX_SAFE_INTEGER, "must be a positive integer"),
} satisfies { readonly [K in keyof Required<MemoryStoreOptions>]: unknown };

/**
 * What {@link MemoryStore.countSync} answers: a first-request `fixed-window` key's count after
 * the charge, and when its window ends. @internal
 */
export interface WindowCount {
  /** Whether the charge was taken (false: it would pass the limit; nothing was counted). */
  allowed: boolean;
  /** Units counted in the key's window (with this charge, when allowed). */
  count: number;
  /** Until the window ends (ms). */
  resetAfterMs: number;
  /** The store's clock when it decided (epoch ms). */
  nowMs: number;
}

/**
 * How long the incremental sweep leaves an expired key alone, so that a key that comes back
 * soon (the usual case for an active client) reuses its entry instead of being deleted and
 * inserted again. A full store does not wait: it takes expired keys at once.
 */
const SWEEP_GRACE_MS = 1000;

/**
 * The name a key is held under: the key itself, or — when it is longer than
 * {@link MAX_RAW_IDENTIFIER} (64) characters — `#` and the base64url of its SHA-1 (28
 * characters), the Redis store's name for it ({@link identifierTag}). A key is then held in at
 * most ~150 B however long it is (a key of 4,096 "€" is 8 KiB as a string), so `maxKeys` bounds
 * the store's bytes. Two long keys share a counter only if their SHA-1s collide. A short key is
 * not looked into (reading a character of a concatenated string makes V8 flatten it, a copy per
 * new key): one that spells a long key's digest name shares its counter, but only someone who
 * knows the long key can spell it, and they could send the long key itself.
 */
function heldKey(key: string): string {
  if (key.length <= MAX_RAW_IDENTIFIER) return key;
  const tag = identifierTag(key);
  // The tag is "#" + the digest: in V8 a cons string, which a Map keeps as a 32 B node over its
  // flattened text. Joined, it is one flat string (48 B in all: ~32 B less a key held).
  return [tag.charAt(0), tag.slice(1)].join("");
}

/**
 * A key's class, by what its last decision left: `CALM` at least half of every rule's
 * capacity, `WARM` less than half of some rule's, `HELD` nothing (denied, blocked, or the last
 * unit taken: the next request is denied). Time only ever gives room back, so a key is never
 * more limited than its class says. A full store evicts the lowest class first.
 */
const CALM = 0;
const WARM = 1;
const HELD = 2;
type KeyClass = typeof CALM | typeof WARM | typeof HELD;

/** The class of a key that has `remaining` of `capacity` left on one rule. */
function classOfRule(remaining: number, capacity: number): KeyClass {
  return remaining <= 0 ? HELD : 2 * remaining < capacity ? WARM : CALM;
}

/**
 * Keys in insertion order, a cursor that walks them round and round (the sweep's), and one
 * that stays at the oldest (eviction's: it removes every entry it steps on).
 *
 * Neither cursor is left standing while its map changes. V8 keeps a Map's hash table, once
 * rehashed (it is, every few thousand insertions and deletions), alive for as long as an
 * iterator that has not moved since points into it, and with it every newer table it was
 * rehashed into and every key those tables held: an iterator catches up to the current table
 * only when it is stepped. A sweep cursor that stood still through a flood at the cap kept
 * every table its map ever had (~51 B per key that went through), and one that stood still
 * while known keys changed class, ~20 B per change, without a single new key. So the map is
 * changed only here, changes are counted, and a cursor that has not moved within
 * {@link Ring.patience} changes is let go: the next look starts a new one (eviction's, at the
 * oldest key, which is where it stood anyway; the sweep's, at the oldest, one pass started
 * early). What an iterator can keep is then the tables of those few changes.
 */
class Ring<V> {
  /** The keys; read it, but change it only through {@link add} and {@link remove}. */
  readonly map = new Map<string, V>();
  private cursor: Iterator<[string, V]> | undefined = undefined;
  private head: Iterator<[string, V]> | undefined = undefined;
  /** Changes of the map since the cursors were last looked at, and whether each moved since. */
  private changes = 0;
  private cursorMoved = false;
  private headMoved = false;

  /** Adds a new key. */
  add(key: string, value: V): void {
    this.map.set(key, value);
    if (++this.changes > 16 && this.changes > this.patience()) this.letGoOfStillCursors();
  }

  /** Removes a key; returns whether it was there. */
  remove(key: string): boolean {
    if (!this.map.delete(key)) return false;
    if (++this.changes > 16 && this.changes > this.patience()) this.letGoOfStillCursors();
    return true;
  }

  /**
   * Changes a cursor may stand through: a few, and an eighth of the keys for a large map (a
   * rehash comes after at least about half as many changes as keys, so a cursor let go of at
   * this pace keeps at most the one table before the current, and a new one is rarely started:
   * starting one steps over the holes at the start of the table).
   */
  private patience(): number {
    return 16 + (this.map.size >>> 3);
  }

  private letGoOfStillCursors(): void {
    if (!this.cursorMoved) this.cursor = undefined;
    if (!this.headMoved) this.head = undefined;
    this.cursorMoved = this.headMoved = false;
    this.changes = 0;
  }

  /** The cursor's next step; at the end, a `done` step once, then (if restarted) undefined. */
  next(restarted: boolean): IteratorResult<[string, V]> | undefined {
    this.cursorMoved = true;
    const step = this.cursor?.next();
    if (step !== undefined && step.done !== true) return step;
    if (restarted || this.map.size === 0) return undefined;
    this.cursor = this.map.entries();
    return { done: true, value: undefined };
  }

  /** Removes the oldest entry and returns it (undefined when empty). */
  shift(): [string, V] | undefined {
    if (this.map.size === 0) return undefined;
    this.headMoved = true;
    let step = this.head?.next();
    if (step === undefined || step.done === true) {
      this.head = this.map.entries();
      step = this.head.next();
    }
    if (step.done === true) return undefined;
    this.remove(step.value[0]);
    return step.value;
  }
}

/**
 * One policy's keys, in one ring per {@link KeyClass}. Entries stay where they were inserted
 * (state is written in place) until their class changes, and each ring's cursor walks its
 * entries round and round, to drop expired ones a few at a time and to find the next to evict.
 */
abstract class Space<V> {
  readonly calm = new Ring<V>();
  readonly warm = new Ring<V>();
  readonly held = new Ring<V>();
  /** The same rings, by class. */
  readonly rings: readonly [Ring<V>, Ring<V>, Ring<V>] = [this.calm, this.warm, this.held];
  /** The class in which the last {@link get} found its key (CALM when it found none). */
  found: KeyClass = CALM;
  /** The rules of the policy last bound to this space. */
  private rules: readonly ResolvedRule[] = [];

  constructor(readonly alg: Algorithm) {}

  /** Epoch ms after which the entry holds nothing (≤ now: as good as absent). */
  protected abstract expiry(value: V): number;
  /** Called when an entry leaves the map. */
  protected abstract free(value: V): void;
  /** The rule `i` state of an entry, or undefined when it has none. */
  protected abstract stateOf(value: V, i: number): readonly number[] | undefined;
  /** Whether the entry's penalty block lasts past `nowMs`. */
  protected abstract blocked(value: V, nowMs: number): boolean;

  /** Keys held, every class. */
  get count(): number {
    return this.calm.map.size + this.warm.map.size + this.held.map.size;
  }

  /** Binds the rules of a policy of this shape (the latest one wins). */
  bind(rules: readonly ResolvedRule[]): void {
    this.rules = rules;
  }

  /** A key's entry; sets {@link found}. */
  get(key: string): V | undefined {
    this.found = CALM;
    let v = this.calm.map.get(key);
    if (v !== undefined) return v;
    const { warm, held } = this;
    if (warm.map.size > 0) {
      v = warm.map.get(key);
      if (v !== undefined) {
        this.found = WARM;
        return v;
      }
    }
    if (held.map.size > 0) {
      v = held.map.get(key);
      if (v !== undefined) this.found = HELD;
    }
    return v;
  }

  /** Adds a new key in class `to`. */
  set(key: string, value: V, to: KeyClass): void {
    this.rings[to].add(key, value);
  }

  /** Moves a key from class `from` (where it is) to class `to`, if they differ. */
  classify(key: string, value: V, from: KeyClass, to: KeyClass): void {
    if (from === to) return;
    this.rings[from].remove(key);
    this.rings[to].add(key, value);
  }

  /** Removes a key; returns whether it was there. */
  delete(key: string): boolean {
    const v = this.get(key);
    if (v === undefined) return false;
    this.rings[this.found].remove(key);
    this.free(v);
    return true;
  }

  /**
   * The class of an entry's state at `nowMs`, from its rules' own answers (a cost-0 `decide`
   * each): for a key changed without a decision (a reservation's charge or refund).
   */
  classOf(value: V, nowMs: number): KeyClass {
    if (this.blocked(value, nowMs)) return HELD;
    let c: KeyClass = CALM;
    for (let i = 0; i < this.rules.length && c !== HELD; i++) {
      const state = this.stateOf(value, i);
      if (state === undefined) continue;
      const rule = this.rules[i]!;
      const left = this.alg.decide(state, nowMs, rule, 0).remaining;
      const ci = classOfRule(left, this.alg.capacity(rule));
      if (ci > c) c = ci;
    }
    return c;
  }

  /**
   * Looks at up to `budget` calm entries (and one entry of each other class) from where the
   * last look stopped, starting over at the oldest at most once per call, and drops those
   * expired for at least `graceMs`. Returns how many it dropped. A persistent cursor steps over
   * each hole that deletes leave in the Map's table once per pass, instead of once per call.
   */
  sweep(nowMs: number, budget: number, graceMs = 0): number {
    const before = nowMs - graceMs;
    const { calm, warm, held } = this;
    let dropped = this.sweepRing(calm, before, budget);
    if (warm.map.size > 0) dropped += this.sweepRing(warm, before, 1);
    if (held.map.size > 0) dropped += this.sweepRing(held, before, 1);
    return dropped;
  }

  private sweepRing(ring: Ring<V>, before: number, budget: number): number {
    let dropped = 0;
    let restarted = false;
    for (let seen = 0; seen < budget;) {
      const step = ring.next(restarted);
      if (step === undefined) break;
      if (step.done === true) {
        restarted = true;
        continue;
      }
      seen++;
      const [key, value] = step.value;
      if (this.expiry(value) <= before) {
        ring.remove(key);
        this.free(value);
        dropped++;
      }
    }
    return dropped;
  }

  /**
   * Drops one key to make room: the oldest key of the lowest class holding any (calm, then
   * warm, then held), unless the sweep's next look at a higher class finds an expired key.
   * Reads no state of the key it drops, so that a flood into a full store costs about what
   * filling an empty one does.
   */
  evict(nowMs: number): boolean {
    const { calm, warm, held } = this;
    const from = calm.map.size > 0 ? CALM : warm.map.size > 0 ? WARM : HELD;
    if (from < WARM && warm.map.size > 0 && this.sweepRing(warm, nowMs, 1) > 0) return true;
    if (from < HELD && held.map.size > 0 && this.sweepRing(held, nowMs, 1) > 0) return true;
    const victim = this.rings[from].shift();
    if (victim === undefined) return false;
    this.free(victim[1]);
    return true;
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
  /** One rule's state, copied out of a slot for {@link Space.classOf}. */
  private readonly probe: number[];

  constructor(
    override readonly alg: FixedAlgorithm,
    readonly size: number,
    rules: number,
    hasBlock: boolean,
    /** Single-rule GCRA without penalty: the slot is the TAT alone. */
    readonly compact: boolean,
  ) {
    super(alg);
    this.probe = new Array<number>(size).fill(0);
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

  protected stateOf(offset: number, i: number): readonly number[] | undefined {
    const at = offset + this.rulesAt + i * this.size;
    const d = this.data;
    if (Number.isNaN(d[at])) return undefined;
    for (let j = 0; j < this.size; j++) this.probe[j] = d[at + j]!;
    return this.probe;
  }

  protected blocked(offset: number, nowMs: number): boolean {
    return this.blockAt >= 0 && this.data[offset + this.blockAt]! > nowMs;
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
  /** The entry last dropped, for a new key to take over with its arrays (see {@link takeSpare}). */
  private spare: Entry | undefined = undefined;

  /**
   * The entry last dropped, if any: a new key that takes it over (a flood into a full store)
   * leaves no long-lived object behind for the garbage collector, as a slot does.
   */
  takeSpare(): Entry | undefined {
    const spare = this.spare;
    this.spare = undefined;
    return spare;
  }

  protected expiry(entry: Entry): number {
    return entry.e;
  }
  protected free(entry: Entry): void {
    this.spare = entry;
  }
  protected stateOf(entry: Entry, i: number): readonly number[] | undefined {
    return entry.s.states[i];
  }
  protected blocked(entry: Entry, nowMs: number): boolean {
    return entry.s.blockUntil > nowMs;
  }
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
  /** The same spaces, as a list to go round. */
  private readonly spaceList: Array<FixedSpace | VarSpace> = [];
  /** The space holding the most keys when last looked for, and calls until the next look. */
  private largest: FixedSpace | VarSpace | undefined = undefined;
  private untilScan = 0;
  private byPolicy = new WeakMap<Policy, FixedSpace | VarSpace>();
  private lastPolicy: Policy | undefined;
  private lastSpace: FixedSpace | VarSpace | undefined;
  private size = 0;
  private permitSeq = 0;
  /** Where {@link makeRoom} looks for expired keys in other policies next. */
  private rotation = 0;
  /** Reusable arrays for the one-rule path's next state, by size (the slot takes a copy). */
  private readonly scratch: number[][] = [[], [0], [0, 0], [0, 0, 0]];
  /** The figures of the one-rule path's last decision ({@link stepSingle}). */
  private readonly figures: StepFigures = {
    allowed: false,
    remaining: 0,
    resetAfterMs: 0,
    retryAfterMs: 0,
    ttlMs: 0,
  };

  constructor(options: MemoryStoreOptions = {}) {
    const o = resolveOptions("Invalid memoryStore options", OPTIONS, options);
    this.now = o.now;
    this.maxKeys = o.maxKeys;
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
    return this.run(policy, heldKey(key), cost, true);
  }

  peekSync(policy: Policy, key: string, cost: number): StoreDecision {
    return this.run(policy, heldKey(key), cost, false);
  }

  /**
   * {@link decideSync}, told as the key's count (the rule's limit less what remains) and window
   * instead of a decision: how the drop-in faces count (a first-request `fixed-window` of one
   * rule). A policy of one rule without penalty over fixed-size state is decided on its slot
   * without building the decision's objects; another by {@link decideSync}, told the same way.
   * The answer is written to `out` (one object per caller, reused: no allocation per call).
   * @internal
   */
  countSync(policy: Policy, key: string, cost: number, out: WindowCount): void {
    key = heldKey(key);
    const nowMs = this.now();
    const sp = this.space(policy);
    const rule = policy.rules[0]!;
    if (sp instanceof FixedSpace && sp.blockAt < 0 && policy.rules.length === 1) {
      // The one-rule path on the slot, told without building the decision's objects.
      const f = this.stepSingle(sp, policy, rule, key, cost, true, nowMs);
      out.allowed = f.allowed;
      out.count = rule.limit - f.remaining;
      out.resetAfterMs = f.resetAfterMs;
      out.nowMs = nowMs;
      return;
    }
    const sd = this.run(policy, key, cost, true, nowMs);
    const r = sd.rules[0]!;
    out.allowed = sd.allowed;
    out.count = r.limit - r.remaining;
    out.resetAfterMs = Math.max(r.resetAfterMs, sd.blockedForMs);
    out.nowMs = nowMs;
  }

  adjustSync(policy: Policy, key: string, delta: number): void {
    key = heldKey(key);
    const nowMs = this.now();
    const sp = this.space(policy);
    const n = policy.rules.length;
    if (sp instanceof FixedSpace) {
      let offset = sp.get(key);
      const from = sp.found;
      const live = offset !== undefined && sp.live(offset, nowMs);
      if (sp.compact) {
        const rule = policy.rules[0]!;
        const a = sp.alg.adjust(live ? [sp.data[offset!]!] : undefined, nowMs, rule, delta);
        if (a.next !== null) {
          offset ??= this.insert(sp, key, nowMs, CALM);
          sp.data[offset] = a.next[0]!;
          sp.classify(key, offset, from, sp.classOf(offset, nowMs));
        } else if (offset !== undefined) sp.expire(offset, nowMs);
        return;
      }
      const a = adjustState(policy, live ? sp.keyState(offset!, n) : undefined, nowMs, delta);
      if (a.ttlMs > 0) {
        offset ??= this.insert(sp, key, nowMs, CALM);
        sp.setKeyState(offset, a.next, n, nowMs + a.ttlMs);
        sp.classify(key, offset, from, sp.classOf(offset, nowMs));
      } else if (offset !== undefined) sp.expire(offset, nowMs);
      return;
    }
    const entry = sp.get(key);
    const from = sp.found;
    const a = adjustState(
      policy,
      entry !== undefined && entry.e > nowMs ? entry.s : undefined,
      nowMs,
      delta,
    );
    const written = this.writeEntry(sp, key, entry, from, from, a.next, a.ttlMs, nowMs);
    if (written !== undefined) sp.classify(key, written, from, sp.classOf(written, nowMs));
  }

  releaseSync(policy: Policy, key: string, leaseId: string): boolean {
    if (policy.algorithm !== "concurrency") return false;
    key = heldKey(key);
    const nowMs = this.now();
    const sp = this.space(policy) as VarSpace;
    const entry = sp.get(key);
    if (entry === undefined || entry.e <= nowMs) return false;
    const r = concurrency.release(entry.s.states[0], nowMs, Number(leaseId));
    if (!r.released) return false;
    // In place: concurrency has one rule; the penalty block, if any, is kept. The key keeps its
    // class: its next decision tells whether it still holds its last permit.
    const blockUntil = entry.s.blockUntil > nowMs ? entry.s.blockUntil : 0;
    entry.e = nowMs + Math.max(r.ttlMs, blockUntil - nowMs);
    // With nothing left and no block the entry has expired, and its array is kept for reuse.
    if (r.next !== null || blockUntil > 0) entry.s.states[0] = reuse(entry.s.states[0], r.next);
    return true;
  }

  resetSync(policy: Policy, key: string): void {
    if (this.space(policy).delete(heldKey(key))) this.size--;
  }

  setCount(policy: Policy, key: string, count: number, windowMs: number): Promise<void> {
    this.setCountSync(policy, key, count, windowMs);
    return Promise.resolve();
  }

  setCountSync(policy: Policy, key: string, count: number, windowMs: number): void {
    key = heldKey(key);
    const nowMs = this.now();
    const sp = this.space(policy);
    if (!(sp instanceof FixedSpace) || sp.compact) return;
    const n = policy.rules.length;
    let offset = sp.get(key);
    const from = sp.found;
    const current =
      offset !== undefined && sp.live(offset, nowMs) ? sp.keyState(offset, n) : undefined;
    const { next, ttlMs } = setCountState(policy, current, nowMs, count, windowMs);
    if (ttlMs > 0) {
      offset ??= this.insert(sp, key, nowMs, CALM);
      sp.setKeyState(offset, next, n, nowMs + ttlMs);
      sp.classify(key, offset, from, sp.classOf(offset, nowMs));
    } else if (offset !== undefined) sp.expire(offset, nowMs);
  }

  close(): Promise<void> {
    this.spaces.clear();
    this.spaceList.length = 0;
    this.largest = undefined;
    this.byPolicy = new WeakMap();
    this.lastPolicy = this.lastSpace = undefined;
    this.size = 0;
    return Promise.resolve();
  }

  private run(
    policy: Policy,
    key: string,
    cost: number,
    commit: boolean,
    nowMs = this.now(),
  ): StoreDecision {
    const sp = this.space(policy);
    if (sp instanceof FixedSpace) {
      if (sp.blockAt < 0 && policy.rules.length === 1) {
        const rule = policy.rules[0]!;
        const f = this.stepSingle(sp, policy, rule, key, cost, commit, nowMs);
        return { allowed: f.allowed, rules: [ruleDecision(rule, f)], blockedForMs: 0 };
      }
      return this.runFixed(sp, policy, key, cost, commit, nowMs);
    }
    const entry = sp.get(key);
    const from = sp.found;
    const current = entry !== undefined && entry.e > nowMs ? entry.s : undefined;
    const permitId = policy.algorithm === "concurrency" && commit ? ++this.permitSeq : 0;
    // One rule, and no penalty block in force (a policy with a penalty whose key is not
    // blocked decides as one without, until a denial starts the block).
    if (policy.rules.length === 1 && (current === undefined || !(current.blockUntil > nowMs)))
      return this.runSingleVar(
        sp,
        policy,
        key,
        entry,
        from,
        current,
        cost,
        commit,
        nowMs,
        permitId,
      );
    const ev = evaluate(policy, current, nowMs, cost, commit, permitId);
    if (commit) {
      const to = classOf(sp.alg, policy, ev);
      if (ev.changed) this.writeEntry(sp, key, entry, from, to, ev.next, ev.ttlMs, nowMs);
      else if (entry !== undefined) sp.classify(key, entry, from, to);
    }
    const out: StoreDecision = {
      allowed: ev.allowed,
      rules: ruleDecisions(policy, ev.rules),
      blockedForMs: ev.blockedForMs,
    };
    return permitId > 0 && ev.allowed && cost > 0 ? { ...out, leaseId: String(permitId) } : out;
  }

  /**
   * One rule, no penalty: {@link evaluate} for n = 1 — the rule's outcome is the verdict, and
   * {@link effectOf} what it does to the key — decided by the algorithm's
   * {@link FixedAlgorithm.decideAt} on the key's slot, and the next state written back into it.
   * Allocates nothing; answers in {@link figures} (rewritten by the next decision).
   */
  private stepSingle(
    sp: FixedSpace,
    policy: Policy,
    rule: ResolvedRule,
    key: string,
    cost: number,
    commit: boolean,
    nowMs: number,
  ): StepFigures {
    let offset = sp.get(key);
    const from = sp.found;
    const at = offset === undefined ? 0 : offset + sp.rulesAt;
    const has = offset !== undefined && sp.live(offset, nowMs) && !Number.isNaN(sp.data[at]);
    const f = this.figures;
    const next = this.scratch[sp.size]!;
    const kept = sp.alg.decideAt(sp.data, at, has, nowMs, rule, cost, f, next);
    const effect = effectOf(policy, f.allowed, cost, commit);
    if (effect === CHARGE) {
      if (kept) {
        const to = classOfRule(f.remaining, sp.alg.capacity(rule));
        if (offset === undefined) offset = this.insert(sp, key, nowMs, to);
        else sp.classify(key, offset, from, to);
        const data = sp.data; // insert may have grown it
        if (sp.compact) data[offset] = next[0]!;
        else {
          data[offset] = nowMs + f.ttlMs;
          for (let j = 0; j < sp.size; j++) data[offset + sp.rulesAt + j] = next[j]!;
        }
      } else if (offset !== undefined) {
        // Nothing left to remember: mark the slot expired (it is reused or swept later).
        sp.expire(offset, nowMs);
      }
    } else if (commit && !f.allowed && cost > 0 && offset !== undefined) {
      sp.classify(key, offset, from, HELD);
    }
    return f;
  }

  /**
   * {@link stepSingle} for sliding-log and concurrency, the key not blocked: the key's entry is
   * updated in place. A denial starts the policy's penalty block, as {@link evaluate} does.
   */
  private runSingleVar(
    sp: VarSpace,
    policy: Policy,
    key: string,
    entry: Entry | undefined,
    from: KeyClass,
    current: KeyState | undefined,
    cost: number,
    commit: boolean,
    nowMs: number,
    permitId: number,
  ): StoreDecision {
    const alg = sp.alg;
    const rule = policy.rules[0]!;
    let step: Step;
    if (permitId > 0) step = concurrency.decide(current?.states[0], nowMs, rule, cost, permitId);
    else if (effectOf(policy, true, cost, commit) === CHARGE && "decideInPlace" in alg) {
      // A charge if admitted: the key's log is changed in place (and is the new state when
      // allowed; a denial only prunes what has left the window).
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
        sp.classify(key, entry, from, classOfRule(step.remaining, alg.capacity(rule)));
        return { allowed: true, rules: [ruleDecision(rule, step)], blockedForMs: 0 };
      }
    } else step = alg.decide(current?.states[0], nowMs, rule, cost);
    const effect = effectOf(policy, step.allowed, cost, commit);
    if (effect === BLOCK) return this.blockVar(sp, policy, key, entry, from, current, step, nowMs);
    const rules = [ruleDecision(rule, step)];
    if (effect !== CHARGE) {
      if (commit && !step.allowed && cost > 0 && entry !== undefined)
        sp.classify(key, entry, from, HELD);
      return { allowed: step.allowed, rules, blockedForMs: 0 };
    }
    const to = classOfRule(step.remaining, alg.capacity(rule));
    if (entry !== undefined || step.ttlMs > 0) {
      const own = entry ?? this.insertEntry(sp, key, to, nowMs);
      own.e = nowMs + step.ttlMs;
      if (own.s.blockUntil !== 0 || own.s.states.length !== 1)
        own.s = { states: [undefined], blockUntil: 0 };
      own.s.states[0] = reuse(own.s.states[0], step.next);
      if (entry !== undefined) sp.classify(key, entry, from, to);
    }
    return permitId > 0
      ? { allowed: true, rules, blockedForMs: 0, leaseId: String(permitId) }
      : { allowed: true, rules, blockedForMs: 0 };
  }

  /** A denial of a one-rule policy with a penalty (sliding-log, concurrency) starts the block. */
  private blockVar(
    sp: VarSpace,
    policy: Policy,
    key: string,
    entry: Entry | undefined,
    from: KeyClass,
    current: KeyState | undefined,
    step: Step,
    nowMs: number,
  ): StoreDecision {
    const outcomes: RuleOutcome[] = [step];
    const block = startBlock(policy, current, nowMs, outcomes, step.ttlMs);
    this.writeEntry(sp, key, entry, from, HELD, block.next, block.ttlMs, nowMs);
    return {
      allowed: false,
      rules: [ruleDecision(policy.rules[0]!, outcomes[0]!)],
      blockedForMs: policy.blockMs,
    };
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
    let offset = sp.get(key);
    const from = sp.found;
    const current =
      offset !== undefined && sp.live(offset, nowMs) ? sp.keyState(offset, n) : undefined;
    const ev = evaluate(policy, current, nowMs, cost, commit);
    if (commit) {
      const to = classOf(sp.alg, policy, ev);
      if (ev.changed) {
        if (offset === undefined) offset = this.insert(sp, key, nowMs, to);
        else sp.classify(key, offset, from, to);
        sp.setKeyState(offset, ev.next, n, nowMs + ev.ttlMs);
      } else if (offset !== undefined) sp.classify(key, offset, from, to);
    }
    return {
      allowed: ev.allowed,
      rules: ruleDecisions(policy, ev.rules),
      blockedForMs: ev.blockedForMs,
    };
  }

  /** Writes a key's entry (in place when it has one); returns the entry, if any is kept. */
  private writeEntry(
    sp: VarSpace,
    key: string,
    entry: Entry | undefined,
    from: KeyClass,
    to: KeyClass,
    next: KeyState,
    ttlMs: number,
    nowMs: number,
  ): Entry | undefined {
    if (entry !== undefined) {
      // In place: a key keeps its position (unless its class changes), and its object is reused.
      entry.e = nowMs + ttlMs;
      entry.s = next;
      sp.classify(key, entry, from, to);
      return entry;
    }
    if (ttlMs <= 0) return undefined;
    const fresh = this.insertEntry(sp, key, to, nowMs);
    fresh.e = nowMs + ttlMs;
    fresh.s = next;
    return fresh;
  }

  /** Adds a new key to a fixed-size space, in class `to`; returns its slot. */
  private insert(sp: FixedSpace, key: string, nowMs: number, to: KeyClass): number {
    this.makeRoom(sp, nowMs);
    const offset = sp.alloc();
    sp.set(key, offset, to);
    return offset;
  }

  /**
   * Adds a new key to a sliding-log or concurrency space, in class `to`; returns its entry for
   * the caller to fill: the one room was just made from, or a new one.
   */
  private insertEntry(sp: VarSpace, key: string, to: KeyClass, nowMs: number): Entry {
    this.makeRoom(sp, nowMs);
    const entry = sp.takeSpare() ?? { e: 0, s: { states: [undefined], blockUntil: 0 } };
    sp.set(key, entry, to);
    return entry;
  }

  /**
   * Makes room for one new key of `sp`. Below `maxKeys` the new key sweeps a little of its own
   * policy's expired state, as it would anyway. In a full store: an expired key of `sp`, else
   * of two other policies in turn, else one key of the policy holding the most keys (its least
   * valuable, see {@link Space.evict}). Bounded work: a few entries looked at, as for a key
   * inserted below the cap.
   */
  private makeRoom(sp: FixedSpace | VarSpace, nowMs: number): void {
    if (this.size < this.maxKeys) {
      this.size -= sp.sweep(nowMs, 2, SWEEP_GRACE_MS);
      this.size++;
      return;
    }
    const largest = this.largestSpace(sp);
    let dropped = largest === sp ? 0 : sp.sweep(nowMs, 2);
    // Two other policies in turn (at most four steps round the list: sp and largest are skipped).
    const n = this.spaceList.length;
    for (let i = 0, tried = 0; dropped === 0 && tried < 2 && i < n; i++) {
      const other = this.spaceList[this.rotation++ % n]!;
      if (other === sp || other === largest) continue;
      tried++;
      dropped = other.sweep(nowMs, 2);
    }
    if (dropped === 0 && largest.evict(nowMs)) dropped = 1;
    this.size += 1 - dropped;
  }

  /**
   * The space holding the most keys. Looked for over every space once per as many calls as
   * there are spaces (amortised O(1), so a store with thousands of policies stays fast); in
   * between, only the space that grows is compared with the last one found.
   */
  private largestSpace(sp: FixedSpace | VarSpace): FixedSpace | VarSpace {
    if (this.largest === undefined || --this.untilScan <= 0) {
      let largest = sp;
      for (const other of this.spaceList) if (other.count > largest.count) largest = other;
      this.largest = largest;
      this.untilScan = this.spaceList.length;
    } else if (sp.count > this.largest.count) this.largest = sp;
    return this.largest;
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
    const id = `${policy.name}\u0000${policy.algorithm}\u0000${policy.windowStart}\u0000${policy.refill}\u0000${n}\u0000${hasBlock ? "b" : ""}`;
    sp = this.spaces.get(id);
    if (sp === undefined) {
      sp = isFixedAlgorithm(alg)
        ? new FixedSpace(alg, alg.stateSize, n, hasBlock, compact)
        : new VarSpace(alg);
      this.spaces.set(id, sp);
      this.spaceList.push(sp);
    }
    // Eviction weighs keys by the rules of the latest policy of this shape.
    sp.bind(policy.rules);
    this.byPolicy.set(policy, sp);
    this.lastPolicy = policy;
    this.lastSpace = sp;
    return sp;
  }
}

/** The class a committed multi-rule (or penalty) decision leaves its key in. */
function classOf(alg: Algorithm, policy: Policy, ev: Evaluation): KeyClass {
  if (!ev.allowed || ev.blockedForMs > 0) return HELD;
  let c: KeyClass = CALM;
  for (let i = 0; i < ev.rules.length && c !== HELD; i++) {
    const ci = classOfRule(ev.rules[i]!.remaining, alg.capacity(policy.rules[i]!));
    if (ci > c) c = ci;
  }
  return c;
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
