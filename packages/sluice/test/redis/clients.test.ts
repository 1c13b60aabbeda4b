/**
 * Every Redis client sluice supports, as its owner made it (test/support/redis-clients.ts):
 * ioredis 6 and 5, iovalkey, node-redis 6, 5 and 4 — standalone and Cluster. For each: the
 * store is exact under concurrency (4 stores, each on its own connection, × 50 concurrent at
 * limit 5), answers remaining 4, 3, 2, 1, 0 then a denial with its wait, reads back counts near
 * the top of the faces' range exactly, and waits for a client that is not connected yet.
 */
import { describe, expect, it } from "vitest";
import {
  type AlgorithmName,
  type PolicyInput,
  type RedisClient,
  type RedisStore,
  createLimiter,
  redisStore,
} from "../../src/index.js";
import { freePort, waitFor } from "../../../../test/support/ports.js";
import { CLIENTS, type ClientKind } from "../../../../test/support/redis-clients.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { redisAndClusterForSuite } from "../../../../test/support/redis-suite.js";
import { Owned } from "./helpers.js";

const run = Date.now().toString(36);
const redis = redisAndClusterForSuite();

/** Clients and stores made by one test, closed at its end. */
function scope(kind: ClientKind) {
  const owned = new Owned();
  return {
    async client(where: "standalone" | "cluster"): Promise<RedisClient> {
      const c =
        where === "standalone"
          ? await kind.standalone(redis.server.url)
          : await kind.cluster(redis.cluster.startupNodes);
      return owned.client(c, (client) => kind.close(client));
    },
    store: (client: RedisClient): RedisStore => owned.store({ client, heartbeatMs: 0 }),
    close: () => owned.close(),
  };
}

describe.each(CLIENTS)("$name", (kind) => {
  describe.each(["standalone", "cluster"] as const)("%s", (where) => {
    it.each(["fixed-window", "gcra", "sliding-log", "token-bucket"] as AlgorithmName[])(
      "%s: 4 stores × 50 concurrent at limit 5 admit exactly 5",
      async (algorithm) => {
        const s = scope(kind);
        try {
          const policy: PolicyInput = {
            name: `cl${run}-${kind.name}-${where}-${algorithm}`,
            algorithm,
            rules: [{ limit: 5, period: "1h" }],
            onStoreError: "deny",
          };
          const limiters = await Promise.all(
            [0, 1, 2, 3].map(async () =>
              createLimiter({ store: s.store(await s.client(where)), policy }),
            ),
          );
          const ds = await Promise.all(
            limiters.flatMap((l) => Array.from({ length: 50 }, () => l.limit("hot"))),
          );
          expect(ds.filter((d) => d.reason === "store-error")).toEqual([]);
          expect(ds.filter((d) => d.allowed)).toHaveLength(5);
        } finally {
          await s.close();
        }
      },
    );

    it.each(["fixed-window", "gcra"] as AlgorithmName[])(
      "%s: remaining 4, 3, 2, 1, 0, then a denial with its wait",
      async (algorithm) => {
        const s = scope(kind);
        try {
          const limiter = createLimiter({
            store: s.store(await s.client(where)),
            policy: {
              name: `cs${run}-${kind.name}-${where}-${algorithm}`,
              algorithm,
              rules: [{ limit: 5, period: "1h" }],
              onStoreError: "deny",
            },
          });
          const seen = [];
          for (let i = 0; i < 6; i++) seen.push(await limiter.limit("k"));
          expect(seen.map((d) => d.remaining)).toEqual([4, 3, 2, 1, 0, 0]);
          expect(seen.map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
          expect(seen[5]!.reason).toBeUndefined();
          // A denial's wait: the window's end (fixed-window), one emission interval (gcra).
          expect(seen[5]!.retryAfterMs).toBeGreaterThan(algorithm === "gcra" ? 700_000 : 0);
          expect(seen[5]!.retryAfterMs).toBeLessThanOrEqual(3_600_000);
        } finally {
          await s.close();
        }
      },
    );

    it("counts near the largest limit and cost are read back exactly", async () => {
      const s = scope(kind);
      try {
        // 2^48: the faces' counting limit, the largest figure any reply carries.
        const top = 2 ** 48;
        const limiter = createLimiter({
          store: s.store(await s.client(where)),
          policy: {
            name: `cn${run}-${kind.name}-${where}`,
            algorithm: "fixed-window",
            rules: [{ limit: top, period: "1h" }],
          },
        });
        const remaining: number[] = [];
        for (const cost of [1, 2, 3, top - 10, 4, 5]) {
          const d = await limiter.limit("big", { cost });
          remaining.push(d.allowed ? d.remaining : -1);
        }
        expect(remaining).toEqual([top - 1, top - 3, top - 6, 4, 0, -1]);
      } finally {
        await s.close();
      }
    });
  });

  it("a client that its owner has not connected yet is waited for", async () => {
    const client = await kind.standalone(redis.server.url, { lazy: true });
    const store = redisStore({ client, heartbeatMs: 0, connectTimeoutMs: 5000 });
    try {
      const limiter = createLimiter({
        store,
        policy: { name: `cw${run}-${kind.name}`, rules: [{ limit: 2, period: "1h" }] },
      });
      const pending = Promise.all([limiter.limit("a"), limiter.limit("a"), limiter.limit("a")]);
      // The owner connects afterwards (ioredis: sluice connects a lazy client itself).
      if (kind.family === "node-redis")
        await (client as unknown as { connect(): Promise<unknown> }).connect();
      const ds = await pending;
      expect(ds.map((d) => [d.allowed, d.reason])).toEqual([
        [true, undefined],
        [true, undefined],
        [false, undefined],
      ]);
    } finally {
      await store.close();
      await kind.close(client);
    }
  });
});

describe.each(CLIENTS)("$name: a wrong address", (kind) => {
  it("fails open with one warning naming the cause, and one when Redis is back", async () => {
    const port = await freePort();
    const warnings: string[] = [];
    const client = await kind.standalone(`redis://127.0.0.1:${port}`, { lazy: true });
    // node-redis clients are connected by their owner; it keeps retrying in the background.
    if (kind.family === "node-redis")
      void (client as unknown as { connect(): Promise<unknown> }).connect().catch(() => undefined);
    const store = redisStore({
      client,
      heartbeatMs: 0,
      probeIntervalMs: 50,
      logger: { warn: (m) => warnings.push(m) },
    });
    let restarted: RedisServer | undefined;
    try {
      const limiter = createLimiter({
        store,
        policy: { name: `cx${run}-${kind.name}`, rules: [{ limit: 3, period: "1h" }] },
      });
      for (let i = 0; i < 5; i++) {
        const ds = await Promise.all(Array.from({ length: 10 }, () => limiter.limit("k")));
        expect(ds.every((d) => d.allowed && d.reason === "store-error")).toBe(true);
      }
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
      expect(warnings[0]).toContain("unavailable");

      restarted = await startRedis([], port);
      await waitFor(async () => (await limiter.limit("probe")).reason === undefined, 20_000, 50);
      expect(warnings).toHaveLength(2);
      expect(warnings[1]).toMatch(/available again after [\d.]+ s/);
      const ds = await Promise.all(Array.from({ length: 10 }, () => limiter.limit("k")));
      expect(ds.filter((d) => d.allowed)).toHaveLength(3);
      expect(warnings).toHaveLength(2);
    } finally {
      await store.close();
      await kind.close(client);
      await restarted?.stop();
    }
  });
});
