/** The Redis store on standalone Redis: batching, scripts, deny cache, TTLs, errors, size, latency. */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ALGORITHMS,
  type AlgorithmName,
  type Limiter,
  type PolicyInput,
  type RedisClientLike,
  type RedisStore,
  type RedisStoreOptions,
  StoreError,
  createLimiter,
  definePolicy,
  isSluiceError,
  redisStore,
} from "../../src/index.js";
import { SLUICE_LUA } from "../../src/stores/lua-scripts.js";
import { waitFor } from "../../../../test/support/ports.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";

let server: RedisServer;
let client: Redis;
let admin: Redis;
const stores: RedisStore[] = [];
const run = Date.now().toString(36);
let seq = 0;

beforeAll(async () => {
  server = await startRedis();
  client = new Redis(server.url);
  admin = new Redis(server.url);
  await Promise.all([client.ping(), admin.ping()]);
  // Load the script once, so that call counts below do not include the NOSCRIPT + EVAL pair.
  const warm = redisStore({ client, heartbeatMs: 0 });
  await warm.decide({
    policy: definePolicy({ name: "warm", rules: [{ limit: 1, period: 1000 }] }),
    key: "w",
    cost: 1,
  });
  await warm.close();
});

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  client.disconnect();
  admin.disconnect();
  await server.stop();
});

function store(options: Partial<RedisStoreOptions> = {}): RedisStore {
  const s = redisStore({ client, heartbeatMs: 0, ...options });
  stores.push(s);
  return s;
}

function limiter(
  policy: Omit<PolicyInput, "name">,
  options: Partial<RedisStoreOptions> = {},
): Limiter {
  return createLimiter({
    store: store(options),
    policy: { onStoreError: "deny", ...policy, name: `p${run}-${++seq}` },
  });
}

/** EVALSHA + EVAL calls the server has run so far. */
async function scriptCalls(): Promise<number> {
  const info = await admin.info("commandstats");
  let n = 0;
  for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) n += Number(m[1]);
  return n;
}

