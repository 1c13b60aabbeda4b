/**
 * One limit across regions (docs/multi-region.md): a store over one store per region (each
 * region's Redis), for policies with allotments (`lease`).
 *
 * Every key has a **home** region, whose store holds the key's one ledger: the policy's counter,
 * exactly as a single Redis holds it. The home region decides its keys there directly (with its
 * node allotments, as any Redis store). Another region decides a key from a **region lease**:
 * units it debited from the home ahead of its requests (all or nothing, atomically, like any
 * decision), sized from the demand it sees for the key (a horizon's worth, at most a fair share
 * — the capacity over the regions — per call), and spends in memory until they run out or the
 * lease ends (for fixed-window: when the home's window ends, measured from before the call was
 * sent, so never after it; otherwise after `lease.ttl`, when what is left goes back). Units are
 * debited before they admit anything, so the regions together never admit more than the limit.
 *
 * - `strict`: a region that cannot reach a key's home (a partition, the home's Redis down)
 *   spends what it holds and then denies: never over the limit, partitions included. What that
 *   costs is under-admission, counted (`RegionStats.underAdmitted`).
 * - `bounded` (with `borrow: n`): where strict would deny because the home is out of reach, or
 *   would wait a round trip for a key it has not seen, the region decides from its own borrow
 *   ledger instead — a counter of the same rules with `limit` n, in the region's own store — and
 *   charges the borrowed units to the home afterwards (best effort). The bound, printed and
 *   reported: limit + (regions − 1) × n per window.
 *
 * A hot key (`lease.hotAfter` decisions within a second) asks for more units in the background
 * before its units run out; while such a call is in flight, a request its units cannot cover is
 * not held up for a WAN round trip: it is denied (strict) or borrows (bounded). Any other request
 * the held units cannot cover waits for its home's answer (one round trip).
 */
import { type Clock, type Timers, monoNow } from "../clock.js";
import { fnv1a } from "../hash.js";
import { StoreError, ValidationError } from "../errors.js";
import { type Problem, type Resolved, option, resolveOptions } from "../options.js";
import type { Policy, RuleInput } from "../policy.js";
import { definePolicy, policyCapacity, policyToInput } from "../policy.js";
import { unrefTimer } from "../platform.js";
import type { LocalAnswer, RegionStats, Store, StoreDecision, StoreRequest } from "../store.js";

export type { RegionStats } from "../store.js";

/** How a region decides a key whose home it cannot reach. */
export type MultiRegionMode = "strict" | "bounded";

/** Options of {@link multiRegionStore}. */
export interface MultiRegionStoreOptions {
  /** This process's region: one of the names in `regions`. */
  region: string;
  /**
   * Every region's store by region name, this region's included: the region's own Redis store
   * (`redisStore`), and a Redis store for each other region, reached over the WAN.
   */
  regions: Readonly<Record<string, Store>>;
  /** `strict` (default): never over the limit; `bounded`: up to `borrow` more per window per region when cut off. */
  mode?: MultiRegionMode;
  /** `bounded` only, and required there: the units a region may admit per window (per key) beyond what it holds. */
  borrow?: number;
  /** A policy's home region by policy name (default: a stable hash of the key over the regions). */
  homes?: Readonly<Record<string, string>>;
  /** The demand a region lease is sized for, in ms of the region's requests (default 250). */
  horizonMs?: number;
  /** After a call to a region fails, how long that region counts as out of reach before it is tried again (ms, default 1,000). */
  probeAfterMs?: number;
  /**
   * Most keys whose region leases this process tracks (default 20,000, about 380 bytes each;
   * when full, the longest-tracked tenth that holds nothing goes).
   */
  maxKeys?: number;
  /**
   * The clock region leases are timed by, in ms (default a monotonic one: a lease is a duration
   * the home measured, and must not stretch when the wall clock is set back).
   */
  now?: Clock;
  /** Timers for the store's upkeep (giving back, settling borrowed units); default the system's. */
  timers?: Timers;
}

