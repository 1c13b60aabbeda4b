/**
 * `sluice/compat/nestjs-throttler`: `SluiceThrottlerStorage`, a @nestjs/throttler (v5, v6)
 * `ThrottlerStorage` over sluice's stores. Keep the guard and the decorators, change the
 * storage:
 *
 * ```ts
 * ThrottlerModule.forRoot({
 *   throttlers: [{ ttl: 60_000, limit: 10 }],
 *   storage: new SluiceThrottlerStorage({ client: new Redis(process.env.REDIS_URL) }),
 * });
 * ```
 *
 * It decides as @nestjs/throttler's own storage does — a hit counts for `ttl` ms after it was
 * made (a sliding log), the hit that passes `limit` starts a block of `blockDuration`, after
 * which the key starts afresh — with sluice's `sliding-log` and its penalty block (with
 * `resetOnBlock` when the block is shorter than `ttl`) under the policy `<prefix>:<throttler name>`,
 * exact under concurrency, in a memory store of its own (no timer per hit, bounded) or the
 * Redis store of a Redis client (ioredis, iovalkey or node-redis; standalone, Sentinel or Cluster). `timeToExpire` is the
 * storage's window, opened by a key's first hit: a first-request `fixed-window` count under
 * `<prefix>:<throttler name>:window`. Differences that remain: docs/migrating.md.
 */
import type { Decision } from "../decision.js";
import { ValidationError, type ValidationIssue } from "../errors.js";
import { resolveOptions } from "../options.js";
import { type Limiter, type SyncLimiter, createLimiter } from "../limiter.js";
import { type Store, isSyncStore } from "../store.js";
import { MemoryStore, type WindowCount } from "../stores/memory.js";
import type { RedisClient } from "../stores/redis-client.js";
import {
  STORE_OPTIONS,
  counterPolicy,
  policyName,
  policyNameOption,
  sluiceKey,
  storeAcross,
  storeFrom,
} from "./shared.js";

/** What `increment` answers (@nestjs/throttler's `ThrottlerStorageRecord`). */
export interface ThrottlerStorageRecord {
  /** Hits counted for the key within `ttl` (with the one that passed the limit, while it counts). */
  totalHits: number;
  /** Seconds until the key's window, opened by its first hit, ends. */
  timeToExpire: number;
  /** Whether this hit is refused. */
  isBlocked: boolean;
  /** Seconds until the key may pass again (0 when not blocked). */
  timeToBlockExpire: number;
}

/** Options of {@link SluiceThrottlerStorage}. */
export interface SluiceThrottlerStorageOptions {
  /**
   * A Redis client (ioredis `new Redis(url)`, Sentinel, `new Cluster(nodes)`; iovalkey;
   * node-redis `createClient`, `createCluster`, `createSentinel`, connected); default: memory.
   */
  client?: RedisClient;
  /** A sluice store to decide in instead (e.g. `redisStore({ client, timeoutMs })`). */
  store?: Store;
  /**
   * Starts every policy name: `<prefix>:<throttler name>` (1–128 letters, digits, `.`, `_`,
   * `-`, `:` in all). Default `"nest"`.
   */
  prefix?: string;
}

/** The options, checked once (options.ts): every problem named, unknown options caught. */
const OPTIONS = {
  ...STORE_OPTIONS,
  prefix: policyNameOption("nest"),
} satisfies { readonly [K in keyof Required<SluiceThrottlerStorageOptions>]: unknown };

/** Limiters of one throttler setting: the hits, and the window `timeToExpire` tells. */
interface Throttle {
  readonly hits: Limiter;
  readonly window: Limiter;
  /**
   * The same when the store decides in this process (no promise per call): the hits' limiter,
   * and the memory store that counts the window.
   */
  readonly sync: { readonly hits: SyncLimiter; readonly counter: MemoryStore } | undefined;
  readonly blockMs: number;
  readonly ttlMs: number;
}

/** Whether a limiter decides in this process (over the memory store). */
function isSync(l: Limiter): l is SyncLimiter {
  return isSyncStore(l.store);
}

/** Most throttler settings (name, ttl, limit, blockDuration) remembered at once. */
const MAX_SETTINGS = 1000;

/**
 * A @nestjs/throttler `ThrottlerStorage` over sluice; see the module's comment.
 */
export class SluiceThrottlerStorage {
  private store: Store;
  /** Whether `store` is this storage's own memory store (forgotten at shutdown, as theirs is). */
  private readonly ownMemory: boolean;
  private readonly prefix: string;
  private readonly throttles = new Map<string, Throttle>();
  private last:
    | { ttl: number; limit: number; blockDuration: number; name: string; throttle: Throttle }
    | undefined;
  private lastError: unknown;
  /** What the window's counting path answers (reused). */
  private readonly count: WindowCount = { allowed: true, count: 0, resetAfterMs: 0, nowMs: 0 };
  private readonly onError = (err: unknown): void => {
    this.lastError = err;
  };

  constructor(options: SluiceThrottlerStorageOptions = {}) {
    const o = resolveOptions("Invalid SluiceThrottlerStorage options", OPTIONS, options, {
      across: (_, fail) => storeAcross(options, fail),
    });
    const { store, own } = storeFrom(o);
    this.prefix = o.prefix;
    this.store = store;
    this.ownMemory = own;
  }

