/**
 * The drop-in faces over every Redis client sluice supports (test/support/redis-clients.ts),
 * each client passed as its owner made it, judged against the real peer (which runs on an
 * ioredis 5 client of the same redis-server: the reference). For each client:
 *
 * - rate-limiter-flexible's `RateLimiterRedis` (and `useRedisPackage` for node-redis): a
 *   scripted sequence, then random sequences across the whole range of counts and points (up to
 *   2^44 points, counts up to 2^48) — every field the same (times within a tolerance);
 * - express-rate-limit's store: `SluiceStore({ client })` against rate-limit-redis;
 * - @nestjs/throttler: `SluiceThrottlerStorage({ client })` against its own storage;
 * - @upstash/ratelimit: the fixed window over the client against the real library over HTTP.
 */
import { ThrottlerStorageService } from "@nestjs/throttler";
import { Ratelimit as Peer } from "@upstash/ratelimit";
import { Redis as UpstashRedis } from "@upstash/redis";
import fc from "fast-check";
import { Redis as Redis5 } from "ioredis5";
import * as rlf from "rate-limiter-flexible";
import { RedisStore as RateLimitRedis } from "rate-limit-redis";
import { SluiceStore } from "sluice/compat/express-rate-limit";
import { SluiceThrottlerStorage } from "sluice/compat/nestjs-throttler";
import * as face from "sluice/compat/rate-limiter-flexible";
import { Ratelimit } from "sluice/compat/upstash";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENTS } from "../../../../test/support/redis-clients.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { clientForSuite } from "../../../../test/support/redis-suite.js";
import { type UpstashRest, startUpstashRest } from "../../../../test/support/upstash-rest.js";

const run = Date.now().toString(36);
/** msBeforeNext may differ by this much: the two are asked one after the other, in real time. */
const TOLERANCE = 100;
let server: RedisServer;
let rest: UpstashRest;
let reference: Redis5;
let upstash: UpstashRedis;
let seq = 0;

beforeAll(async () => {
  server = await startRedis();
  rest = await startUpstashRest({ redisUrl: server.url });
  reference = new Redis5(server.url);
  await reference.ping();
  upstash = new UpstashRedis({
    url: rest.url,
    token: rest.token,
    retry: false,
    enableTelemetry: false,
  });
});

afterAll(async () => {
  reference?.disconnect();
  await rest?.stop();
  await server?.stop();
});

type Answer = Record<string, unknown>;

/** What a call came to: resolved or rejected, its fields, and its `msBeforeNext` apart. */
interface Settled {
  readonly how: "resolved" | "rejected";
  readonly fields: unknown;
  readonly ms: number | undefined;
}

async function settled(p: () => Promise<unknown>): Promise<Settled> {
  const split = (how: Settled["how"], v: unknown): Settled => {
    if (v === null || typeof v !== "object") return { how, fields: v, ms: undefined };
    if (v instanceof Error) return { how, fields: "error", ms: undefined };
    const { msBeforeNext, ...fields } =
      (v as { toJSON?: () => Answer }).toJSON?.() ?? (v as Answer);
    return { how, fields, ms: typeof msBeforeNext === "number" ? msBeforeNext : undefined };
  };
  try {
    return split("resolved", await p());
  } catch (err) {
    return split("rejected", err);
  }
}

/** `got` as `want` when their times are within TOLERANCE (for `toEqual`'s diff otherwise). */
function same(got: Settled, want: Settled): Settled {
  const near =
    got.ms === want.ms ||
    (got.ms !== undefined && want.ms !== undefined && Math.abs(got.ms - want.ms) <= TOLERANCE);
  return near ? { ...got, ms: want.ms } : got;
}

