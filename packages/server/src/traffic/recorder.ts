/**
 * What each node saw, for the console: decisions per policy, app and second, and the heaviest
 * keys per policy and minute. The decision path only increments counters in memory
 * ({@link TrafficRecorder.record}: no I/O, no await); every second the node adds what it counted
 * to the shared tables ({@link TrafficSink}: SQL, see ../repository/traffic.ts), where the
 * counts of every node are summed, so every node answers the same history.
 *
 * Memory is bounded: counts of at most `maxPendingSeconds` seconds wait for a flush (when the
 * database is down, the oldest are dropped and that is logged), and each policy has three
 * Space-Saving sketches of `keyCapacity` keys per minute (see ./sketch.ts), about 200 bytes a
 * key watched: 1,000 keys of each kind are ~0.6 MB per policy and minute, two minutes kept
 * (the current one and the one before, until written), up to 16 while the database is down.
 * The default of 1,000 counts a node's minute exactly while a policy sees at most 1,000
 * distinct keys in it, so a flat load of a few hundred keys is ranked as it really was.
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { KeyKind, KeyRow, TrafficCounts, TrafficRow } from "../repository/traffic.js";
import { SpaceSaving } from "./sketch.js";

/** Where a node's counts go: the database (see ../repository/traffic.ts). */
export interface TrafficSink {
  addCounts(rows: readonly TrafficRow[]): Promise<void>;
  putKeys(rows: readonly KeyRow[]): Promise<void>;
  sweep(nowSec: number): Promise<void>;
}

/** What a decision was, for the counts: allowed, denied, or allowed only because of shadow mode. */
export type TrafficOutcome = "allowed" | "denied" | "shadow";

/** The outcome of a decision (or of decisions reported by outcome and reason). */
export function trafficOutcome(d: {
  readonly allowed: boolean;
  readonly reason?: string;
}): TrafficOutcome {
  return !d.allowed ? "denied" : d.reason === "shadow" ? "shadow" : "allowed";
}

/** Options of {@link TrafficRecorder}. */
export interface TrafficRecorderOptions {
  readonly sink: TrafficSink;
  /** This node's id in the key summaries. */
  readonly nodeId: string;
  /** The clock (epoch ms). Default `Date.now`. */
  readonly now?: () => number;
  readonly logger?: Logger;
  /** How often counts are written (ms). Default 1000. */
  readonly flushMs?: number;
  /** Keys each sketch watches (per policy, kind and minute). Default 1000. */
  readonly keyCapacity?: number;
  /** Seconds of counts kept while they cannot be written. Default 900 (15 minutes). */
  readonly maxPendingSeconds?: number;
}

/** How often the sweep of old rows runs (ms). */
const SWEEP_MS = 60_000;

interface Sketches {
  readonly requests: SpaceSaving;
  readonly denied: SpaceSaving;
  readonly shadow: SpaceSaving;
}

const pairKey = (policy: string, app: string) => `${policy}\u0000${app}`;

/** The longest key a sketch watches as it is; a longer one goes by {@link shortName}. */
export const LONGEST_WATCHED_KEY = 64;

/**
 * The name a long key is watched by in the busiest keys: its first 40 characters, an ellipsis
 * and a digest of the whole (SHA-1, base64url), 69 characters in all.
 */
export function shortName(key: string): string {
  // The first characters copied: a slice would keep the whole key alive (V8 sliced strings).
  const cut = /[\uD800-\uDBFF]/.test(key[39] ?? "") ? 39 : 40; // not between a surrogate pair
  const head = Array.from(key.slice(0, cut)).join("");
  return `${head}…#${createHash("sha1").update(key).digest("base64url")}`;
}

