// Every Redis client sluice supports, made as its owner makes it, type-checks as the `client`
// of `redisStore` and of each drop-in face (tsc -p packages/sluice/test/http/consumer).
import { Cluster, Redis } from "ioredis";
import { Redis as Redis5 } from "ioredis5";
import { Redis as Valkey } from "iovalkey";
import { createClient, createCluster, createSentinel } from "redis";
import { createClient as createClient4, createCluster as createCluster4 } from "redis4";
import {
  createClient as createClient5,
  createCluster as createCluster5,
  createSentinel as createSentinel5,
} from "redis5";
import { type RedisClient, redisStore } from "sluice";
import { SluiceStore } from "sluice/compat/express-rate-limit";
import { SluiceThrottlerStorage } from "sluice/compat/nestjs-throttler";
import { RateLimiterRedis } from "sluice/compat/rate-limiter-flexible";
import { Ratelimit } from "sluice/compat/upstash";

const clients: RedisClient[] = [
  new Redis({ lazyConnect: true }),
  new Cluster([], { lazyConnect: true }),
  new Redis({ sentinels: [{ host: "127.0.0.1", port: 26379 }], name: "m", lazyConnect: true }),
  new Redis5({ lazyConnect: true }),
  new Valkey({ lazyConnect: true }),
  createClient(),
  createCluster({ rootNodes: [] }),
  createSentinel({ name: "m", sentinelRootNodes: [] }),
  createClient5(),
  createCluster5({ rootNodes: [] }),
  createSentinel5({ name: "m", sentinelRootNodes: [] }),
  createClient4(),
  createCluster4({ rootNodes: [] }),
];
for (const client of clients) {
  redisStore({ client });
  new SluiceStore({ client });
  new SluiceThrottlerStorage({ client });
  new RateLimiterRedis({ storeClient: client, points: 5, duration: 60, useRedisPackage: true });
  new Ratelimit({ redis: client, limiter: Ratelimit.fixedWindow(5, "60 s") });
}
