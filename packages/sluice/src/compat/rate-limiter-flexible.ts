/**
 * `sluice/compat/rate-limiter-flexible`: rate-limiter-flexible's API over sluice. Change the
 * import and keep the code:
 *
 * ```ts
 * // import { RateLimiterRedis } from "rate-limiter-flexible";
 * import { RateLimiterRedis } from "sluice/compat/rate-limiter-flexible";
 * const limiter = new RateLimiterRedis({ storeClient: redis, keyPrefix: "login", points: 5, duration: 60 });
 * await limiter.consume(ip); // resolves with a RateLimiterRes, rejects with one over the limit
 * ```
 *
 * A limiter counts as rate-limiter-flexible does — every consumed point is added to the key's
 * count in a window of `duration` started by the key's first consume, even over the limit —
 * with sluice's `fixed-window` (`windowStart: "first-request"`) under the policy named
 * `keyPrefix`, in the memory store (`RateLimiterMemory`, one per limiter) or the Redis store
 * of `storeClient` (`RateLimiterRedis`: an ioredis `Redis` or `Cluster`). `set`, `block` and
 * `blockDuration` are `limiter.setCount`. `RateLimiterUnion` is one multi-rule sluice policy:
 * one atomic decision over all its limiters, nothing consumed when one rejects (the fix of
 * rate-limiter-flexible's #280). Differences that remain: docs/migrating.md.
 */
import type { Decision } from "../decision.js";
import { StoreError, ValidationError, type ValidationIssue } from "../errors.js";
import { fnv1a } from "../hash.js";
import { type Limiter, type SyncLimiter, createLimiter } from "../limiter.js";
import { type Policy, definePolicy, policyCapacity } from "../policy.js";
import { type Store, isSyncStore } from "../store.js";
import { MemoryStore } from "../stores/memory.js";
import { type ClientPort, type RedisClient, clientPort } from "../stores/redis-client.js";
import { RedisStore } from "../stores/redis.js";
import {
  COUNTER_LIMIT,
  FOREVER_MS,
  counterPolicy,
  countOf,
  countVerdict,
  isStore,
  policyName,
  redisStoreOf,
  sluiceKey,
} from "./shared.js";

/** What a consume, penalty, reward, get, set or block answers (rate-limiter-flexible's class). */
export class RateLimiterRes {
  private _remainingPoints = 0;
  private _msBeforeNext = 0;
  private _consumedPoints = 0;
  private _isFirstInDuration = false;

  constructor(
    remainingPoints?: number,
    msBeforeNext?: number,
    consumedPoints?: number,
    isFirstInDuration?: boolean,
  ) {
    this.remainingPoints = remainingPoints ?? 0;
    this.msBeforeNext = msBeforeNext ?? 0;
    this.consumedPoints = consumedPoints ?? 0;
    this.isFirstInDuration = isFirstInDuration ?? false;
  }

  /** Milliseconds before the key's points are back (−1: never, for a key kept forever). */
  get msBeforeNext(): number {
    return this._msBeforeNext;
  }
  set msBeforeNext(ms: number) {
    this._msBeforeNext = ms;
  }

  /** Points left in the current duration. */
  get remainingPoints(): number {
    return this._remainingPoints;
  }
  set remainingPoints(p: number) {
    this._remainingPoints = p;
  }

  /** Points consumed in the current duration (past `points` once over the limit). */
  get consumedPoints(): number {
    return this._consumedPoints;
  }
  set consumedPoints(p: number) {
    this._consumedPoints = p;
  }

  /** Whether this action opened the duration. */
  get isFirstInDuration(): boolean {
    return this._isFirstInDuration;
  }
  set isFirstInDuration(value: boolean) {
    this._isFirstInDuration = Boolean(value);
  }

  /** The four figures as a plain object. */
  toJSON(): {
    remainingPoints: number;
    msBeforeNext: number;
    consumedPoints: number;
    isFirstInDuration: boolean;
  } {
    return {
      remainingPoints: this.remainingPoints,
      msBeforeNext: this.msBeforeNext,
      consumedPoints: this.consumedPoints,
      isFirstInDuration: this.isFirstInDuration,
    };
  }

  toString(): string {
    return JSON.stringify(this.toJSON());
  }

  [Symbol.for("nodejs.util.inspect.custom")](): ReturnType<RateLimiterRes["toJSON"]> {
    return this.toJSON();
  }
}

/** The error `RateLimiterQueue` rejects with (name `CustomError`, as rate-limiter-flexible's). */
export class RateLimiterQueueError extends Error {
  /** Extra detail, when given. */
  readonly extra?: unknown;
  constructor(message: string, extra?: unknown) {
    super(message);
    this.name = "CustomError";
    if (extra !== undefined) this.extra = extra;
  }
}

/** Per-call options (rate-limiter-flexible's `options` object). */
export interface ConsumeOptions {
  /**
   * `consume`, `penalty` and `reward`: seconds the key's window lasts when this call opens it
   * (0: forever), instead of `duration`; a window already open keeps its end. A negative value
   * is `duration`, as in rate-limiter-flexible.
   */
  customDuration?: number;
  [other: string]: unknown;
}