/** Counts decisions in memory and writes them out every second; see the module comment. */
export class TrafficRecorder {
  private readonly now: () => number;
  private readonly keyCapacity: number;
  private readonly maxPendingSeconds: number;
  /** Second → policy+app → counts. */
  private pending = new Map<number, Map<string, TrafficCounts>>();
  private lastSecond = -1;
  private lastBucket: Map<string, TrafficCounts> | undefined;
  /** Minute → policy → sketches. */
  private readonly sketches = new Map<number, Map<string, Sketches>>();
  private timer: ReturnType<typeof setInterval> | undefined;
  /** The last flush queued: each runs after the one before it. */
  private flushing: Promise<void> = Promise.resolve();
  private lastSweepMs = -Infinity;
  private failing = false;
  /** Seconds of counts dropped because they could not be written in time. */
  droppedSeconds = 0;

  constructor(private readonly options: TrafficRecorderOptions) {
    this.now = options.now ?? Date.now;
    this.keyCapacity = options.keyCapacity ?? 1000;
    this.maxPendingSeconds = options.maxPendingSeconds ?? 900;
  }

  /**
   * Counts one decision of `policy` for `app` about `key` (the hot path: memory only). A shadow
   * would-denial counts as `shadow`, and among the shadow keys (not the denied ones).
   */
  record(policy: string, app: string, outcome: TrafficOutcome, key: string): void {
    const ms = this.now();
    const second = Math.floor(ms / 1000);
    this.countsOf(second, policy, app)[outcome]++;

    const minute = second - (second % 60);
    let perPolicy = this.sketches.get(minute);
    if (!perPolicy) {
      this.sketches.set(minute, (perPolicy = new Map()));
      // Minutes not written out for 15 minutes (a long database outage) are given up.
      for (const m of this.sketches.keys())
        if (m < minute - this.maxPendingSeconds) this.sketches.delete(m);
    }
    let s = perPolicy.get(policy);
    if (!s) {
      s = {
        requests: new SpaceSaving(this.keyCapacity),
        denied: new SpaceSaving(this.keyCapacity),
        shadow: new SpaceSaving(this.keyCapacity),
      };
      perPolicy.set(policy, s);
    }
    // A long key is watched by a short name, so a flood of long keys costs the sketch no more
    // than one of short keys (a sketch of 1,000 keys of 4,096 "€" would hold 8 MB).
    const k = key.length > LONGEST_WATCHED_KEY ? shortName(key) : key;
    s.requests.offer(k);
    if (outcome !== "allowed") s[outcome].offer(k);
  }

  /**
   * Adds `count` decisions of `policy` for `app` made elsewhere and reported in bulk (an
   * embedded client's report, `POST /v1/policies/report`): counted in the current second,
   * without keys (a report carries none).
   */
  recordCount(policy: string, app: string, outcome: TrafficOutcome, count: number): void {
    if (count <= 0) return;
    this.countsOf(Math.floor(this.now() / 1000), policy, app)[outcome] += count;
  }

  /** The counts of (policy, app) in `second`, made when missing. */
  private countsOf(second: number, policy: string, app: string): TrafficCounts {
    let bucket = this.lastBucket;
    if (second !== this.lastSecond || bucket === undefined) {
      bucket = this.pending.get(second);
      if (!bucket) {
        bucket = new Map();
        this.pending.set(second, bucket);
        this.bound();
      }
      this.lastSecond = second;
      this.lastBucket = bucket;
    }
    const pk = pairKey(policy, app);
    let c = bucket.get(pk);
    if (!c) bucket.set(pk, (c = { allowed: 0, denied: 0, shadow: 0 }));
    return c;
  }

  /** Keeps at most `maxPendingSeconds` seconds waiting: the oldest go first. */
  private bound(): void {
    while (this.pending.size > this.maxPendingSeconds) {
      const oldest = Math.min(...this.pending.keys());
      this.pending.delete(oldest);
      if (this.lastSecond === oldest) this.lastBucket = undefined;
      this.droppedSeconds++;
    }
  }

  /** Writes every second, and sweeps old rows every minute. */
  start(): void {
    this.timer ??= setInterval(() => {
      this.flush().catch(() => {});
    }, this.options.flushMs ?? 1000);
    this.timer.unref?.();
  }

