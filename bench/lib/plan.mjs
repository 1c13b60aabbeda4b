// What the bench measures, in which order, with which counts; runs it with progress.
import { Redis } from "ioredis";
import { readFileSync } from "node:fs";
import { BENCH_DIR, fmtMs, fmtRate, median, run } from "./util.mjs";
import { runCaseRetry } from "./children.mjs";
import { join } from "node:path";
import { measureService } from "./service.mjs";
import { PAIRS as COMPAT_PAIRS } from "../cases/compat.mjs";
import { measureGrpc } from "./grpc.mjs";

/** The sections `--only` accepts. */
export const SECTIONS = [
  "memory",
  "memory-random",
  "memory-hot",
  "memory-sync",
  "memory-flood",
  "heap",
  "redis",
  "redis-policies",
  "ceiling",
  "redis-memory",
  "hot-key",
  "service",
  "compat",
  "leases",
  "grpc",
  "telemetry",
  "adaptive",
  "multi-region",
];

/** Every algorithm, in the order the tables list them. */
export const ALGORITHMS = [
  "gcra",
  "token-bucket",
  "fixed-window",
  "sliding-window",
  "sliding-log",
  "concurrency",
];

/** The algorithms with a `limitSync` figure (concurrency has no synchronous release). */
export const SYNC_ALGORITHMS = ALGORITHMS.filter((a) => a !== "concurrency");

/** The Redis contestants of the throughput runs, in table order. */
export const REDIS_CONTESTANTS = [
  "sluice",
  "sluice-node-redis",
  "sluice-ioredis5",
  "rlf",
  "rlr",
  "raw",
  "raw-pipeline",
];

/**
 * The two-rule policy of the Redis figures: 100 per second AND 100,000 per hour. With 100k
 * identifiers round robin at ~200k decisions/s each key sees ~2 a second and ~10 in a run
 * (FLUSHALL first), so neither rule ever denies.
 */
export const TWO_RULES = [
  { limit: 100, periodMs: 1000 },
  { limit: 100_000, periodMs: 3_600_000 },
];

/** The round-robin policy of the memory figures, both sides: never reached in a run. */
export const MEMORY_POLICY = { limit: 1000, periodMs: 60_000 };

/**
 * The hot-key policy: so large that no key of the 1,000, each hit thousands of times a second,
 * comes near it (nothing is denied), on both sides. Note that at this rate a GCRA TAT or a
 * token-bucket deficit lasts 0.06 ms past each hit: it is the keys that stay, not their state.
 */
export const HOT_POLICY = { limit: 1_000_000, periodMs: 60_000 };

/**
 * sluice's sliding-log allows at most 100,000 per rule (one entry per request and ms): its
 * hot-key policy is 100,000 per second, which no key comes near either, and which keeps each
 * key's log at about a second of entries (a steady state, not a log that grows all run long).
 */
export const HOT_SLIDING_LOG_POLICY = { limit: 100_000, periodMs: 1000 };

/** The hot-key figures' policies (saved with the results, for the report). */
const HOT = { policy: HOT_POLICY, slidingLogPolicy: HOT_SLIDING_LOG_POLICY };

/**
 * The Redis policies beyond GCRA, each against rate-limiter-flexible: `contestants` maps a
 * contestant id to the parameters of cases/redis.mjs `throughput`.
 */
export const REDIS_POLICIES = {
  "sliding-window": {
    contestants: {
      sluice: { name: "sluice", algorithm: "sliding-window" },
      rlf: { name: "rlf" },
    },
  },
  "two-rule": {
    contestants: {
      sluice: { name: "sluice", algorithm: "gcra", rules: TWO_RULES },
      "rlf-union": { name: "rlf-union", rules: TWO_RULES },
      rlf: { name: "rlf", ...TWO_RULES[0] },
    },
  },
};