/** What every limiter here (and an `insuranceLimiter`) offers. */
export interface RateLimiterLike {
  readonly keyPrefix: string;
  points: number;
  blockDuration: number;
  execEvenly: boolean;
  consume(key: string | number, points?: number, options?: ConsumeOptions): Promise<RateLimiterRes>;
  penalty(key: string | number, points?: number, options?: ConsumeOptions): Promise<RateLimiterRes>;
  reward(key: string | number, points?: number, options?: ConsumeOptions): Promise<RateLimiterRes>;
  get(key: string | number, options?: ConsumeOptions): Promise<RateLimiterRes | null>;
  set(
    key: string | number,
    points: number,
    secDuration: number,
    options?: ConsumeOptions,
  ): Promise<RateLimiterRes>;
  block(
    key: string | number,
    secDuration: number,
    options?: ConsumeOptions,
  ): Promise<RateLimiterRes>;
  delete(key: string | number, options?: ConsumeOptions): Promise<boolean>;
}

/** The methods an insurance limiter is asked instead. */
type RateLimiterMethod = "consume" | "penalty" | "reward" | "get" | "set" | "block" | "delete";

/** Options of every limiter (rate-limiter-flexible's). */
export interface RateLimiterOptions {
  /** Points a key may consume per `duration` (rate-limiter-flexible compares the count with it). */
  points: number;
  /** Seconds before consumed points are reset, counted from a key's first consume; 0: never. */
  duration: number;
  /** Seconds a key is blocked once it consumed more than `points` (0: off). */
  blockDuration?: number;
  /** Delay allowed actions to spread them over the duration (see rate-limiter-flexible's docs). */
  execEvenly?: boolean;
  /** Least delay of `execEvenly` (ms); default `duration · 1000 / points`. */
  execEvenlyMinDelayMs?: number;
  /**
   * Names the limiter's keys: the sluice policy name (1–128 letters, digits, `.`, `_`, `-`,
   * `:`). Default `rlflx`. Limiters with the same prefix and store share counts.
   */
  keyPrefix?: string;
  /** Asked instead when the store fails (rate-limiter-flexible's `insuranceLimiter`). */
  insuranceLimiter?: RateLimiterLike;
}

/** Options of {@link RateLimiterRedis}. */
export interface RateLimiterRedisOptions extends RateLimiterOptions {
  /**
   * A Redis client as you made it — ioredis 5 or 6 (`new Redis(url)`, Sentinel, `new
   * Cluster(nodes)`), iovalkey, node-redis 4–6 (`createClient`, `createCluster`,
   * `createSentinel`, connected) — or a sluice Redis store (`redisStore({ client, … })`, to
   * choose its options).
   */
  storeClient: RedisClient | Store;
  /**
   * rate-limiter-flexible's switch for a node-redis client; accepted and not needed (sluice
   * tells the client families apart by themselves).
   */
  useRedisPackage?: boolean;
  /** node-redis 3 and older (callbacks): not supported; must be false or absent. */
  useRedis3AndLowerPackage?: boolean;
  /** Block a key in this process's memory once it consumed this many points (0: off). */
  inMemoryBlockOnConsumed?: number;
  /** Seconds of that in-memory block (0: until the key's duration ends). */
  inMemoryBlockDuration?: number;
  /** Block in the store once the key consumed this many points (≥ points; 0: at points + 1). */
  blockOnConsumed?: number;
  /**
   * Reject at once (or ask `insuranceLimiter`) while the ioredis client's `status` is not
   * `ready` — connecting included — instead of waiting for it, as rate-limiter-flexible does;
   * `delete` is not checked (nor in rate-limiter-flexible). Without it, a call waits while the
   * first connection is made and fails fast while Redis is down (the store's breaker).
   */
  rejectIfRedisNotReady?: boolean;
}

/**
 * Base of {@link RateLimiterMemory} and {@link RateLimiterRedis}: options, key naming, and the
 * count (one sluice limiter over a counting policy named `keyPrefix`).
 */
export abstract class RateLimiterAbstract implements RateLimiterLike {
  private _points = 0;
  private _duration = 0;
  private _blockDuration = 0;
  private _execEvenly = false;
  private _execEvenlyMinDelayMs: number | undefined;
  /** Names the limiter's keys and its sluice policy. */
  readonly keyPrefix: string;
  /** The sluice limiter that counts (rebuilt when `duration` changes). */
  protected counter!: Limiter;
  /** Limiters whose windows are a `customDuration` (Redis store), by window length in ms. */
  private readonly customCounters = new Map<number, Limiter>();
  /** The last store failure (what a store-error decision rejects with). */
  private lastError: unknown;