  /** Stops the timer and writes what is left (errors are logged, not thrown). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush().catch(() => {});
  }

  /**
   * Writes what was counted since the last flush (one call at a time; a call made while one runs
   * waits for it and then runs). On failure the counts are kept for the next flush, and the
   * error is logged once per outage and thrown.
   */
  flush(): Promise<void> {
    const run = this.flushing.then(() => this.write());
    this.flushing = run.catch(() => {});
    return run;
  }

  private async write(): Promise<void> {
    try {
      await this.writeCounts();
      await this.writeKeys();
      const nowMs = this.now();
      if (nowMs - this.lastSweepMs >= SWEEP_MS) {
        await this.options.sink.sweep(Math.floor(nowMs / 1000));
        this.lastSweepMs = nowMs;
      }
      if (this.failing) this.options.logger?.info("traffic history: writing to the database again");
      this.failing = false;
    } catch (err) {
      if (!this.failing)
        this.options.logger?.warn(
          { err },
          "traffic history: cannot write to the database; counts are kept in memory (up to 15 minutes) and written when it answers",
        );
      this.failing = true;
      throw err;
    }
  }

  private async writeCounts(): Promise<void> {
    if (this.pending.size === 0) return;
    const taken = this.pending;
    this.pending = new Map();
    this.lastBucket = undefined;
    this.lastSecond = -1;
    const rows: TrafficRow[] = [];
    const minutes = new Map<string, TrafficRow>();
    for (const [second, bucket] of taken) {
      const minute = second - (second % 60);
      for (const [pk, c] of bucket) {
        const [policy = "", app = ""] = pk.split("\u0000");
        rows.push({ policy, app, span: 1, at: second, ...c });
        const mk = `${pk}\u0000${minute}`;
        const m = minutes.get(mk);
        if (m) {
          m.allowed += c.allowed;
          m.denied += c.denied;
          m.shadow += c.shadow;
        } else minutes.set(mk, { policy, app, span: 60, at: minute, ...c });
      }
    }
    try {
      await this.options.sink.addCounts([...rows, ...minutes.values()]);
    } catch (err) {
      // Put them back, under what was counted meanwhile.
      for (const [second, bucket] of taken) {
        let into = this.pending.get(second);
        if (!into) this.pending.set(second, (into = new Map()));
        for (const [pk, c] of bucket) {
          const n = into.get(pk);
          if (n) {
            n.allowed += c.allowed;
            n.denied += c.denied;
            n.shadow += c.shadow;
          } else into.set(pk, c);
        }
      }
      this.lastBucket = undefined;
      this.bound();
      throw err;
    }
  }

  private async writeKeys(): Promise<void> {
    const currentMinute = Math.floor(this.now() / 60_000) * 60;
    const rows: KeyRow[] = [];
    const taken: { sketch: SpaceSaving; keys: string[] }[] = [];
    for (const [minute, perPolicy] of this.sketches) {
      for (const [policy, s] of perPolicy) {
        for (const kind of ["requests", "denied", "shadow"] as const satisfies readonly KeyKind[]) {
          const sketch = s[kind];
          const dirty = sketch.takeDirty();
          if (dirty.length === 0) continue;
          taken.push({ sketch, keys: dirty.map((d) => d.key) });
          for (const d of dirty)
            rows.push({
              policy,
              kind,
              node: this.options.nodeId,
              minute,
              slot: d.slot,
              key: d.key,
              hits: d.count,
              overcount: d.overcount,
              floor: sketch.floor,
            });
        }
      }
    }
    if (rows.length > 0) {
      try {
        await this.options.sink.putKeys(rows);
      } catch (err) {
        for (const t of taken) t.sketch.markDirty(t.keys);
        throw err;
      }
    }
    // A past minute is complete once written.
    for (const minute of this.sketches.keys())
      if (minute < currentMinute) this.sketches.delete(minute);
  }
}
