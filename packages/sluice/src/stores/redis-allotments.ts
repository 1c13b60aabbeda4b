/**
 * Allotments: hot keys decided in memory from capacity taken from Redis ahead of the requests
 * (docs/leases.md; a policy turns them on with its `lease` field). The Redis store owns the
 * calls; this module owns what each node holds.
 *
 * A key a node decides often enough (`hotAfter` times within a second) gets an allotment: the
 * next call to Redis for it decides the request and debits up to `asked` more units (at most
 * half of what is left; at most `maxShare` of the capacity), which this node then spends in
 * memory until they run out or the allotment ends (`ttl`; for fixed-window also the window's
 * end). Units are debited before they admit anything, so every node together never admits more
 * than the limit. What a node does not use goes back: with its next call for the key, when the
 * key goes idle, when the allotment ends, and when the store closes. A node that has no units
 * left asks Redis before it denies. While an allotment call is in flight, the key's other calls
 * wait for it (they are served from its grant, or ask again).
 *
 * A concurrency allotment is slots: a node holds some of the key's slots as one member of its
 * sorted set (expiring `ttl` after the node last touched it, so a dead node's slots come back),
 * and hands them out as permits while it has free ones, freeing them on release, in memory.
 */
import type { RuleDecision } from "../decision.js";
import type { Policy } from "../policy.js";
import { policyCapacity } from "../policy.js";
import { unrefTimer } from "../platform.js";
import type { LocalAnswer, StoreDecision } from "../store.js";
import { type DenyCache, denyCacheable } from "./deny-cache.js";

/** What Redis answered an allotment call: the request's decision and the units granted. */
export interface AllotmentReply {
  readonly decision: StoreDecision;
  /** Units debited for this node beyond the request. */
  readonly granted: number;
  /** The decision time (Redis's clock, or the injected one). */
  readonly at: number;
  /** The key's allotment epoch (see lua/sluice.lua): units of another epoch are void. */
  readonly epoch: number;
}

/** The calls an allotment book makes through its store. */
export interface AllotmentCalls {
  /** The clock allotments are timed by (the store's injected clock, or a monotonic one). */
  now(): number;
  /** An allotment call: give back `ret` units taken at `retAt` in `epoch`, decide `cost`, ask for `asked` more. */
  allot(
    policy: Policy,
    key: string,
    cost: number,
    asked: number,
    ret: number,
    retAt: number,
    epoch: number,
    member: string,
  ): Promise<AllotmentReply>;
  /** Give back `ret` units (for concurrency: shrink the member to what is held, and refresh it). */
  giveBack(
    policy: Policy,
    key: string,
    ret: number,
    retAt: number,
    epoch: number,
    member: string,
  ): Promise<unknown>;
}

/** One pending request on a key whose allotment call is in flight. */
interface Waiter {
  readonly cost: number;
  readonly resolve: (d: StoreDecision) => void;
  readonly reject: (err: unknown) => void;
}

/** What this node holds of one key. */
interface Held {
  readonly policy: Policy;
  readonly key: string;
  /** Rate algorithms: units left. Concurrency: slots held (in use or free). */
  units: number;
  /** Concurrency: slots in use, by local permit id: cost and when it expires (allotment clock). */
  readonly inUse: Map<string, { cost: number; expires: number }>;
  used: number;
  /** Allotment clock: units cannot be spent from then on. */
  expires: number;
  /** Decision time and epoch of the grant (for giving back). */
  at: number;
  epoch: number;
  /** The rules at the grant, remaining net of the grant; allotment clock of the grant. */
  base: readonly RuleDecision[];
  grantedAt: number;
  /** An allotment call is in flight; calls meanwhile wait. */
  busy: boolean;
  waiters: Waiter[];
  /**
   * The last denial from Redis, and until when (allotment clock) it holds for its cost or more:
   * a denial changes nothing in Redis, so the same request is denied until then (as the store's
   * deny cache answers keys without an allotment).
   */
  denied:
    | {
        readonly decision: StoreDecision;
        readonly cost: number;
        readonly at: number;
        readonly until: number;
      }
    | undefined;
  /** Decisions since `since` (allotment clock), for the next allotment's size. */
  recent: number;
  since: number;
  lastUse: number;
}

