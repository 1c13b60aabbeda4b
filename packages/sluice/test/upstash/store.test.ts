/**
 * The Redis store over HTTP (`sluice/upstash`): `@upstash/redis`'s real client, through the
 * Upstash REST fixture (test/support/upstash-rest.ts), in front of a real redis-server. The
 * same conformance table as every store, the same keys as the TCP store, NOSCRIPT, pipelines,
 * exactness under concurrency, deadlines and onStoreError.
 */
import { Redis as UpstashRedis } from "@upstash/redis";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Limiter,
  type PolicyInput,
  type RedisStore,
  StoreError,
  ValidationError,
  createLimiter,
  redisStore,
} from "../../src/index.js";
import { Ratelimit } from "../../src/compat/upstash.js";
import { UpstashCommandError, upstashClient, upstashStore } from "../../src/stores/upstash.js";
import { SLUICE_LUA } from "../../src/stores/lua-scripts.js";
import { waitFor } from "../../../../test/support/ports.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { type UpstashRest, startUpstashRest } from "../../../../test/support/upstash-rest.js";
import { runConformance } from "../conformance/run.js";

let server: RedisServer;
let rest: UpstashRest;
let direct: Redis;
const stores: RedisStore[] = [];
const run = Date.now().toString(36);

beforeAll(async () => {
  server = await startRedis();
  rest = await startUpstashRest({ redisUrl: server.url });
  direct = new Redis(server.url);
});

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  direct?.disconnect();
  await rest?.stop();
  await server?.stop();
});

/** The real client, as applications make it (base64 answers, automatic pipelining: defaults). */
function upstash(options: { retry?: false } = {}): UpstashRedis {
  return new UpstashRedis({ url: rest.url, token: rest.token, ...options });
}

function store(options: Partial<Parameters<typeof upstashStore>[0]> = {}): RedisStore {
  const s = upstashStore({ redis: upstash(), ...options });
  stores.push(s);
  return s;
}

function pipelines(): number {
  return rest.requests.get("/pipeline") ?? 0;
}

runConformance("redis over HTTP (Upstash REST)", (now) => store({ now, denyCache: false }));
runConformance("redis over HTTP (Upstash REST, deny cache on)", (now) =>
  store({ now, denyCache: true }),
);

