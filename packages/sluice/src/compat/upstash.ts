/**
 * `sluice/compat/upstash`: @upstash/ratelimit's `Ratelimit` over sluice — on Redis over HTTP
 * through the same `@upstash/redis` client (Workers, Vercel Edge, Deno: `sluice/upstash`), on a
 * TCP Redis through ioredis (standalone, Sentinel or Cluster), or in this process's memory.
 * Change the import, and keep the `redis` you pass:
 *
 * ```ts
 * // import { Ratelimit } from "@upstash/ratelimit";
 * import { Ratelimit } from "sluice/compat/upstash";
 * const ratelimit = new Ratelimit({ redis: new Redis(url), limiter: Ratelimit.slidingWindow(10, "10 s") });
 * const { success, remaining, reset } = await ratelimit.limit(userId);
 * ```
 *
 * The algorithms are sluice's under the policy named after `prefix` (`@upstash/ratelimit` →
 * `upstash.ratelimit`): `fixedWindow` counts every request in windows aligned to the clock and
 * compares the count as Upstash does; `slidingWindow` is sluice's `sliding-window`;
 * `tokenBucket` is sluice's `token-bucket` refilled by interval (`refill: "interval"`: Upstash's
 * own token bucket); `cachedFixedWindow` is Upstash's local cache in front of the fixed
 * window's count. The ephemeral cache, `timeout` (fail open), `blockUntilReady`, `getRemaining`
 * and `resetUsedTokens` behave as Upstash's. Differences that remain: docs/migrating.md.
 */
import type { Decision } from "../decision.js";
import { fnv1a } from "../hash.js";
import { ValidationError, type ValidationIssue } from "../errors.js";
import { COUNTING_POLICIES, type Limiter, createLimiter, toDecision } from "../limiter.js";
import { type Policy, type PolicyInput, definePolicy } from "../policy.js";
import type { Store } from "../store.js";
import { MemoryStore } from "../stores/memory.js";
import type { RedisStore } from "../stores/redis.js";
import { type RedisClient, clientPort } from "../stores/redis-client.js";
import { type UpstashRedisLike, upstashStore } from "../stores/upstash.js";
import {
  COUNTER_LIMIT,
  countOf,
  countVerdict,
  isStore,
  redisStoreOf,
  sluiceKey,
} from "./shared.js";

/** A duration as Upstash writes it: `"10 s"`, `"500ms"`, `"1.5 m"` (units ms, s, m, h, d, w). */
export type Duration = `${number} ${Unit}` | `${number}${Unit}`;
type Unit = "ms" | "s" | "m" | "h" | "d" | "w";

/** Why a response is unusual (Upstash's; sluice's face answers `timeout` and `cacheBlock`). */
export type RatelimitResponseType = "timeout" | "cacheBlock" | "denyList";

/** What `limit` answers (@upstash/ratelimit's `RatelimitResponse`). */
export interface RatelimitResponse {
  /** Whether the request may pass. */
  success: boolean;
  /** The limit (tokens per window; the bucket's maximum). */
  limit: number;
  /** Requests left in the current window (bucket). */
  remaining: number;
  /** Unix time in ms when the limit resets (see docs/migrating.md for each algorithm). */
  reset: number;
  /** Work still running after the answer (the cached window's write-back); await it in edge runtimes. */
  pending: Promise<unknown>;
  /** Set when something unusual answered (`timeout`: failed open; `cacheBlock`: the local cache). */
  reason?: RatelimitResponseType;
}

/** Options of one `limit` call. */
export interface LimitOptions {
  /** Tokens this request takes (default 1); 0 only looks; negative gives tokens back. */
  rate?: number;
  /** Accepted for compatibility (Upstash's analytics and deny list); not used. */
  ip?: string;
  /** As `ip`. */
  userAgent?: string;
  /** As `ip`. */
  country?: string;
  /** As `ip`. */
  geo?: unknown;
}

/** An algorithm as `Ratelimit.fixedWindow(…)` and the others make it. */
export interface Algorithm {
  /** Which one, and its figures (for the face; treat as opaque). */
  readonly kind: "fixedWindow" | "slidingWindow" | "tokenBucket" | "cachedFixedWindow";
  /** tokens per window, or the bucket's maximum. */
  readonly tokens: number;
  /** The window, or the refill interval, in ms. */
  readonly windowMs: number;
  /** Token bucket: tokens added per interval. */
  readonly refillRate: number;
}

