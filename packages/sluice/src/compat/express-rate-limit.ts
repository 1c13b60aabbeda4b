/**
 * `sluice/compat/express-rate-limit`: `SluiceStore`, an express-rate-limit (v7, v8) `Store`
 * over sluice's stores. Keep the middleware, change the store:
 *
 * ```ts
 * import { rateLimit } from "express-rate-limit";
 * import { SluiceStore } from "sluice/compat/express-rate-limit";
 * app.use(rateLimit({ windowMs: 60_000, limit: 100, store: new SluiceStore({ client: redis }) }));
 * ```
 *
 * By default it counts as express-rate-limit's own stores do — every hit is added to the key's
 * count in a window of `windowMs` opened by the key's first hit, and the middleware compares
 * the count with its `limit` — with sluice's `fixed-window` (`windowStart: "first-request"`)
 * under the policy named `prefix`, in a memory store of its own (`new SluiceStore()`) or the
 * Redis store of a Redis client — ioredis, iovalkey or node-redis (`new SluiceStore({ client })`: standalone, Sentinel or
 * Cluster). With `algorithm`, sluice decides instead (gcra, token-bucket, sliding windows…)
 * and the store answers the middleware a count that tells it the decision. Differences that
 * remain: docs/migrating.md.
 */
import { ALGORITHMS, type AlgorithmName } from "../algorithms/index.js";
import type { Decision } from "../decision.js";
import { ValidationError } from "../errors.js";
import { type Limiter, type SyncLimiter, createLimiter } from "../limiter.js";
import { option, resolveOptions } from "../options.js";
import { type Store, isSyncStore } from "../store.js";
import { MemoryStore, type WindowCount } from "../stores/memory.js";
import type { RedisClient } from "../stores/redis-client.js";
import {
  STORE_OPTIONS,
  counterPolicy,
  countVerdict,
  countOf,
  policyNameOption,
  sluiceKey,
  storeAcross,
  storeFrom,
} from "./shared.js";

/** A client's hits and when they reset (express-rate-limit's `ClientRateLimitInfo`). */
export interface ClientRateLimitInfo {
  /** Hits counted in the client's current window (with `algorithm`: see {@link SluiceStore}). */
  totalHits: number;
  /** When the client's count resets (with `algorithm`: when it may try again, if denied). */
  resetTime: Date | undefined;
}

/** The part of express-rate-limit's options the store reads in `init`. */
export interface SluiceStoreInitOptions {
  /** The window, in ms. */
  windowMs: number;
  /** The limit; with `algorithm`, it must be a number (sluice's policy is built from it). */
  limit?: unknown;
  /** Whether failed requests are taken back (decrement). */
  skipFailedRequests?: boolean;
}

/** Options of {@link SluiceStore}. */
export interface SluiceStoreOptions {
  /**
   * A Redis client (ioredis `new Redis(url)`, Sentinel, `new Cluster(nodes)`; iovalkey;
   * node-redis `createClient`, `createCluster`, `createSentinel`, connected): counts live in
   * Redis, shared by every instance. Without it (and without `store`) they live in this
   * process's memory, as express-rate-limit's MemoryStore keeps them.
   */
  client?: RedisClient;
  /** A sluice store to count in instead (e.g. `redisStore({ client, timeoutMs })`). */
  store?: Store;
  /**
   * Names the keys: the sluice policy name (1–128 letters, digits, `.`, `_`, `-`, `:`), so
   * Redis keys are `sl:<prefix>:{<key>}:f0`. Also express-rate-limit's `store.prefix` (its
   * double-count check tells stores apart by it). Default `"erl"`.
   */
  prefix?: string;
  /**
   * Let sluice decide with this algorithm over the middleware's `limit` per `windowMs`
   * (which must then be a number) instead of counting: `gcra`, `token-bucket`,
   * `sliding-window`, `sliding-log` or `fixed-window` (aligned to the clock). Denied hits are
   * not counted; the store answers `totalHits` = limit − remaining when allowed and limit + 1
   * when denied, and `resetTime` the decision's reset (allowed) or retry time (denied).
   */
  algorithm?: Exclude<AlgorithmName, "concurrency">;
  /** With `gcra` or `token-bucket`: how many may pass at once. Default: the limit. */
  burst?: number;
}

/** The algorithms `algorithm` takes. */
const DECIDING = ALGORITHMS.filter(
  (a): a is Exclude<AlgorithmName, "concurrency"> => a !== "concurrency",
);

/** The options, checked once (options.ts): every problem named, unknown options caught. */
const OPTIONS = {
  ...STORE_OPTIONS,
  prefix: policyNameOption("erl"),
  algorithm: option.oneOf(DECIDING, undefined, `must be one of ${DECIDING.join(", ")}`),
  // Checked by the policy it goes into (at init), as express-rate-limit's limit is.
  burst: option.custom<number | undefined>((v) => v as number, undefined),
} satisfies { readonly [K in keyof Required<SluiceStoreOptions>]: unknown };

/** express-rate-limit's default `windowMs` (one minute), used before `init`. */
const DEFAULT_WINDOW_MS = 60_000;