describe("batching", () => {
  it("decisions made in one tick with nothing in flight travel in four script calls", async () => {
    // Four (the most in flight), not one: Redis runs one while Node sends or reads another.
    const l = limiter({ algorithm: "gcra", rules: [{ limit: 1000, period: "1m" }] });
    const before = await scriptCalls();
    const ds = await Promise.all(Array.from({ length: 120 }, (_, i) => l.limit(`k${i % 20}`)));
    expect(await scriptCalls()).toBe(before + 4);
    expect(ds.every((d) => d.allowed && d.reason === undefined)).toBe(true);
  });

  it("maxInFlight: decisions made in one tick travel in that many script calls, never more at once", async () => {
    for (const maxInFlight of [1, 2]) {
      let inFlight = 0;
      let most = 0;
      const spy = spyClient(
        () => (most = Math.max(most, ++inFlight)),
        undefined,
        () => inFlight--,
      );
      const l = createLimiter({
        store: store({ client: spy, maxInFlight }),
        policy: { name: `p${run}-${++seq}`, rules: [{ limit: 1000, period: "1m" }] },
      });
      const before = await scriptCalls();
      const first = await Promise.all(Array.from({ length: 120 }, (_, i) => l.limit(`k${i}`)));
      expect(await scriptCalls()).toBe(before + maxInFlight);
      // Under a steady load (each call asks again as soon as it is answered) the cap holds.
      let left = 2000;
      const worker = async () => {
        while (left-- > 0) await l.limit(`k${left % 50}`);
      };
      await Promise.all(Array.from({ length: 64 }, worker));
      expect(most).toBe(maxInFlight);
      expect(first.every((d) => d.allowed && d.reason === undefined)).toBe(true);
    }
  });

  it("refuses a maxInFlight that is not an integer ≥ 1, naming the field", () => {
    expect(() => store({ maxInFlight: 0 })).toThrow(
      /maxInFlight: must be an integer ≥ 1 \(got 0\)/,
    );
    expect(() => store({ maxInFlight: 1.5 })).toThrow(/maxInFlight/);
  });

  it("a call carries at most maxBatch operations, in the order they were asked", async () => {
    const sizes: number[] = [];
    const spy = spyClient((args) => sizes.push(Number(args[1])));
    const l = createLimiter({
      store: store({ client: spy, maxBatch: 16 }),
      policy: {
        name: `p${run}-${++seq}`,
        algorithm: "fixed-window",
        rules: [{ limit: 10, period: "1h" }],
      },
    });
    const ds = await Promise.all(Array.from({ length: 100 }, () => l.limit("same")));
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(100);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(16);
    expect(ds.filter((d) => d.allowed)).toHaveLength(10);
    // The 10 allowed are the first 10 asked: batches keep the order of the calls.
    expect(ds.slice(0, 10).every((d) => d.allowed)).toBe(true);
  });

  it("a reply that does not match the operations sent fails them all (never read as a decision)", async () => {
    const errors: unknown[] = [];
    const short = spyClient(undefined, (reply) =>
      Array.isArray(reply) ? reply.slice(0, -1) : reply,
    );
    const l = createLimiter({
      store: store({ client: short }),
      policy: {
        name: `p${run}-${++seq}`,
        rules: [{ limit: 5, period: "1m" }],
        onStoreError: "deny",
      },
      onError: (e) => errors.push(e),
    });
    const ds = await Promise.all([l.limit("a"), l.limit("b"), l.limit("c")]);
    expect(ds.map((d) => [d.allowed, d.reason])).toEqual([
      [false, "store-error"],
      [false, "store-error"],
      [false, "store-error"],
    ]);
    expect(errors[0]).toBeInstanceOf(StoreError);
    expect((errors[0] as StoreError).message).toMatch(/Unreadable reply from the sluice script/);
  });

  it("mixes policies, algorithms and operations in one call", async () => {
    const s = store();
    const ls = ALGORITHMS.map((alg) =>
      createLimiter({
        store: s,
        policy: { name: `mix${run}-${alg}`, algorithm: alg, rules: [{ limit: 2, period: "1h" }] },
      }),
    );
    const ds = await Promise.all(
      ls.flatMap((l) => [l.limit("a"), l.limit("a"), l.limit("a"), l.peek("a")]),
    );
    for (let i = 0; i < ls.length; i++) {
      expect(ds.slice(i * 4, i * 4 + 4).map((d) => d.allowed)).toEqual([true, true, false, false]);
    }
  });
});

describe("scripts", () => {
  it("reloads after SCRIPT FLUSH (NOSCRIPT) and keeps deciding", async () => {
    const l = limiter({ algorithm: "sliding-window", rules: [{ limit: 3, period: "1h" }] });
    expect((await l.limit("k")).allowed).toBe(true);
    await admin.script("FLUSH");
    expect(await admin.script("EXISTS", SLUICE_LUA.sha)).toEqual([0]);
    const d = await l.limit("k");
    expect(d.reason).toBeUndefined();
    expect(d.remaining).toBe(1);
    expect(await admin.script("EXISTS", SLUICE_LUA.sha)).toEqual([1]);
  });

  it("a corrupt key fails its own decision with SLUICE_ERR_CORRUPT_STATE, not the batch", async () => {
    const errors: unknown[] = [];
    const policy = definePolicy({
      name: `corrupt${run}`,
      algorithm: "gcra",
      rules: [{ limit: 5, period: "1m" }],
      onStoreError: "deny",
    });
    const s = store({ prefix: "cx:" });
    const l = createLimiter({ store: s, policy, onError: (e) => errors.push(e) });
    await admin.set(`cx:${policy.name}:{bad}:g0`, "not a number");
    await admin.sadd(`cx:${policy.name}:{wrongtype}:g0`, "x");
    const [bad, wrong, good] = await Promise.all([
      l.limit("bad"),
      l.limit("wrongtype"),
      l.limit("good"),
    ]);
    expect(bad.reason).toBe("store-error");
    expect(bad.allowed).toBe(false);
    expect(wrong.reason).toBe("store-error");
    expect(good.reason).toBeUndefined();
    expect(good.allowed).toBe(true);
    expect(errors.map((e) => isSluiceError(e, "SLUICE_ERR_CORRUPT_STATE"))).toEqual([true, true]);
    expect(String((errors[0] as Error).message)).toContain(`{bad}`);
  });
});