/** Options of {@link Ratelimit} (@upstash/ratelimit's, with `redis` any Redis sluice speaks to). */
export interface RatelimitConfig {
  /**
   * An `@upstash/redis` client (`Redis.fromEnv()`: Redis over HTTP, as with @upstash/ratelimit),
   * a Redis client (ioredis `new Redis(url)`, Sentinel, `new Cluster(nodes)`; iovalkey;
   * node-redis `createClient`, `createCluster`, `createSentinel`, connected), or a sluice store
   * (`redisStore(…)`, `memoryStore()`). Default: this process's memory.
   */
  redis?: UpstashRedisLike | RedisClient | Store;
  /** The algorithm: `Ratelimit.fixedWindow(10, "10 s")`, … */
  limiter: Algorithm;
  /**
   * Names the keys (the sluice policy: its characters outside letters, digits, `.`, `_`, `-`,
   * `:` become `.`). Default `@upstash/ratelimit` (policy `upstash.ratelimit`).
   */
  prefix?: string;
  /** Identifiers known to be over the limit, answered locally until their reset (default a new Map; false: off). */
  ephemeralCache?: Map<string, number> | false;
  /** Answer `success: true, reason: "timeout"` after this many ms (default 5000; 0: wait). */
  timeout?: number;
  /** Not supported (Upstash's analytics): must be false or absent. */
  analytics?: boolean;
  /** Not supported (Upstash's deny lists): must be false or absent. */
  enableProtection?: boolean;
  /** Not supported (Upstash's limits changed in Redis at run time): must be false or absent. */
  dynamicLimits?: boolean;
}

const UNITS: Readonly<Record<Unit, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/** Upstash's `ms()`: a {@link Duration} in whole ms (at least 1). */
function durationMs(d: unknown, what: string): number {
  const m = typeof d === "string" ? /^(\d+(?:\.\d+)?)\s?(ms|s|m|h|d|w)$/.exec(d) : null;
  const value = m ? Math.round(Number.parseFloat(m[1]!) * UNITS[m[2] as Unit]) : 0;
  if (value < 1)
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid Ratelimit algorithm", [
      {
        path: what,
        message: `must be a duration of at least 1 ms such as "10 s" or "500ms" (got ${JSON.stringify(d)})`,
      },
    ]);
  return value;
}

function positive(n: unknown, what: string): number {
  if (typeof n === "number" && Number.isSafeInteger(n) && n > 0) return n;
  throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid Ratelimit algorithm", [
    { path: what, message: `must be a positive integer (got ${String(n)})` },
  ]);
}

const httpStores = new WeakMap<UpstashRedisLike, RedisStore>();

/** One store per `@upstash/redis` client, as `redisStoreOf` keeps one per Redis client. */
function upstashStoreOf(redis: UpstashRedisLike): RedisStore {
  let store = httpStores.get(redis);
  if (store === undefined) httpStores.set(redis, (store = upstashStore({ redis })));
  return store;
}

/** Upstash's ephemeral cache: identifiers blocked until a time, and the cached window counts. */
class Cache {
  constructor(private readonly map: Map<string, number>) {}

  isBlocked(identifier: string): { blocked: boolean; reset: number } {
    const reset = this.map.get(identifier);
    if (reset === undefined) return { blocked: false, reset: 0 };
    if (reset < Date.now()) {
      this.map.delete(identifier);
      return { blocked: false, reset: 0 };
    }
    return { blocked: true, reset };
  }

  blockUntil(identifier: string, reset: number): void {
    this.map.set(identifier, reset);
  }

  get(key: string): number | null {
    return this.map.get(key) || null;
  }

  set(key: string, value: number): void {
    this.map.set(key, value);
  }

  incr(key: string, by: number): number {
    const value = (this.map.get(key) ?? 0) + by;
    this.map.set(key, value);
    return value;
  }

  pop(key: string): void {
    this.map.delete(key);
  }
}

/**
 * @upstash/ratelimit's `Ratelimit` over sluice. See the module's comment.
 */
export class Ratelimit {
  /** The prefix keys are named by (Upstash's). */
  readonly prefix: string;
  /** Answer `timeout` after this many ms (0: never). */
  readonly timeout: number;
  private readonly algorithm: Algorithm;
  private readonly limiter: Limiter;
  private readonly cache: Cache | undefined;
  private lastError: unknown;