const OPTIONS = {
  region: option.required((v): string | Problem =>
    typeof v === "string" && v.length > 0 ? v : { problem: "must be a region name (a string)" },
  ),
  regions: option.required(regionsOption),
  mode: option.oneOf(["strict", "bounded"] as const, "strict", 'must be "strict" or "bounded"'),
  borrow: option.optionalInt(1, Number.MAX_SAFE_INTEGER, "must be a positive integer"),
  homes: option.custom<Record<string, string> | undefined>(homesOption, undefined),
  horizonMs: option.int(1, 250, 3_600_000, "must be an integer from 1 to 3600000 (ms)"),
  probeAfterMs: option.int(1, 1000, 3_600_000, "must be an integer from 1 to 3600000 (ms)"),
  maxKeys: option.int(1, 20_000, Number.MAX_SAFE_INTEGER, "must be a positive integer"),
  now: option.fn<Clock>("must be a function returning ms", monoNow),
  timers: option.timers(),
} satisfies { readonly [K in keyof Required<MultiRegionStoreOptions>]: unknown };

function regionsOption(v: unknown): Record<string, Store> | Problem {
  if (typeof v !== "object" || v === null || Array.isArray(v))
    return { problem: "must be an object of stores by region name" };
  const entries = Object.entries(v as Record<string, unknown>);
  if (entries.length === 0) return { problem: "must name at least one region" };
  for (const [name, s] of entries)
    if (typeof (s as Partial<Store> | null)?.decide !== "function")
      return { problem: `${name} must be a store (redisStore(...))` };
  return v as Record<string, Store>;
}

function homesOption(v: unknown): Record<string, string> | Problem {
  if (typeof v !== "object" || v === null || Array.isArray(v))
    return { problem: "must be an object of region names by policy name" };
  return v as Record<string, string>;
}

/** What this process holds of one key homed in another region. */
interface RegionLease {
  readonly policy: Policy;
  readonly key: string;
  /** The key's home region (where its units come from and go back to). */
  readonly home: string;
  /** Units held, unspent. */
  units: number;
  /** Lease clock: units cannot be spent from then on. */
  expires: number;
  /** Whether the held units go back when the lease ends (not for fixed-window: its window ends). */
  refundable: boolean;
  /** The home denied: until then (lease clock), requests of `deniedCost` or more are denied. */
  deniedUntil: number;
  deniedCost: number;
  /** A call for units in flight. */
  asking: Promise<void> | undefined;
  /** Whether the key ever had a grant. */
  granted: boolean;
  /** Decisions since `since`, and the rate they made at the last full second (per second). */
  seen: number;
  since: number;
  perSecond: number;
  /** Borrowed units (bounded) not yet charged to the home. */
  owed: number;
  /** Units of the requests waiting for a call in flight (the next call asks for them all). */
  waiting: number;
  lastUse: number;
}

/** Running totals of one policy (see {@link RegionStats}). */
interface Totals {
  crossRegionCalls: number;
  unitsLeased: number;
  underAdmitted: number;
  borrowed: number;
}

/** A store that keeps one limit across regions (see the module's comment). */
export class MultiRegionStore implements Store {
  readonly kind = "multi-region";
  private readonly o: Resolved<typeof OPTIONS>;
  private readonly local: Store;
  private readonly names: readonly string[];
  /** Each region's hash, mixed with a key's for its score (see {@link MultiRegionStore.homeOf}). */
  private readonly seeds: readonly number[];
  private readonly leases = new Map<string, RegionLease>();
  /** Regions out of reach until then (lease clock). */
  private readonly down = new Map<string, number>();
  private readonly totals = new Map<string, Totals>();
  /** Round trips to each region (ms, smoothed). */
  private readonly rtt = new Map<string, number>();
  private readonly remotePolicies = new WeakMap<Policy, Policy>();
  private readonly borrowPolicies = new WeakMap<Policy, Policy>();
  private timer: unknown;
  private closed = false;

  constructor(options: MultiRegionStoreOptions) {
    this.o = resolveOptions("Invalid multiRegionStore options", OPTIONS, options, {
      across: (r, fail) => {
        if (r.region !== undefined && r.regions !== undefined && !(r.region in r.regions))
          fail("region", `must be one of regions (${Object.keys(r.regions).join(", ")})`);
        if (r.mode === "bounded" && r.borrow === undefined)
          fail(
            "borrow",
            'is required in mode "bounded" (units per window a cut-off region may add)',
          );
        if (r.mode === "strict" && r.borrow !== undefined)
          fail("borrow", 'applies to mode "bounded" only (strict never admits past what it holds)');
        for (const [policy, home] of Object.entries(r.homes ?? {}))
          if (r.regions !== undefined && !(home in r.regions))
            fail(`homes.${policy}`, `must be one of regions (got ${JSON.stringify(home)})`);
      },
    });
    this.local = this.o.regions[this.o.region]!;
    this.names = Object.keys(this.o.regions).sort();
    this.seeds = this.names.map((name) => mix(fnv1a(name)));
  }

