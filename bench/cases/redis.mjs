// Redis cases: decisions/s and latency, bytes per key, and round trips for a hot key.
// Each export runs in its own child process (see lib/child.mjs) against the bench's redis-server.
import { readFileSync } from "node:fs";
import { createHistogram, performance } from "node:perf_hooks";
import { Redis } from "ioredis";
import { commandCalls, parseInfo, usedMemory } from "../lib/redis.mjs";
import { drive, keyAt, makeKeys } from "../lib/util.mjs";

/** The ceiling's minimal GCRA script (GET, TIME, SET PX). */
export const MINIMAL_GCRA = readFileSync(
  new URL("../lib/minimal-gcra.lua", import.meta.url),
  "utf8",
);

/** The policy of the throughput runs: every key stays well inside it, so all are allowed. */
export const THROUGHPUT_LIMIT = { limit: 1000, periodMs: 60_000 };

/** sluice's Redis policy name (one letter: keys stay short, like the peers' with their prefixes). */
export const POLICY_NAME = "b";

function connect(port) {
  return new Redis({ host: "127.0.0.1", port, lazyConnect: false, maxRetriesPerRequest: 1 });
}

/** The client of a "sluice-<client>" contestant (connected), or undefined for plain "sluice". */
async function otherClient(name, port) {
  if (name === "sluice-node-redis") {
    const { createClient } = await import("redis");
    const c = createClient({ socket: { host: "127.0.0.1", port } });
    c.on("error", () => undefined);
    await c.connect();
    return c;
  }
  if (name === "sluice-ioredis5") {
    const { Redis: Redis5 } = await import("ioredis5");
    return new Redis5({ host: "127.0.0.1", port, maxRetriesPerRequest: 1 });
  }
  return undefined;
}

/** Marks a rate-limiter-flexible denial (its `consume` rejects with a non-Error for one). */
const DENIED = Symbol("denied");

/**
 * Builds `{ op(key), close(), isDenied(result) }` for a contestant over `client`:
 * - `sluice`: createLimiter + redisStore (`algorithm`, `denyCache`, `limit`/`periodMs`, or
 *   `rules`: a list of `{ limit, periodMs }` all enforced);
 * - `rlf`: rate-limiter-flexible RateLimiterRedis (`blockOnConsumed` → its in-memory block);
 * - `rlf-union`: rate-limiter-flexible RateLimiterUnion of one RateLimiterRedis per rule of
 *   `rules` (its way to enforce several limits on one key);
 * - `rlr`: rate-limit-redis's RedisStore, driven through `increment(key)`;
 * - `raw`: a bare ioredis EVALSHA of the minimal GCRA script.
 * Denials count as results, never as errors (`op` resolves undefined for a peer's denial).
 */
