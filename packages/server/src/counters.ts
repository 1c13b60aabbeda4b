/**
 * The counter store: memory by default, Redis (standalone, Sentinel or Cluster) when a Redis
 * URL is configured. Every store is wrapped to time its calls and count its errors.
 */
import { Cluster, Redis, type RedisOptions } from "ioredis";
import {
  type Logger as SluiceLogger,
  type Policy,
  type Store,
  type StoreDecision,
  type StoreRequest,
  isSyncStore,
  memoryStore,
  redisStore,
} from "sluice";
import { withDeadline } from "./deadline.js";
import type { Metrics } from "./metrics.js";

/** The counter store and what the service needs around it. */
export interface Counters {
  /** The (instrumented) store. */
  readonly store: Store;
  /** `memory` or `redis`. */
  readonly kind: string;
  /**
   * Readiness check for `/readyz` (which puts its own deadline on it): the store can decide
   * from Redis (connected; during a Sentinel failover, to the new master) and Redis answers.
   */
  ping(): Promise<void>;
  /** Closes the store and the Redis connection. */
  close(): Promise<void>;
}

/** ioredis client of either shape. */
export type RedisClient = Redis | Cluster;

/**
 * A Redis client from a URL: `redis://…` / `rediss://…` (standalone),
 * `redis-sentinel://[:password@]host:port,host:port/mastername` (Sentinel), or a comma list of
 * `host:port` / `redis://host:port` (Cluster).
 */
export function redisClientFromUrl(url: string): RedisClient {
  const common: RedisOptions = {
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    connectTimeout: 2000,
    lazyConnect: false,
  };
  if (url.startsWith("redis-sentinel://")) {
    const m = /^redis-sentinel:\/\/(?:([^:@/]*):?([^@/]*)@)?([^/]+)\/([^/?#]+)/.exec(url);
    if (!m)
      throw new Error(
        "REDIS_URL: a Sentinel URL is redis-sentinel://host:port,host:port/mastername",
      );
    const sentinels = m[3]!.split(",").map((hp) => {
      const [host, port] = hp.split(":");
      return { host: host || "127.0.0.1", port: Number(port || 26379) };
    });
    const password = m[2] ? decodeURIComponent(m[2]) : undefined;
    return new Redis({
      ...common,
      sentinels,
      name: decodeURIComponent(m[4]!),
      ...(password ? { password } : {}),
    });
  }
  if (url.includes(",")) {
    const nodes = url.split(",").map((n) => {
      const u = new URL(n.includes("://") ? n : `redis://${n}`);
      return { host: u.hostname, port: Number(u.port || 6379) };
    });
    // TRYAGAIN (a slot moving) reaches the store at once, which then sends each operation alone
    // (docs/redis.md, Cluster), instead of ioredis retrying the whole call 100 ms apart.
    return new Cluster(nodes, {
      redisOptions: common,
      enableOfflineQueue: true,
      retryDelayOnTryAgain: 0,
    });
  }
  return new Redis(url, common);
}

/** Opens the counter store for the configuration. */
export function openCounters(options: {
  redisUrl?: string | undefined;
  /** The memory store's `maxKeys` (default: the store's, 1,000,000). */
  memoryMaxKeys?: number | undefined;
  metrics: Metrics;
  /** The clock of the counters (tests); default: the memory store's own, Redis's `TIME`. */
  now?: (() => number) | undefined;
  /** Where the Redis store says that Redis is unavailable, and that it is back. */
  logger?: SluiceLogger | undefined;
}): Counters {
  const now = options.now ? { now: options.now } : {};
  if (!options.redisUrl) {
    const store = memoryStore({
      ...now,
      ...(options.memoryMaxKeys !== undefined ? { maxKeys: options.memoryMaxKeys } : {}),
    });
    return {
      store: instrument(store, options.metrics),
      kind: "memory",
      ping: () => Promise.resolve(),
      close: async () => store.close?.(),
    };
  }
  const client = redisClientFromUrl(options.redisUrl);
  // Connection errors surface through the store as StoreErrors; ioredis also emits them here.
  client.on("error", () => {});
  // Two script calls in flight, not the library's four: a decision service is busy when it
  // matters, and then fewer, larger calls cost less CPU per decision in Node and in Redis
  // (bench, 5 interleaved rounds: +5% decisions/s over gRPC and over POST /v1/limit).
  const store = redisStore({
    client,
    maxInFlight: 2,
    ...now,
    ...(options.logger ? { logger: options.logger } : {}),
  });
  options.metrics.allotments.source = () => store.allotmentCounters;
  return {
    store: instrument(store, options.metrics),
    kind: "redis",
    async ping() {
      await store.ready();
      await client.ping();
    },
    async close() {
      await store.close?.();
      // QUIT waits for Redis to answer; a hung Redis must not hold the shutdown up.
      await withDeadline(client.quit(), 1000, "redis").catch(() => client.disconnect());
    },
  };
}

/**
 * Wraps a store to record each call's latency and errors. A store that decides in-process (the
 * memory store: microseconds, and it cannot fail) is returned as it is, so that its limiters keep
 * their synchronous path; the metrics then cover the Redis store.
 */
export function instrument(inner: Store, metrics: Metrics): Store {
  if (isSyncStore(inner)) return inner;
  // One labelled child per operation, made once (labelling on every call hashes the labels).
  const track = <T>(operation: string) => {
    const latency = metrics.storeLatency.labels(inner.kind, operation);
    const errors = metrics.storeErrors.labels(inner.kind, operation);
    return (call: () => Promise<T>): Promise<T> => {
      const end = latency.startTimer();
      return call().then(
        (v) => {
          end();
          return v;
        },
        (err: unknown) => {
          end();
          errors.inc();
          throw err;
        },
      );
    };
  };
  const decide = track<StoreDecision>("decide");
  const peek = track<StoreDecision>("peek");
  const adjust = track<void>("adjust");
  const release = track<boolean>("release");
  const reset = track<void>("reset");
  const wrapped: Store = {
    kind: inner.kind,
    decide: (req: StoreRequest) => decide(() => inner.decide(req)),
    peek: (req: StoreRequest) => peek(() => inner.peek(req)),
    adjust: (policy: Policy, key: string, delta: number) =>
      adjust(() => inner.adjust(policy, key, delta)),
    release: (policy: Policy, key: string, leaseId: string) =>
      release(() => inner.release(policy, key, leaseId)),
    reset: (policy: Policy, key: string) => reset(() => inner.reset(policy, key)),
    ...(inner.ready ? { ready: () => inner.ready!() } : {}),
    // A decision from an allotment is made in memory, with no store call to time.
    ...(inner.decideLocal
      ? {
          decideLocal: (policy: Policy, key: string, cost: number) =>
            inner.decideLocal!(policy, key, cost),
        }
      : {}),
    ...(inner.liveInstances ? { liveInstances: () => inner.liveInstances?.() } : {}),
    ...(inner.close ? { close: () => inner.close!() } : {}),
  };
  return wrapped;
}