  /** The region whose ledger holds the key (its home). */
  homeOf(policy: Policy, key: string): string {
    const pinned = this.o.homes?.[policy.name];
    if (pinned !== undefined) return pinned;
    // Rendezvous hashing: the region with the highest score for the key; adding a region moves
    // only the keys it now wins. The key is hashed once; each region's score mixes that hash
    // with the region's own (a decision costs one pass over the key, not one per region).
    const h = mix(fnv1a(`${policy.name}\u0000${key}`));
    let best = 0;
    let bestScore = -1;
    for (let i = 0; i < this.seeds.length; i++) {
      const score = mix(h ^ this.seeds[i]!);
      if (score > bestScore) {
        best = i;
        bestScore = score;
      }
    }
    return this.names[best]!;
  }

  /** Keys whose region leases this process tracks now (at most `maxKeys`). */
  get trackedKeys(): number {
    return this.leases.size;
  }

  /** What the store has done for the policy (see {@link RegionStats}). */
  regionStats(policy: Policy): RegionStats {
    const t = this.totalsOf(policy.name);
    const borrow = this.o.mode === "bounded" ? this.o.borrow! : 0;
    return {
      bound: Math.min(...policy.rules.map((r) => r.limit)) + (this.names.length - 1) * borrow,
      ...t,
    };
  }

  decideLocal(policy: Policy, key: string, cost: number): StoreDecision | undefined {
    this.check(policy);
    const home = this.homeOf(policy, key);
    if (home === this.o.region) return this.local.decideLocal?.(policy, key, cost);
    const l = this.leases.get(leaseKey(policy, key));
    if (l === undefined) return undefined;
    const now = this.o.now();
    this.saw(l, now);
    return this.fromHeld(policy, l, cost, now);
  }

  explainLocal(policy: Policy, key: string, cost: number): LocalAnswer | undefined {
    const home = this.homeOf(policy, key);
    if (home === this.o.region) return this.local.explainLocal?.(policy, key, cost);
    const l = this.leases.get(leaseKey(policy, key));
    const now = this.o.now();
    return l !== undefined && l.units >= cost && now < l.expires ? "allotment" : undefined;
  }

  decide(req: StoreRequest): Promise<StoreDecision> {
    const { policy, key, cost } = req;
    this.check(policy);
    const home = this.homeOf(policy, key);
    if (home === this.o.region) return this.local.decide(req);
    this.start();
    const now = this.o.now();
    const l = this.leaseOf(policy, key, home, now);
    this.saw(l, now);
    const held = this.fromHeld(policy, l, cost, now);
    if (held !== undefined) return Promise.resolve(held);
    return this.decideAway(policy, key, home, l, cost, false);
  }

  /** A decision the held units cannot answer, for a key homed in another region. */
  private async decideAway(
    policy: Policy,
    key: string,
    home: string,
    l: RegionLease,
    cost: number,
    waited: boolean,
  ): Promise<StoreDecision> {
    const now = this.o.now();
    const hot = l.granted && l.perSecond >= (policy.lease?.hotAfter ?? 20);
    const reachable = (this.down.get(home) ?? 0) <= now;
    if (!reachable || (hot && l.asking !== undefined)) return this.cutOff(policy, key, l, cost);
    if (this.o.mode === "bounded" && !l.granted && !waited) {
      const b = await this.borrowed(policy, key, l, cost);
      if (b !== undefined) return b;
    }
    l.asking ??= this.ask(policy, key, home, l, cost);
    l.waiting += cost;
    try {
      await l.asking;
    } finally {
      l.waiting -= cost;
    }
    const after = this.fromHeld(policy, l, cost, this.o.now());
    if (after !== undefined) return after;
    if (waited) return this.cutOff(policy, key, l, cost);
    return this.decideAway(policy, key, home, l, cost, true);
  }

