import { Redis } from "ioredis";
import { afterAll, beforeAll } from "vitest";
import { type RedisStore, redisStore } from "../../src/index.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { runConformance } from "../conformance/run.js";

// One server and client for the file; each scenario gets its own store (and unique policy name).
let server: RedisServer;
let client: Redis;
const stores: RedisStore[] = [];

beforeAll(async () => {
  server = await startRedis();
  client = new Redis(server.url, { lazyConnect: false });
});

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  client.disconnect();
  await server.stop();
});

function make(now: () => number, denyCache: boolean): RedisStore {
  const s = redisStore({ client, now, heartbeatMs: 0, denyCache });
  stores.push(s);
  return s;
}

runConformance("redis standalone", (now) => make(now, false));
runConformance("redis standalone (deny cache on)", (now) => make(now, true));
runConformance("redis standalone", (now) => make(now, false), { lease: true });
