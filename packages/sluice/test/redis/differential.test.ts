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
  type RedisStore,
  memoryStore,
  policyCapacity,
  redisStore,
} from "../../src/index.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { policyOfCase, storeCaseArb, strip } from "../store-cases.js";

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
      fc.asyncProperty(storeCaseArb, async (c) => {
        const policy = policyOfCase(c, `d${++seq}`);
        if (policy === undefined) return; // not a valid policy
        const cap = policyCapacity(policy);
        const mem = memoryStore({ now: () => t });
        const leases: { mem: string[]; redis: string[] } = { mem: [], redis: [] };
        const key = `key-${seq}`;
        for (const [i, op] of c.ops.entries()) {
          t += op.dt;
          const where = `${policy.algorithm} ${JSON.stringify(policy.rules)} block ${policy.blockMs}, op ${i} ${JSON.stringify(op)}`;
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
                    (policy.refill === "interval" ? " interval" : "") +
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
    expect([...denied].some((d) => d.startsWith("token-bucket interval"))).toBe(true);
  }, 120_000);
});