const FULL = {
  rounds: 3,
  memory: { durationMs: 2000, warmupMs: 700, keyCount: 100_000, policy: MEMORY_POLICY },
  memoryRandom: {
    durationMs: 2000,
    warmupMs: 700,
    keyCount: 100_000,
    policy: MEMORY_POLICY,
    order: "random",
  },
  memoryHot: { durationMs: 2000, warmupMs: 700, keyCount: 1000, ...HOT },
  memorySync: { durationMs: 2000, warmupMs: 700, keyCount: 100_000, policy: MEMORY_POLICY },
  memoryFlood: { maxKeys: 200_000 },
  heap: { count: 200_000 },
  redis: { durationMs: 4000, warmupMs: 700, keyCount: 100_000, inflight: [1, 16, 256] },
  redisPolicies: {
    durationMs: 4000,
    warmupMs: 700,
    keyCount: 100_000,
    inflight: [16, 256],
    twoRules: TWO_RULES,
  },
  ceiling: { n: 200_000, clients: 50, pipeline: 16, keyCount: 100_000 },
  redisMemory: { count: 100_000, idLength: 16 },
  hotKey: { requests: 100_000, inflight: 16 },
  service: { durationS: 6, warmupS: 3, rounds: 3, connections: 64, distinct: 2000, workers: 2 },
  compat: { durationMs: 3000, warmupMs: 700, keyCount: 100_000, inflight: 64 },
  leases: { durationMs: 3000, warmupMs: 1000, inflight: 256, hotKeys: 100, coldKeys: 100_000 },
  // As issue 21 measured it: 4 connections × 32 calls in flight, three interleaved rounds.
  grpc: { durationS: 10, warmupS: 3, rounds: 3, clients: 4, streams: 32, workers: 2 },
  // Issue 33: the memory and Redis rows (config.memory, config.redis at 256 in flight) without
  // and with the app's OpenTelemetry SDK, collecting every 500 ms.
  telemetry: { exportIntervalMs: 500, inflight: 256 },
};

const QUICK = {
  rounds: 1,
  // Enough identifiers that no key reaches 1000 per minute at full speed in a quick run.
  memory: { durationMs: 150, warmupMs: 50, keyCount: 10_000, policy: MEMORY_POLICY },
  memoryRandom: {
    durationMs: 150,
    warmupMs: 50,
    keyCount: 10_000,
    policy: MEMORY_POLICY,
    order: "random",
  },
  memoryHot: { durationMs: 150, warmupMs: 50, keyCount: 1000, ...HOT },
  memorySync: { durationMs: 150, warmupMs: 50, keyCount: 10_000, policy: MEMORY_POLICY },
  memoryFlood: { maxKeys: 20_000 },
  heap: { count: 5000 },
  redis: { durationMs: 200, warmupMs: 50, keyCount: 1000, inflight: [1, 16, 256] },
  redisPolicies: {
    durationMs: 200,
    warmupMs: 50,
    keyCount: 10_000,
    inflight: [16, 256],
    twoRules: TWO_RULES,
  },
  ceiling: { n: 10_000, clients: 50, pipeline: 16, keyCount: 1000 },
  redisMemory: { count: 2000, idLength: 16 },
  hotKey: { requests: 2000, inflight: 16 },
  service: { durationS: 1, warmupS: 1, rounds: 1, connections: 16, distinct: 500, workers: 2 },
  compat: { durationMs: 200, warmupMs: 50, keyCount: 10_000, inflight: 64 },
  leases: { durationMs: 200, warmupMs: 100, inflight: 256, hotKeys: 100, coldKeys: 10_000 },
  grpc: { durationS: 1, warmupS: 0, rounds: 1, clients: 2, streams: 8, workers: 2 },
  telemetry: { exportIntervalMs: 50, inflight: 256 },
};

/**
 * The lease figures: hot keys (100 identifiers, 256 in flight) and cold ones (100,000 round
 * robin), gcra of 1,000,000,000 per hour (never reached), each contestant by id.
 */
export const LEASE_CONTESTANTS = {
  hot: {
    lease: { name: "sluice", lease: true, limit: 1e9, periodMs: 3_600_000 },
    "no-lease": { name: "sluice", limit: 1e9, periodMs: 3_600_000 },
    rlf: { name: "rlf", limit: 1e9, periodMs: 3_600_000 },
  },
  cold: {
    lease: { name: "sluice", lease: true, limit: 1e9, periodMs: 3_600_000 },
    "no-lease": { name: "sluice", limit: 1e9, periodMs: 3_600_000 },
  },
};

/**
 * The telemetry figures (issue 33): each store's case, as the memory (gcra, awaited, round
 * robin) and Redis (gcra, 256 in flight) rows measure it, without and with the SDK.
 */
export const TELEMETRY_STORES = ["memory", "redis"];

