/**
 * Sentinel: 1 master, 1 replica, 3 sentinels. The conformance table through a Sentinel client;
 * traffic keeps flowing through a SENTINEL FAILOVER (answered per onStoreError while the client
 * switches), and decisions are exact afterwards — through ioredis with the options docs/redis.md
 * recommends, and through every client that has Sentinel support, with its defaults
 * (test/support/redis-clients.ts: ioredis 6 and 5, iovalkey, node-redis 6 and 5).
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Decision,
  type PolicyInput,
  type RedisClient,
  type RedisStore,
  createLimiter,
} from "../../src/index.js";
import { CLIENTS } from "../../../../test/support/redis-clients.js";
import { waitFor } from "../../../../test/support/ports.js";
import { type RedisSentinel, startSentinel } from "../../../../test/support/redis-sentinel.js";
import { runConformance } from "../conformance/run.js";
import { Owned, unhandledRejections } from "./helpers.js";

const unhandled = unhandledRejections();
const run = Date.now().toString(36);

let sentinel: RedisSentinel;
const owned = new Owned();

/** An ioredis client of the sentinels whose commands fail at once while it reconnects. */
const sentinelClient = (): Redis =>
  owned.client(sentinel.ioredis({ maxRetriesPerRequest: 1 }), (c) => c.disconnect());

function store(c: RedisClient): RedisStore {
  return owned.store({
    client: c,
    timeoutMs: 1000,
    breakerFailures: 3,
    probeIntervalMs: 50,
    heartbeatMs: 0,
  });
}

beforeAll(async () => {
  sentinel = await startSentinel();
}, 120_000);

afterAll(async () => {
  await owned.close();
  await sentinel?.stop();
});

// The table, through one Sentinel client (each scenario its own store and policy name).
let conformanceClient: Redis | undefined;
runConformance("redis sentinel", (now) => {
  conformanceClient ??= sentinelClient();
  return owned.store({ client: conformanceClient, now, heartbeatMs: 0, denyCache: false });
});

/**
 * Traffic through a store on one client while the sentinels fail the master over; then two
 * stores (two clients) share a limit of 5 exactly.
 */
async function throughFailover(label: string, a: RedisStore, b: RedisStore): Promise<void> {
  {
    const policy = (name: string, limit: number): PolicyInput => ({
      name: `s${run}-${label}-${name}`,
      algorithm: "gcra",
      rules: [{ limit, period: "1h" }],
      onStoreError: "allow",
    });
    const traffic = createLimiter({ store: a, policy: policy("traffic", 1_000_000) });
    await traffic.limit("warm");

    let stop = false;
    const seen: Decision[] = [];
    const failures: unknown[] = [];
    const loop = (async () => {
      while (!stop) {
        await Promise.all(
          Array.from({ length: 5 }, (_, i) =>
            traffic.limit(`t${i}`).then(
              (d) => seen.push(d),
              (e: unknown) => failures.push(e),
            ),
          ),
        );
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    await waitFor(() => seen.length > 100, 10_000, 10);
    const before = await sentinel.masterPort();
    const after = await sentinel.failover();
    expect(after).not.toBe(before);
    const atSwitch = seen.length;
    // Answered from Redis again, on the new master.
    await waitFor(
      () =>
        seen.slice(atSwitch).some((d) => d.reason === undefined) &&
        seen[seen.length - 1]!.reason === undefined,
      20_000,
      20,
    );
    stop = true;
    await loop;
    const errors = seen.filter((d) => d.reason === "store-error").length;
    console.log(
      `sentinel failover (${label}): ${seen.length} decisions, ${errors} answered by onStoreError during the switch`,
    );
    expect(failures).toEqual([]);
    // Every call was answered: from Redis, or per onStoreError ("allow") during the switch.
    expect(
      seen.every((d) => d.allowed && (d.reason === undefined || d.reason === "store-error")),
    ).toBe(true);

    // Exact afterwards: two stores (two connections) share a limit of 5.
    for (const s of [a, b]) await waitFor(() => !s.breakerOpen, 10_000, 20);
    const la = createLimiter({ store: a, policy: { ...policy("exact", 5), onStoreError: "deny" } });
    const lb = createLimiter({ store: b, policy: { ...policy("exact", 5), onStoreError: "deny" } });
    const ds = await Promise.all(
      Array.from({ length: 100 }, (_, i) => (i % 2 ? la : lb).limit("shared")),
    );
    expect(ds.filter((d) => d.reason === "store-error")).toHaveLength(0);
    expect(ds.filter((d) => d.allowed)).toHaveLength(5);
    const master = new Redis({ host: "127.0.0.1", port: after });
    expect((await master.info("replication")).includes("role:master")).toBe(true);
    master.disconnect();
  }
}

describe("sentinel", () => {
  it("keeps answering through a failover and is exact afterwards", async () => {
    await throughFailover("ioredis", store(sentinelClient()), store(sentinelClient()));
  });

  describe.each(CLIENTS.filter((k) => k.sentinel !== undefined))("$name", (kind) => {
    const sentinelOf = async (): Promise<RedisClient> =>
      owned.client(
        await kind.sentinel!(sentinel.sentinels, sentinel.name, { reconnectMs: 50 }),
        (c) => kind.close(c),
      );
    let first: RedisClient | undefined;
    runConformance(`redis sentinel (${kind.name})`, async (now) => {
      first ??= await sentinelOf();
      return owned.store({ client: first, now, heartbeatMs: 0, denyCache: false });
    });
    it("keeps answering through a failover and is exact afterwards", async () => {
      await throughFailover(kind.name, store(await sentinelOf()), store(await sentinelOf()));
    });
  });

  it("left no unhandled rejection", () => {
    expect(unhandled).toEqual([]);
  });
});