async function contestant(client, o) {
  const limit = o.limit ?? THROUGHPUT_LIMIT.limit;
  const periodMs = o.periodMs ?? THROUGHPUT_LIMIT.periodMs;
  const rules = o.rules ?? [{ limit, periodMs }];
  if (o.name === "sluice" || o.name.startsWith("sluice-")) {
    const { createLimiter, redisStore } = await import("sluice");
    if (typeof redisStore !== "function") throw new Error("sluice does not export redisStore yet");
    // "sluice-node-redis", "sluice-ioredis5": the same store over another client of its own.
    const own = await otherClient(o.name, client.options.port);
    const store = redisStore({
      client: own ?? client,
      denyCache: o.denyCache ?? true,
      heartbeatMs: 0,
      ...(o.prefix !== undefined ? { prefix: o.prefix } : {}),
      ...(o.maxBatch !== undefined ? { maxBatch: o.maxBatch } : {}),
    });
    const algorithm = o.algorithm ?? "gcra";
    const limiter = createLimiter({
      store,
      policy: {
        name: POLICY_NAME,
        algorithm,
        rules: rules.map((r) => ({ limit: r.limit, period: r.periodMs })),
        ...(o.lease ? { lease: o.lease } : {}),
      },
    });
    // concurrency: leases are held (never released), so each identifier keeps its state.
    return {
      op: (key) => limiter.limit(key),
      close: async () => {
        await store.close();
        if (own) await (own.destroy?.() ?? own.disconnect());
      },
      isDenied: (d) => d?.allowed === false,
    };
  }
  if (o.name === "rlf-union") {
    const { RateLimiterRedis, RateLimiterUnion } = await import("rate-limiter-flexible");
    const union = new RateLimiterUnion(
      ...rules.map(
        (r, i) =>
          new RateLimiterRedis({
            storeClient: client,
            keyPrefix: `rlu${i}`,
            points: r.limit,
            duration: Math.ceil(r.periodMs / 1000),
          }),
      ),
    );
    // It rejects with { keyPrefix: RateLimiterRes | Error } when any limiter did not allow.
    return {
      op: (key) =>
        union.consume(key).catch((e) => {
          if (e instanceof Error) throw e;
          const failure = Object.values(e ?? {}).find((v) => v instanceof Error);
          if (failure) throw failure;
          return DENIED;
        }),
      close: async () => {},
      isDenied: (r) => r === DENIED,
    };
  }
  if (o.name === "rlf") {
    const { RateLimiterRedis } = await import("rate-limiter-flexible");
    const rl = new RateLimiterRedis({
      storeClient: client,
      points: limit,
      duration: Math.ceil(periodMs / 1000),
      ...(o.prefix !== undefined ? { keyPrefix: o.prefix } : {}),
      ...(o.blockOnConsumed
        ? { inMemoryBlockOnConsumed: limit, inMemoryBlockDuration: Math.ceil(periodMs / 1000) }
        : {}),
    });
    // A denial rejects with a RateLimiterRes; a Redis failure with an Error.
    return {
      op: (key) =>
        rl.consume(key).catch((e) => {
          if (e instanceof Error) throw e;
        }),
      close: async () => {},
      isDenied: (r) => r === undefined,
    };
  }
  if (o.name === "rlr") {
    const { RedisStore } = await import("rate-limit-redis");
    const store = new RedisStore({
      sendCommand: (command, ...args) => client.call(command, ...args),
      ...(o.prefix !== undefined ? { prefix: o.prefix } : {}),
    });
    await store.init({ windowMs: periodMs });
    // It only counts (express-rate-limit compares the count with its limit).
    return {
      op: (key) => store.increment(key),
      close: async () => {},
      isDenied: (r) => r.totalHits > limit,
    };
  }
  if (o.name === "raw") {
    const sha = await client.script("LOAD", MINIMAL_GCRA);
    const interval = periodMs / limit;
    const tau = periodMs;
    return {
      op: (key) => client.evalsha(sha, 1, key, interval, tau),
      close: async () => {},
      isDenied: (r) => r[0] === 0,
    };
  }
  throw new Error(`unknown contestant ${o.name}`);
}

/**
 * Decisions/s and p50/p99 latency at `inflight` concurrent calls over `keyCount` identifiers
 * (`name`, `algorithm`, `rules`: see {@link contestant}; `raw-pipeline` sends each wave of
 * `inflight` EVALSHAs as one explicit ioredis pipeline). `denied` counts denials (0 unless the
 * policy is too small for the run).
 */
export async function throughput(o) {
  const client = connect(o.port);
  await client.flushall();
  // A lease run: as a Redis that has served leases before (a fresh one grants none for the
  // first lease lifetime: lua/sluice.lua, leases).
  if (o.lease) await client.set("sl:lease-epoch", "0");
  const keys = makeKeys(o.keyCount);
  const n = keys.length;
  // Spread the in-flight calls over the key space (a stride prime to n), not on neighbours.
  const pick = (i) => keys[(i * 7919) % n];
  let r;
  if (o.name === "raw-pipeline") {
    r = await pipelined(client, pick, o);
  } else {
    const c = await contestant(client, o);
    let cpu0 = 0;
    let scripts0 = 0;
    r = await drive((i) => c.op(pick(i)), {
      inflight: o.inflight,
      durationMs: o.durationMs,
      warmupMs: o.warmupMs,
      latency: true,
      isDenied: c.isDenied,
      onStart: async () => {
        cpu0 = await redisCpu(client);
        scripts0 = await scriptCalls(client);
      },
      onEnd: async (count) => ({
        redisCpuUs: ((await redisCpu(client)) - cpu0) / count,
        // Script calls Redis ran per 1,000 decisions (the bench's own INFO calls aside).
        scriptsPerK: (((await scriptCalls(client)) - scripts0) / count) * 1000,
      }),
    });
    await c.close();
  }
  client.disconnect();
  return r;
}

/** Script calls (EVALSHA, EVAL, FCALL) Redis has run, from INFO commandstats. */
async function scriptCalls(client) {
  const calls = await commandCalls(client);
  return (calls.evalsha ?? 0) + (calls.eval ?? 0) + (calls.fcall ?? 0);
}

/** CPU time redis-server has used (µs, user + system), from INFO cpu. */
async function redisCpu(client) {
  const info = parseInfo(await client.info("cpu"));
  return (Number(info.used_cpu_user) + Number(info.used_cpu_sys)) * 1e6;
}