  /**
   * Counts a hit of `key` for the throttler `throttlerName` (`ttl` and `blockDuration` in ms)
   * and tells whether it is refused.
   */
  async increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerStorageRecord> {
    const t = this.throttle(ttl, limit, blockDuration, throttlerName);
    // "" is a key of its own, as in @nestjs/throttler's storage.
    key = sluiceKey(key);
    let d: Decision;
    let windowMs: number;
    if (t.sync !== undefined && typeof key === "string") {
      // In memory, decided at once; the window counted on the store's counting path.
      d = t.sync.hits.limitSync(key);
      t.sync.counter.countSync(t.window.policy, key, 1, this.count);
      windowMs = this.count.resetAfterMs;
    } else {
      // In Redis, asked in one tick: one script call for both.
      const [h, w] = await Promise.all([t.hits.limit(key), t.window.limit(key)]);
      if (w.reason === "store-error")
        throw this.lastError ?? new Error("SluiceThrottlerStorage: the store failed");
      d = h;
      windowMs = w.resetAfterMs;
    }
    if (d.reason === "store-error")
      throw this.lastError ?? new Error("SluiceThrottlerStorage: the store failed");
    const timeToExpire = Math.ceil(windowMs / 1000);
    const used = d.limit - d.remaining;
    if (d.allowed) return { totalHits: used, timeToExpire, isBlocked: false, timeToBlockExpire: 0 };
    if (t.blockMs <= 0) {
      // No block: the refused hit is not counted; it may pass once the oldest hit leaves.
      return {
        totalHits: used + 1,
        timeToExpire,
        isBlocked: true,
        timeToBlockExpire: Math.ceil(d.retryAfterMs / 1000),
      };
    }
    // Blocked: the hit that passed the limit (made when the block started) counts while it is
    // younger than ttl, as @nestjs/throttler counts it.
    const sinceBlock = t.blockMs - d.retryAfterMs;
    return {
      totalHits: used + (sinceBlock < t.ttlMs ? 1 : 0),
      timeToExpire,
      isBlocked: true,
      timeToBlockExpire: Math.ceil(d.retryAfterMs / 1000),
    };
  }

  /**
   * At the application's shutdown, a storage in memory forgets its hits (as
   * ThrottlerStorageService does); a Redis one keeps them (they are shared). No timer to stop.
   */
  onApplicationShutdown(): void {
    this.throttles.clear();
    this.last = undefined;
    if (this.ownMemory) this.store = new MemoryStore();
  }

  private throttle(ttl: number, limit: number, blockDuration: number, name: string): Throttle {
    // Most calls repeat the last setting (one throttler): no key string to build for them.
    const last = this.last;
    if (
      last !== undefined &&
      last.ttl === ttl &&
      last.limit === limit &&
      last.blockDuration === blockDuration &&
      last.name === name
    )
      return last.throttle;
    const id = `${name}\u0000${ttl}\u0000${limit}\u0000${blockDuration}`;
    let t = this.throttles.get(id);
    if (t !== undefined) {
      this.last = { ttl, limit, blockDuration, name, throttle: t };
      return t;
    }
    const subject = `Invalid throttler "${name}"`;
    const issues: ValidationIssue[] = [];
    if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 1)
      issues.push({ path: "limit", message: `must be a positive integer (got ${String(limit)})` });
    if (typeof ttl !== "number" || !Number.isFinite(ttl) || ttl <= 0)
      issues.push({ path: "ttl", message: `must be a positive number of ms (got ${String(ttl)})` });
    if (typeof blockDuration !== "number" || !Number.isFinite(blockDuration))
      issues.push({
        path: "blockDuration",
        message: `must be a number of ms (got ${String(blockDuration)})`,
      });
    if (issues.length > 0) throw new ValidationError("SLUICE_ERR_OPTIONS", subject, issues);
    const ttlMs = Math.max(1, Math.round(ttl));
    const blockMs = Math.max(0, Math.round(blockDuration));
    const base = policyName(`${this.prefix}:${name}`, "throttler name", subject);
    const hits = createLimiter({
      store: this.store,
      policy: {
        name: base,
        algorithm: "sliding-log",
        rules: [{ limit, period: ttlMs }],
        ...(blockMs > 0 ? { blockDuration: blockMs } : {}),
        // @nestjs/throttler forgets a key's hits when its block ends. A block at least as long
        // as ttl outlives them anyway (and they keep counting, as theirs do, while it runs); a
        // shorter one must forget them.
        ...(blockMs > 0 && blockMs < ttlMs ? { resetOnBlock: true } : {}),
      },
      onError: this.onError,
    });
    const window = createLimiter({
      store: this.store,
      policy: counterPolicy(policyName(`${base}:window`, "throttler name", subject), ttlMs),
      onError: this.onError,
    });
    const store = this.store;
    t = {
      hits,
      window,
      sync: isSync(hits) && store instanceof MemoryStore ? { hits, counter: store } : undefined,
      blockMs,
      ttlMs,
    };
    if (this.throttles.size >= MAX_SETTINGS) this.throttles.clear();
    this.throttles.set(id, t);
    this.last = { ttl, limit, blockDuration, name, throttle: t };
    return t;
  }
}
