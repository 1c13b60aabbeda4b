import { afterAll, beforeAll, describe } from "vitest";
import { type RedisClient, type RedisStore, redisStore } from "../../src/index.js";
import { CLIENTS } from "../../../../test/support/redis-clients.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { runConformance } from "../conformance/run.js";

// One server for the file and one client of each kind (test/support/redis-clients.ts); each
// scenario gets its own store (and unique policy name). The deny cache and leases live in the
// store, apart from the client: they are played on the first client only.
let server: RedisServer;

beforeAll(async () => {
  server = await startRedis();
});

afterAll(async () => {
  await server.stop();
});

describe.each(CLIENTS)("$name", (kind) => {
  let client: RedisClient;
  const stores: RedisStore[] = [];
  beforeAll(async () => {
    client = await kind.standalone(server.url);
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await kind.close(client);
  });

  function make(now: () => number, denyCache: boolean): RedisStore {
    const s = redisStore({ client, now, heartbeatMs: 0, denyCache });
    stores.push(s);
    return s;
  }

  runConformance(`redis standalone (${kind.name})`, (now) => make(now, false));
  if (kind === CLIENTS[0]) {
    runConformance("redis standalone (deny cache on)", (now) => make(now, true));
    runConformance("redis standalone", (now) => make(now, false), { lease: true });
  }
});