/** Waves of `inflight` EVALSHAs, each wave one ioredis pipeline; latency is the wave's. */
async function pipelined(client, pick, o) {
  const sha = await client.script("LOAD", MINIMAL_GCRA);
  const interval = THROUGHPUT_LIMIT.periodMs / THROUGHPUT_LIMIT.limit;
  const hist = createHistogram();
  let i = 0;
  let count = 0;
  let denied = 0;
  const wave = async (record) => {
    const t0 = process.hrtime.bigint();
    const p = client.pipeline();
    for (let j = 0; j < o.inflight; j++) p.evalsha(sha, 1, pick(i++), interval, 60_000);
    for (const [err, reply] of await p.exec()) {
      if (err) throw err;
      if (reply[0] === 0) denied++;
    }
    if (record) {
      const dt = process.hrtime.bigint() - t0;
      for (let j = 0; j < o.inflight; j++) hist.record(dt);
      count += o.inflight;
    }
  };
  const warmEnd = performance.now() + o.warmupMs;
  while (performance.now() < warmEnd) await wave(false);
  const redis0 = await redisCpu(client);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < o.durationMs) await wave(true);
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return {
    nodeCpuUs: (cpu.user + cpu.system) / count,
    redisCpuUs: ((await redisCpu(client)) - redis0) / count,
    ops: count / seconds,
    count,
    seconds,
    errors: 0,
    denied,
    p50: hist.percentile(50) / 1e6,
    p99: hist.percentile(99) / 1e6,
  };
}

/**
 * Redis bytes per identifier: INFO used_memory growth over `count` identifiers decided once
 * each (after FLUSHALL and one warm-up decision, which loads the scripts). Also returns a
 * sample key and the number of keys written per identifier.
 */
export async function memory(o) {
  // The measuring client only reads INFO: the deciding client is closed before the second
  // reading, so that its query and reply buffers (larger for a batch of many decisions than
  // for a single command) are not counted as key memory.
  const admin = connect(o.port);
  const client = connect(o.port);
  await admin.flushall();
  const c = await contestant(client, { ...o, limit: 100, periodMs: 3_600_000 });
  // Warm up with a few thousand identifiers of their own (scripts loaded, Redis's and the
  // allocator's first-use structures made), so that the reading counts only the keys.
  const warm = Math.min(2000, o.count);
  for (let i = 0; i < warm; i += 64)
    await Promise.all(Array.from({ length: 64 }, (_, j) => c.op(keyAt(i + j, o.idLength, "w"))));
  const before = await usedMemory(admin);
  const keysBefore = await admin.dbsize();
  const inflight = 128;
  let next = 0;
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      while (next < o.count) await c.op(keyAt(next++, o.idLength));
    }),
  );
  await c.close();
  await client.quit();
  const after = await usedMemory(admin);
  const keys = (await admin.dbsize()) - keysBefore;
  let sample = [];
  let cursor = "0";
  do {
    [cursor, sample] = await admin.scan(
      cursor,
      "MATCH",
      `*${keyAt(1, o.idLength)}*`,
      "COUNT",
      10_000,
    );
  } while (sample.length === 0 && cursor !== "0");
  admin.disconnect();
  return {
    bytesPerId: (after - before) / o.count,
    keysPerId: keys / o.count,
    sampleKey: sample[0] ?? "?",
  };
}

/**
 * Hot key under attack: `requests` calls at one identifier (limit 10/min, so all but the first
 * 10 are denied), `inflight` at a time; counts the script calls Redis saw (INFO commandstats).
 */
export async function hotKey(o) {
  const client = connect(o.port);
  await client.flushall();
  const c = await contestant(client, { ...o, limit: 10, periodMs: 60_000 });
  await c.op("warmup-key-0000");
  const before = await commandCalls(client);
  let denied = 0;
  let allowed = 0;
  const count = (d) => {
    // sluice resolves a Decision; rate-limiter-flexible's op resolves undefined when denied.
    if (d === undefined || d?.allowed === false) denied++;
    else allowed++;
  };
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: o.inflight }, async () => {
      while (next++ < o.requests) count(await c.op("hot-identifier0"));
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const after = await commandCalls(client);
  await c.close();
  client.disconnect();
  const calls = ["evalsha", "eval"].reduce((s, k) => s + ((after[k] ?? 0) - (before[k] ?? 0)), 0);
  return {
    calls,
    denied,
    allowed,
    perHundredK: (calls * 100_000) / denied,
    ops: o.requests / seconds,
  };
}
