/**
 * Cold starts (issue: "exact through operations", item 1): processes that decide from their
 * first moment, while their first connection to Redis is still being made, decide exactly — the
 * decisions wait for the connection (the store's connect budget) instead of being answered by
 * `onStoreError`. Real processes, a real redis-server paused (SIGSTOP) while they start, and a
 * real Cluster paused likewise.
 */
import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import {
  ALGORITHMS,
  type AlgorithmName,
  type PolicyInput,
  StoreError,
  createLimiter,
  redisStore,
} from "../../src/index.js";
import { freePort } from "../../../../test/support/ports.js";
import { redisAndClusterForSuite } from "../../../../test/support/redis-suite.js";
import { forkWorker } from "../../../../test/support/workers.js";

const WORKER = fileURLToPath(new URL("./start-worker.ts", import.meta.url));
const run = Date.now().toString(36);

type Results = Record<
  string,
  { allowed: number; reasons: Record<string, number>; errors?: string[] }
>;

function policies(label: string): PolicyInput[] {
  return ALGORITHMS.map((alg: AlgorithmName): PolicyInput => ({
    name: `cold${run}-${label}-${alg}`,
    algorithm: alg,
    // A day for the windows, so that no window edge falls inside the test.
    rules: [
      { limit: 5, period: alg === "fixed-window" || alg === "sliding-window" ? "24h" : "1h" },
    ],
    // The default: fail open. A decision answered by it would show as reason "store-error".
    onStoreError: "allow",
  }));
}

/**
 * Starts `count` processes that fire at once; calls `whileFiring` once every one of them has
 * started its calls, and resolves with their results.
 */
async function coldStart(
  count: number,
  env: Record<string, string>,
  whileFiring: () => Promise<void>,
): Promise<Results[]> {
  const children: ChildProcess[] = [];
  const results = Array.from({ length: count }, (_, i) => {
    const c = forkWorker(WORKER, [], env);
    children.push(c);
    const firing = new Promise<void>((resolve) =>
      c.on("message", (m: { firing?: boolean }) => m.firing && resolve()),
    );
    const done = new Promise<Results>((resolve, reject) => {
      c.on("message", (m: { results?: Results }) => m.results && resolve(m.results));
      c.once("exit", (code) => reject(new Error(`worker ${i} exited (${String(code)})`)));
    });
    return { firing, done };
  });
  try {
    await Promise.all(results.map((r) => r.firing));
    await whileFiring();
    return await Promise.all(results.map((r) => r.done));
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  }
}

function total(all: Results[], name: string): { allowed: number; reasons: Record<string, number> } {
  const reasons: Record<string, number> = {};
  let allowed = 0;
  for (const r of all) {
    // What the store failed with, if it did (shown when a figure is off).
    if (r[name]!.errors) console.log(`${name}: ${r[name]!.errors!.join("; ")}`);
    allowed += r[name]!.allowed;
    for (const [k, v] of Object.entries(r[name]!.reasons)) reasons[k] = (reasons[k] ?? 0) + v;
  }
  return { allowed, reasons };
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

const redis = redisAndClusterForSuite();

describe("cold start", () => {
  it("4 processes start while Redis takes 1.5 s to answer: exactly the limit, for every algorithm", async () => {
    const ps = policies("standalone");
    redis.server.pause();
    let all: Results[];
    try {
      all = await coldStart(
        4,
        { REDIS_URL: redis.server.url, POLICIES: JSON.stringify(ps), KEY: "hot", N: "250" },
        async () => {
          await pause(1500);
          redis.server.resume();
        },
      );
    } finally {
      redis.server.resume();
    }
    for (const p of ps)
      expect([p.name, total(all, p.name)]).toEqual([p.name, { allowed: 5, reasons: {} }]);
  }, 60_000);

  it("4 processes start together against a Cluster that takes 1 s to answer: exactly the limit", async () => {
    const ps = policies("cluster");
    for (const n of redis.cluster.nodes) n.pause();
    let all: Results[];
    try {
      all = await coldStart(
        4,
        {
          CLUSTER_NODES: JSON.stringify(redis.cluster.startupNodes),
          POLICIES: JSON.stringify(ps),
          KEY: "hot",
          N: "250",
        },
        async () => {
          await pause(1000);
          for (const n of redis.cluster.nodes) n.resume();
        },
      );
    } finally {
      for (const n of redis.cluster.nodes) n.resume();
    }
    for (const p of ps)
      expect([p.name, total(all, p.name)]).toEqual([p.name, { allowed: 5, reasons: {} }]);
  }, 60_000);
});

describe("ready()", () => {
  it("resolves once the first connection is up; decisions made meanwhile waited for it", async () => {
    redis.server.pause();
    const client = new Redis(redis.server.url);
    client.on("error", () => {});
    const store = redisStore({ client, heartbeatMs: 0 });
    const limiter = createLimiter({
      store,
      policy: { name: `ready${run}`, rules: [{ limit: 1, period: "1h" }] },
    });
    try {
      let ready = false;
      const readiness = limiter.ready().then(() => (ready = true));
      const first = limiter.limit("k");
      await pause(700); // longer than the per-call timeout (500 ms)
      expect(ready).toBe(false);
      redis.server.resume();
      await readiness;
      expect(await first).toMatchObject({ allowed: true, remaining: 0 });
      expect((await limiter.limit("k")).allowed).toBe(false);
    } finally {
      redis.server.resume();
      await store.close();
      client.disconnect();
    }
  });

  it("rejects with a StoreError, and decisions follow onStoreError, when the connect budget is spent", async () => {
    redis.server.pause();
    const client = new Redis(redis.server.url);
    client.on("error", () => {});
    const store = redisStore({ client, heartbeatMs: 0, connectTimeoutMs: 300 });
    const limiter = createLimiter({
      store,
      policy: { name: `budget${run}`, rules: [{ limit: 1, period: "1h" }], onStoreError: "deny" },
    });
    try {
      const [readiness, d] = await Promise.allSettled([store.ready(), limiter.limit("k")]);
      expect(readiness.status).toBe("rejected");
      expect((readiness as PromiseRejectedResult).reason).toBeInstanceOf(StoreError);
      expect(((readiness as PromiseRejectedResult).reason as StoreError).code).toBe(
        "SLUICE_ERR_STORE_TIMEOUT",
      );
      expect(d).toMatchObject({
        status: "fulfilled",
        value: { allowed: false, reason: "store-error" },
      });
    } finally {
      redis.server.resume();
      await store.close();
      client.disconnect();
    }
  });

  it("fails at once when the first connection is refused (nothing listens)", async () => {
    const client = new Redis({
      port: await freePort(),
      host: "127.0.0.1",
      retryStrategy: () => 1000,
    });
    client.on("error", () => {});
    const store = redisStore({ client, heartbeatMs: 0, connectTimeoutMs: 20_000 });
    const limiter = createLimiter({
      store,
      policy: { name: `refused${run}`, rules: [{ limit: 1, period: "1h" }], onStoreError: "deny" },
    });
    const started = Date.now();
    try {
      await expect(store.ready()).rejects.toMatchObject({ code: "SLUICE_ERR_STORE_UNAVAILABLE" });
      expect(await limiter.limit("k")).toMatchObject({ allowed: false, reason: "store-error" });
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await store.close();
      client.disconnect();
    }
  });
});