  /**
   * A decision that cannot have units from the home now (out of reach, or being renewed):
   * bounded mode borrows, strict denies (counted as under-admission).
   */
  private async cutOff(
    policy: Policy,
    key: string,
    l: RegionLease,
    cost: number,
  ): Promise<StoreDecision> {
    if (this.o.mode === "bounded") {
      const b = await this.borrowed(policy, key, l, cost);
      if (b !== undefined) return b;
    }
    this.totalsOf(policy.name).underAdmitted += cost;
    const retry = Math.max(1, Math.min(this.o.probeAfterMs, this.o.horizonMs));
    return denied(policy, l, this.o.now(), retry);
  }

  /** Bounded mode: a decision from the region's borrow ledger, or undefined when it has nothing left. */
  private async borrowed(
    policy: Policy,
    key: string,
    l: RegionLease,
    cost: number,
  ): Promise<StoreDecision | undefined> {
    const d = await this.local.decide({ policy: this.borrowPolicy(policy), key, cost });
    if (!d.allowed) return undefined;
    l.owed += cost;
    this.totalsOf(policy.name).borrowed += cost;
    // Reported as the policy's rules (the ledger's limit is the borrow), with what it has left.
    return {
      ...d,
      rules: d.rules.map((r, i) => ({
        ...r,
        limit: policy.rules[i]!.limit,
        burst: policy.rules[i]!.burst,
      })),
    };
  }

  /**
   * Asks the home for units: the waiting request's cost plus a horizon's worth of this region's
   * demand, at most a fair share of the capacity; when that much is not left, what is left.
   */
  private async ask(
    policy: Policy,
    key: string,
    home: string,
    l: RegionLease,
    cost: number,
  ): Promise<void> {
    const store = this.o.regions[home]!;
    const remote = this.remotePolicy(policy);
    const capacity = policyCapacity(policy);
    const fair = Math.max(1, Math.ceil(capacity / this.names.length));
    const demand = l.granted ? Math.ceil((l.perSecond * this.o.horizonMs) / 1000) : 0;
    // The requests waiting for this call (an earlier one's, which fell short) are asked for too.
    const need = Math.max(cost, l.waiting);
    const want = Math.min(capacity, Math.max(need, 1, Math.min(fair, need + demand)));
    const t = this.totalsOf(policy.name);
    const sentAt = this.o.now();
    // Borrowed units are charged beside the call, not before it: a grant that does not see
    // them yet is still within the bound (they were admitted from the borrow ledger).
    const settled = this.settle(policy, key, home, l);
    try {
      t.crossRegionCalls++;
      let asked = want;
      let d = await store.decide({ policy: remote, key, cost: asked });
      if (!d.allowed) {
        const left = Math.min(...d.rules.map((r) => r.remaining));
        if (left >= Math.max(1, cost) && left < want) {
          t.crossRegionCalls++;
          asked = left;
          d = await store.decide({ policy: remote, key, cost: asked });
        }
      }
      this.granted(policy, l, d, sentAt, asked);
      const took = this.o.now() - sentAt;
      const rtt = this.rtt.get(home);
      this.rtt.set(home, rtt === undefined ? took : rtt * 0.8 + took * 0.2);
    } catch (err) {
      if (!(err instanceof StoreError)) throw err;
      this.down.set(home, this.o.now() + this.o.probeAfterMs);
    } finally {
      await settled; // never rejects
      l.asking = undefined;
    }
  }

  /** Takes the home's answer to a call for `asked` units (sent at `sentAt`) into the lease. */
  private granted(
    policy: Policy,
    l: RegionLease,
    d: StoreDecision,
    sentAt: number,
    asked: number,
  ): void {
    if (!d.allowed) {
      // Denied until the first request the home would admit: requests above what is left
      // wait for the window's end (fixed-window) or for the missing units to come back.
      const left = Math.min(...d.rules.map((r) => r.remaining));
      l.deniedCost = left + 1;
      l.deniedUntil = sentAt + deniedFor(policy, d, l.deniedCost);
      return;
    }
    this.totalsOf(policy.name).unitsLeased += asked;
    const fixed = policy.algorithm === "fixed-window";
    // Measured from before the call was sent, so the lease ends no later than the home's window.
    const ends = fixed
      ? sentAt + Math.min(...d.rules.map((r) => r.resetAfterMs))
      : sentAt + (policy.lease?.ttlMs ?? 1000);
    // Held units keep the earlier end: a grant never extends them (for fixed-window, a grant
    // decided in the home's next window ends with the units already held: lost, never over).
    l.expires = l.units > 0 ? Math.min(l.expires, ends) : ends;
    l.units += asked;
    l.refundable = !fixed;
    l.granted = true;
    l.deniedUntil = 0;
  }