/** sluice's Redis key for an identifier of `idLength` characters: `sl:b:{<id>}:g0`. */
const sluiceKeyLength = (idLength) => "sl:b:{".length + idLength + "}:g0".length;

/**
 * Builds the plan for one run. `plan.run()` resolves the results:
 * { memory, memoryRandom, memoryLoop, memoryHot, memorySync, memoryFlood, memoryFloodHeap, heap, redis,
 * redisPolicies, ceiling, redisMemory, hotKey, service, compat, leases, grpc, telemetry,
 * failures }, each figure the median over the rounds. memorySync's peer is memory.rlf
 * (RateLimiterMemory has no synchronous path); memoryLoop is the awaited loop without a
 * limiter. telemetry: { memory, redis }, each { none, sdk } (without and with the app's
 * OpenTelemetry SDK, alternated within each round).
 */
export function planFor({ quick, only, port, log }) {
  const config = quick ? QUICK : FULL;
  const want = (s) => !only || only.includes(s);
  const tasks = [];
  const samples = new Map();
  /** The memory-flood runs per algorithm (fill and flood rates of one process each). */
  const floods = new Map();
  /** The memory-flood heap runs per algorithm (heap at the cap and after 10× the cap). */
  const floodHeaps = new Map();
  const results = {
    memory: {},
    memoryRandom: {},
    memoryLoop: undefined,
    memoryHot: {},
    memorySync: {},
    memoryFlood: {},
    memoryFloodHeap: {},
    heap: {},
    redis: {},
    redisPolicies: {},
    ceiling: undefined,
    redisMemory: {},
    hotKey: {},
    service: undefined,
    compat: {},
    leases: {},
    grpc: undefined,
    telemetry: {},
    failures: [],
  };
  const add = (section, label, fn, summary) => tasks.push({ section, label, fn, summary });
  const keep = (id, r) => {
    // A figure with failed calls measures the failure path: never keep it.
    if (r.errors > 0) throw new Error(`${r.errors} calls failed: ${r.error}`);
    // Nor one with denials: every policy is meant to allow every call of a run.
    if (r.denied > 0)
      throw new Error(`${r.denied} calls were denied: the policy is too small for this run`);
    if (!samples.has(id)) samples.set(id, []);
    samples.get(id).push(r);
  };
  const rate = (r) =>
    `${fmtRate(r.ops)}/s${r.bytesPerOp !== undefined ? `, ${r.bytesPerOp.toFixed(0)} B/decision` : ""}`;
  const lat = (r) => `${fmtRate(r.ops)}/s  p50 ${fmtMs(r.p50)}  p99 ${fmtMs(r.p99)}`;

  for (let round = 1; round <= config.rounds; round++) {
    const tag = config.rounds > 1 ? ` (round ${round}/${config.rounds})` : "";
    // Memory store, awaited: round robin over many keys, the same keys in a random order, then
    // hot keys; the awaited loop alone; limitSync. The sync figures' peer is the round-robin
    // RateLimiterMemory (it has no synchronous path).
    const memoryCases = [
      ["memory", "memory", config.memory],
      ["memory-random", "memory random keys", config.memoryRandom],
      ["memory-hot", "memory hot key", config.memoryHot],
    ];
    if (want("memory") || want("memory-random")) {
      add(
        "memory",
        `memory: the awaited loop alone${tag}`,
        async () => {
          const r = await runCaseRetry("memory", "loopAlone", config.memory);
          keep("memory-loop", r);
          return r;
        },
        (r) => `${rate(r)}, ${r.bytesPerOp.toFixed(0)} B per call`,
      );
    }
    for (const [section, title, m] of memoryCases) {
      const { slidingLogPolicy, ...params } = m;
      const policyOf = (algorithm) =>
        algorithm === "sliding-log" && slidingLogPolicy ? slidingLogPolicy : m.policy;
      const peerNeeded = want(section) || (section === "memory" && want("memory-sync"));
      if (!peerNeeded) continue;
      add(
        section,
        `${title}: RateLimiterMemory${tag}`,
        async () => {
          const r = await runCaseRetry("memory", "throughput", { ...params, name: "rlf" });
          keep(`${section}:rlf`, r);
          return r;
        },
        rate,
      );
      if (!want(section)) continue;
      // concurrency's peer: a point consumed and given back, as sluice's limit + release.
      add(
        section,
        `${title}: RateLimiterMemory consume + reward${tag}`,
        async () => {
          const r = await runCaseRetry("memory", "throughput", { ...params, name: "rlf-reward" });
          keep(`${section}:rlf-reward`, r);
          return r;
        },
        rate,
      );
      for (const algorithm of ALGORITHMS) {
        add(
          section,
          `${title}: sluice ${algorithm}${tag}`,
          async () => {
            const r = await runCaseRetry("memory", "throughput", {
              ...params,
              name: "sluice",
              algorithm,
              policy: policyOf(algorithm),
            });
            keep(`${section}:${algorithm}`, r);
            return r;
          },
          rate,
        );
      }
    }
    if (want("memory-sync")) {
      for (const algorithm of SYNC_ALGORITHMS) {
        add(
          "memory-sync",
          `memory limitSync: sluice ${algorithm}${tag}`,
          async () => {
            const r = await runCaseRetry("memory", "throughputSync", {
              algorithm,
              ...config.memorySync,
            });
            keep(`memory-sync:${algorithm}`, r);
            return r;
          },
          rate,
        );
      }
    }
    if (want("memory-flood")) {
      for (const algorithm of ALGORITHMS) {
        add(
          "memory-flood",
          `memory flood at the cap: sluice ${algorithm}${tag}`,
          async () => {
            const r = await runCaseRetry("memory", "flood", { algorithm, ...config.memoryFlood });
            if (!r.hotDenied) throw new Error("the exhausted hot key was evicted by the flood");
            const all = floods.get(algorithm) ?? [];
            all.push(r);
            floods.set(algorithm, all);
            return r;
          },
          (r) =>
            `fill ${fmtRate(r.fill)}/s, flood ${fmtRate(r.flood)}/s: a flood costs ${r.ratio.toFixed(2)}× filling`,
        );
        add(
          "memory-flood",
          `memory flood at the cap, heap: sluice ${algorithm}${tag}`,
          async () => {
            const r = await runCaseRetry(
              "memory",
              "floodHeap",
              { algorithm, ...config.memoryFlood },
              { nodeArgs: ["--expose-gc"] },
            );
            if (!r.hotDenied) throw new Error("the exhausted hot key was evicted by the flood");
            if (r.keyCount !== config.memoryFlood.maxKeys)
              throw new Error(`the store holds ${r.keyCount} keys, not its cap`);
            const all = floodHeaps.get(algorithm) ?? [];
            all.push(r);
            floodHeaps.set(algorithm, all);
            return r;
          },
          (r) =>
            `${r.heldPerKey.toFixed(0)} B/key held at the cap, ${r.floodPerKey.toFixed(0)} B/key after ${r.times}× the cap: heap ${r.ratio.toFixed(2)}× (the store's share ${r.storeRatio.toFixed(2)}×)`,
        );
      }
    }
    if (want("redis")) {
      const c = config.redis;
      for (const inflight of c.inflight) {
        for (const name of REDIS_CONTESTANTS) {
          add(
            "redis",
            `redis @${inflight}: ${name}${tag}`,
            async () => {
              const params = { ...c, name, port, inflight };
              const r = await runCaseRetry("redis", "throughput", params);
              keep(`redis:${inflight}:${name}`, r);
              return r;
            },
            lat,
          );
        }
      }
    }
    if (want("compat")) {
      // Each drop-in face against the library it replaces, one after the other.
      for (const pair of Object.keys(COMPAT_PAIRS)) {
        for (const which of ["peer", "face"]) {
          add(
            "compat",
            `compat ${pair}: ${COMPAT_PAIRS[pair][which]}${tag}`,
            async () => {
              const r = await runCaseRetry(
                "compat",
                "throughput",
                { ...config.compat, pair, which, port },
                // The Upstash peer runs through the REST fixture, a TypeScript file.
                pair === "upstash" && which === "peer" ? { nodeArgs: ["--import", "tsx"] } : {},
              );
              keep(`compat:${pair}:${which}`, r);
              return r;
            },
            lat,
          );
        }
      }
    }
    if (want("leases")) {
      const c = config.leases;
      for (const [kind, contestants] of Object.entries(LEASE_CONTESTANTS)) {
        for (const [id, params] of Object.entries(contestants)) {
          add(
            "leases",
            `leases, ${kind} keys: ${id}${tag}`,
            async () => {
              const r = await runCaseRetry("redis", "throughput", {
                ...params,
                port,
                inflight: c.inflight,
                durationMs: c.durationMs,
                warmupMs: c.warmupMs,
                keyCount: kind === "hot" ? c.hotKeys : c.coldKeys,
              });
              keep(`leases:${kind}:${id}`, r);
              return r;
            },
            (r) => `${lat(r)}  ${r.scriptsPerK.toFixed(1)} script calls per 1,000`,
          );
        }
      }
    }
    if (want("redis-policies")) {
      const c = config.redisPolicies;
      for (const [policy, { contestants }] of Object.entries(REDIS_POLICIES)) {
        for (const inflight of c.inflight) {
          for (const [id, params] of Object.entries(contestants)) {
            add(
              "redis-policies",
              `redis ${policy} @${inflight}: ${id}${tag}`,
              async () => {
                const { twoRules: _, ...counts } = c;
                const r = await runCaseRetry("redis", "throughput", {
                  ...counts,
                  ...params,
                  port,
                  inflight,
                });
                keep(`redis-policies:${policy}:${inflight}:${id}`, r);
                return r;
              },
              lat,
            );
          }
        }
      }
    }
    if (want("telemetry")) {
      // Without the SDK, then with it, one after the other in each round (A B A B …): the
      // ratio compares neighbours in time on this shared machine.
      const c = config.telemetry;
      const counts = (store) => {
        if (store === "memory") return config.memory;
        const { inflight: _, ...redis } = config.redis;
        return { ...redis, port, inflight: c.inflight };
      };
      for (const store of TELEMETRY_STORES) {
        for (const sdk of [false, true]) {
          add(
            "telemetry",
            `telemetry, ${store === "memory" ? "memory gcra awaited" : `redis gcra @${c.inflight}`}: ${sdk ? "SDK registered" : "no SDK"}${tag}`,
            async () => {
              const r = await runCaseRetry("telemetry", "throughput", {
                ...counts(store),
                store,
                sdk,
                exportIntervalMs: c.exportIntervalMs,
              });
              keep(`telemetry:${store}:${sdk ? "sdk" : "none"}`, r);
              return r;
            },
            (r) =>
              `${store === "redis" ? lat(r) : rate(r)}` +
              (r.sdk
                ? `  ${r.collections} collection(s) in the run; exported ${fmtRate(r.exported)} decisions, ${fmtRate(r.timed)} durations`
                : ""),
          );
        }
      }
    }
  }

  if (want("heap")) {
    const h = config.heap;
    const opts = { nodeArgs: ["--expose-gc"] };
    add(
      "heap",
      "heap: RateLimiterMemory",
      async () => {
        const r = await runCaseRetry("memory", "heap", { name: "rlf", ...h }, opts);
        results.heap.rlf = r.bytesPerKey;
        return r;
      },
      (r) => `${r.bytesPerKey.toFixed(0)} B/identifier`,
    );
    for (const algorithm of ALGORITHMS) {
      add(
        "heap",
        `heap: sluice ${algorithm}`,
        async () => {
          const r = await runCaseRetry("memory", "heap", { name: "sluice", algorithm, ...h }, opts);
          results.heap[algorithm] = r.bytesPerKey;
          return r;
        },
        (r) => `${r.bytesPerKey.toFixed(0)} B/identifier`,
      );
    }
  }

  if (want("ceiling")) {
    add(
      "ceiling",
      "ceiling: redis-benchmark EVALSHA (minimal GCRA)",
      async () => {
        results.ceiling = await redisBenchmark(port, config.ceiling);
        return results.ceiling;
      },
      (r) => `${fmtRate(r.rps)}/s`,
    );
  }

  if (want("redis-memory")) {
    const m = config.redisMemory;
    const L = sluiceKeyLength(m.idLength);
    // Peers' prefixes padded so that every Redis key has the same length as sluice's.
    const peers = [
      ["rlf", { name: "rlf", prefix: "rlflx".padEnd(L - m.idLength - 1, "-") }],
      ["rlr", { name: "rlr", prefix: "rl:".padEnd(L - m.idLength - 1, "-") + ":" }],
    ];
    const entries = [...ALGORITHMS.map((a) => [a, { name: "sluice", algorithm: a }]), ...peers];
    // The first keys a fresh redis-server holds cost it a little more (about 0.5 B per
    // identifier here, whoever writes them): one unrecorded run first, then every contestant
    // `rounds` times, interleaved, keeping the median.
    add(
      "redis-memory",
      "redis memory: warm-up (not recorded)",
      () => runCaseRetry("redis", "memory", { ...peers[0][1], port, ...m }),
      (r) => `${r.bytesPerId.toFixed(0)} B/identifier`,
    );
    const byId = new Map();
    for (let round = 1; round <= config.rounds; round++) {
      for (const [id, params] of entries) {
        add(
          "redis-memory",
          `redis memory: ${id}${config.rounds > 1 ? ` (round ${round}/${config.rounds})` : ""}`,
          async () => {
            const r = await runCaseRetry("redis", "memory", { ...params, port, ...m });
            const all = byId.get(id) ?? [];
            all.push(r);
            byId.set(id, all);
            const bytes = median(all.map((x) => x.bytesPerId));
            results.redisMemory[id] = { ...r, bytesPerId: bytes, rounds: all.length };
            return r;
          },
          (r) => `${r.bytesPerId.toFixed(1)} B/identifier (${r.sampleKey})`,
        );
      }
    }
  }

  if (want("hot-key")) {
    const h = config.hotKey;
    const variants = [
      ["sluice", { name: "sluice", denyCache: true }],
      ["sluice-nocache", { name: "sluice", denyCache: false }],
      ["rlf-block", { name: "rlf", blockOnConsumed: true }],
      ["rlf", { name: "rlf" }],
    ];
    for (const [id, params] of variants) {
      add(
        "hot-key",
        `hot key: ${id}`,
        async () => {
          const r = await runCaseRetry("redis", "hotKey", { ...params, port, ...h });
          results.hotKey[id] = r;
          return r;
        },
        (r) => `${r.calls} script calls for ${r.denied} denied`,
      );
    }
  }

  if (want("service")) {
    add(
      "service",
      "service: sluice serve (HTTP and gRPC) vs bare Fastify",
      async () => {
        results.service = await measureService({ ...config.service, redisPort: port, log });
        return results.service;
      },
      (r) =>
        r.skipped
          ? r.skipped
          : `sluice ${fmtRate(r.sluice?.rps)}/s, POST /json ${fmtRate(r.json?.rps)}/s, Fastify ${fmtRate(r.fastify?.rps)}/s`,
    );
  }

  if (want("grpc")) {
    add(
      "grpc",
      "gRPC: h2load against bare node:http2, bare grpc-js and sluice serve",
      async () => {
        results.grpc = await measureGrpc({ ...config.grpc, redisPort: port, log });
        const failed = Object.entries(results.grpc.errors ?? {});
        if (failed.length > 0)
          results.failures.push(...failed.map(([id, e]) => `gRPC ${id}: ${e}`));
        return results.grpc;
      },
      (r) =>
        r.skipped
          ? r.skipped
          : Object.entries(r.rows)
              .map(([id, v]) => `${id} ${fmtRate(v.rps)}/s`)
              .join(", "),
    );
  }

  async function runAll() {
    const width = String(tasks.length).length;
    for (let i = 0; i < tasks.length; i++) {
      const t = tasks[i];
      const n = `[${String(i + 1).padStart(width)}/${tasks.length}]`;
      const start = Date.now();
      process.stderr.write(`${n} ${t.label} … `);
      try {
        const r = await t.fn();
        const secs = ((Date.now() - start) / 1000).toFixed(1);
        process.stderr.write(`${t.summary(r)}  (${secs} s)\n`);
      } catch (err) {
        const msg = String(err?.message ?? err).split("\n")[0];
        process.stderr.write(`FAILED: ${msg}\n`);
        results.failures.push(`${t.label}: ${String(err?.message ?? err)}`);
      }
    }
    // Medians over the rounds.
    const med = (id) => {
      const xs = samples.get(id);
      if (!xs) return undefined;
      const m = { ops: median(xs.map((x) => x.ops)), rounds: xs.length };
      for (const k of ["p50", "p99", "nodeCpuUs", "redisCpuUs", "scriptsPerK", "bytesPerOp"]) {
        if (xs[0][k] !== undefined) m[k] = median(xs.map((x) => x[k]));
      }
      return m;
    };
    for (const a of ["rlf", "rlf-reward", ...ALGORITHMS]) {
      const m = med(`memory:${a}`);
      if (m) results.memory[a] = m;
      const x = med(`memory-random:${a}`);
      if (x) results.memoryRandom[a] = x;
      const h = med(`memory-hot:${a}`);
      if (h) results.memoryHot[a] = h;
      const y = med(`memory-sync:${a}`);
      if (y) results.memorySync[a] = y;
    }
    results.memoryLoop = med("memory-loop");
    for (const [a, xs] of floods) {
      results.memoryFlood[a] = {
        fill: median(xs.map((x) => x.fill)),
        flood: median(xs.map((x) => x.flood)),
        ratio: median(xs.map((x) => x.ratio)),
        rounds: xs.length,
      };
    }
    for (const [a, xs] of floodHeaps) {
      results.memoryFloodHeap[a] = {
        heldPerKey: median(xs.map((x) => x.heldPerKey)),
        floodPerKey: median(xs.map((x) => x.floodPerKey)),
        ratio: median(xs.map((x) => x.ratio)),
        storeRatio: median(xs.map((x) => x.storeRatio)),
        times: xs[0].times,
        rounds: xs.length,
      };
    }
    for (const inflight of config.redis.inflight) {
      for (const name of REDIS_CONTESTANTS) {
        const m = med(`redis:${inflight}:${name}`);
        if (m) (results.redis[inflight] ??= {})[name] = m;
      }
    }
    for (const pair of Object.keys(COMPAT_PAIRS)) {
      for (const which of ["peer", "face"]) {
        const m = med(`compat:${pair}:${which}`);
        if (m) (results.compat[pair] ??= {})[which] = m;
      }
    }
    for (const [kind, contestants] of Object.entries(LEASE_CONTESTANTS)) {
      for (const id of Object.keys(contestants)) {
        const m = med(`leases:${kind}:${id}`);
        if (m) (results.leases[kind] ??= {})[id] = m;
      }
    }
    for (const [policy, { contestants }] of Object.entries(REDIS_POLICIES)) {
      for (const inflight of config.redisPolicies.inflight) {
        for (const id of Object.keys(contestants)) {
          const m = med(`redis-policies:${policy}:${inflight}:${id}`);
          if (m) ((results.redisPolicies[policy] ??= {})[inflight] ??= {})[id] = m;
        }
      }
    }
    for (const store of TELEMETRY_STORES) {
      const none = med(`telemetry:${store}:none`);
      const sdk = med(`telemetry:${store}:sdk`);
      if (!none && !sdk) continue;
      const runs = samples.get(`telemetry:${store}:sdk`) ?? [];
      if (sdk)
        for (const k of ["collections", "exported", "timed"])
          sdk[k] = median(runs.map((x) => x[k]));
      results.telemetry[store] = { none, sdk };
    }
    return results;
  }

  return { config, run: runAll, tasks };
}