  protected constructor(
    opts: RateLimiterOptions,
    /** Where counts live. */
    readonly store: Store,
    subject: string,
  ) {
    if (typeof opts !== "object" || opts === null)
      throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
        { path: "", message: "must be an object" },
      ]);
    const prefix = opts.keyPrefix ?? "rlflx";
    this.keyPrefix = policyName(prefix, "keyPrefix", subject);
    const issues: ValidationIssue[] = [];
    if (typeof opts.points !== "number" || !Number.isFinite(opts.points))
      issues.push({ path: "points", message: "must be set and must be a finite number" });
    if (typeof opts.duration !== "number" || !Number.isFinite(opts.duration) || opts.duration < 0)
      issues.push({
        path: "duration",
        message: "must be set and must be a finite, non-negative number",
      });
    if (
      opts.blockDuration !== undefined &&
      (typeof opts.blockDuration !== "number" ||
        !Number.isFinite(opts.blockDuration) ||
        opts.blockDuration < 0)
    )
      issues.push({ path: "blockDuration", message: "must be a number of seconds ≥ 0" });
    if (issues.length > 0) throw new ValidationError("SLUICE_ERR_OPTIONS", subject, issues);
    this._points = opts.points;
    this.duration = opts.duration;
    this.blockDuration = opts.blockDuration ?? 0;
    this.execEvenly = opts.execEvenly ?? false;
    this._execEvenlyMinDelayMs = opts.execEvenlyMinDelayMs;
  }

  get points(): number {
    return this._points;
  }
  set points(value: number) {
    if (!Number.isFinite(value)) throw new Error("points must be set and must be a finite number");
    this._points = value;
  }

  get duration(): number {
    return this._duration;
  }
  set duration(value: number) {
    if (typeof value !== "number" || !Number.isFinite(value) || value < 0)
      throw new Error("duration must be set and must be a finite, non-negative number");
    this._duration = value;
    this.counter = createLimiter({
      store: this.store,
      policy: this.policyFor(value),
      onError: (err) => {
        this.lastError = err;
      },
    });
  }

  /** `duration` in ms. */
  get msDuration(): number {
    return this.duration * 1000;
  }

  get blockDuration(): number {
    return this._blockDuration;
  }
  set blockDuration(value: number | undefined) {
    this._blockDuration = value ?? 0;
  }

  /** `blockDuration` in ms. */
  get msBlockDuration(): number {
    return this.blockDuration * 1000;
  }

  get execEvenly(): boolean {
    return this._execEvenly;
  }
  set execEvenly(value: boolean | undefined) {
    this._execEvenly = Boolean(value);
  }

  get execEvenlyMinDelayMs(): number {
    if (this._execEvenlyMinDelayMs !== undefined) return this._execEvenlyMinDelayMs;
    return this.points > 0 ? Math.ceil(this.msDuration / this.points) : 0;
  }
  set execEvenlyMinDelayMs(value: number | undefined) {
    this._execEvenlyMinDelayMs = value;
  }

  /** The key as rate-limiter-flexible stores it (`keyPrefix:key`). */
  getKey(key: string | number): string {
    return this.keyPrefix.length > 0 ? `${this.keyPrefix}:${key}` : String(key);
  }

  /** The key without `keyPrefix:`. */
  parseKey(rlKey: string): string {
    return this.keyPrefix.length > 0 ? rlKey.substring(this.keyPrefix.length + 1) : rlKey;
  }

  abstract consume(
    key: string | number,
    points?: number,
    options?: ConsumeOptions,
  ): Promise<RateLimiterRes>;

  penalty(key: string | number, points = 1, options: ConsumeOptions = {}): Promise<RateLimiterRes> {
    return this.guard("penalty", [key, points, options], async () =>
      this.change(key, this.pointsOf(points), options, points),
    );
  }

  reward(key: string | number, points = 1, options: ConsumeOptions = {}): Promise<RateLimiterRes> {
    // Negated as given (a string of digits becomes a number), then read as points.
    const negated = -points;
    return this.guard("reward", [key, points, options], async () =>
      this.change(key, this.pointsOf(negated), options, negated),
    );
  }

  get(key: string | number, options: ConsumeOptions = {}): Promise<RateLimiterRes | null> {
    return this.guard("get", [key, options], async () => {
      const now = await this.read(sluiceKey(String(key)));
      return now.open ? this.res(now.count, now.ms, false) : null;
    });
  }

  set(
    key: string | number,
    points: number,
    secDuration: number,
    options: ConsumeOptions = {},
  ): Promise<RateLimiterRes> {
    return this.guard("set", [key, points, secDuration, options], () => {
      const ms = (secDuration >= 0 ? secDuration : this.duration) * 1000;
      return this.put(key, points, ms);
    });
  }

  block(
    key: string | number,
    secDuration: number,
    options: ConsumeOptions = {},
  ): Promise<RateLimiterRes> {
    return this.guard("block", [key, secDuration, options], () =>
      this.put(key, this.blockedPoints(), secDuration * 1000),
    );
  }

  delete(key: string | number, options: ConsumeOptions = {}): Promise<boolean> {
    return this.guard("delete", [key, options], async () => {
      const k = sluiceKey(String(key));
      // Asked in one tick, so a Redis store sends both in one script call: atomic.
      const [now] = await Promise.all([this.read(k), this.counter.reset(k)]);
      this.forgetBlocked(String(key));
      return now.open;
    });
  }

  /** How many points a `block` puts on a key. */
  protected blockedPoints(): number {
    return this.points + 1;
  }

  /** Drops the key from an in-memory block list (store limiters). */
  protected forgetBlocked(key: string): void {
    void key;
  }

  /** Runs `op`; a store failure goes to the insurance limiter when there is one. */
  protected guard<T>(method: RateLimiterMethod, args: unknown[], op: () => Promise<T>): Promise<T> {
    return op();
  }

  /**
   * Points as this limiter takes them: whole numbers or strings of digits (as
   * rate-limiter-flexible's Redis limiter); anything else throws, naming `points`.
   */
  protected pointsOf(points: unknown): number {
    return wholePoints(points);
  }

  /**
   * Adds `points` (negative: takes away) to the key's count, without any check. `given` is the
   * points as the caller wrote them (rate-limiter-flexible's Redis limiter tells
   * `isFirstInDuration` by comparing the count with them).
   */
  protected async change(
    key: string | number,
    points: number,
    options: ConsumeOptions | undefined,
    given: unknown = points,
  ): Promise<RateLimiterRes> {
    const k = sluiceKey(String(key));
    const windowMs = this.customWindowMs(options);
    // A store deciding in this process can tell whether the window was open before the change,
    // and decides without a promise.
    const sync = isSyncStore(this.store) ? (this.counter as SyncLimiter) : undefined;
    let before: boolean | undefined;
    if (sync !== undefined) {
      before = sync.store.peekSync(sync.policy, k, 0).rules[0]!.resetAfterMs > 0;
      if (!before && (points <= 0 || windowMs !== undefined) && sync.store.setCountSync) {
        // rate-limiter-flexible's memory limiter opens a key's window with any change (of
        // `customDuration` when given), of 0 points too; sluice's count stays ≥ 0.
        const count = Math.max(0, points);
        const ms = windowMs ?? sync.policy.rules[0]!.periodMs;
        sync.store.setCountSync(sync.policy, k, count, ms);
        return this.res(count, ms, true);
      }
    }
    let d: Decision;
    if (points > 0)
      d =
        sync !== undefined
          ? sync.limitSync(k, { cost: points })
          : await this.counterOf(windowMs).limit(k, { cost: points });
    else if (points < 0) {
      // One tick: the refund and the read go in one Redis script call.
      [, d] = await Promise.all([this.counter.refund(k, -points), this.counter.peek(k)]);
    } else d = await this.counter.peek(k);
    d = this.checked(d);
    const consumed = countOf(d);
    // isFirstInDuration: whether the charge opened the window — as rate-limiter-flexible's
    // memory limiter tells it where that is known, else as its store limiters (the count is
    // what was given).
    const first = before !== undefined ? !before : consumed === given;
    return this.res(consumed, d.resetAfterMs, points > 0 && first);
  }

  /**
   * The window a change opens, in ms, when `options.customDuration` makes it other than
   * `duration`'s; else undefined. As rate-limiter-flexible reads it: `customDuration >= 0`
   * (so `null` is 0: forever), else `duration`.
   */
  private customWindowMs(options: ConsumeOptions | undefined): number | undefined {
    const custom = options?.customDuration;
    if (custom === undefined) return undefined;
    const seconds = Number(custom);
    if (!(seconds >= 0)) return undefined;
    const ms = windowMsOf(seconds);
    return ms === this.counter.policy.rules[0]!.periodMs ? undefined : ms;
  }

  /**
   * The limiter that charges a key whose window, if this charge opens it, lasts `windowMs`: a
   * counting policy of the same name (the same keys) with that period. The Redis store keeps a
   * first-request window as its end (the key's expiry), so a window open already keeps its end
   * whichever period charges it; the memory store is answered in `change`.
   */
  private counterOf(windowMs: number | undefined): Limiter {
    if (windowMs === undefined) return this.counter;
    let limiter = this.customCounters.get(windowMs);
    if (limiter !== undefined) return limiter;
    if (!(this.store instanceof RedisStore))
      throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid options", [
        {
          path: "customDuration",
          message: `needs sluice's memory or Redis store (this limiter counts in the ${this.store.kind} store)`,
        },
      ]);
    // Durations vary per call in some code (ExpressBruteFlexible's delays): keep a few.
    if (this.customCounters.size >= 64) this.customCounters.clear();
    limiter = createLimiter({
      store: this.store,
      policy: counterPolicy(this.keyPrefix, windowMs),
      onError: (err) => {
        this.lastError = err;
      },
    });
    this.customCounters.set(windowMs, limiter);
    return limiter;
  }

  /** The key's count and window, read without a change (a cost-0 look at the store). */
  protected async read(key: string): Promise<{ open: boolean; count: number; ms: number }> {
    const sd = await this.store.peek({ policy: this.counter.policy, key, cost: 0 });
    const r = sd.rules[0]!;
    return { open: r.resetAfterMs > 0, count: COUNTER_LIMIT - r.remaining, ms: r.resetAfterMs };
  }

  /** Puts the key at `points` for `ms` (0: forever); answers the points as given, as rate-limiter-flexible does. */
  protected async put(key: string | number, points: number, ms: number): Promise<RateLimiterRes> {
    await this.counter.setCount(sluiceKey(String(key)), Math.max(0, this.pointsOf(points)), {
      windowMs: ms > 0 ? Math.max(1, Math.round(ms)) : FOREVER_MS,
    });
    return new RateLimiterRes(0, ms > 0 ? ms : -1, points);
  }

  /** A decision answered by `onStoreError` is the store's failure: throw it. */
  protected checked(d: Decision): Decision {
    if (d.reason === "store-error") throw this.lastError ?? new Error("The store failed");
    return d;
  }

  /** A {@link RateLimiterRes} from a count and the time left in its window. */
  protected res(consumed: number, windowMs: number, isFirst: boolean): RateLimiterRes {
    const ms = windowMs > FOREVER_MS / 2 ? -1 : windowMs;
    return new RateLimiterRes(Math.max(this.points - consumed, 0), ms, consumed, isFirst);
  }

  /** Delays an allowed action for `execEvenly` (rate-limiter-flexible's formula). */
  protected evenly(res: RateLimiterRes): Promise<RateLimiterRes> | undefined {
    if (!(this.execEvenly && this.points > 0 && res.msBeforeNext > 0 && !res.isFirstInDuration))
      return undefined;
    let delay = Math.ceil(res.msBeforeNext / (res.remainingPoints + 2));
    if (delay < this.execEvenlyMinDelayMs) delay = res.consumedPoints * this.execEvenlyMinDelayMs;
    // msBeforeNext as it will be once the delay is over.
    res.msBeforeNext = Math.max(res.msBeforeNext - delay, 0);
    return new Promise((resolve) => setTimeout(resolve, delay, res));
  }

  /** The counting policy of a `duration` (seconds; 0: forever). */
  private policyFor(duration: number): Policy {
    return counterPolicy(this.keyPrefix, windowMsOf(duration));
  }
}