describe("upstashStore", () => {
  it("writes the keys the TCP store reads: one semantics, one key layout", async () => {
    const policy: PolicyInput = {
      name: `same${run}`,
      algorithm: "fixed-window",
      rules: [{ limit: 5, period: "1h" }],
    };
    const overHttp = createLimiter({ store: store(), policy });
    const tcp = redisStore({ client: direct, heartbeatMs: 0, denyCache: false });
    stores.push(tcp);
    const overTcp = createLimiter({ store: tcp, policy });
    const id = "user:" + "x".repeat(80); // hashed into the key
    for (let i = 0; i < 3; i++) expect((await overHttp.limit(id)).allowed).toBe(true);
    expect((await overTcp.limit(id)).remaining).toBe(1);
    expect((await overHttp.limit(id)).remaining).toBe(0);
    const keys = await direct.keys(`sl:same${run}:*`);
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^sl:same[a-z0-9]+:\{#[A-Za-z0-9_-]{27}\}:f0$/);
  });

  it("loads the script with EVAL when Redis answers NOSCRIPT (after SCRIPT FLUSH)", async () => {
    const l = createLimiter({
      store: store(),
      policy: { name: `flush${run}`, rules: [{ limit: 3, period: "1h" }] },
    });
    expect((await l.limit("k")).remaining).toBe(2);
    await direct.script("FLUSH");
    expect(await direct.script("EXISTS", SLUICE_LUA.sha)).toEqual([0]);
    const d = await l.limit("k");
    expect([d.allowed, d.remaining, d.reason]).toEqual([true, 1, undefined]);
    expect(await direct.script("EXISTS", SLUICE_LUA.sha)).toEqual([1]);
  });

  it("sends a tick's decisions as one script call in one HTTP request", async () => {
    const l = createLimiter({
      store: store({ denyCache: false }),
      policy: { name: `batch${run}`, rules: [{ limit: 1000, period: "1h" }] },
    });
    await l.limit("warm");
    const before = pipelines();
    const ds = await Promise.all(Array.from({ length: 100 }, (_, i) => l.limit(`k${i % 10}`)));
    expect(ds.every((d) => d.allowed)).toBe(true);
    // 100 decisions: one flush, at most four script calls (MAX_IN_FLIGHT), one pipeline.
    expect(pipelines() - before).toBe(1);
  });

  it("is exact under concurrency: many stores and clients, one key, exactly the limit", async () => {
    const policy: PolicyInput = { name: `exact${run}`, rules: [{ limit: 37, period: "1h" }] };
    const limiters: Limiter[] = Array.from({ length: 4 }, () =>
      createLimiter({ store: store({ denyCache: false }), policy }),
    );
    const ds = await Promise.all(
      Array.from({ length: 400 }, (_, i) => limiters[i % 4]!.limit("one-key")),
    );
    expect(ds.filter((d) => d.allowed)).toHaveLength(37);
    expect(ds.every((d) => d.reason === undefined)).toBe(true);
  });

  it("answers by onStoreError when the server does not answer in time, and never charges later", async () => {
    const s = store({ timeoutMs: 300, denyCache: false });
    const l = createLimiter({
      store: s,
      policy: { name: `late${run}`, rules: [{ limit: 50, period: "1h" }], onStoreError: "deny" },
    });
    // A first answer teaches the store the server's clock (deadlines travel on it).
    expect((await l.limit("probe")).allowed).toBe(true);
    server.pause();
    let ds;
    const started = performance.now();
    try {
      ds = await Promise.all(Array.from({ length: 20 }, () => l.limit("k")));
    } finally {
      server.resume();
    }
    expect(performance.now() - started).toBeLessThan(2000);
    expect(ds.every((d) => !d.allowed && d.reason === "store-error")).toBe(true);
    // The fixture delivers the calls once Redis wakes; the script refuses them (past deadline).
    await waitFor(async () => (await l.peek("probe")).reason === undefined, 10_000, 50);
    const d = await l.peek("k");
    expect([d.reason, d.remaining]).toEqual([undefined, 50]);
  });

  it("fails fast to onStoreError when nothing answers at the URL, then opens its breaker", async () => {
    const dead = upstashStore({
      redis: new UpstashRedis({ url: "http://127.0.0.1:1", token: "t", retry: false }),
      breakerFailures: 2,
    });
    stores.push(dead);
    const l = createLimiter({
      store: dead,
      policy: { name: `dead${run}`, rules: [{ limit: 5, period: "1m" }], onStoreError: "allow" },
    });
    for (let i = 0; i < 3; i++) {
      const d = await l.limit("k");
      expect([d.allowed, d.reason]).toEqual([true, "store-error"]);
    }
    expect(dead.breakerOpen).toBe(true);
    await expect(dead.decide({ policy: l.policy, key: "k", cost: 1 })).rejects.toBeInstanceOf(
      StoreError,
    );
  });

  it("validates its options, naming the field", () => {
    expect(() => upstashStore({ redis: {} as never })).toThrow(ValidationError);
    expect(() => upstashStore({ redis: {} as never })).toThrow(
      /redis: must be an @upstash\/redis client/,
    );
    expect(() => upstashStore({ redis: upstash(), client: direct } as never)).toThrow(
      /client: not an option of upstashStore/,
    );
    expect(() => upstashStore({ redis: upstash(), timeoutMs: 0 })).toThrow(
      /timeoutMs: must be an integer ≥ 1/,
    );
    expect(() => upstashStore({ redis: upstash(), bogus: 1 } as never)).toThrow(
      /bogus: unknown option/,
    );
  });
});

describe("upstashClient", () => {
  it("answers each call of a pipeline with its own result or error", async () => {
    const c = upstashClient(upstash());
    const script = "return {tonumber(ARGV[1]) + 1, KEYS[1]}";
    const sha = (await direct.script("LOAD", script)) as string;
    const before = pipelines();
    const [ok, missing, evaluated] = await Promise.allSettled([
      c.call("EVALSHA", [sha, 1, "key", 41]),
      c.call("EVALSHA", ["0".repeat(40), 0]),
      c.call("EVAL", [script, 1, "k2", 1]),
    ]);
    expect(pipelines() - before).toBe(1);
    expect(ok).toEqual({ status: "fulfilled", value: [42, "key"] });
    expect(missing.status).toBe("rejected");
    const err = (missing as PromiseRejectedResult).reason as Error;
    expect(err).toBeInstanceOf(UpstashCommandError);
    expect(err.message).toMatch(/^NOSCRIPT/);
    expect(evaluated).toEqual({ status: "fulfilled", value: [2, "k2"] });
    expect(c.status).toBe("ready");
  });

  it("refuses commands the store never sends, and clients that are not @upstash/redis", async () => {
    await expect(upstashClient(upstash()).call("GET", ["k"])).rejects.toThrow(
      /GET is not supported/,
    );
    expect(() => upstashClient({} as never)).toThrow(/redis: must be an @upstash\/redis client/);
  });
});

describe("sluice/compat/upstash over HTTP", () => {
  it("takes the @upstash/redis client an @upstash/ratelimit app already has", async () => {
    const ratelimit = new Ratelimit({
      redis: upstash(),
      limiter: Ratelimit.slidingWindow(3, "10 s"),
      prefix: `rl${run}`,
    });
    const rs = [];
    for (let i = 0; i < 4; i++) rs.push(await ratelimit.limit("user-1"));
    expect(rs.map((r) => r.success)).toEqual([true, true, true, false]);
    expect(await direct.keys(`sl:rl${run}:{user-1}:*`)).toEqual([`sl:rl${run}:{user-1}:s0`]);
  });
});
