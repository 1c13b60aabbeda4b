/**
 * Redis for one suite — the test file, or the `describe`, that calls these — started before its
 * tests and stopped after them: a redis-server with a connected ioredis client
 * ({@link redisForSuite}), a Cluster with a connected ioredis `Cluster` client
 * ({@link clusterForSuite}), a redis-server beside a Cluster ({@link redisAndClusterForSuite}),
 * or a client of one family (test/support/redis-clients.ts) ({@link clientForSuite}).
 * Call them before the suite's own `afterAll` hooks that still use what they start: those run
 * first.
 */
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import type { RedisClient } from "../../packages/sluice/src/stores/redis-client.js";
import type { ClientKind } from "./redis-clients.js";
import { type RedisCluster, startCluster } from "./redis-cluster.js";
import { type RedisServer, startRedis } from "./redis.js";

/**
 * What `start` makes, made in the calling suite's `beforeAll` and read through the object this
 * returns (inside tests and hooks). `start` registers with `onStop` how to undo each thing as
 * soon as it has made it; the suite's `afterAll` undoes them, the last made first — also what
 * a `start` that failed part-way had made.
 */
function forSuite<T extends object>(
  start: (onStop: (stop: () => unknown) => void) => Promise<T>,
): T {
  let value: T | undefined;
  const stops: Array<() => unknown> = [];
  beforeAll(async () => {
    value = await start((stop) => stops.unshift(stop));
  }, 120_000);
  afterAll(async () => {
    for (const stop of stops.splice(0)) await stop();
  });
  return new Proxy({} as T, {
    get(_target, key) {
      if (value === undefined) throw new Error("read the suite's Redis inside tests and hooks");
      return value[key as keyof T];
    },
  });
}

/** The suite's redis-server and its client. */
export interface SuiteRedis {
  readonly server: RedisServer;
  readonly client: Redis;
}

/** Starts a redis-server and an ioredis client of it for the calling suite. */
export function redisForSuite(): SuiteRedis {
  return forSuite(async (onStop) => {
    const server = await startRedis();
    onStop(() => server.stop());
    const client = new Redis(server.url);
    onStop(() => client.disconnect());
    await client.ping();
    return { server, client };
  });
}

/** The suite's Cluster and its client. */
export interface SuiteCluster {
  readonly cluster: RedisCluster;
  readonly client: Cluster;
}

/**
 * Starts a 6-node Cluster (test/support/redis-cluster.ts) and an ioredis `Cluster` client of
 * it (its `error` events ignored) for the calling suite.
 */
export function clusterForSuite(): SuiteCluster {
  return forSuite(async (onStop) => {
    const cluster = await startCluster();
    onStop(() => cluster.stop());
    const client = new Cluster([...cluster.startupNodes]);
    onStop(() => client.disconnect());
    // What fails reaches the commands that failed (a test that kills a node expects some).
    client.on("error", () => {});
    await client.ping();
    return { cluster, client };
  });
}

/** The suite's redis-server and Cluster. */
export interface SuiteServers {
  readonly server: RedisServer;
  readonly cluster: RedisCluster;
}

/** Starts a redis-server and a 6-node Cluster (test/support/redis-cluster.ts) for the calling suite. */
export function redisAndClusterForSuite(): SuiteServers {
  return forSuite(async (onStop) => {
    const [server, cluster] = await Promise.all([
      startRedis().then((s) => (onStop(() => s.stop()), s)),
      startCluster().then((c) => (onStop(() => c.stop()), c)),
    ]);
    return { server, cluster };
  });
}

/** The suite's client. */
export interface SuiteClient {
  readonly client: RedisClient;
}

/** A client of `kind`, made by `connect` for the calling suite and closed by `kind` after it. */
export function clientForSuite(kind: ClientKind, connect: () => Promise<RedisClient>): SuiteClient {
  return forSuite(async (onStop) => {
    const client = await connect();
    onStop(() => kind.close(client));
    return { client };
  });
}