/**
 * rate-limiter-flexible's `RateLimiterMemory`: counts in a sluice memory store of its own
 * (bounded at 1,000,000 keys, no timer per key).
 */
export class RateLimiterMemory extends RateLimiterAbstract {
  constructor(opts: RateLimiterOptions) {
    super(opts, new MemoryStore(), "Invalid RateLimiterMemory options");
  }

  /**
   * Points as rate-limiter-flexible's memory limiter counts them: a count is kept whole
   * (`parseInt` of count + points), so fractional points count rounded down (1.5 is 1, and a
   * reward of 1.5 takes 2). Strings of digits and other input as {@link RateLimiterAbstract}.
   */
  protected override pointsOf(points: unknown): number {
    if (typeof points === "number" && Number.isFinite(points) && Math.abs(points) <= COUNTER_LIMIT)
      return Math.floor(points);
    return super.pointsOf(points);
  }

  consume(
    key: string | number,
    pointsToConsume = 1,
    options: ConsumeOptions = {},
  ): Promise<RateLimiterRes> {
    let points: number;
    try {
      points = this.pointsOf(pointsToConsume);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.change(key, points, options, pointsToConsume).then(async (res) => {
      countVerdict(this.counter, res.consumedPoints <= this.points);
      if (res.consumedPoints > this.points) {
        // Block only the first time the count passes `points`.
        if (this.blockDuration > 0 && res.consumedPoints <= this.points + points) {
          await this.counter.setCount(sluiceKey(String(key)), res.consumedPoints, {
            windowMs: Math.max(1, Math.round(this.msBlockDuration)),
          });
          res = new RateLimiterRes(0, this.msBlockDuration, res.consumedPoints, true);
        }
        throw res;
      }
      return this.evenly(res) ?? res;
    });
  }
}

/**
 * rate-limiter-flexible's `RateLimiterRedis` over a Redis client (ioredis, iovalkey or
 * node-redis; standalone, Sentinel or Cluster): counts in sluice's Redis store — one atomic script call per batch of operations,
 * a 500 ms deadline and a breaker — keys `sl:<keyPrefix>:{<key>}:f0`.
 */
export class RateLimiterRedis extends RateLimiterAbstract {
  private _insuranceLimiter: RateLimiterLike | undefined;
  /** Points at which a key is blocked in this process's memory (0: off). */
  readonly inMemoryBlockOnConsumed: number;
  /** Seconds of that block (0: the rest of the key's duration). */
  readonly inMemoryBlockDuration: number;
  /** Points at which a key is blocked in the store (0: at points + 1). */
  readonly blockOnConsumed: number;
  private readonly blocked = new Map<string, number>();
  /** With `rejectIfRedisNotReady`: the client that must be ready for a call to go. */
  private readonly readiness: ClientPort | undefined;

