/**
 * Calendar rules on the Redis store in production mode: no injected clock, so the script decides
 * on the server's clock and the store sends the window's edges at the time it estimates the
 * server is at (the clock offsets its replies teach it). The conformance table covers the
 * answers under injected time (test/conformance/scenarios.ts, "calendar").
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createLimiter, definePolicy, redisStore } from "../../src/index.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";

let server: RedisServer;
let client: Redis;
let admin: Redis;
const run = Date.now().toString(36);

beforeAll(async () => {
  server = await startRedis();
  client = new Redis(server.url);
  admin = new Redis(server.url);
  await Promise.all([client.ping(), admin.ping()]);
});

afterAll(async () => {
  client.disconnect();
  admin.disconnect();
  await server.stop();
});

it("on the server's clock: the key holds its count and expires at the local midnight that ends it", async () => {
  const store = redisStore({ client, heartbeatMs: 0 });
  const input = {
    name: `cal-${run}`,
    algorithm: "fixed-window" as const,
    rules: [{ limit: 2, calendar: "day" as const, timeZone: "Asia/Kolkata" }],
  };
  const windows = definePolicy(input).rules[0]!.calendar!;
  const limiter = createLimiter({ store, policy: input });
  const decisions = [];
  for (let i = 0; i < 3; i++) decisions.push(await limiter.limit("user-1"));
  const now = Date.now();
  const start = windows.startAt(now);
  const end = windows.endAt(now);
  expect(decisions.map((d) => d.allowed)).toEqual([true, true, false]);
  // The wait is to the local midnight (IST, UTC+5:30), give or take the calls' time.
  expect(Math.abs(decisions[2]!.retryAfterMs - (end - now))).toBeLessThan(5_000);
  expect(end - start).toBe(86_400_000);
  expect((end + 5.5 * 3_600_000) % 86_400_000).toBe(0);
  const keys = await admin.keys(`*cal-${run}*`);
  expect(keys).toHaveLength(1);
  expect(await admin.get(keys[0]!)).toBe("2");
  expect(await admin.pexpiretime(keys[0]!)).toBe(end);
  await store.close();
});