/** Keys tracked for heat (the first `hotAfter` decisions of a key go to Redis as usual). */
const HEAT_KEYS = 10_000;
/** The horizon an allotment is sized for: the units this node would spend in this long (ms). */
const HORIZON_MS = 250;

/** Metrics of one store's allotments. */
export interface AllotmentCounters {
  /** Allotments taken (allotment calls that granted units). */
  taken: number;
  /** Units given back before they ran out. */
  returned: number;
  /** Allotments that ended with units unspent (given back at their end). */
  expired: number;
  /** Decisions answered in memory: from an allotment, or a denial Redis gave that still holds. */
  local: number;
  /** Decisions of policies with allotments (`lease` set) answered by Redis. */
  remote: number;
}

/**
 * The first name of {@link AllotmentCounters}.
 * @deprecated Use {@link AllotmentCounters} (docs/ARCHITECTURE.md, Glossary).
 */
export type LeaseCounters = AllotmentCounters;

/** How often allotments are looked over: idle or expired ones give their units back (ms). */
export const ALLOTMENT_SWEEP_MS = 100;

/** The allotments of one Redis store. */
export class AllotmentBook {
  /** What is held, by policy name and key. */
  private readonly held = new Map<string, Map<string, Held>>();
  /**
   * Keys on their way to an allotment, by policy name: their decisions in the current second
   * (`heatSecond` of this book's clock). The maps are dropped when the second changes or they
   * hold {@link HEAT_KEYS} keys, never pruned key by key: a Map used as a queue (delete the
   * oldest, add the newest) makes V8 skip a growing run of deleted entries, which cost cold
   * keys ~5 µs a decision.
   */
  private heat = new Map<string, Map<string, number>>();
  /** Keys counted since the count last started again (at most {@link HEAT_KEYS}). */
  private heatSize = 0;
  private heatSecond = -1;
  private readonly heatOrigin: number;
  private seq = 0;
  /** Counts for metrics. */
  readonly counters: AllotmentCounters = { taken: 0, returned: 0, expired: 0, local: 0, remote: 0 };
  private sweeper: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly calls: AllotmentCalls,
    /** This node's id: the prefix of its local permit ids and its concurrency member. */
    private readonly nodeId: string,
  ) {
    this.heatOrigin = calls.now();
  }

  /** Allotments of the policy in force now: unexpired, with units left or slots in use. */
  heldCount(policy: string): number {
    const m = this.held.get(policy);
    if (m === undefined) return 0;
    const now = this.calls.now();
    let n = 0;
    for (const h of m.values()) if (h.expires > now && (h.units > 0 || h.inUse.size > 0)) n++;
    return n;
  }

  private heldOf(policy: Policy): Map<string, Held> {
    let m = this.held.get(policy.name);
    if (m === undefined) this.held.set(policy.name, (m = new Map()));
    return m;
  }

  /**
   * Decides from an allotment when the key has one (or is hot enough to get one): a decision, a
   * promise of one, or undefined when the key is cold (the caller asks Redis as usual).
   */
  decide(
    policy: Policy,
    key: string,
    cost: number,
  ): StoreDecision | Promise<StoreDecision> | undefined {
    const byKey = this.held.get(policy.name);
    let h = byKey?.get(key);
    if (h !== undefined && h.policy !== policy) {
      // The policy changed (a new version): what was held for the old one goes back.
      void this.giveBackUnspent(h);
      byKey!.delete(key);
      h = undefined;
    }
    const now = this.calls.now();
    if (h === undefined) {
      if (!this.isHot(policy.name, key, policy.lease!.hotAfter, now)) return undefined;
      h = {
        policy,
        key,
        units: 0,
        inUse: new Map(),
        used: 0,
        expires: 0,
        at: 0,
        epoch: 0,
        base: [],
        grantedAt: now,
        busy: false,
        waiters: [],
        denied: undefined,
        recent: policy.lease!.hotAfter,
        since: now - 1000,
        lastUse: now,
      };
      (byKey ?? this.heldOf(policy)).set(key, h);
    }
    h.recent++;
    h.lastUse = now;
    if (h.busy) {
      const held = h;
      return new Promise((resolve, reject) => held.waiters.push({ cost, resolve, reject }));
    }
    const local = this.spend(h, cost, now) ?? this.stillDenied(h, cost, now);
    if (local !== undefined) return local;
    return new Promise((resolve, reject) => this.refill(h!, { cost, resolve, reject }));
  }

  /**
   * A decision from the key's allotment when it can answer at once, else undefined (nothing is
   * asked of Redis: the caller then decides as usual).
   */
  trySpend(policy: Policy, key: string, cost: number): StoreDecision | undefined {
    const h = this.held.get(policy.name)?.get(key);
    if (h === undefined || h.policy !== policy || h.busy) return undefined;
    const now = this.calls.now();
    const d = this.spend(h, cost, now) ?? this.stillDenied(h, cost, now);
    if (d !== undefined) {
      h.recent++;
      h.lastUse = now;
    }
    return d;
  }

  /**
   * Who would answer a decision of `cost` for the key now, changing nothing (the Redis store's
   * `explainLocal`): `"allotment"` (what this node holds covers it), `"deny-cache"` (a denial
   * Redis gave still holds for it), `"remote"` (Redis: an allotment call, for a key that is
   * held, becomes hot with this decision, or waits for a call in flight), or `"cold"` (the key
   * is not held and stays cold: the store decides it as any other key).
   */
  answerer(
    policy: Policy,
    key: string,
    cost: number,
  ): "allotment" | "deny-cache" | "remote" | "cold" {
    const h = this.held.get(policy.name)?.get(key);
    const now = this.calls.now();
    if (h === undefined || h.policy !== policy)
      return this.wouldBeHot(policy.name, key, policy.lease!.hotAfter, now) ? "remote" : "cold";
    if (h.busy) return "remote";
    if (now < h.expires) {
      // Concurrency: the slots held less those in use (a permit that ran out frees its slot).
      let free = h.units;
      if (policy.algorithm === "concurrency")
        for (const l of h.inUse.values()) if (l.expires > now) free -= l.cost;
      if (free >= cost) return "allotment";
    }
    const dn = h.denied;
    if (dn !== undefined && cost >= dn.cost && now >= dn.at && now < dn.until) return "deny-cache";
    return "remote";
  }

  /** Whether {@link AllotmentBook.isHot} would find the key hot now, counting nothing. */
  private wouldBeHot(policy: string, key: string, hotAfter: number, now: number): boolean {
    if (hotAfter <= 1) return true;
    const second = Math.floor((now - this.heatOrigin) / 1000);
    const n = second === this.heatSecond ? (this.heat.get(policy)?.get(key) ?? 0) : 0;
    return n + 1 >= hotAfter;
  }

  /**
   * The key's last denial, counted down, when it still holds for `cost` (no allotment can cover it
   * and Redis said no until then), else undefined.
   */
  private stillDenied(h: Held, cost: number, now: number): StoreDecision | undefined {
    const dn = h.denied;
    if (dn === undefined || cost < dn.cost) return undefined;
    if (now >= dn.until || now < dn.at) {
      h.denied = undefined;
      return undefined;
    }
    const elapsed = Math.round(now - dn.at);
    const rules = dn.decision.rules.map((r): RuleDecision => ({
      ...r,
      resetAfterMs: Math.max(0, r.resetAfterMs - elapsed),
      retryAfterMs: Math.max(0, r.retryAfterMs - elapsed),
    }));
    this.counters.local++;
    return { allowed: false, rules, blockedForMs: 0, reason: "deny-cache" };
  }

  /** A decision from what `h` holds, or undefined when it cannot cover `cost`. */
  private spend(h: Held, cost: number, now: number): StoreDecision | undefined {
    if (now >= h.expires) return undefined;
    const policy = h.policy;
    if (policy.algorithm === "concurrency") {
      this.expireLocal(h, now);
      const free = h.units - h.used;
      if (free < cost) return undefined;
      const permitId = `${this.nodeId}~${(++this.seq).toString(36)}`;
      h.inUse.set(permitId, { cost, expires: now + policy.rules[0]!.periodMs });
      h.used += cost;
      this.counters.local++;
      return this.reported(h, now, h.units - h.used, permitId);
    }
    if (h.units < cost) return undefined;
    h.units -= cost;
    this.counters.local++;
    return this.reported(h, now, h.units, undefined);
  }

  /** The decision reported from an allotment: the rules at the grant, with what is left here. */
  private reported(
    h: Held,
    now: number,
    left: number,
    permitId: string | undefined,
  ): StoreDecision {
    const elapsed = Math.max(0, now - h.grantedAt);
    const rules = h.base.map((r): RuleDecision => ({
      limit: r.limit,
      periodMs: r.periodMs,
      burst: r.burst,
      allowed: true,
      remaining: r.remaining + left,
      resetAfterMs: Math.max(0, r.resetAfterMs - Math.round(elapsed)),
      retryAfterMs: 0,
    }));
    return permitId === undefined
      ? { allowed: true, rules, blockedForMs: 0 }
      : { allowed: true, rules, blockedForMs: 0, leaseId: permitId };
  }

  /** Concurrency: frees local slots whose permit ran out (their holder never released them). */
  private expireLocal(h: Held, now: number): void {
    if (h.inUse.size === 0) return;
    for (const [id, l] of h.inUse) {
      if (l.expires <= now) {
        h.inUse.delete(id);
        h.used -= l.cost;
      }
    }
  }

  /** The units to ask for: this node's rate over the horizon, at least what waits. */
  private asked(h: Held, now: number, waiting: number): number {
    const policy = h.policy;
    const cap = Math.floor(policy.lease!.maxShare * policyCapacity(policy));
    const rate = h.recent / Math.max(1, now - h.since);
    h.recent = 0;
    h.since = now;
    const want = Math.ceil(rate * Math.min(HORIZON_MS, policy.lease!.ttlMs));
    return Math.max(0, Math.min(cap, Math.max(want, waiting)));
  }

  /** Asks Redis for `first` (and an allotment); then serves what waited. */
  private refill(h: Held, first: Waiter): void {
    const policy = h.policy;
    const now = this.calls.now();
    const concurrency = policy.algorithm === "concurrency";
    if (concurrency) this.expireLocal(h, now);
    // What goes back with the call: rate algorithms return their leftover (it cannot cover the
    // request, or it has expired); concurrency returns free slots only once the allotment expired.
    const ret = concurrency ? (now >= h.expires ? h.units - h.used : 0) : h.units;
    if (ret > 0) {
      this.counters.returned += ret;
      if (now >= h.expires) this.counters.expired++;
    }
    const asked = this.asked(
      h,
      now,
      h.waiters.reduce((n, w) => n + w.cost, 0),
    );
    h.busy = true;
    // The units given back are gone whatever the call's fate (it may have run).
    h.units -= ret;
    const member = concurrency ? `${this.nodeId}~n` : "";
    this.counters.remote++;
    this.calls.allot(policy, h.key, first.cost, asked, ret, h.at, h.epoch, member).then(
      (reply) => {
        h.busy = false;
        const d = reply.decision;
        const grantedAt = now;
        if (reply.epoch !== h.epoch) {
          // A new epoch (Redis lost its data, or this is the first allotment): what was held is void.
          if (concurrency) h.units = Math.min(h.units, h.used);
          else h.units = 0;
        }
        h.epoch = reply.epoch;
        h.at = reply.at;
        if (reply.granted > 0) this.counters.taken++;
        if (d.allowed) {
          if (concurrency) {
            h.units += first.cost + reply.granted;
            const permitId = `${this.nodeId}~${(++this.seq).toString(36)}`;
            h.inUse.set(permitId, { cost: first.cost, expires: now + policy.rules[0]!.periodMs });
            h.used += first.cost;
            first.resolve({ ...d, leaseId: permitId });
          } else {
            h.units += reply.granted;
            first.resolve(d);
          }
          // Redis reports remaining net of what this node now holds unspent; a decision from
          // the allotment adds back what is left of it.
          h.base = d.rules;
          let ttl = policy.lease!.ttlMs;
          if (policy.algorithm === "fixed-window")
            for (const r of d.rules) ttl = Math.min(ttl, r.resetAfterMs);
          h.expires = grantedAt + ttl;
          h.grantedAt = grantedAt;
        } else {
          let retry = 0;
          for (const r of d.rules) if (!r.allowed && r.retryAfterMs > retry) retry = r.retryAfterMs;
          // Not for concurrency: a release, here or anywhere, frees a slot at any time (the
          // store's deny cache leaves it out too).
          if (retry > 0 && d.blockedForMs === 0 && !concurrency)
            h.denied = { decision: d, cost: first.cost, at: now, until: now + retry };
          first.resolve(d);
        }
        if (d.allowed) h.denied = undefined;
        this.serveWaiters(h);
      },
      (err: unknown) => {
        h.busy = false;
        first.reject(err);
        // Redis failed: what this node still holds keeps deciding until it expires; the rest
        // of the waiters get the error (their policy's onStoreError answers).
        const waiters = h.waiters;
        h.waiters = [];
        const now2 = this.calls.now();
        for (const w of waiters) {
          const d = this.spend(h, w.cost, now2);
          if (d !== undefined) w.resolve(d);
          else w.reject(err);
        }
      },
    );
  }

  /** After an allotment call: serve waiters from the grant; the first it cannot cover asks again. */
  private serveWaiters(h: Held): void {
    const now = this.calls.now();
    while (h.waiters.length > 0) {
      const w = h.waiters[0]!;
      const d = this.spend(h, w.cost, now) ?? this.stillDenied(h, w.cost, now);
      if (d === undefined) {
        h.waiters.shift();
        this.refill(h, w);
        return;
      }
      h.waiters.shift();
      w.resolve(d);
    }
  }

  /**
   * True once a key has been decided `hotAfter` times within a second (the same second of this
   * book's clock). One map lookup and one write of a small integer: a cold key costs no more.
   * At most {@link HEAT_KEYS} keys are counted at once: the next new key starts the count again.
   */
  private isHot(policy: string, key: string, hotAfter: number, now: number): boolean {
    if (hotAfter <= 1) return true;
    const second = Math.floor((now - this.heatOrigin) / 1000);
    if (second !== this.heatSecond) {
      this.heatSecond = second;
      if (this.heatSize > 0) this.heat = new Map();
      this.heatSize = 0;
    }
    let m = this.heat.get(policy);
    if (m === undefined) this.heat.set(policy, (m = new Map()));
    const n = (m.get(key) ?? 0) + 1;
    if (n === 1) {
      if (this.heatSize >= HEAT_KEYS) {
        // Full: counting starts again, so a hot key is counted again at once (a flood of new
        // keys costs a fresh map every HEAT_KEYS of them, and blinds nothing).
        this.heat = new Map([[policy, (m = new Map())]]);
        this.heatSize = 0;
      }
      this.heatSize++;
    }
    if (n < hotAfter) {
      m.set(key, n);
      return false;
    }
    m.delete(key);
    return true;
  }

  /**
   * Concurrency: frees a permit handed out from an allotment (`true`), or says the id is not
   * one of ours.
   */
  releaseLocal(policy: Policy, key: string, permitId: string): boolean | undefined {
    if (!permitId.startsWith(`${this.nodeId}~`)) return undefined;
    const h = this.held.get(policy.name)?.get(key);
    const l = h?.inUse.get(permitId);
    if (h === undefined || l === undefined) return false;
    h.inUse.delete(permitId);
    h.used -= l.cost;
    h.lastUse = this.calls.now();
    return true;
  }

  /** A peek's answer with what this node holds unspent for the key added to each rule. */
  withUnspent(policy: Policy, key: string, d: StoreDecision): StoreDecision {
    const extra = this.unspent(policy, key);
    if (extra === 0) return d;
    return { ...d, rules: d.rules.map((r) => ({ ...r, remaining: r.remaining + extra })) };
  }

  /** Units this node holds unspent for the key (added to a peek's remaining). */
  unspent(policy: Policy, key: string): number {
    const h = this.held.get(policy.name)?.get(key);
    if (h === undefined || h.policy !== policy || this.calls.now() >= h.expires) return 0;
    return policy.algorithm === "concurrency" ? h.units - h.used : h.units;
  }

  /** A refund or forced charge of the key: a denial remembered no longer holds. */
  changed(policy: Policy, key: string): void {
    const h = this.held.get(policy.name)?.get(key);
    if (h !== undefined) h.denied = undefined;
  }

  /** Forgets the key (after a reset: Redis no longer counts what was allotted). */
  forget(policy: Policy, key: string): void {
    this.held.get(policy.name)?.delete(key);
  }

  /**
   * Gives back what idle or expired allotments hold and drops idle keys. Called on a timer; also
   * keeps concurrency members alive while they hold slots in use.
   */
  sweep(): void {
    const now = this.calls.now();
    for (const [name, byKey] of this.held) {
      this.sweepKeys(byKey, now);
      if (byKey.size === 0) this.held.delete(name);
    }
  }

  private sweepKeys(byKey: Map<string, Held>, now: number): void {
    for (const [id, h] of byKey) {
      if (h.busy) continue;
      const ttl = h.policy.lease!.ttlMs;
      const idle = now - h.lastUse >= ttl / 2;
      if (h.policy.algorithm === "concurrency") {
        this.expireLocal(h, now);
        const free = h.units - h.used;
        if (h.units > 0 && (idle || now >= h.expires - ttl / 2)) {
          // Shrink to what is in use (when idle) and refresh the member: its slots stay this
          // node's for another ttl from now (Redis counts from its own later time).
          const ret = idle ? free : 0;
          h.units -= ret;
          if (ret > 0) this.counters.returned += ret;
          h.busy = true;
          this.calls.giveBack(h.policy, h.key, ret, h.at, h.epoch, `${this.nodeId}~n`).then(
            () => {
              h.busy = false;
              h.expires = now + ttl;
              this.serveWaiters(h);
            },
            () => {
              h.busy = false;
              this.serveWaiters(h);
            },
          );
        }
        if (h.units === 0 && h.used === 0 && idle) byKey.delete(id);
        continue;
      }
      if (h.units > 0 && (idle || now >= h.expires)) {
        if (now >= h.expires) this.counters.expired++;
        void this.giveBackUnspent(h);
      }
      if (h.units === 0 && idle) byKey.delete(id);
    }
  }

  /** Gives back all that `h` holds unspent. */
  private giveBackUnspent(h: Held): Promise<unknown> {
    const ret = h.policy.algorithm === "concurrency" ? h.units - h.used : h.units;
    if (ret <= 0) return Promise.resolve();
    h.units -= ret;
    this.counters.returned += ret;
    const member = h.policy.algorithm === "concurrency" ? `${this.nodeId}~n` : "";
    return this.calls.giveBack(h.policy, h.key, ret, h.at, h.epoch, member).catch(() => undefined);
  }

  /**
   * Looks the allotments over every {@link ALLOTMENT_SWEEP_MS} while any is held (idle or expired
   * ones give their units back); the timer stops when nothing is held. Called on each use.
   */
  keepSwept(): void {
    if (this.sweeper !== undefined) return;
    this.sweeper = setInterval(() => {
      this.sweep();
      if (this.empty) this.stopSweeping();
    }, ALLOTMENT_SWEEP_MS);
    unrefTimer(this.sweeper);
  }

  private stopSweeping(): void {
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /** Gives back everything (the store is closing). */
  async close(): Promise<void> {
    this.stopSweeping();
    const all: Array<Promise<unknown>> = [];
    for (const byKey of this.held.values()) {
      for (const h of byKey.values()) {
        for (const w of h.waiters.splice(0)) w.reject(new Error("closing"));
        if (!h.busy) all.push(this.giveBackUnspent(h));
      }
    }
    this.held.clear();
    await Promise.all(all);
  }

  /** Whether anything is held (the sweep timer runs only then). */
  get empty(): boolean {
    return this.held.size === 0;
  }
}

/**
 * Which local structure would answer a Redis store's `decide` of `cost` for the key now — an
 * allotment this node holds, or the deny cache (for a key with an allotment, the denial it
 * remembers) — or undefined when Redis would. Changes nothing: no heat counted, no entry dropped.
 */
export function localAnswer(
  book: AllotmentBook | undefined,
  deny: DenyCache | undefined,
  policy: Policy,
  key: string,
  cost: number,
): LocalAnswer | undefined {
  if (policy.lease !== undefined) {
    // No book yet: the first decision makes it, and a key is hot at once with hotAfter 1.
    const a = book?.answerer(policy, key, cost) ?? (policy.lease.hotAfter <= 1 ? "remote" : "cold");
    if (a === "allotment" || a === "deny-cache") return a;
    if (a === "remote") return undefined;
  }
  return deny !== undefined && denyCacheable(policy) && deny.wouldAnswer(policy, key, cost)
    ? "deny-cache"
    : undefined;
}