/** `redis-benchmark` of EVALSHA of the minimal GCRA script over random keys; its requests/s. */
async function redisBenchmark(port, { n, clients, pipeline, keyCount }) {
  const client = new Redis({ host: "127.0.0.1", port });
  const sha = await client.script(
    "LOAD",
    readFileSync(join(BENCH_DIR, "lib/minimal-gcra.lua"), "utf8"),
  );
  await client.flushall();
  client.disconnect();
  const args = ["-h", "127.0.0.1", "-p", String(port), "-n", String(n), "-c", String(clients)]
    .concat(["-P", String(pipeline), "-r", String(keyCount), "--csv"])
    .concat(["EVALSHA", sha, "1", "k:__rand_int__", "60", "60000"]);
  const r = await run("redis-benchmark", args);
  if (r.code !== 0) throw new Error(`redis-benchmark failed: ${r.stderr || r.stdout}`);
  // CSV: a header line, then "name","rps",… per test.
  const rows = r.stdout
    .trim()
    .split("\n")
    .filter((l) => !l.startsWith('"test"'));
  const rps = Number(JSON.parse(`[${rows.at(-1)}]`)[1]);
  if (!Number.isFinite(rps)) throw new Error(`could not read redis-benchmark output: ${r.stdout}`);
  return { rps, command: `redis-benchmark ${args.join(" ").replace(sha, "<sha>")}` };
}
