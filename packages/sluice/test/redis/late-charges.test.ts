/**
 * A decision answered by `onStoreError` is never charged later (issue "exact through
 * operations", item 4). Calls that Redis had not run when their timeout answered them —
 * because the server was hung (SIGSTOP) or restarted — must not be run afterwards: not when the
 * server wakes up and reads them, not when ioredis re-sends them to a restarted server (where
 * they meet NOSCRIPT). Real redis-server, paused, resumed, killed and restarted on its port.
 */
import { Redis } from "ioredis";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import {
  ALGORITHMS,
  type Limiter,
  type RedisStore,
  createLimiter,
  redisStore,
} from "../../src/index.js";
import { waitFor } from "../../../../test/support/ports.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";

const run = Date.now().toString(36);
const servers: RedisServer[] = [];
const clients: Redis[] = [];
const stores: RedisStore[] = [];

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  for (const c of clients) c.disconnect();
  await Promise.all(servers.map((s) => s.stop()));
});

let server: RedisServer;
let client: Redis;
let store: RedisStore;

beforeEach(async () => {
  server = await startRedis();
  servers.push(server);
  client = new Redis({ host: "127.0.0.1", port: server.port, retryStrategy: () => 50 });
  client.on("error", () => {});
  clients.push(client);
});

/** The store of a test, with at most `maxInFlight` script calls in flight. */
async function openStore(maxInFlight?: number): Promise<void> {
  store = redisStore({ client, heartbeatMs: 0, timeoutMs: 300, denyCache: false, maxInFlight });
  stores.push(store);
  await store.ready();
}

function limiters(label: string): Limiter[] {
  return ALGORITHMS.map((alg) =>
    createLimiter({
      store,
      policy: {
        name: `late${run}-${label}-${alg}`,
        algorithm: alg,
        rules: [{ limit: 100, period: "24h" }],
        onStoreError: "deny",
      },
    }),
  );
}

/** Fires 20 decisions per limiter while the server is hung; all are answered by onStoreError. */
async function answeredWhileHung(ls: Limiter[]): Promise<void> {
  server.pause();
  const ds = await Promise.all(ls.flatMap((l) => Array.from({ length: 20 }, () => l.limit("k"))));
  expect(ds.every((d) => !d.allowed && d.reason === "store-error")).toBe(true);
}

/** Every key of these limiters is untouched: nothing was charged. */
async function nothingCharged(ls: Limiter[]): Promise<void> {
  await waitFor(async () => (await ls[0]!.peek("probe")).reason === undefined, 20_000, 50);
  for (const l of ls) {
    const d = await l.peek("k");
    expect([l.policy.name, d.reason, d.remaining]).toEqual([l.policy.name, undefined, 100]);
  }
}

// With one call in flight, most of the 140 decisions wait behind the hung call and go (already
// past their deadline) when it times out: those must not be charged either.
describe.each([4, 1])(
  "decisions answered by onStoreError are never charged later (maxInFlight %i)",
  (maxInFlight) => {
    beforeEach(() => openStore(maxInFlight));

    it("when the hung server wakes up and runs what it had received", async () => {
      const ls = limiters("resumed");
      await answeredWhileHung(ls);
      server.resume();
      // Redis reads and answers the calls it had received (their answers come too late).
      await client.ping();
      await nothingCharged(ls);
    });

    it("when ioredis re-sends them to a restarted server (NOSCRIPT there)", async () => {
      const ls = limiters("restarted");
      await answeredWhileHung(ls);
      server.kill();
      await waitFor(() => server.process.exitCode !== null || server.process.signalCode !== null);
      const again = await startRedis([], server.port);
      servers.push(again);
      await client.ping();
      await nothingCharged(ls);
    });
  },
);

describe("recovery", () => {
  it("once the client has reconnected, the next decision goes to Redis (no wait for probeIntervalMs)", async () => {
    const s = redisStore({
      client,
      heartbeatMs: 0,
      timeoutMs: 300,
      breakerFailures: 2,
      probeIntervalMs: 600_000,
    });
    stores.push(s);
    const l = createLimiter({
      store: s,
      policy: { name: `rec${run}`, rules: [{ limit: 5, period: "1h" }], onStoreError: "deny" },
    });
    expect((await l.limit("k")).reason).toBeUndefined();
    server.kill();
    await waitFor(async () => (await l.limit("k")).reason === "store-error" && s.breakerOpen);
    const again = await startRedis([], server.port);
    servers.push(again);
    await waitFor(() => client.status === "ready", 10_000, 10);
    const d = await l.limit("k");
    expect([d.allowed, d.reason, d.remaining]).toEqual([true, undefined, 4]);
    expect(s.breakerOpen).toBe(false);
  });
});