  constructor(opts: RateLimiterRedisOptions) {
    const subject = "Invalid RateLimiterRedis options";
    const client = (opts as Partial<RateLimiterRedisOptions> | null)?.storeClient;
    let store: Store;
    const port = isStore(client) ? undefined : clientPort(client);
    if (isStore(client)) store = client;
    else if (typeof port === "string")
      throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
        { path: "storeClient", message: `${port}, or a sluice redisStore` },
      ]);
    else if ((opts as { useRedis3AndLowerPackage?: unknown }).useRedis3AndLowerPackage === true)
      throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
        {
          path: "useRedis3AndLowerPackage",
          message: "node-redis 3 and older is not supported: use node-redis 4 or later, or ioredis",
        },
      ]);
    else store = redisStoreOf(client as RedisClient);
    super(opts, store, subject);
    this.readiness = opts.rejectIfRedisNotReady && typeof port === "object" ? port : undefined;
    this.inMemoryBlockOnConsumed = Math.trunc(Number(opts.inMemoryBlockOnConsumed ?? 0)) || 0;
    this.inMemoryBlockDuration = Math.trunc(Number(opts.inMemoryBlockDuration ?? 0)) || 0;
    this.blockOnConsumed = Math.trunc(Number(opts.blockOnConsumed ?? 0)) || 0;
    const issues: ValidationIssue[] = [];
    if (this.inMemoryBlockOnConsumed > 0 && this.points > this.inMemoryBlockOnConsumed)
      issues.push({
        path: "inMemoryBlockOnConsumed",
        message: 'must be greater or equal "points"',
      });
    if (this.inMemoryBlockDuration > 0 && this.inMemoryBlockOnConsumed === 0)
      issues.push({ path: "inMemoryBlockDuration", message: "needs inMemoryBlockOnConsumed" });
    if (this.blockOnConsumed > 0 && this.points > this.blockOnConsumed)
      issues.push({ path: "blockOnConsumed", message: 'must be greater or equal "points"' });
    if (issues.length > 0) throw new ValidationError("SLUICE_ERR_OPTIONS", subject, issues);
    this.insuranceLimiter = opts.insuranceLimiter;
  }

  /** Asked instead when the store fails; takes this limiter's blockDuration and execEvenly. */
  get insuranceLimiter(): RateLimiterLike | undefined {
    return this._insuranceLimiter;
  }
  set insuranceLimiter(value: RateLimiterLike | undefined) {
    if (value !== undefined && (typeof value !== "object" || typeof value.consume !== "function"))
      throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid RateLimiterRedis options", [
        { path: "insuranceLimiter", message: "must be a limiter (e.g. a RateLimiterMemory)" },
      ]);
    this._insuranceLimiter = value;
    if (value) {
      value.blockDuration = this.blockDuration;
      value.execEvenly = this.execEvenly;
    }
  }

  consume(
    key: string | number,
    pointsToConsume = 1,
    options: ConsumeOptions = {},
  ): Promise<RateLimiterRes> {
    const k = String(key);
    const blockedFor = this.inMemoryBlockedFor(k);
    if (blockedFor > 0) {
      countVerdict(this.counter, false);
      return Promise.reject(new RateLimiterRes(0, blockedFor));
    }
    return this.guard("consume", [key, pointsToConsume, options], async () => {
      const points = this.pointsOf(pointsToConsume);
      const res = await this.change(key, points, options, pointsToConsume);
      countVerdict(this.counter, res.consumedPoints <= this.points);
      if (
        this.inMemoryBlockOnConsumed > 0 &&
        !(this.inMemoryBlockDuration > 0) &&
        res.consumedPoints >= this.inMemoryBlockOnConsumed
      ) {
        this.blocked.set(k, Date.now() + res.msBeforeNext);
        if (res.consumedPoints > this.points) throw res;
        return res;
      }
      if (res.consumedPoints > this.points) {
        if (this.blockDuration > 0 && this.crossedBlockThreshold(res.consumedPoints, points)) {
          res.msBeforeNext = this.msBlockDuration;
          await this.blockInStore(k, res.consumedPoints);
        }
        if (
          this.inMemoryBlockOnConsumed > 0 &&
          res.consumedPoints >= this.inMemoryBlockOnConsumed
        ) {
          this.blocked.set(k, Date.now() + this.inMemoryBlockDuration * 1000);
          res.msBeforeNext = this.inMemoryBlockDuration * 1000;
        }
        throw res;
      }
      return this.evenly(res) ?? res;
    });
  }

  /** Forgets every key blocked in this process's memory. */
  deleteInMemoryBlockedAll(): void {
    this.blocked.clear();
  }

  protected override blockedPoints(): number {
    return this.blockOnConsumedEnabled() ? this.blockOnConsumed : this.points + 1;
  }

  protected override forgetBlocked(key: string): void {
    this.blocked.delete(key);
  }

  protected override guard<T>(
    method: RateLimiterMethod,
    args: unknown[],
    op: () => Promise<T>,
  ): Promise<T> {
    const ready =
      method === "delete" || this.readiness === undefined || this.readiness.status() === "ready";
    const attempt = ready
      ? op
      : () =>
          Promise.reject(
            new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "Redis connection is not ready"),
          );
    return attempt().catch((err: unknown) => {
      const insurance = this._insuranceLimiter;
      if (err instanceof RateLimiterRes || insurance === undefined) throw err;
      const call = insurance[method] as (...a: unknown[]) => Promise<T>;
      return call.apply(insurance, args);
    });
  }

  private async blockInStore(key: string, consumed: number): Promise<void> {
    try {
      await this.counter.setCount(sluiceKey(key), consumed, {
        windowMs: Math.max(1, Math.round(this.msBlockDuration)),
      });
    } catch (err) {
      if (this._insuranceLimiter === undefined) throw err;
      await this._insuranceLimiter.block(key, this.blockDuration);
    }
  }

  private blockOnConsumedEnabled(): boolean {
    return this.blockOnConsumed > 0 && this.blockOnConsumed > this.points;
  }

  /** Whether this consume is the one that crossed the blocking threshold. */
  private crossedBlockThreshold(consumed: number, changed: number): boolean {
    if (!this.blockOnConsumedEnabled())
      return consumed > this.points && consumed <= this.points + changed;
    return consumed >= this.blockOnConsumed && consumed - changed < this.blockOnConsumed;
  }

  private inMemoryBlockedFor(key: string): number {
    if (this.inMemoryBlockOnConsumed <= 0) return 0;
    const until = this.blocked.get(key);
    if (until === undefined) return 0;
    const now = Date.now();
    if (until >= now) return until - now;
    this.blocked.delete(key);
    return 0;
  }
}