/** Slots of the table of windows' end Dates (a power of 2). */
const DATE_SLOTS = 1024;

/** Most keys remembered as denied-but-not-counted (for `skipFailedRequests` with `algorithm`). */
const MAX_UNCOUNTED = 10_000;

/**
 * An express-rate-limit `Store` over sluice. See the module's comment; every method is the
 * `Store` contract's.
 */
export class SluiceStore {
  /** express-rate-limit's `store.prefix`: the sluice policy name. */
  readonly prefix: string;
  /** True for counts kept in this process's memory (express-rate-limit's double-count check). */
  readonly localKeys: boolean;
  private readonly options: SluiceStoreOptions;
  private store: Store;
  /** Whether `store` is this store's own memory store (which `resetAll` may replace). */
  private readonly ownMemory: boolean;
  private limiter: Limiter | undefined;
  /** The memory store when it counts (no `algorithm`): increments take its counting path. */
  private counter: MemoryStore | undefined;
  /** Window ends' Dates, by end (see {@link dateOf}). */
  private readonly dates = new Array<Date | undefined>(DATE_SLOTS).fill(undefined);
  /** What the counting path answers (reused). */
  private readonly count: WindowCount = { allowed: true, count: 0, resetAfterMs: 0, nowMs: 0 };
  private windowMs = 0;
  /** With `algorithm` and `skipFailedRequests`: keys' denied hits, which a decrement must not refund. */
  private uncounted: Map<string, number> | undefined;
  /**
   * express-rate-limit's `limit` when it is a number (counting mode): what telemetry compares a
   * count with to tell the verdict express-rate-limit makes. Undefined for a function.
   */
  private verdictLimit: number | undefined;
  /** The last store failure (what `increment` rejects with, as express-rate-limit's stores do). */
  private lastError: unknown;
  private readonly onError = (err: unknown): void => {
    this.lastError = err;
  };

  constructor(options: SluiceStoreOptions = {}) {
    const o = resolveOptions("Invalid SluiceStore options", OPTIONS, options, {
      across: (r, fail) => {
        storeAcross(options, fail);
        if (options.burst !== undefined && r.algorithm !== "gcra" && r.algorithm !== "token-bucket")
          fail("burst", "applies only to algorithm gcra or token-bucket");
      },
    });
    const { store, own } = storeFrom(o);
    this.prefix = o.prefix;
    this.options = o;
    this.store = store;
    this.ownMemory = own;
    this.localKeys = this.store.kind === "memory";
    this.counter = this.counterOf(store);
  }