  /** A decision from the held units, or undefined when they cannot answer it. */
  private fromHeld(
    policy: Policy,
    l: RegionLease,
    cost: number,
    now: number,
  ): StoreDecision | undefined {
    if (now >= l.expires && l.units > 0) this.lapse(policy, l);
    if (l.units >= cost && now < l.expires) {
      l.units -= cost;
      this.refillAhead(policy, l, now);
      return spent(policy, l, now);
    }
    if (now < l.deniedUntil && cost >= l.deniedCost)
      return denied(policy, l, now, l.deniedUntil - now);
    return undefined;
  }

  /**
   * A hot key's units run low: asks for more in the background, before they run out (when
   * fewer are left than the key's demand over a round trip and a half to its home).
   */
  private refillAhead(policy: Policy, l: RegionLease, now: number): void {
    if (l.asking !== undefined || now < l.deniedUntil || this.closed) return;
    if (l.perSecond < (policy.lease?.hotAfter ?? 20)) return;
    const home = l.home;
    if ((this.down.get(home) ?? 0) > now) return;
    const rtt = this.rtt.get(home) ?? this.o.horizonMs;
    if (l.units > Math.ceil((l.perSecond * rtt * 1.5) / 1000)) return;
    l.asking = this.ask(policy, l.key, home, l, 0).catch(() => undefined);
  }

  /** The held units' lease ended: give them back when they can be, else count them lost. */
  private lapse(policy: Policy, l: RegionLease): void {
    const units = l.units;
    l.units = 0;
    if (units <= 0) return;
    if (!l.refundable) {
      this.totalsOf(policy.name).underAdmitted += units;
      return;
    }
    this.totalsOf(policy.name).crossRegionCalls++;
    this.o.regions[l.home]!.adjust(this.remotePolicy(policy), l.key, -units).catch(() => {
      this.totalsOf(policy.name).underAdmitted += units;
    });
  }

  /** Bounded mode: charges what the region borrowed for the key to its home. */
  private async settle(policy: Policy, key: string, home: string, l: RegionLease): Promise<void> {
    const owed = l.owed;
    if (owed <= 0) return;
    l.owed = 0;
    this.totalsOf(policy.name).crossRegionCalls++;
    try {
      await this.o.regions[home]!.adjust(this.remotePolicy(policy), key, owed);
    } catch {
      // The home is out of reach: the units were admitted within the bound; they stay unsettled.
    }
  }

  /** Counts a decision of the key toward its rate (for the lease's size and heat). */
  private saw(l: RegionLease, now: number): void {
    l.seen++;
    l.lastUse = now;
    const elapsed = now - l.since;
    if (elapsed >= 1000) {
      l.perSecond = (l.seen * 1000) / elapsed;
      l.seen = 0;
      l.since = now;
    } else if (elapsed >= 50 && (l.seen * 1000) / elapsed > l.perSecond) {
      l.perSecond = (l.seen * 1000) / elapsed;
    }
  }

  private leaseOf(policy: Policy, key: string, home: string, now: number): RegionLease {
    const k = leaseKey(policy, key);
    let l = this.leases.get(k);
    if (l === undefined) {
      if (this.leases.size >= this.o.maxKeys) this.evict();
      l = {
        policy,
        key,
        home,
        units: 0,
        expires: 0,
        refundable: false,
        deniedUntil: 0,
        deniedCost: 0,
        asking: undefined,
        granted: false,
        seen: 0,
        since: now,
        perSecond: 0,
        owed: 0,
        waiting: 0,
        lastUse: now,
      };
      this.leases.set(k, l);
    }
    return l;
  }