  constructor(config: RatelimitConfig) {
    const subject = "Invalid Ratelimit options";
    if (typeof config !== "object" || config === null)
      throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
        { path: "", message: "must be an object" },
      ]);
    const issues: ValidationIssue[] = [];
    const a = config.limiter;
    if (typeof a !== "object" || a === null || typeof a.kind !== "string")
      issues.push({
        path: "limiter",
        message:
          "must be Ratelimit.fixedWindow(…), slidingWindow(…), tokenBucket(…) or cachedFixedWindow(…)",
      });
    for (const f of ["analytics", "enableProtection", "dynamicLimits"] as const)
      if (config[f] === true)
        issues.push({
          path: f,
          message: "is not supported by sluice's Ratelimit (see docs/migrating.md)",
        });
    const r = config.redis;
    const port = r === undefined || isStore(r) ? undefined : clientPort(r);
    // An @upstash/redis client has pipelines and no connection (nor `call`, nor `sendCommand`).
    const overHttp =
      typeof port === "string" &&
      typeof (r as Partial<UpstashRedisLike> | null)?.pipeline === "function";
    if (typeof port === "string" && !overHttp)
      issues.push({
        path: "redis",
        message: `must be an @upstash/redis client, a sluice store, or a Redis client: ${port.replace(/^must be a Redis client: /, "")}`,
      });
    const timeout = config.timeout ?? 5000;
    if (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout < 0)
      issues.push({
        path: "timeout",
        message: `must be a number of ms ≥ 0 (got ${String(timeout)})`,
      });
    if (issues.length > 0) throw new ValidationError("SLUICE_ERR_OPTIONS", subject, issues);
    this.prefix = config.prefix ?? "@upstash/ratelimit";
    this.timeout = timeout;
    this.algorithm = a;
    const store: Store =
      r === undefined
        ? new MemoryStore()
        : isStore(r)
          ? r
          : overHttp
            ? upstashStoreOf(r as UpstashRedisLike)
            : redisStoreOf(r as RedisClient);
    this.limiter = createLimiter({
      store,
      policy: policyOf(a, nameOf(this.prefix)),
      onError: (err) => {
        this.lastError = err;
      },
    });
    const cache = config.ephemeralCache;
    if (cache instanceof Map) this.cache = new Cache(cache);
    else if (cache === undefined) this.cache = new Cache(new Map());
    if (a.kind === "cachedFixedWindow" && this.cache === undefined)
      throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
        { path: "ephemeralCache", message: "cachedFixedWindow needs the ephemeral cache" },
      ]);
  }

  /**
   * Each request inside a fixed window (aligned to the clock) adds to a count; once the count
   * passes `tokens`, the window's further requests are refused (and still counted).
   */
  static fixedWindow(tokens: number, window: Duration): Algorithm {
    return algorithm("fixedWindow", tokens, window, 0);
  }

  /** A weighted estimate over the current and the previous window (sluice's `sliding-window`). */
  static slidingWindow(tokens: number, window: Duration): Algorithm {
    return algorithm("slidingWindow", tokens, window, 0);
  }

  /**
   * A bucket of `maxTokens`, to which `refillRate` tokens are added at once every `interval`
   * counted from the identifier's first request (sluice's `token-bucket` with
   * `refill: "interval"`: Upstash's token bucket).
   */
  static tokenBucket(refillRate: number, interval: Duration, maxTokens: number): Algorithm {
    positive(refillRate, "refillRate");
    return algorithm("tokenBucket", maxTokens, interval, refillRate);
  }

  /**
   * The fixed window's count, cached in this process: after the first request of a window,
   * requests are decided locally and written back in the background (`pending`). Upstash
   * calls it experimental.
   */
  static cachedFixedWindow(tokens: number, window: Duration): Algorithm {
    return algorithm("cachedFixedWindow", tokens, window, 0);
  }

  /** Decides a request of `identifier` (taking `rate` tokens, default 1). */
  limit = async (identifier: string, req?: LimitOptions): Promise<RatelimitResponse> => {
    const response = this.decide(identifier, req?.rate ?? 1);
    if (!(this.timeout > 0)) return response;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<RatelimitResponse>((resolve) => {
      timer = setTimeout(
        () =>
          resolve({
            success: true,
            limit: 0,
            remaining: 0,
            reset: 0,
            pending: Promise.resolve(),
            reason: "timeout",
          }),
        this.timeout,
      );
    });
    try {
      return await Promise.race([response, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  };

  /** Waits until a request of `identifier` may pass, or `timeout` ms have passed. */
  blockUntilReady = async (identifier: string, timeout: number): Promise<RatelimitResponse> => {
    if (timeout <= 0) throw new Error("timeout must be positive");
    const deadline = Date.now() + timeout;
    for (;;) {
      const res = await this.limit(identifier);
      if (res.success) return res;
      if (res.reset === 0) throw new Error("This should not happen");
      const wait = Math.min(res.reset, deadline) - Date.now();
      await new Promise((r) => setTimeout(r, wait > 0 ? wait : 100));
      if (Date.now() > deadline) return res;
    }
  };

  /** Forgets what `identifier` used. */
  resetUsedTokens = async (identifier: string): Promise<void> => {
    const key = this.keyOf(identifier);
    this.cache?.pop(key);
    if (this.algorithm.kind === "cachedFixedWindow") this.cache?.pop(this.bucketKey(key));
    await this.limiter.reset(sluiceKey(identifier));
  };

  /** What `identifier` has left, when that resets, and the limit. */
  getRemaining = async (
    identifier: string,
  ): Promise<{ remaining: number; reset: number; limit: number }> => {
    const a = this.algorithm;
    if (a.kind === "cachedFixedWindow") {
      const cached = this.cache!.get(this.bucketKey(this.keyOf(identifier)));
      if (cached !== null)
        return {
          remaining: Math.max(0, a.tokens - cached),
          reset: this.windowEnd(),
          limit: a.tokens,
        };
    }
    if (a.kind === "tokenBucket") {
      // What is left now (Upstash's: what its last request left, not caught up since).
      const look = await this.lookAtBucket(sluiceKey(identifier));
      return { remaining: look.tokens, reset: look.reset, limit: a.tokens };
    }
    const sd = await this.limiter.store.peek({
      policy: this.limiter.policy,
      key: sluiceKey(identifier),
      cost: 0,
    });
    const rule = sd.rules[0]!;
    if (a.kind === "fixedWindow" || a.kind === "cachedFixedWindow") {
      const used = COUNTER_LIMIT - rule.remaining;
      return { remaining: Math.max(0, a.tokens - used), reset: this.windowEnd(), limit: a.tokens };
    }
    return { remaining: rule.remaining, reset: this.windowEnd(), limit: a.tokens };
  };

  private async decide(identifier: string, rate: number): Promise<RatelimitResponse> {
    const a = this.algorithm;
    const key = this.keyOf(identifier);
    // An identifier the cache holds blocked is answered before the rate is read, as Upstash does.
    if (this.cache !== undefined && rate > 0 && a.kind !== "cachedFixedWindow") {
      const { blocked, reset } = this.cache.isBlocked(key);
      if (blocked) {
        countVerdict(this.limiter, false);
        return {
          success: false,
          limit: a.tokens,
          remaining: 0,
          reset,
          pending: Promise.resolve(),
          reason: "cacheBlock",
        };
      }
    }
    if (typeof rate !== "number" || !Number.isSafeInteger(rate))
      throw new ValidationError("SLUICE_ERR_COST", "Invalid rate", [
        { path: "rate", message: `must be a whole number (got ${String(rate)})` },
      ]);
    if (a.kind === "cachedFixedWindow") return this.cached(identifier, key, rate);
    let res: RatelimitResponse;
    if (a.kind === "tokenBucket") res = await this.bucket(identifier, rate);
    else if (a.kind === "fixedWindow") {
      const d = await this.charge(identifier, rate);
      const used = countOf(d);
      if (rate > 0) countVerdict(this.limiter, used <= a.tokens);
      res = this.answer(used <= a.tokens, Math.max(0, a.tokens - used), this.windowEnd());
    } else {
      // A look or a refund succeeds while the window is not over its limit (cost-0 look), as
      // Upstash answers it.
      const d = await this.charge(identifier, rate);
      if (!d.allowed && rate > 0) await this.countRefused(identifier, rate, d);
      res = this.answer(d.allowed, d.allowed ? d.remaining : 0, this.windowEnd());
    }
    if (this.cache !== undefined) {
      if (!res.success) this.cache.blockUntil(key, res.reset);
      else if (rate < 0) this.cache.pop(key);
    }
    return res;
  }

  /** Upstash's cachedFixedWindow: the window's count cached here, written back in the background. */
  private async cached(identifier: string, key: string, rate: number): Promise<RatelimitResponse> {
    const cache = this.cache!;
    const tokens = this.algorithm.tokens;
    const bucketKey = this.bucketKey(key);
    const reset = this.windowEnd();
    if (typeof cache.get(bucketKey) === "number") {
      let count = cache.incr(bucketKey, rate);
      // A refund takes the count no lower than 0, as the store's does (Upstash's goes negative).
      if (count < 0) cache.set(bucketKey, (count = 0));
      const success = count <= tokens;
      if (rate > 0) countVerdict(this.limiter, success);
      const pending = success ? this.charge(identifier, rate) : Promise.resolve();
      return { success, limit: tokens, remaining: tokens - count, reset, pending };
    }
    const used = countOf(await this.charge(identifier, rate));
    cache.set(bucketKey, used);
    const remaining = tokens - used;
    if (rate > 0) countVerdict(this.limiter, remaining >= 0);
    return { success: remaining >= 0, limit: tokens, remaining, reset, pending: Promise.resolve() };
  }

  /**
   * Upstash's token bucket: a rate the bucket can hold is decided (a refusal answers 0 left); a
   * larger one is refused, taking nothing; a look (0) or a refund (< 0) writes the bucket back
   * caught up with its refills, as Upstash's script does (a refund stops at `maxTokens`), and
   * succeeds. `reset` is the bucket's next refill, as Upstash answers it.
   */
  private async bucket(identifier: string, rate: number): Promise<RatelimitResponse> {
    const a = this.algorithm;
    // "" is an identifier of its own, as in @upstash/ratelimit.
    const key = sluiceKey(identifier);
    if (rate > 0 && rate <= a.tokens) {
      const d = await this.limiter.limit(key, { cost: rate });
      if (d.reason === "store-error")
        throw this.lastError ?? new Error("Ratelimit: the store failed");
      return this.answer(
        d.allowed,
        d.allowed ? d.remaining : 0,
        this.nextRefill(d.remaining, d.resetAfterMs),
      );
    }
    const { policy, store } = this.limiter;
    const [, look] = await Promise.all([
      rate <= 0 ? store.adjust(policy, key, rate) : undefined,
      this.lookAtBucket(key),
    ]);
    return this.answer(rate <= 0, rate <= 0 ? look.tokens : 0, look.reset);
  }

  /**
   * The token bucket's tokens and next refill, without taking any: a look at a whole bucket
   * (a cost of `maxTokens`), whose answer tells both. Sent in the same tick as the caller's
   * other operation on the key (one script call on Redis, after it).
   */
  private async lookAtBucket(key: string): Promise<{ tokens: number; reset: number }> {
    const a = this.algorithm;
    const { policy, store } = this.limiter;
    const look = await store.peek({ policy, key, cost: a.tokens });
    const rule = look.rules[0]!;
    return {
      tokens: look.allowed ? a.tokens : rule.remaining,
      reset: this.nextRefill(rule.remaining, rule.resetAfterMs),
    };
  }

  /**
   * Takes `rate` (negative: gives back; 0: looks) and answers the decision or the count after it.
   * A refund of any size is the store's `adjust`: counts stop at 0 (a bucket at full), in every
   * algorithm.
   */
  private async charge(identifier: string, rate: number): Promise<Decision> {
    // "" is an identifier of its own, as in @upstash/ratelimit.
    identifier = sluiceKey(identifier);
    let d: Decision;
    if (rate > 0 && rate <= this.capacity())
      d = await this.limiter.limit(identifier, { cost: rate });
    else if (rate > 0) {
      // More than the bucket or window can ever hold: refused, nothing taken; `remaining` is
      // what is left now (an allowed look of 1 told what would be left after it).
      const now = await this.limiter.peek(identifier);
      d = {
        ...now,
        allowed: false,
        remaining: now.allowed ? now.remaining + 1 : now.remaining,
        retryAfterMs: this.algorithm.windowMs,
      };
    } else {
      // One tick: a Redis store sends the refund and the look in one script call. The look
      // costs 0: allowed while nothing is over the limit.
      const { policy, store } = this.limiter;
      const [, look] = await Promise.all([
        rate < 0 ? store.adjust(policy, identifier, rate) : undefined,
        store.peek({ policy, key: identifier, cost: 0 }),
      ]);
      d = toDecision(policy, look, 0);
    }
    if (d.reason === "store-error")
      throw this.lastError ?? new Error("Ratelimit: the store failed");
    return d;
  }

  /**
   * Upstash's sliding window counts a refused request while its window has room for one (its
   * script checks the count before, then INCRBY, answering `success: false`), a rate larger
   * than the limit too: so does the face (a forced charge, `store.adjust`), or it would later
   * admit what Upstash refuses. `d` is the refusal, whose `remaining` is what is left now.
   */
  private async countRefused(identifier: string, rate: number, d: Decision): Promise<void> {
    const { policy, store } = this.limiter;
    if (d.remaining >= 1) await store.adjust(policy, sluiceKey(identifier), rate);
  }

  /** The largest rate one request may take (the policy's capacity). */
  private capacity(): number {
    return this.algorithm.kind === "slidingWindow" ? this.algorithm.tokens : COUNTER_LIMIT;
  }

  private answer(success: boolean, remaining: number, reset: number): RatelimitResponse {
    return { success, limit: this.algorithm.tokens, remaining, reset, pending: Promise.resolve() };
  }

  /** The key Upstash's cache and keys are named by (`prefix:identifier`). */
  private keyOf(identifier: string): string {
    return `${this.prefix}:${identifier}`;
  }

  /** Upstash's per-window cache key (`prefix:identifier:bucket`). */
  private bucketKey(key: string): string {
    return `${key}:${Math.floor(Date.now() / this.algorithm.windowMs)}`;
  }

  /** The end of the current aligned window, on this machine's clock (as Upstash computes it). */
  private windowEnd(): number {
    const w = this.algorithm.windowMs;
    return (Math.floor(Date.now() / w) + 1) * w;
  }

  /**
   * Token bucket: when its next refill comes (Upstash's `reset`: the anchor + one interval),
   * from a rule's answer: `resetAfterMs` is the anchor + ceil(missing / refillRate) intervals
   * from now, `missing` being `maxTokens − remaining` (never 0: a charge or a whole bucket's look
   * leaves some missing).
   */
  private nextRefill(remaining: number, resetAfterMs: number): number {
    const a = this.algorithm;
    const steps = Math.max(1, Math.ceil((a.tokens - remaining) / a.refillRate));
    return Date.now() + resetAfterMs - (steps - 1) * a.windowMs;
  }
}

function algorithm(
  kind: Algorithm["kind"],
  tokens: number,
  window: Duration,
  refillRate: number,
): Algorithm {
  return Object.freeze({
    kind,
    tokens: positive(tokens, kind === "tokenBucket" ? "maxTokens" : "tokens"),
    windowMs: durationMs(window, kind === "tokenBucket" ? "interval" : "window"),
    refillRate,
  });
}

/** The sluice policy of an algorithm. */
function policyOf(a: Algorithm, name: string): Policy {
  let input: PolicyInput;
  // A counter (the face decides against `tokens` and counts its verdict for telemetry).
  let counting = false;
  switch (a.kind) {
    case "fixedWindow":
    case "cachedFixedWindow":
      // Counted as Upstash counts (every request, also refused ones): a limit never reached.
      input = {
        name,
        algorithm: "fixed-window",
        rules: [{ limit: COUNTER_LIMIT, period: a.windowMs }],
      };
      counting = true;
      break;
    case "slidingWindow":
      input = {
        name,
        algorithm: "sliding-window",
        rules: [{ limit: a.tokens, period: a.windowMs }],
      };
      break;
    case "tokenBucket":
      input = {
        name,
        algorithm: "token-bucket",
        refill: "interval",
        rules: [{ limit: a.refillRate, period: a.windowMs, burst: a.tokens }],
      };
      break;
  }
  const policy = definePolicy(input);
  if (counting) COUNTING_POLICIES.add(policy);
  return policy;
}

/** A policy name from Upstash's prefix: other characters become `.`, trimmed; long ones hashed. */
function nameOf(prefix: string): string {
  const name = prefix.replace(/[^A-Za-z0-9._:-]+/g, ".").replace(/^\.+|\.+$/g, "");
  if (name.length >= 1 && name.length <= 128) return name;
  return `upstash.${name.slice(0, 100)}.${fnv1a(prefix).toString(36)}`.replace(/\.+/g, ".");
}
