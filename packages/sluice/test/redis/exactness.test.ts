/**
 * Exactness across OS processes: 4 processes fire 1000 concurrent requests in total at one key
 * with limit 5, for every algorithm, on standalone Redis and on a Cluster (Redis server time),
 * through every client sluice supports (test/support/redis-clients.ts).
 * Also: two processes whose clocks are 5 s apart share one limit exactly.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ALGORITHMS, type AlgorithmName, type PolicyInput } from "../../src/index.js";
import { CLIENTS } from "../../../../test/support/redis-clients.js";
import { redisAndClusterForSuite } from "../../../../test/support/redis-suite.js";
import { type Workers, startWorkers } from "./workers.js";

const run = Date.now().toString(36);

function policyFor(alg: AlgorithmName, name: string): PolicyInput {
  // Long periods (a day for the windows, so no window edge falls inside the test).
  const period =
    alg === "concurrency"
      ? "1h"
      : alg === "fixed-window" || alg === "sliding-window"
        ? "24h"
        : "1h";
  return { name, algorithm: alg, rules: [{ limit: 5, period }], onStoreError: "deny" };
}

const redis = redisAndClusterForSuite();
let standalone: Workers;
let clustered: Workers;
let skewed: Workers;

// After redisAndClusterForSuite's beforeAll (hooks run in order); the workers stop before
// Redis does (afterAll hooks run last registered first).
beforeAll(async () => {
  const url = redis.server.url;
  const nodes = JSON.stringify(redis.cluster.startupNodes);
  [standalone, clustered, skewed] = await Promise.all([
    startWorkers(Array.from({ length: 4 }, () => ({ REDIS_URL: url }))),
    startWorkers(Array.from({ length: 4 }, () => ({ CLUSTER_NODES: nodes }))),
    startWorkers([{ REDIS_URL: url }, { REDIS_URL: url, SKEW_MS: "5000" }]),
  ]);
}, 120_000);

afterAll(async () => {
  await Promise.all([standalone?.stop(), clustered?.stop(), skewed?.stop()]);
});

describe.each([
  ["standalone", () => standalone],
  ["cluster", () => clustered],
] as const)("exactness on %s: 4 processes × 250 requests, limit 5", (label, workers) => {
  // Every algorithm through the first client; then every client (the same processes, one store
  // per client in each) on the algorithms whose state differs most.
  it.each(ALGORITHMS)("%s: exactly 5 allowed", async (alg) => {
    const r = await workers().fire(policyFor(alg, `x${run}-${label}-${alg}`), `hot-${alg}`, 250);
    expect(r.reasons["store-error"] ?? 0).toBe(0);
    expect(r.allowed).toBe(5);
  });
  describe.each(CLIENTS.slice(1))("$name", (kind) => {
    it.each(["fixed-window", "gcra", "sliding-log"] as const)(
      "%s: exactly 5 allowed",
      async (alg) => {
        const name = `x${run}-${label}-${kind.name}-${alg}`;
        const r = await workers().fire(policyFor(alg, name), `hot-${alg}`, 250, kind.name);
        expect(r.reasons["store-error"] ?? 0).toBe(0);
        expect(r.allowed).toBe(5);
      },
    );
  });
});

describe("clock skew: two processes with clocks 5 s apart", () => {
  it.each(["fixed-window", "gcra", "sliding-log"] as const)(
    "%s: they share one limit exactly",
    async (alg) => {
      const r = await skewed.fire(policyFor(alg, `skew${run}-${alg}`), "shared", 200);
      expect(r.reasons["store-error"] ?? 0).toBe(0);
      expect(r.allowed).toBe(5);
    },
  );
});
