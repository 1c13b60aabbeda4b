// The drop-in faces (sluice/compat/*) against the libraries they replace: the same calls, the
// same limits, in the same run. Each export runs in its own child process (lib/child.mjs).
import { Redis } from "ioredis";
import { drive, makeKeys } from "../lib/util.mjs";

/** Every pair: what the peer runs, what the face runs, and whether it needs Redis. */
export const PAIRS = {
  "rlf-memory": { redis: false, peer: "RateLimiterMemory", face: "compat RateLimiterMemory" },
  "rlf-redis": { redis: true, peer: "RateLimiterRedis", face: "compat RateLimiterRedis" },
  "rlf-union": {
    redis: true,
    peer: "RateLimiterUnion of 2 RateLimiterRedis",
    face: "compat RateLimiterUnion (one decision)",
  },
  "erl-memory": { redis: false, peer: "express-rate-limit MemoryStore", face: "SluiceStore()" },
  "erl-redis": { redis: true, peer: "rate-limit-redis", face: "SluiceStore({ client })" },
  "nest-memory": {
    redis: false,
    peer: "@nestjs/throttler ThrottlerStorageService",
    face: "SluiceThrottlerStorage()",
  },
  upstash: {
    redis: true,
    peer: "@upstash/ratelimit over REST (test fixture)",
    face: "compat Ratelimit over ioredis",
  },
};

/** Never reached in a run: every call is allowed on both sides. */
const POINTS = 1000;
const DURATION_S = 60;

/** `op(key)` of one side of a pair; `close()` when done. */
async function side(pair, which, port) {
  const client = PAIRS[pair].redis
    ? new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 1 })
    : undefined;
  if (client) await client.flushall();
  const close = async (more) => {
    await more?.();
    client?.disconnect();
  };
  const lib = (peer, face) => import(which === "peer" ? peer : face);
  if (pair === "rlf-memory" || pair === "rlf-redis") {
    const m = await lib("rate-limiter-flexible", "sluice/compat/rate-limiter-flexible");
    const opts = { points: POINTS, duration: DURATION_S, keyPrefix: "b" };
    const l =
      pair === "rlf-memory"
        ? new m.RateLimiterMemory(opts)
        : new m.RateLimiterRedis({ ...opts, storeClient: client });
    return { op: (k) => l.consume(k), close };
  }
  if (pair === "rlf-union") {
    const m = await lib("rate-limiter-flexible", "sluice/compat/rate-limiter-flexible");
    const u = new m.RateLimiterUnion(
      new m.RateLimiterRedis({ storeClient: client, points: POINTS, duration: 1, keyPrefix: "u1" }),
      new m.RateLimiterRedis({
        storeClient: client,
        points: 100_000,
        duration: 3600,
        keyPrefix: "u2",
      }),
    );
    return { op: (k) => u.consume(k), close };
  }
  if (pair === "erl-memory" || pair === "erl-redis") {
    let store;
    if (which === "peer") {
      if (pair === "erl-memory") {
        const { MemoryStore } = await import("express-rate-limit");
        store = new MemoryStore();
      } else {
        const { RedisStore } = await import("rate-limit-redis");
        store = new RedisStore({ sendCommand: (c, ...a) => client.call(c, ...a), prefix: "b:" });
      }
    } else {
      const { SluiceStore } = await import("sluice/compat/express-rate-limit");
      store = new SluiceStore(pair === "erl-memory" ? { prefix: "b" } : { client, prefix: "b" });
    }
    await store.init({ windowMs: DURATION_S * 1000, limit: POINTS });
    return { op: (k) => store.increment(k), close: () => close(() => store.shutdown?.()) };
  }
  if (pair === "nest-memory") {
    let s;
    if (which === "peer") {
      await import("reflect-metadata");
      const { ThrottlerStorageService } = await import("@nestjs/throttler");
      s = new ThrottlerStorageService();
    } else {
      const { SluiceThrottlerStorage } = await import("sluice/compat/nestjs-throttler");
      s = new SluiceThrottlerStorage();
    }
    return {
      op: (k) => s.increment(k, DURATION_S * 1000, POINTS, DURATION_S * 1000, "default"),
      close: () => close(() => s.onApplicationShutdown?.()),
    };
  }
  if (pair === "upstash") {
    if (which === "peer") {
      // The real client speaks HTTP: the REST fixture in front of the bench's redis-server.
      const { startUpstashRest } = await import("../../test/support/upstash-rest.ts");
      const { Redis: UpstashRedis } = await import("@upstash/redis");
      const { Ratelimit } = await import("@upstash/ratelimit");
      const rest = await startUpstashRest({ redisUrl: `redis://127.0.0.1:${port}` });
      const r = new Ratelimit({
        redis: new UpstashRedis({ url: rest.url, token: rest.token, enableTelemetry: false }),
        limiter: Ratelimit.slidingWindow(POINTS, `${DURATION_S} s`),
      });
      return { op: (k) => r.limit(k), close: () => close(() => rest.stop()) };
    }
    const { Ratelimit } = await import("sluice/compat/upstash");
    const r = new Ratelimit({
      redis: client,
      limiter: Ratelimit.slidingWindow(POINTS, `${DURATION_S} s`),
    });
    return { op: (k) => r.limit(k), close };
  }
  throw new Error(`unknown pair ${pair}`);
}

/** A denial (every call is meant to pass): rejections of RateLimiterRes, success false, …. */
function isDenied(r) {
  if (r === undefined || r === null) return false;
  if (r.success === false || r.isBlocked === true) return true;
  return typeof r.totalHits === "number" && r.totalHits > POINTS;
}

/**
 * Calls/s and latency of one side of a pair (`which`: "peer" or "face"), `inflight` loops over
 * `keyCount` identifiers.
 */
export async function throughput({ pair, which, port, inflight, durationMs, warmupMs, keyCount }) {
  const keys = makeKeys(keyCount);
  const n = keys.length;
  const s = await side(pair, which, port);
  const r = await drive((i) => s.op(keys[(i * 7919) % n]), {
    inflight,
    durationMs,
    warmupMs,
    latency: true,
    isDenied,
  });
  await s.close();
  return r;
}