describe.each(CLIENTS)("$name", (kind) => {
  const ours = clientForSuite(kind, () => kind.standalone(server.url));

  it("RateLimiterRedis: points 2, three consumes: ok(1), ok(2), rejected(3), as the peer", async () => {
    const keyPrefix = `rc${run}-${++seq}`;
    const peer = new rlf.RateLimiterRedis({
      storeClient: reference,
      keyPrefix,
      points: 2,
      duration: 60,
    });
    const mine = new face.RateLimiterRedis({
      storeClient: ours.client,
      keyPrefix: `${keyPrefix}f`,
      points: 2,
      duration: 60,
      ...(kind.family === "node-redis" ? { useRedisPackage: true } : {}),
    });
    const got: Settled[] = [];
    const want: Settled[] = [];
    for (let i = 0; i < 3; i++) {
      const w = await settled(() => peer.consume("k"));
      want.push(w);
      got.push(same(await settled(() => mine.consume("k")), w));
    }
    expect(got).toEqual(want);
    expect(got.map((g) => g.how)).toEqual(["resolved", "resolved", "rejected"]);
    expect((got[2]!.fields as Answer).consumedPoints).toBe(3);
  });

  it("RateLimiterRedis: random sequences over the whole range of points and counts (to 2^48)", async () => {
    let compared = 0;
    await fc.assert(
      fc.asyncProperty(
        // Up to 2^44 points: twelve calls of up to 1.2 × points stay below 2^48, the faces'
        // counting range (docs/migrating.md).
        fc.integer({ min: 1, max: 2 ** 44 }),
        fc.array(
          fc.record({
            // (Not reward: a reward past zero differs on purpose, docs/migrating.md.)
            op: fc.constantFrom("consume", "consume", "consume", "penalty", "get"),
            // Points of one call: a few (1–3), or a share of `points` (below 1: a fraction of it;
            // negative: −1.2 to −0.999, that much of it).
            share: fc.oneof(
              fc.integer({ min: 1, max: 3 }),
              fc.double({ min: 0, max: 0.999, noNaN: true }),
              fc.double({ min: 0.999, max: 1.2, noNaN: true }).map((x) => -x),
            ),
          }),
          { minLength: 1, maxLength: 12 },
        ),
        async (points, ops) => {
          const keyPrefix = `rp${run}-${++seq}`;
          const peer = new rlf.RateLimiterRedis({
            storeClient: reference,
            keyPrefix,
            points,
            duration: 60,
          });
          const mine = new face.RateLimiterRedis({
            storeClient: ours.client,
            keyPrefix: `${keyPrefix}f`,
            points,
            duration: 60,
          });
          for (const o of ops) {
            const n = Math.max(1, o.share >= 1 ? o.share : Math.floor(Math.abs(o.share) * points));
            const call = (l: typeof peer | typeof mine) =>
              o.op === "get" ? l.get("k") : l[o.op]("k", n);
            const want = await settled(() => call(peer));
            const got = same(await settled(() => call(mine)), want);
            expect(got, JSON.stringify({ points, o, n })).toEqual(want);
            compared++;
          }
        },
      ),
      { numRuns: 25 },
    );
    expect(compared).toBeGreaterThan(25);
  });

  it("SluiceStore({ client }): five increments count 1 to 5, as rate-limit-redis", async () => {
    const peer = new RateLimitRedis({
      sendCommand: (...args: string[]) => reference.call(args[0]!, ...args.slice(1)) as never,
      prefix: `rl${run}-${++seq}:`,
    });
    const mine = new SluiceStore({ client: ours.client, prefix: `s${run}-${seq}` });
    const options = { windowMs: 60_000, limit: 5 } as never;
    await peer.init(options);
    mine.init(options);
    const want: number[] = [];
    const got: number[] = [];
    for (let i = 0; i < 5; i++) {
      want.push((await peer.increment("u")).totalHits);
      got.push((await mine.increment("u")).totalHits);
    }
    await peer.decrement("u");
    await mine.decrement("u");
    want.push((await peer.increment("u")).totalHits);
    got.push((await mine.increment("u")).totalHits);
    expect(got).toEqual(want);
    expect(got).toEqual([1, 2, 3, 4, 5, 5]);
  });

  it("SluiceThrottlerStorage({ client }): the same hits and blocks as @nestjs/throttler's storage", async () => {
    const peer = new ThrottlerStorageService();
    const mine = new SluiceThrottlerStorage({ client: ours.client, prefix: `n${run}-${++seq}` });
    try {
      const view = (r: { totalHits: number; isBlocked: boolean }) => [r.totalHits, r.isBlocked];
      const want = [];
      const got = [];
      for (let i = 0; i < 5; i++) {
        want.push(view(await peer.increment("k", 60_000, 3, 60_000, "default")));
        got.push(view(await mine.increment("k", 60_000, 3, 60_000, "default")));
      }
      expect(got).toEqual(want);
      expect(got.filter(([, blocked]) => !blocked)).toHaveLength(3);
    } finally {
      peer.onApplicationShutdown();
    }
  });

  it("Ratelimit over the client: fixedWindow(2, '60 s') answers true, true, false, as the peer", async () => {
    const prefix = `up${run}-${++seq}`;
    const peer = new Peer({
      redis: upstash,
      limiter: Peer.fixedWindow(2, "60 s"),
      prefix,
      ephemeralCache: false,
    });
    const mine = new Ratelimit({
      redis: ours.client,
      limiter: Ratelimit.fixedWindow(2, "60 s"),
      prefix: `${prefix}f`,
      ephemeralCache: false,
    });
    const want = [];
    const got = [];
    for (let i = 0; i < 3; i++) {
      const a = await peer.limit("id");
      const b = await mine.limit("id");
      want.push([a.success, a.limit, a.remaining]);
      got.push([b.success, b.limit, b.remaining]);
    }
    expect(got).toEqual(want);
    expect(got.map(([success]) => success)).toEqual([true, true, false]);
  });
});