/**
 * Several limiters as one: `consume` resolves with every limiter's {@link RateLimiterRes}
 * (by `keyPrefix`) when all have room, and rejects with those of the limiters without room.
 *
 * Unlike rate-limiter-flexible's (its issues #280, #350), it is atomic: one multi-rule sluice
 * policy decides all limiters at once, and when one rejects, nothing is consumed from any. Its
 * counts are its own (policy `union:<prefix>:<prefix>…` in the limiters' store): the limiters'
 * own `get`/`delete` do not see them; use the union's.
 */
export class RateLimiterUnion {
  private readonly limiters: RateLimiterAbstract[];
  private readonly union: Limiter;
  private lastError: unknown;

  constructor(...limiters: RateLimiterAbstract[]) {
    const subject = "Invalid RateLimiterUnion";
    if (limiters.length < 1)
      throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
        { path: "limiters", message: "at least one limiter has to be passed" },
      ]);
    const issues: ValidationIssue[] = [];
    limiters.forEach((l, i) => {
      if (!(l instanceof RateLimiterAbstract)) {
        issues.push({
          path: `limiters.${i}`,
          message:
            "must be a RateLimiterMemory or RateLimiterRedis from sluice/compat/rate-limiter-flexible",
        });
        return;
      }
      if (!Number.isSafeInteger(l.points) || l.points <= 0)
        issues.push({
          path: `limiters.${i}.points`,
          message: `must be a positive integer in a union (got ${l.points})`,
        });
      if (l.blockDuration > 0 || l.execEvenly)
        issues.push({
          path: `limiters.${i}`,
          message:
            "blockDuration and execEvenly are not supported in a union (one decision covers every limiter)",
        });
      if (l instanceof RateLimiterRedis && l.inMemoryBlockOnConsumed > 0)
        issues.push({
          path: `limiters.${i}.inMemoryBlockOnConsumed`,
          message: "is not supported in a union",
        });
    });
    const memory = !limiters.some((l) => !(l instanceof RateLimiterMemory));
    if (!memory && limiters.some((l) => l.store !== limiters[0]!.store))
      issues.push({
        path: "limiters",
        message:
          "must all count in one store (RateLimiterRedis on one storeClient, or all RateLimiterMemory)",
      });
    if (issues.length > 0) throw new ValidationError("SLUICE_ERR_OPTIONS", subject, issues);
    this.limiters = limiters;
    const name = `union:${limiters.map((l) => l.keyPrefix).join(":")}`;
    this.union = createLimiter({
      store: memory ? new MemoryStore() : limiters[0]!.store,
      policy: definePolicy({
        name: name.length <= 128 ? name : `union:${hashName(name)}`,
        algorithm: "fixed-window",
        windowStart: "first-request",
        rules: limiters.map((l) => ({
          limit: l.points,
          period: l.duration > 0 ? Math.max(1, Math.round(l.duration * 1000)) : FOREVER_MS,
        })),
      }),
      onError: (err) => {
        this.lastError = err;
      },
    });
  }

  /** Consumes `points` from every limiter, or from none. */
  async consume(key: string | number, points = 1): Promise<Record<string, RateLimiterRes>> {
    points = wholePoints(points);
    const k = sluiceKey(String(key));
    // More than some limiter's points can never fit: those limiters reject, nothing is taken.
    const d =
      points > policyCapacity(this.union.policy)
        ? overCapacity(await this.union.peek(k), points)
        : await this.union.limit(k, { cost: points });
    if (d.reason === "store-error") {
      const err = this.lastError ?? new Error("The store failed");
      throw Object.fromEntries(this.limiters.map((l) => [l.keyPrefix, err]));
    }
    const out: Record<string, RateLimiterRes> = {};
    d.rules.forEach((r, i) => {
      if (d.allowed || !r.allowed) {
        const consumed = r.limit - r.remaining;
        const ms = d.allowed ? r.resetAfterMs : r.retryAfterMs;
        out[this.limiters[i]!.keyPrefix] = new RateLimiterRes(
          r.remaining,
          ms > FOREVER_MS / 2 ? -1 : ms,
          consumed,
          d.allowed && consumed === points,
        );
      }
    });
    if (!d.allowed) throw out;
    return out;
  }
}

