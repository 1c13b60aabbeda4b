/**
 * Every drop-in face over a Redis Cluster (ioredis `Cluster`, 3 masters + 3 replicas): what the
 * peers leave to their users (express-rate-limit's Redis store) or lack, exact under
 * concurrency across identifiers in different slots.
 */
import * as rlf from "sluice/compat/rate-limiter-flexible";
import { SluiceStore } from "sluice/compat/express-rate-limit";
import { SluiceThrottlerStorage } from "sluice/compat/nestjs-throttler";
import { Ratelimit } from "sluice/compat/upstash";
import { describe, expect, it } from "vitest";
import { clusterForSuite } from "../../../../test/support/redis-suite.js";

const redis = clusterForSuite();
const run = Date.now().toString(36);
/** Identifiers that fall in different slots (and so on different masters). */
const ids = Array.from({ length: 12 }, (_, i) => `user-${run}-${i}`);

/** Fires `n` concurrent calls per identifier; answers how many passed, per identifier. */
async function passed(n: number, call: (id: string) => Promise<boolean>): Promise<number[]> {
  return Promise.all(
    ids.map(async (id) => {
      const rs = await Promise.all(Array.from({ length: n }, () => call(id)));
      return rs.filter(Boolean).length;
    }),
  );
}

describe("the drop-in faces on a Redis Cluster", () => {
  it("rate-limiter-flexible: RateLimiterRedis and an atomic RateLimiterUnion", async () => {
    const l = new rlf.RateLimiterRedis({
      storeClient: redis.client,
      points: 4,
      duration: 60,
      keyPrefix: `c${run}`,
    });
    expect(
      await passed(40, (id) =>
        l.consume(id).then(
          () => true,
          () => false,
        ),
      ),
    ).toEqual(ids.map(() => 4));
    expect((await l.get(ids[0]!))?.consumedPoints).toBe(40);
    const union = new rlf.RateLimiterUnion(
      new rlf.RateLimiterRedis({
        storeClient: redis.client,
        points: 3,
        duration: 60,
        keyPrefix: `u1${run}`,
      }),
      new rlf.RateLimiterRedis({
        storeClient: redis.client,
        points: 5,
        duration: 600,
        keyPrefix: `u2${run}`,
      }),
    );
    expect(
      await passed(30, (id) =>
        union.consume(id).then(
          () => true,
          () => false,
        ),
      ),
    ).toEqual(ids.map(() => 3));
  });

  it("express-rate-limit: SluiceStore counts every hit, per key", async () => {
    const store = new SluiceStore({ client: redis.client, prefix: `e${run}` });
    store.init({ windowMs: 60_000 });
    const counts = await Promise.all(
      ids.map(async (id) => {
        const rs = await Promise.all(Array.from({ length: 25 }, () => store.increment(id)));
        return rs.map((r) => r.totalHits).sort((a, b) => a - b);
      }),
    );
    for (const c of counts) expect(c).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
  });

  it("@nestjs/throttler: SluiceThrottlerStorage lets exactly the limit through", async () => {
    const s = new SluiceThrottlerStorage({ client: redis.client, prefix: `n${run}` });
    expect(
      await passed(
        30,
        async (id) => !(await s.increment(id, 60_000, 5, 60_000, "default")).isBlocked,
      ),
    ).toEqual(ids.map(() => 5));
  });

  it("@upstash/ratelimit: Ratelimit on TCP Redis (Cluster), each algorithm exact", async () => {
    for (const limiter of [
      Ratelimit.fixedWindow(6, "60 s"),
      Ratelimit.slidingWindow(6, "60 s"),
      Ratelimit.tokenBucket(1, "60 s", 6),
    ]) {
      const r = new Ratelimit({
        redis: redis.client,
        limiter,
        prefix: `up${run}`,
        ephemeralCache: false,
      });
      expect(await passed(30, async (id) => (await r.limit(id)).success)).toEqual(ids.map(() => 6));
    }
  });
});