  /** Called by express-rate-limit with its options: builds the policy from `windowMs` (and `limit`). */
  init(options: SluiceStoreInitOptions): void {
    const subject = "Invalid express-rate-limit options for SluiceStore";
    const windowMs = options.windowMs;
    if (typeof windowMs !== "number" || !Number.isFinite(windowMs) || windowMs <= 0)
      throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
        { path: "windowMs", message: `must be a positive number of ms (got ${String(windowMs)})` },
      ]);
    this.windowMs = Math.max(1, Math.round(windowMs));
    const algorithm = this.options.algorithm;
    if (algorithm === undefined) {
      this.limiter = createLimiter({
        store: this.store,
        policy: counterPolicy(this.prefix, this.windowMs),
        onError: this.onError,
      });
      this.verdictLimit = typeof options.limit === "number" ? options.limit : undefined;
      return;
    }
    const limit = options.limit;
    if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit <= 0)
      throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
        {
          path: "limit",
          message: `must be a positive integer when SluiceStore decides with algorithm "${algorithm}" (got ${typeof limit === "function" ? "a function" : String(limit)})`,
        },
      ]);
    const burst = this.options.burst;
    this.limiter = createLimiter({
      store: this.store,
      policy: {
        name: this.prefix,
        algorithm,
        rules: [{ limit, period: this.windowMs, ...(burst !== undefined ? { burst } : {}) }],
      },
      onError: this.onError,
    });
    if (options.skipFailedRequests === true) this.uncounted = new Map();
  }

  /** Fetches a client's hits and reset time (undefined when it has no window open). */
  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    const limiter = this.ready();
    const sd = await this.store.peek({ policy: limiter.policy, key: sluiceKey(key), cost: 0 });
    const rule = sd.rules[0]!;
    if (this.options.algorithm !== undefined) {
      if (rule.remaining >= rule.burst && rule.resetAfterMs === 0) return undefined;
      return this.info(Math.max(0, rule.limit - rule.remaining), rule.resetAfterMs);
    }
    if (rule.resetAfterMs === 0) return undefined;
    return {
      totalHits: rule.limit - rule.remaining,
      resetTime: new Date(Date.now() + rule.resetAfterMs),
    };
  }

  /** Counts a hit (or, with `algorithm`, decides it) and answers the client's count. */
  async increment(key: string): Promise<ClientRateLimitInfo> {
    // "" is a key of its own, as in express-rate-limit's stores (`keyGenerator: (req) =>
    // req.get("x-api-key") || ""`).
    key = sluiceKey(key);
    const counter = this.counter;
    if (counter !== undefined && typeof key === "string") {
      // In memory: the store's counting path (the same count, no decision to build).
      const c = this.count;
      const limiter = this.limiter ?? this.ready();
      counter.countSync(limiter.policy, key, 1, c);
      if (this.verdictLimit !== undefined) countVerdict(limiter, c.count <= this.verdictLimit);
      return { totalHits: c.count, resetTime: this.dateOf(c.nowMs + c.resetAfterMs) };
    }
    const limiter = this.ready();
    // In memory, decided at once (no promise to wait for).
    const d = isSyncStore(this.store)
      ? (limiter as SyncLimiter).limitSync(key)
      : await limiter.limit(key);
    // Rejected as express-rate-limit's stores reject: its `passOnStoreError` then decides.
    if (d.reason === "store-error")
      throw this.lastError ?? new Error("SluiceStore: the store failed");
    if (this.options.algorithm === undefined) {
      const hits = countOf(d);
      if (this.verdictLimit !== undefined) countVerdict(limiter, hits <= this.verdictLimit);
      return this.info(hits, d.resetAfterMs);
    }
    return this.decided(key, d);
  }

  /** Takes one hit back (never below 0). */
  async decrement(key: string): Promise<void> {
    key = sluiceKey(key);
    const limiter = this.ready();
    const uncounted = this.uncounted?.get(key);
    if (uncounted !== undefined) {
      // A denied hit was never charged: taking it back refunds nothing.
      if (uncounted <= 1) this.uncounted!.delete(key);
      else this.uncounted!.set(key, uncounted - 1);
      return;
    }
    await limiter.refund(key, 1);
  }

  /** Forgets a client's count. */
  async resetKey(key: string): Promise<void> {
    key = sluiceKey(key);
    this.uncounted?.delete(key);
    await this.ready().reset(key);
  }

  /**
   * Forgets every client's count. Only for counts in this process's memory (Redis has no
   * cheap "every key of a policy"; rate-limit-redis has no `resetAll` either): otherwise throws.
   */
  resetAll(): Promise<void> {
    if (!this.ownMemory)
      return Promise.reject(
        new ValidationError("SLUICE_ERR_OPTIONS", "SluiceStore.resetAll", [
          { path: "", message: "resets only a SluiceStore's own memory store" },
        ]),
      );
    this.store = new MemoryStore();
    this.counter = this.counterOf(this.store);
    this.uncounted?.clear();
    if (this.limiter)
      this.limiter = createLimiter({
        store: this.store,
        policy: this.limiter.policy,
        onError: this.onError,
      });
    return Promise.resolve();
  }

  /** Nothing to stop: sluice's stores keep no timer per key, and the Redis client is yours. */
  shutdown(): void {
    this.uncounted?.clear();
  }

  private ready(): Limiter {
    if (this.limiter !== undefined) return this.limiter;
    // Used before init (on its own, as express-rate-limit's MemoryStore may be): counting in
    // windows of express-rate-limit's default windowMs. A sluice algorithm needs init's limit.
    if (this.options.algorithm === undefined) {
      this.init({ windowMs: DEFAULT_WINDOW_MS });
      return this.limiter!;
    }
    throw new ValidationError("SLUICE_ERR_OPTIONS", "SluiceStore is not initialised", [
      {
        path: "",
        message: "pass it to express-rate-limit's rateLimit({ store }), which calls init(options)",
      },
    ]);
  }

  /**
   * The `Date` of epoch ms `ms`, shared with the calls whose windows end then, as
   * express-rate-limit's MemoryStore shares one per client (the middleware copies it before
   * changing it): a key counted many times in its window gets the same one back, not a new one
   * per hit. One per slot of a small table by `ms`.
   */
  private dateOf(ms: number): Date {
    const slot = ms & (DATE_SLOTS - 1);
    const d = this.dates[slot];
    if (d !== undefined && d.getTime() === ms) return d;
    const fresh = new Date(ms);
    this.dates[slot] = fresh;
    return fresh;
  }

  /** `store` when increments may take its counting path: a memory store, counting. */
  private counterOf(store: Store): MemoryStore | undefined {
    return store instanceof MemoryStore && this.options.algorithm === undefined ? store : undefined;
  }

  private info(totalHits: number, ms: number): ClientRateLimitInfo {
    return { totalHits, resetTime: new Date(Date.now() + ms) };
  }

  /** A sluice decision told as a count: within the limit when allowed, one over when denied. */
  private decided(key: string, d: Decision): ClientRateLimitInfo {
    // (With a burst above the limit, remaining can pass the limit: the count stays ≥ 1, which
    // express-rate-limit requires of an increment.)
    if (d.allowed) return this.info(Math.max(1, d.limit - d.remaining), d.resetAfterMs);
    const uncounted = this.uncounted;
    if (uncounted !== undefined) {
      if (uncounted.size >= MAX_UNCOUNTED && !uncounted.has(key)) {
        const oldest = uncounted.keys().next();
        if (!oldest.done) uncounted.delete(oldest.value);
      }
      uncounted.set(key, (uncounted.get(key) ?? 0) + 1);
    }
    return this.info(d.limit + 1, d.retryAfterMs);
  }
}