/**
 * rate-limiter-flexible's `BurstyRateLimiter`: when the rate limiter rejects, the burst limiter
 * may still allow; answers show the rate limiter's points and the shorter wait of the two.
 */
export class BurstyRateLimiter {
  constructor(
    private readonly rateLimiter: RateLimiterLike,
    private readonly burstLimiter: RateLimiterLike,
  ) {}

  get points(): number {
    return this.rateLimiter.points;
  }

  consume(
    key: string | number,
    pointsToConsume = 1,
    options: ConsumeOptions = {},
  ): Promise<RateLimiterRes> {
    return this.rateLimiter.consume(key, pointsToConsume, options).catch((rlRej: unknown) => {
      if (!(rlRej instanceof RateLimiterRes)) throw rlRej;
      return this.burstLimiter.consume(key, pointsToConsume, options).then(
        (blRes) => combine(rlRej, blRes)!,
        (blRej: unknown) => {
          throw blRej instanceof RateLimiterRes ? combine(rlRej, blRej) : blRej;
        },
      );
    });
  }

  /** The rate limiter's figures (null when it has none), with the shorter wait of the two. */
  async get(key: string | number): Promise<RateLimiterRes | null> {
    const [rl, bl] = await Promise.all([this.rateLimiter.get(key), this.burstLimiter.get(key)]);
    return combine(rl, bl);
  }
}

function combine(rl: RateLimiterRes | null, bl: RateLimiterRes | null): RateLimiterRes | null {
  if (!rl) return null;
  return new RateLimiterRes(
    rl.remainingPoints,
    Math.min(rl.msBeforeNext, bl ? bl.msBeforeNext : 0),
    rl.consumedPoints,
    rl.isFirstInDuration,
  );
}

/** Options of {@link RateLimiterQueue}. */
export interface RateLimiterQueueOptions {
  /** Most requests waiting per key (default 4294967295). */
  maxQueueSize?: number;
}

const MAX_QUEUE_SIZE = 4294967295;
const QUEUE_KEY = "limiter";

/**
 * rate-limiter-flexible's `RateLimiterQueue`: `removeTokens` waits in a FIFO line per key until
 * the limiter has room, and resolves with the points left.
 */
export class RateLimiterQueue {
  private readonly queues = new Map<string, QueueLine>();
  private readonly maxQueueSize: number;

