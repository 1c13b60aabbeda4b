/**
 * Faults: Redis down at start, killed mid-load, restarted empty (scripts gone), SCRIPT FLUSH —
 * through every client sluice supports (test/support/redis-clients.ts), each on its own
 * redis-server. While Redis is down decisions follow each policy's onStoreError (allow, deny,
 * insurance with this instance's share); once it is back they are exact again; nothing ever
 * rejects or leaves an unhandled rejection.
 */
import { Redis } from "ioredis";
import { afterAll, describe, expect, it } from "vitest";
import {
  type Decision,
  type Limiter,
  type PolicyInput,
  type RedisClient,
  type RedisStore,
  createLimiter,
} from "../../src/index.js";
import { freePort, waitFor } from "../../../../test/support/ports.js";
import { CLIENTS, type ClientKind } from "../../../../test/support/redis-clients.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { Owned, unhandledRejections } from "./helpers.js";

const unhandled = unhandledRejections();
const run = Date.now().toString(36);

function summary(ds: Decision[]): { allowed: number; reasons: string[] } {
  return {
    allowed: ds.filter((d) => d.allowed).length,
    reasons: [...new Set(ds.map((d) => d.reason ?? "none"))].sort(),
  };
}

describe.each(CLIENTS)("faults ($name)", (kind: ClientKind) => {
  let port: number;
  let server: RedisServer | undefined;
  let storeA: RedisStore;
  let storeB: RedisStore;
  let allow: Limiter;
  let deny: Limiter;
  let insurance: Limiter;
  let exact: Limiter;
  let keySeq = 0;

  const owned = new Owned();

  /** A client of the (not yet started) server, connecting and retrying. */
  async function client(): Promise<RedisClient> {
    return owned.client(
      await kind.standalone(`redis://127.0.0.1:${port}`, { noWait: true, reconnectMs: 50 }),
      (c) => kind.close(c),
    );
  }

  afterAll(async () => {
    await owned.close();
    await server?.stop();
  });

  /** `n` concurrent decisions on a fresh key. */
  async function burst(l: Limiter, n: number): Promise<Decision[]> {
    const key = `k${++keySeq}`;
    return Promise.all(Array.from({ length: n }, () => l.limit(key)));
  }

  /** Until the store answers from Redis again. */
  async function recovered(): Promise<void> {
    await waitFor(
      async () => (await exact.peek(`probe-${++keySeq}`)).reason === undefined,
      20_000,
      50,
    );
  }

  it("Redis down at start: onStoreError decides (allow, deny, insurance), then exact once it is up", async () => {
    port = await freePort();
    const clientA = await client();
    const clientB = await client();
    const opts = {
      timeoutMs: 1000,
      breakerFailures: 3,
      probeIntervalMs: 50,
      heartbeatMs: 100,
      logger: false,
    } as const;
    storeA = owned.store({ client: clientA, ...opts });
    storeB = owned.store({ client: clientB, ...opts });
    const rules: PolicyInput["rules"] = [{ limit: 10, period: "1h" }];
    const policy = (name: string, onStoreError: "allow" | "deny" | "insurance"): PolicyInput => ({
      name: `f${run}-${kind.name}-${name}`,
      algorithm: "fixed-window",
      rules,
      onStoreError,
    });
    allow = createLimiter({ store: storeA, policy: policy("allow", "allow") });
    deny = createLimiter({ store: storeA, policy: policy("deny", "deny") });
    insurance = createLimiter({ store: storeA, policy: policy("insurance", "insurance") });
    exact = createLimiter({ store: storeA, policy: policy("exact", "deny") });

    expect(summary(await burst(allow, 20))).toEqual({ allowed: 20, reasons: ["store-error"] });
    expect(summary(await burst(deny, 20))).toEqual({ allowed: 0, reasons: ["store-error"] });
    // No instance count known yet: the insurance limiter assumes this instance is alone.
    expect(summary(await burst(insurance, 20))).toEqual({ allowed: 10, reasons: ["insurance"] });
    expect(storeA.breakerOpen).toBe(true);

    server = await startRedis([], port);
    await recovered();
    expect(summary(await burst(exact, 30))).toEqual({ allowed: 10, reasons: ["none"] });
    expect(summary(await burst(allow, 30))).toEqual({ allowed: 10, reasons: ["none"] });
  });

  it("instances are counted through Redis while it is up", async () => {
    await waitFor(() => storeA.liveInstances() === 2 && storeB.liveInstances() === 2, 10_000, 50);
  });

  it("killed mid-load: every call still resolves; insurance enforces this instance's share (10 / 2)", async () => {
    // A high limit: the load must reach Redis (a denied key would be answered by the deny cache).
    const load = createLimiter({
      store: storeA,
      policy: { name: `f${run}-${kind.name}-load`, rules: [{ limit: 1_000_000, period: "1h" }] },
    });
    let stop = false;
    let served = 0;
    const failures: unknown[] = [];
    const loop = (async () => {
      while (!stop) {
        await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            load.limit(`load-${i}`).then(
              () => served++,
              (e: unknown) => failures.push(e),
            ),
          ),
        );
        await new Promise((r) => setTimeout(r, 2));
      }
    })();
    await waitFor(() => served > 200, 10_000, 10);
    server!.kill();
    await waitFor(() => storeA.breakerOpen, 10_000, 10);
    const during = served;
    await waitFor(() => served > during + 200, 10_000, 10);
    expect(summary(await burst(deny, 20))).toEqual({ allowed: 0, reasons: ["store-error"] });
    expect(storeA.liveInstances()).toBe(2);
    expect(summary(await burst(insurance, 20))).toEqual({ allowed: 5, reasons: ["insurance"] });

    // Back, empty: the scripts are gone (NOSCRIPT → EVAL) and decisions are exact again.
    await server!.stop();
    server = await startRedis([], port);
    await recovered();
    stop = true;
    await loop;
    expect(failures).toEqual([]);
    expect(summary(await burst(exact, 30))).toEqual({ allowed: 10, reasons: ["none"] });
  });

  it("SCRIPT FLUSH during traffic is invisible", async () => {
    const admin = new Redis({ host: "127.0.0.1", port });
    const results = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        if (i === 10) await admin.script("FLUSH");
        return summary(await burst(exact, 15));
      }),
    );
    admin.disconnect();
    expect(results.every((r) => r.allowed === 10 && r.reasons.join() === "none")).toBe(true);
  });

  it("left no unhandled rejection", async () => {
    await new Promise((r) => setTimeout(r, 50));
    expect(unhandled).toEqual([]);
  });
});