describe("deny cache", () => {
  it("answers a denied key locally, counting down, until its retry time", async () => {
    let t = 1_700_000_000_000;
    const l = limiter({ algorithm: "gcra", rules: [{ limit: 2, period: "1s" }] }, { now: () => t });
    await l.limit("k");
    await l.limit("k");
    const first = await l.limit("k");
    expect(first).toMatchObject({ allowed: false, retryAfterMs: 500, remaining: 0 });
    expect(first.reason).toBeUndefined();
    const before = await scriptCalls();
    t += 200;
    const cached = await l.limit("k");
    expect(cached).toMatchObject({
      allowed: false,
      retryAfterMs: 300,
      remaining: 0,
      reason: "deny-cache",
    });
    expect(await scriptCalls()).toBe(before);
    t += 300;
    const after = await l.limit("k");
    expect(after.allowed).toBe(true);
    expect(after.reason).toBeUndefined();
  });

  it("is cleared by reset and by a refund in this process", async () => {
    const t = 1_700_000_000_000;
    const l = limiter(
      { algorithm: "fixed-window", rules: [{ limit: 1, period: "1m" }] },
      { now: () => t },
    );
    await l.limit("k");
    expect((await l.limit("k")).reason).toBeUndefined();
    expect((await l.limit("k")).reason).toBe("deny-cache");
    await l.refund("k");
    expect((await l.limit("k")).allowed).toBe(true);
    expect((await l.limit("k")).allowed).toBe(false);
    expect((await l.limit("k")).reason).toBe("deny-cache");
    await l.reset("k");
    expect((await l.limit("k")).allowed).toBe(true);
  });

  it("only answers the same cost (a larger cost waits longer), and can be turned off", async () => {
    const t = 1_700_000_000_000;
    const l = limiter(
      { algorithm: "sliding-log", rules: [{ limit: 3, period: "1s" }] },
      { now: () => t },
    );
    await l.limit("k", { cost: 3 });
    expect((await l.limit("k", { cost: 1 })).reason).toBeUndefined();
    expect((await l.limit("k", { cost: 1 })).reason).toBe("deny-cache");
    const two = await l.limit("k", { cost: 2 });
    expect(two.reason).toBeUndefined();
    expect(two.allowed).toBe(false);
    expect((await l.limit("k", { cost: 2 })).reason).toBe("deny-cache");
    const off = limiter(
      { algorithm: "sliding-log", rules: [{ limit: 1, period: "1s" }] },
      { now: () => t, denyCache: false },
    );
    await off.limit("k");
    await off.limit("k");
    expect((await off.limit("k")).reason).toBeUndefined();
  });

  it("is bounded", async () => {
    const s = store({ denyCacheSize: 3 });
    const l = createLimiter({
      store: s,
      policy: { name: `dcb${run}`, rules: [{ limit: 1, period: "1h" }] },
    });
    for (let i = 0; i < 10; i++) {
      await l.limit(`k${i}`);
      await l.limit(`k${i}`);
    }
    expect((s as unknown as { deny: { size: number } }).deny.size).toBe(3);
  });
});