  /**
   * Makes room: drops a tenth of the keys at once, the longest-tracked first, passing over those
   * that hold units or have a call in flight (a hot key keeps its lease through a flood of new
   * keys). Dropping a tenth at a time keeps a flood's cost per key constant: a Map walked from
   * its start after each single deletion would be walked over every hole left behind.
   */
  private evict(): void {
    let room = Math.max(1, Math.floor(this.o.maxKeys / 10));
    for (const [k, l] of this.leases) {
      if (room === 0) return;
      if (l.asking !== undefined || l.units > 0 || l.owed > 0) continue;
      this.leases.delete(k);
      room--;
    }
    // Every key holds something: the oldest go all the same (their units count as lapsed).
    for (const [k, l] of this.leases) {
      if (room === 0) return;
      if (l.asking !== undefined) continue;
      if (l.units > 0) this.lapse(l.policy, l);
      this.leases.delete(k);
      room--;
    }
  }

  /** Starts the upkeep timer: lapsed leases go back, borrowings are settled, idle keys forgotten. */
  private start(): void {
    if (this.timer !== undefined || this.closed) return;
    const tick = (): void => {
      this.timer = this.o.timers.setTimeout(tick, this.o.horizonMs);
      unrefTimer(this.timer);
      void this.upkeep();
    };
    this.timer = this.o.timers.setTimeout(tick, this.o.horizonMs);
    unrefTimer(this.timer);
  }

  /** One round of upkeep (also run by `close`). */
  private async upkeep(closing = false): Promise<void> {
    const now = this.o.now();
    const calls: Promise<void>[] = [];
    for (const [k, l] of this.leases) {
      const { policy, key } = l;
      if (l.units > 0 && (closing || now >= l.expires)) this.lapse(policy, l);
      if (l.owed > 0) calls.push(this.settle(policy, key, l.home, l));
      if (l.asking === undefined && l.units === 0 && l.owed === 0 && now - l.lastUse > 10_000)
        this.leases.delete(k);
    }
    await Promise.all(calls);
  }

  peek(req: StoreRequest): Promise<StoreDecision> {
    this.check(req.policy);
    const home = this.homeOf(req.policy, req.key);
    if (home === this.o.region) return this.local.peek(req);
    return this.o.regions[home]!.peek({ ...req, policy: this.remotePolicy(req.policy) });
  }

  adjust(policy: Policy, key: string, delta: number): Promise<void> {
    this.check(policy);
    const home = this.homeOf(policy, key);
    if (home === this.o.region) return this.local.adjust(policy, key, delta);
    this.totalsOf(policy.name).crossRegionCalls++;
    return this.o.regions[home]!.adjust(this.remotePolicy(policy), key, delta);
  }

  release(policy: Policy): Promise<boolean> {
    return Promise.reject(unsupported(policy));
  }

  async reset(policy: Policy, key: string): Promise<void> {
    this.check(policy);
    this.leases.delete(leaseKey(policy, key));
    const home = this.homeOf(policy, key);
    if (home === this.o.region) return this.local.reset(policy, key);
    return this.o.regions[home]!.reset(this.remotePolicy(policy), key);
  }

  ready(): Promise<void> {
    return this.local.ready?.() ?? Promise.resolve();
  }

  allotmentsHeld(policy: string): number {
    let n = this.local.allotmentsHeld?.(policy) ?? 0;
    const now = this.o.now();
    for (const l of this.leases.values())
      if (l.policy.name === policy && l.units > 0 && now < l.expires) n++;
    return n;
  }

  liveInstances(): number | undefined {
    return this.local.liveInstances?.();
  }

  /** Gives back what can go back and settles borrowings; the region stores stay open (they are yours). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== undefined) this.o.timers.clearTimeout(this.timer);
    await this.upkeep(true);
  }

  /** Refuses what region leases cannot do. */
  private check(policy: Policy): void {
    if (policy.lease === undefined || policy.algorithm === "concurrency") throw unsupported(policy);
  }

  private totalsOf(policy: string): Totals {
    let t = this.totals.get(policy);
    if (t === undefined) {
      t = { crossRegionCalls: 0, unitsLeased: 0, underAdmitted: 0, borrowed: 0 };
      this.totals.set(policy, t);
    }
    return t;
  }

  /** The policy as other regions' stores decide it: no allotments of their own there. */
  private remotePolicy(policy: Policy): Policy {
    let p = this.remotePolicies.get(policy);
    if (p === undefined) {
      p = definePolicy({ ...policyToInput(policy), lease: false });
      this.remotePolicies.set(policy, p);
    }
    return p;
  }

