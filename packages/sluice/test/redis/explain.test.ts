/**
 * `limiter.explain` over the Redis store (a redis-server started for the file, time injected):
 * what would answer the next decision — Redis, the deny cache, an allotment this process holds —
 * asked without charging or changing anything (no script call for the answer, the deny cache and
 * the allotment left as they were).
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PolicyInput, type RedisStoreOptions, createLimiter } from "../../src/index.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { Owned } from "./helpers.js";

let server: RedisServer;
let client: Redis;
let admin: Redis;
const owned = new Owned();
const run = Date.now().toString(36);
let seq = 0;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis(server.url);
  admin = new Redis(server.url);
  await Promise.all([client.ping(), admin.ping()]);
});

afterAll(async () => {
  await owned.close();
  client?.disconnect();
  admin?.disconnect();
  await server?.stop();
});

/** A limiter on its own store over the shared client, time injected (`t`). */
function limiterAt(policy: Omit<PolicyInput, "name">, options: Partial<RedisStoreOptions> = {}) {
  const time = { t: 1_700_000_000_000 };
  const store = owned.store({ client, heartbeatMs: 0, now: () => time.t, ...options });
  const limiter = createLimiter({
    store,
    policy: { onStoreError: "deny", ...policy, name: `x${run}-${++seq}` },
  });
  return { limiter, store, time };
}

/** EVALSHA + EVAL calls the server has run so far. */
async function scriptCalls(): Promise<number> {
  const info = await admin.info("commandstats");
  let n = 0;
  for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) n += Number(m[1]);
  return n;
}

describe("explain over Redis", () => {
  it("the same explanation as the memory store's: the denying rule, freeing when limit() says", async () => {
    const { limiter } = limiterAt({
      algorithm: "fixed-window",
      rules: [
        { limit: 10, period: "1h" },
        { limit: 2, period: "1m" },
      ],
    });
    await limiter.limit("u");
    await limiter.limit("u");
    const ex = await limiter.explain("u");
    expect(ex).toMatchObject({
      allowedNow: false,
      denyingRule: 1,
      denyingNow: true,
      answeredBy: "store",
      rules: [
        { remaining: 8, denies: false },
        { remaining: 0, denies: true },
      ],
    });
    const d = await limiter.limit("u");
    expect(d.allowed).toBe(false);
    expect(ex.freesInMs).toBe(d.retryAfterMs);
  });

  it("reports the deny cache while it would answer (same cost, until the retry time), changing nothing", async () => {
    const { limiter, time } = limiterAt({ algorithm: "gcra", rules: [{ limit: 2, period: "1s" }] });
    await limiter.limit("k");
    await limiter.limit("k");
    // Not yet: Redis has not denied this key.
    expect((await limiter.explain("k")).answeredBy).toBe("store");
    const denied = await limiter.limit("k"); // Redis denies: the deny cache remembers it
    expect(denied).toMatchObject({ allowed: false, retryAfterMs: 500 });
    time.t += 200;
    const ex = await limiter.explain("k");
    expect(ex).toMatchObject({
      answeredBy: "deny-cache",
      reason: "deny-cache",
      allowedNow: false,
      freesInMs: 300,
      denyingRule: 0,
    });
    // Only for the same cost.
    expect((await limiter.explain("k", { cost: 2 })).answeredBy).toBe("store");
    // The cache still answers the next decision, without a script call.
    const before = await scriptCalls();
    expect(await limiter.limit("k")).toMatchObject({ reason: "deny-cache", retryAfterMs: 300 });
    expect(await scriptCalls()).toBe(before);
    time.t += 300;
    expect(await limiter.explain("k")).toMatchObject({ answeredBy: "store", allowedNow: true });
  });

  it("a store without a deny cache answers itself", async () => {
    const { limiter } = limiterAt(
      { algorithm: "fixed-window", rules: [{ limit: 1, period: "1m" }] },
      { denyCache: false },
    );
    await limiter.limit("k");
    await limiter.limit("k");
    expect(await limiter.explain("k")).toMatchObject({ answeredBy: "store", allowedNow: false });
  });

  it("reports an allotment this process holds, and spends nothing of it", async () => {
    // A fresh Redis grants no allotment for one lifetime (lua/sluice.lua): end that wait, as a
    // Redis that has served allotments before would have.
    await admin.set("sl:lease-epoch", "0");
    const { limiter, store } = limiterAt({
      algorithm: "fixed-window",
      rules: [{ limit: 1_000_000, period: "24h" }],
      lease: { hotAfter: 1 },
    });
    // Cold: with hotAfter 1, the next decision goes to Redis for an allotment.
    expect((await limiter.explain("hot")).answeredBy).toBe("store");
    for (let i = 0; i < 20 && limiter.tryLimitSync("hot") === undefined; i++)
      await Promise.all(Array.from({ length: 50 }, () => limiter.limit("hot")));
    expect(store.allotmentCounters!.taken).toBeGreaterThan(0);
    const local = store.allotmentCounters!.local;
    const calls = await scriptCalls();
    const ex = await limiter.explain("hot");
    expect(ex).toMatchObject({ answeredBy: "allotment", allowedNow: true, freesInMs: 0 });
    // Explaining spent nothing of the allotment and decided nothing in memory.
    expect(store.allotmentCounters!.local).toBe(local);
    // One script call: the peek (explainLocal asks nothing of Redis).
    expect(await scriptCalls()).toBe(calls + 1);
    expect(limiter.tryLimitSync("hot")).toMatchObject({ allowed: true });
    // Another key of the same policy holds nothing.
    expect((await limiter.explain("other")).answeredBy).toBe("store");
  });

  it("a key that is not hot yet is the deny cache's, as any key", async () => {
    const { limiter } = limiterAt({
      algorithm: "fixed-window",
      rules: [{ limit: 1, period: "1m" }],
      lease: { hotAfter: 1_000 },
    });
    await limiter.limit("c");
    await limiter.limit("c"); // denied by Redis, remembered by the deny cache
    expect(await limiter.explain("c")).toMatchObject({
      answeredBy: "deny-cache",
      allowedNow: false,
    });
  });
});