describe("keys and TTLs", () => {
  /** The longest TTL a key of this policy may have (ms). */
  function bound(alg: AlgorithmName, limit: number, periodMs: number, burst: number): number {
    switch (alg) {
      case "gcra":
      case "token-bucket":
        return Math.ceil((periodMs * burst) / limit);
      case "sliding-window":
        return 2 * periodMs;
      default:
        return periodMs;
    }
  }

  it("no leaks: after 10,000 keys over every algorithm, every key has a TTL within its bound", async () => {
    const prefix = `lk${run}:`;
    const s = store({ prefix });
    const bounds = new Map<string, number>();
    const limiters: Limiter[] = [];
    const periods = [1000, 60_000, 3_600_000];
    // Every algorithm, and the token bucket refilled by interval: at most ceil(7/5) = 2 periods.
    const variants = [
      ...ALGORITHMS.map((alg) => [alg, false] as const),
      ["token-bucket", true] as const,
    ];
    for (const [alg, interval] of variants) {
      for (const periodMs of periods) {
        const name = `${alg}${interval ? "-interval" : ""}-${periodMs}`;
        const burst = alg === "gcra" || alg === "token-bucket" ? 7 : 5;
        const policy: PolicyInput = {
          name,
          algorithm: alg,
          ...(interval ? { refill: "interval" as const } : {}),
          rules: [{ limit: 5, period: periodMs, ...(burst !== 5 ? { burst } : {}) }],
          ...(periodMs === 1000 && alg !== "concurrency" ? { blockDuration: 30_000 } : {}),
        };
        bounds.set(`${name}:`, interval ? 2 * periodMs : bound(alg, 5, periodMs, burst));
        limiters.push(createLimiter({ store: s, policy }));
      }
    }
    const perLimiter = Math.ceil(10_000 / limiters.length);
    for (const [i, l] of limiters.entries()) {
      await Promise.all(
        Array.from({ length: perLimiter }, (_, j) =>
          l.limit(`id-${j}`, { cost: 1 + ((i + j) % 3) }),
        ),
      );
      // A few over the limit, so that penalty blocks are written too.
      await Promise.all(
        Array.from({ length: 20 }, (_, j) =>
          Promise.all([l.limit(`id-${j}`, { cost: 3 }), l.limit(`id-${j}`, { cost: 3 })]),
        ),
      );
    }
    const keys: string[] = [];
    let cursor = "0";
    do {
      const [next, batch] = await admin.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== "0");
    // Keys of the 1 s policies may already have expired; the others are all there.
    expect(keys.length).toBeGreaterThanOrEqual((perLimiter * limiters.length * 2) / 3);
    const pipe = admin.pipeline();
    for (const k of keys) pipe.pttl(k);
    const ttls = (await pipe.exec())!.map(([, v]) => v as number);
    const bad: string[] = [];
    keys.forEach((k, i) => {
      const ttl = ttls[i]!;
      const policy = k.slice(prefix.length, k.indexOf(":{"));
      const b = k.endsWith("b") ? 30_000 : bounds.get(`${policy}:`)!;
      // -1: no TTL (a leak). -2 or 0: expired, or expiring, between SCAN and PTTL (fine).
      if (ttl === -1 || ttl > b) bad.push(`${k} ttl ${ttl} bound ${b}`);
    });
    expect(bad.slice(0, 5)).toEqual([]);
  });

  it("lays keys out as prefix + policy + {identifier} + algorithm and rule; long identifiers hashed", async () => {
    const s = store({ prefix: "kl:" });
    const l = createLimiter({
      store: s,
      policy: {
        name: `layout${run}`,
        algorithm: "token-bucket",
        rules: [
          { limit: 5, period: "1m" },
          { limit: 50, period: "1h" },
        ],
        blockDuration: "1m",
      },
    });
    await l.limit("user:42");
    await l.limit("x".repeat(200));
    const keys = (await admin.keys(`kl:layout${run}:*`)).sort();
    expect(keys).toHaveLength(4);
    expect(keys.filter((k) => k.startsWith(`kl:layout${run}:{user:42}:`)).sort()).toEqual([
      `kl:layout${run}:{user:42}:t0`,
      `kl:layout${run}:{user:42}:t1`,
    ]);
    expect(keys.some((k) => /^kl:layout\w+:\{#[A-Za-z0-9_-]{27}\}:t0$/.test(k))).toBe(true);
  });

  it('a token bucket refilled by interval: keys of its own (i), "tokens refilledAt expiresAt", kept ceil((burst − left)/limit) periods', async () => {
    const t = Date.UTC(2030, 0, 1);
    const s = store({ now: () => t, ttlPadMs: 0, prefix: "iv:" });
    const policy: PolicyInput = {
      name: `iv${run}`,
      algorithm: "token-bucket",
      refill: "interval",
      rules: [
        { limit: 2, period: "10s", burst: 5 },
        { limit: 100, period: "1h" },
      ],
    };
    const l = createLimiter({ store: s, policy });
    await l.limit("k", { cost: 4 });
    const keys = (await admin.keys(`iv:iv${run}:*`)).sort();
    expect(keys).toEqual([`iv:iv${run}:{k}:i0`, `iv:iv${run}:{k}:i1`]);
    // 1 of 5 left: ceil(4/2) = 2 steps of 10 s; 96 of 100: 1 step of an hour.
    expect(await admin.get(keys[0]!)).toBe(`1 ${t} ${t + 20_000}`);
    expect(await admin.get(keys[1]!)).toBe(`96 ${t} ${t + 3_600_000}`);
    const ttl0 = await admin.pttl(keys[0]!);
    const ttl1 = await admin.pttl(keys[1]!);
    expect(ttl0 > 19_900 && ttl0 <= 20_000).toBe(true);
    expect(ttl1 > 3_599_900 && ttl1 <= 3_600_000).toBe(true);
    // A refusal writes nothing.
    await l.limit("k", { cost: 2 });
    expect(await admin.get(keys[0]!)).toBe(`1 ${t} ${t + 20_000}`);
    // The continuous bucket of the same name keeps its own keys (t).
    await createLimiter({ store: s, policy: { ...policy, refill: "continuous" } }).limit("k");
    expect((await admin.keys(`iv:iv${run}:*`)).sort()).toEqual([
      `iv:iv${run}:{k}:i0`,
      `iv:iv${run}:{k}:i1`,
      `iv:iv${run}:{k}:t0`,
      `iv:iv${run}:{k}:t1`,
    ]);
  });
});

describe("failures", () => {
  it("times out with SLUICE_ERR_STORE_TIMEOUT when Redis does not answer in time", async () => {
    const s = store({ timeoutMs: 100, breakerFailures: 100 });
    const policy = definePolicy({ name: `to${run}`, rules: [{ limit: 5, period: "1m" }] });
    await s.decide({ policy, key: "k", cost: 1 });
    await admin.call("CLIENT", "PAUSE", "600", "ALL");
    const err = await s.decide({ policy, key: "k", cost: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as StoreError).code).toBe("SLUICE_ERR_STORE_TIMEOUT");
    // Answers again once the pause is over. (Calls that timed out were still applied by Redis
    // after the pause: the count is not checked here.)
    await waitFor(
      async () => (await s.decide({ policy, key: "k", cost: 1 })).rules.length === 1,
      5000,
      20,
    );
  });

  it("validates its options", async () => {
    expect(() => redisStore({ client, prefx: "x" } as unknown as RedisStoreOptions)).toThrow(
      /prefx: unknown option/,
    );
    expect(() => redisStore({ client, prefix: "a{" })).toThrow(/prefix/);
    expect(() => redisStore({ client, timeoutMs: 0 })).toThrow(/timeoutMs/);
    expect(() => redisStore({ client: {} as unknown as RedisStoreOptions["client"] })).toThrow(
      /client/,
    );
    expect(() => redisStore({ client, logger: "console" as never })).toThrow(
      /logger: must be an object with a warn\(message\) method, or false/,
    );
    await redisStore({ client, logger: false }).close();
  });
});

describe("instances", () => {
  it("counts live stores through Redis, forgets a closed one, and yields to the instances option", async () => {
    const prefix = `in${run}:`;
    const a = redisStore({ client, prefix, heartbeatMs: 50 });
    const b = redisStore({ client, prefix, heartbeatMs: 50 });
    stores.push(a, b);
    await waitFor(() => a.liveInstances() === 2, 5000, 10);
    await b.close();
    expect(await admin.zcard(`${prefix}instances`)).toBe(1);
    const ttl = await admin.pttl(`${prefix}instances`);
    expect(ttl > 0 && ttl <= 150).toBe(true);
    expect(store({ instances: 7 }).liveInstances()).toBe(7);
    expect(store({ heartbeatMs: 0 }).liveInstances()).toBeUndefined();
  });
});

describe("size", () => {
  it("a gcra or fixed-window key costs what a counter key of the same length costs", async () => {
    // The peers keep a small counter with a TTL; sluice keeps gcra's TAT and fixed-window's
    // window in the key's expiry and a small shared integer as its value.
    for (const [i, alg] of (["gcra", "fixed-window"] as const).entries()) {
      const prefix = `m${i}:`;
      const l = createLimiter({
        store: store({ prefix }),
        policy: { name: "api", algorithm: alg, rules: [{ limit: 100, period: "1m" }] },
      });
      for (let j = 0; j < 3; j++) await l.limit("203.0.113.77");
      const key = (await admin.keys(`${prefix}api:*`))[0]!;
      const counter = `c${"-".repeat(key.length - 1)}`;
      await admin.set(counter, "3", "PX", 60_000);
      const usage = async (k: string) =>
        Number(await admin.call("MEMORY", "USAGE", k, "SAMPLES", "0"));
      expect(await usage(key), alg).toBeLessThanOrEqual(await usage(counter));
      await admin.del(counter);
    }
  });

  it("gcra: the key expires at the TAT and holds the µs below that; fixed-window: at the window end, holding the count", async () => {
    const t = Date.UTC(2030, 0, 1);
    const s = store({ now: () => t, ttlPadMs: 0, prefix: "ex:" });
    const g = createLimiter({
      store: s,
      policy: { name: "g", rules: [{ limit: 3, period: "1s" }] },
    });
    await g.limit("k"); // TAT = t + 333.33… ms
    const shift = Date.now() - t; // the store's shift, taken at its first call (± a few ms)
    const gv = await admin.get("ex:g:{k}:g0");
    const ge = await admin.call("PEXPIRETIME", "ex:g:{k}:g0");
    // TAT in µs: one interval of 1000/3 ms rounded up to a whole µs; the key expires at the TAT
    // rounded up to a whole ms, and holds how many µs that is above it.
    const tatUs = t * 1000 + 333_334;
    expect(Number(gv)).toBe(Math.ceil(tatUs / 1000) * 1000 - tatUs);
    expect(Math.abs(Number(ge) - shift - Math.ceil(tatUs / 1000))).toBeLessThanOrEqual(50);
    const f = createLimiter({
      store: s,
      policy: { name: "f", algorithm: "fixed-window", rules: [{ limit: 5, period: "1m" }] },
    });
    await f.limit("k");
    await f.limit("k", { cost: 2 });
    expect(await admin.get("ex:f:{k}:f0")).toBe("3");
    const fe = Number(await admin.call("PEXPIRETIME", "ex:f:{k}:f0"));
    expect(Math.abs(fe - shift - (t - (t % 60_000) + 60_000))).toBeLessThanOrEqual(50);
    // And they read back: the next decisions continue from there.
    expect((await g.peek("k")).remaining).toBe(2);
    expect((await f.limit("k")).remaining).toBe(1);
  });

  it("fixed-window ignores a count kept for another window", async () => {
    let t = Date.UTC(2030, 0, 1);
    const s = store({ now: () => t, ttlPadMs: 3_600_000, prefix: "fw:" });
    const f = createLimiter({
      store: s,
      policy: { name: "f", algorithm: "fixed-window", rules: [{ limit: 2, period: "1s" }] },
    });
    expect((await f.limit("k", { cost: 2 })).remaining).toBe(0);
    t += 1000; // the next window; the key (padded) is still there with count 2
    expect(await admin.get("fw:f:{k}:f0")).toBe("2");
    expect((await f.limit("k")).remaining).toBe(1);
  });
});

/**
 * The test's real client with a look at each EVALSHA/EVAL: `onCall` sees its arguments,
 * `mapReply` may change the reply (to play a broken script).
 */
function spyClient(
  onCall?: (args: Array<string | number | Uint8Array>) => void,
  mapReply?: (reply: unknown) => unknown,
  onSettled?: () => void,
): RedisClientLike {
  return {
    get status() {
      return client.status;
    },
    isCluster: false,
    on: (event, listener) => client.on(event, listener),
    off: (event, listener) => client.off(event, listener),
    async call(command, args) {
      const script = command === "EVALSHA" || command === "EVAL";
      if (script) onCall?.(args);
      try {
        const reply = await client.call(command, args as string[]);
        return script ? (mapReply ?? ((r) => r))(reply) : reply;
      } finally {
        if (script) onSettled?.();
      }
    },
  };
}