  /** Bounded mode: the policy's borrow ledger (the same rules with `limit` = borrow). */
  private borrowPolicy(policy: Policy): Policy {
    let p = this.borrowPolicies.get(policy);
    if (p === undefined) {
      const input = policyToInput(policy);
      const n = this.o.borrow!;
      const rules = (input.rules ?? []).map((r) => ({
        ...r,
        limit: Math.min(n, r.limit),
        ...("burst" in r && r.burst !== undefined ? { burst: Math.min(n, r.burst) } : {}),
      })) as RuleInput[];
      p = definePolicy({ ...input, name: `${policy.name}.borrow`, rules });
      this.borrowPolicies.set(policy, p);
    }
    return p;
  }
}

/** The key of a lease in the store's map. */
function leaseKey(policy: Policy, key: string): string {
  return `${policy.name}\u0000${key}`;
}

/** murmur3's finaliser: near inputs score far apart. */
function mix(x: number): number {
  let h = x;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** How long after the home's denial a request of `cost` stays denied (ms). */
function deniedFor(policy: Policy, d: StoreDecision, cost: number): number {
  let wait = 0;
  d.rules.forEach((r, i) => {
    if (r.allowed || r.remaining >= cost) return;
    const rule = policy.rules[i]!;
    const w =
      policy.algorithm === "fixed-window"
        ? r.retryAfterMs
        : Math.min(r.retryAfterMs, Math.ceil(((cost - r.remaining) * rule.periodMs) / rule.limit));
    wait = Math.max(wait, w);
  });
  return Math.max(1, wait);
}

/**
 * Until a rule is whole again, as far as this region knows: for fixed-window, until the lease
 * ends (the home's window, or earlier); otherwise a full period (the home holds the state).
 */
function resetAfter(policy: Policy, periodMs: number, l: RegionLease, now: number): number {
  return policy.algorithm === "fixed-window" && l.expires > now ? l.expires - now : periodMs;
}

/**
 * A decision made from held units: every rule allowed, the units this region still holds as
 * remaining (the home may have more).
 */
function spent(policy: Policy, l: RegionLease, now: number): StoreDecision {
  return {
    allowed: true,
    blockedForMs: 0,
    rules: policy.rules.map((r) => ({
      limit: r.limit,
      periodMs: r.periodMs,
      burst: r.burst,
      allowed: true,
      remaining: l.units,
      resetAfterMs: resetAfter(policy, r.periodMs, l, now),
      retryAfterMs: 0,
    })),
  };
}

/** A denial without units from the home (it said no, or cannot be asked now): retry after `retryMs`. */
function denied(policy: Policy, l: RegionLease, now: number, retryMs: number): StoreDecision {
  const retry = Math.max(1, retryMs);
  return {
    allowed: false,
    blockedForMs: 0,
    rules: policy.rules.map((r) => ({
      limit: r.limit,
      periodMs: r.periodMs,
      burst: r.burst,
      allowed: false,
      remaining: 0,
      resetAfterMs: Math.max(retry, resetAfter(policy, r.periodMs, l, now)),
      retryAfterMs: retry,
    })),
  };
}

/** What a policy region leases cannot serve is told, naming the field. */
function unsupported(policy: Policy): ValidationError {
  return new ValidationError(
    "SLUICE_ERR_POLICY",
    `Policy "${policy.name}" cannot be decided by multiRegionStore`,
    [
      {
        path: policy.algorithm === "concurrency" ? "algorithm" : "lease",
        message:
          policy.algorithm === "concurrency"
            ? "concurrency permits are not region-leased: use gcra, token-bucket or fixed-window"
            : "region leases need allotments: set lease: true",
      },
    ],
  );
}

/**
 * One limit across regions: a store over each region's store (docs/multi-region.md). Each key
 * has a home region holding its ledger; other regions decide it from units leased from there.
 * `mode: "strict"` never admits more than the limit, partitions included; `"bounded"` with
 * `borrow` admits at most `borrow` more per window per cut-off region.
 */
export function multiRegionStore(options: MultiRegionStoreOptions): MultiRegionStore {
  return new MultiRegionStore(options);
}
