/**
 * Differential test: random policies and random operation sequences played against the memory
 * store and the Redis store with the same injected clock must give identical store decisions
 * (the Lua is a port of the TypeScript; this catches rounding and encoding differences, e.g.
 * fractional emission intervals written to Redis and read back).
 */
import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ALGORITHMS,
  type AlgorithmName,
  type Policy,
  type RedisStore,
  type StoreDecision,
  ValidationError,
  definePolicy,
  memoryStore,
  policyCapacity,
  redisStore,
} from "../../src/index.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";

let server: RedisServer;
let client: Redis;
let redis: RedisStore;
const run = Date.now().toString(36);
let seq = 0;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis(server.url);
  await client.ping();
});

afterAll(async () => {
  await redis?.close();
  client?.disconnect();
  await server?.stop();
});

const ruleArb = fc.record({
  limit: fc.integer({ min: 1, max: 12 }),
  period: fc.oneof(fc.integer({ min: 7, max: 5000 }), fc.constantFrom(1000, 60_000, 333, 1001)),
  burstExtra: fc.integer({ min: -3, max: 6 }),
});

const caseArb = fc.record({
  algorithm: fc.constantFrom<AlgorithmName>(...ALGORITHMS),
  rules: fc.array(ruleArb, { minLength: 1, maxLength: 3 }),
  block: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3000 })),
  /** For fixed-window: windows started by the first request. */
  firstRequest: fc.boolean(),
  /** With a block: the block forgets the counts. */
  resetOnBlock: fc.boolean(),
  ops: fc.array(
    fc.oneof(
      {
        weight: 8,
        arbitrary: fc.record({
          kind: fc.constant("limit" as const),
          dt: fc.integer({ min: 0, max: 700 }),
          cost: fc.integer({ min: 1, max: 4 }),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant("peek" as const),
          dt: fc.integer({ min: 0, max: 700 }),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant("adjust" as const),
          dt: fc.integer({ min: 0, max: 700 }),
          delta: fc.integer({ min: -4, max: 4 }).filter((d) => d !== 0),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant("reset" as const),
          dt: fc.integer({ min: 0, max: 3000 }),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant("setCount" as const),
          dt: fc.integer({ min: 0, max: 700 }),
          count: fc.nat(15),
          windowMs: fc.integer({ min: 1, max: 4000 }),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant("release" as const),
          dt: fc.integer({ min: 0, max: 700 }),
          lease: fc.nat(5),
        }),
      },
    ),
    { minLength: 5, maxLength: 40 },
  ),
});

function strip(d: StoreDecision): unknown {
  return { allowed: d.allowed, rules: d.rules, blockedForMs: d.blockedForMs };
}

describe("differential: memory store vs Redis store", () => {
  it("identical decisions for random policies and operations", async () => {
    let t = 1_700_006_400_000;
    let compared = 0;
    const denied = new Set<string>();
    redis = redisStore({
      client,
      now: () => t,
      denyCache: false,
      heartbeatMs: 0,
      prefix: `df${run}:`,
    });
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const usesBurst = c.algorithm === "gcra" || c.algorithm === "token-bucket";
        const rules = (c.algorithm === "concurrency" ? c.rules.slice(0, 1) : c.rules).map((r) => ({
          limit: r.limit,
          period: r.period,
          ...(usesBurst ? { burst: Math.max(1, r.limit + r.burstExtra) } : {}),
        }));
        let policy: Policy;
        try {
          policy = definePolicy({
            name: `d${++seq}`,
            algorithm: c.algorithm,
            rules,
            ...(c.block > 0 ? { blockDuration: c.block } : {}),
            ...(c.block > 0 && c.resetOnBlock && c.algorithm !== "concurrency"
              ? { resetOnBlock: true }
              : {}),
            ...(c.firstRequest && c.algorithm === "fixed-window"
              ? { windowStart: "first-request" as const }
              : {}),
          });
        } catch (err) {
          if (err instanceof ValidationError) return; // not a valid policy
          throw err;
        }
        const cap = policyCapacity(policy);
        const mem = memoryStore({ now: () => t });
        const leases: { mem: string[]; redis: string[] } = { mem: [], redis: [] };
        const key = `key-${seq}`;
        for (const [i, op] of c.ops.entries()) {
          t += op.dt;
          const where = `${policy.algorithm} ${JSON.stringify(rules)} block ${policy.blockMs}, op ${i} ${JSON.stringify(op)}`;
          switch (op.kind) {
            case "limit": {
              const req = { policy, key, cost: Math.min(op.cost, cap) };
              const [a, b] = [await mem.decide(req), await redis.decide(req)];
              expect(strip(b), where).toEqual(strip(a));
              compared++;
              if (!a.allowed)
                denied.add(
                  policy.algorithm +
                    (policy.windowStart === "first-request" ? " first-request" : "") +
                    (a.blockedForMs > 0 ? " blocked" : ""),
                );
              if (a.leaseId && b.leaseId) {
                leases.mem.push(a.leaseId);
                leases.redis.push(b.leaseId);
              }
              break;
            }
            case "peek": {
              const req = { policy, key, cost: 1 };
              expect(strip(await redis.peek(req)), where).toEqual(strip(await mem.peek(req)));
              compared++;
              break;
            }
            case "adjust":
              await mem.adjust(policy, key, op.delta);
              await redis.adjust(policy, key, op.delta);
              break;
            case "reset":
              await mem.reset(policy, key);
              await redis.reset(policy, key);
              break;
            case "setCount":
              // Only first-request fixed windows have it (the limiter refuses the others).
              if (policy.windowStart !== "first-request") break;
              await mem.setCount(policy, key, op.count, op.windowMs);
              await redis.setCount(policy, key, op.count, op.windowMs);
              break;
            case "release": {
              const j = op.lease % Math.max(1, leases.mem.length);
              await mem.release(policy, key, leases.mem[j] ?? "none");
              await redis.release(policy, key, leases.redis[j] ?? "none");
              break;
            }
          }
        }
      }),
      { numRuns: 300 },
    );
    // The runs exercised every algorithm's denials and penalty blocks.
    expect(compared).toBeGreaterThan(1500);
    for (const alg of ALGORITHMS) expect([...denied].some((d) => d.startsWith(alg))).toBe(true);
    expect([...denied].some((d) => d.endsWith("blocked"))).toBe(true);
    expect([...denied].some((d) => d.startsWith("fixed-window first-request"))).toBe(true);
  }, 120_000);
});