  constructor(
    private readonly limiter: RateLimiterLike,
    opts: RateLimiterQueueOptions = {},
  ) {
    this.maxQueueSize = opts.maxQueueSize ?? MAX_QUEUE_SIZE;
    this.queues.set(QUEUE_KEY, new QueueLine(limiter, QUEUE_KEY, this.maxQueueSize));
  }

  /** Points left for `key` (the limiter's `points` when it has no count or cannot be read). */
  getTokensRemaining(key = QUEUE_KEY): Promise<number> {
    return tokensRemaining(this.limiter, key);
  }

  /**
   * Takes `tokens` for `key`, waiting in line while there is no room. Rejects with a
   * {@link RateLimiterQueueError} when `tokens` exceeds `points`, the line is full, or
   * `expiresUnixAt` (seconds) passes first.
   */
  removeTokens(tokens: number, key = QUEUE_KEY, expiresUnixAt = 0): Promise<number> {
    let line = this.queues.get(key);
    if (line === undefined) {
      line = new QueueLine(this.limiter, key, this.maxQueueSize);
      this.queues.set(key, line);
    }
    return line.removeTokens(tokens, expiresUnixAt);
  }
}

function tokensRemaining(limiter: RateLimiterLike, key: string): Promise<number> {
  return limiter.get(key).then(
    (res) => (res !== null ? res.remainingPoints : limiter.points),
    () => limiter.points,
  );
}

interface Waiting {
  resolve: (remaining: number) => void;
  reject: (err: unknown) => void;
  tokens: number;
  expiresUnixAt: number;
}

/** One key's line (rate-limiter-flexible's RateLimiterQueueInternal). */
class QueueLine {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private queue: Waiting[] = [];
  private hasExpiring = false;

  constructor(
    private readonly limiter: RateLimiterLike,
    private readonly key: string,
    private readonly maxQueueSize: number,
  ) {}

  removeTokens(tokens: number, expiresUnixAt: number): Promise<number> {
    return new Promise((resolve, reject) => {
      if (tokens > this.limiter.points) {
        reject(
          new RateLimiterQueueError(
            `Requested tokens ${tokens} exceeds maximum ${this.limiter.points} tokens per interval`,
          ),
        );
        return;
      }
      if (this.queue.length > 0) {
        this.enqueue({ resolve, reject, tokens, expiresUnixAt });
        return;
      }
      this.limiter.consume(this.key, tokens).then(
        (res) => resolve(res.remainingPoints),
        (rej: unknown) => {
          if (rej instanceof Error) {
            reject(rej);
            return;
          }
          this.enqueue({ resolve, reject, tokens, expiresUnixAt });
          if (this.timer === null && rej instanceof RateLimiterRes)
            this.timer = setTimeout(() => this.next(), rej.msBeforeNext);
        },
      );
    });
  }

  private enqueue(w: Waiting): void {
    if (this.queue.length < this.maxQueueSize) {
      this.queue.push(w);
      if (w.expiresUnixAt > 0) this.hasExpiring = true;
    } else
      w.reject(
        new RateLimiterQueueError(`Number of requests reached it's maximum ${this.maxQueueSize}`),
      );
  }

  private next(): void {
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.hasExpiring) {
      const nowSecs = Math.floor(Date.now() / 1000);
      this.queue = this.queue.filter((w) => {
        if (w.expiresUnixAt > 0 && nowSecs >= w.expiresUnixAt) {
          w.reject(
            new RateLimiterQueueError(
              "The request to remove tokens expired before it could be fulfilled",
            ),
          );
          return false;
        }
        return true;
      });
    }
    const w = this.queue.shift();
    if (w === undefined) return;
    this.limiter.consume(this.key, w.tokens).then(
      (res) => {
        w.resolve(res.remainingPoints);
        this.next();
      },
      (rej: unknown) => {
        if (rej instanceof Error || !(rej instanceof RateLimiterRes)) {
          w.reject(rej);
          this.next();
          return;
        }
        this.queue.unshift(w);
        if (this.timer === null) this.timer = setTimeout(() => this.next(), rej.msBeforeNext);
      },
    );
  }
}

/**
 * Points as a whole number: a safe integer, or a string of digits (which rate-limiter-flexible's
 * Redis limiter takes too); anything else throws, naming `points`.
 */
function wholePoints(points: unknown): number {
  if (typeof points === "number" && Number.isSafeInteger(points)) return points;
  if (typeof points === "string" && /^[1-9][0-9]{0,14}$/.test(points)) return Number(points);
  throw new ValidationError("SLUICE_ERR_COST", "Invalid points", [
    {
      path: "points",
      message: `must be a whole number (got ${typeof points === "number" || typeof points === "string" ? JSON.stringify(points) : typeof points}); rate-limiter-flexible's Redis limiter refuses decimal points too`,
    },
  ]);
}

/** A window of `seconds` (0: forever) in whole ms, at least 1. */
function windowMsOf(seconds: number): number {
  return seconds > 0 ? Math.max(1, Math.round(seconds * 1000)) : FOREVER_MS;
}

/**
 * The union's answer to a request larger than some limiter's points: denied by those limiters,
 * and by those without room for it, from what the key holds now (`now`: a peek).
 */
function overCapacity(now: Decision, points: number): Decision {
  const rules = now.rules.map((r) => {
    const fits = points <= r.limit && points <= r.remaining;
    return fits ? r : { ...r, allowed: false, retryAfterMs: r.resetAfterMs };
  });
  return { ...now, allowed: false, rules };
}

/** A short stable name for a long one (FNV-1a, base 36). */
function hashName(s: string): string {
  return fnv1a(s).toString(36);
}
