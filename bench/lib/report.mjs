// Renders the results: the console table and bench/RESULTS.md.
import { PAIRS as COMPAT_PAIRS } from "../cases/compat.mjs";
import { execFileSync } from "node:child_process";
import { cpus, loadavg, release, type } from "node:os";
import { ALGORITHMS, SYNC_ALGORITHMS } from "./plan.mjs";
import { ROOT, fmtMs, fmtRate, fmtRatio, memoryPeer, packageVersion } from "./util.mjs";
import { LIMITS } from "./targets.mjs";
import { GRPC_CONTESTANTS } from "./grpc.mjs";
import { SERVICE_CONTESTANTS } from "./service.mjs";

const NAMES = {
  sluice: "sluice",
  "sluice-node-redis": "sluice over node-redis 6 (createClient)",
  "sluice-ioredis5": "sluice over ioredis 5",
  rlf: "rate-limiter-flexible RateLimiterRedis",
  rlr: "rate-limit-redis (increment)",
  raw: "ceiling: raw ioredis EVALSHA",
  "raw-pipeline": "ceiling: raw EVALSHA, explicit pipeline",
};

function table(head, rows) {
  const lines = [`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`];
  for (const r of rows) lines.push(`| ${r.join(" | ")} |`);
  return lines.join("\n");
}

/**
 * A service row's share of the bare route: the median of its rounds' ratios (each against the
 * bare route of the same round), or for a run saved before rounds, the ratio of the two rates.
 */
const serviceShare = (v, base) => v.ratio ?? v.rps / base;
const percent = (x) => `${(x * 100).toFixed(0)}%`;
const us = (x) => (x === undefined || Number.isNaN(x) ? "–" : `${x.toFixed(1)} µs`);
const bytes = (b) => (b === undefined || Number.isNaN(b) ? "–" : `${b.toFixed(0)} B`);

/** Each algorithm's memory-store target, awaited, as a multiple of RateLimiterMemory. */
export const MEMORY_TARGET = (algorithm) => (algorithm === "gcra" ? 1.5 : 1);

/** Telemetry (issue 33): decisions/s with the app's SDK registered ÷ without, at least. */
export const TELEMETRY_TARGET = 0.9;

/** The telemetry rows' cases, by store (plan.mjs TELEMETRY_STORES). */
const TELEMETRY_CASES = {
  memory: "memory store, gcra, awaited, round robin",
  redis: "Redis store, gcra, 256 in flight",
};

/** limitSync (gcra) vs RateLimiterMemory's awaited `consume`. */
export const SYNC_TARGET = 3;

/**
 * Each target of issue 10: what was measured and its status ("met", "missed", "shown" for a
 * figure with no numeric target, "not measured" when this run has no such figure). `limits`
 * names the lib/targets.mjs entry that says what limits a missed target (default: the id).
 */
function evaluateTargets(r, config) {
  const out = [];
  const add = (t) => out.push(t);
  const target = (id, text, x, ok, measured, gap, extra = {}) =>
    add({ id, text, measured, status: ok ? "met" : "missed", gap, ratio: x, ...extra });
  const notMeasured = (id, text) => add({ id, text, measured: "–", status: "not measured" });
  const redis = r.redis ?? {};
  const ratioText = (a, b) => `${fmtRatio(a / b)} (${fmtRate(a)}/s vs ${fmtRate(b)}/s)`;

  // Redis, GCRA.
  const s256 = redis[256]?.sluice;
  const f256 = redis[256]?.rlf;
  const t256 = "Redis store, GCRA, 256 in flight ≥ 2× RateLimiterRedis (aim 2.5×)";
  if (s256 && f256) {
    const x = s256.ops / f256.ops;
    add({
      id: "redis-256",
      text: t256,
      measured: ratioText(s256.ops, f256.ops),
      status: x >= 2 ? "met" : "missed",
      note: x >= 2 ? (x >= 2.5 ? "aim 2.5× reached" : "below the 2.5× aim") : undefined,
      gap: `${((1 - x / 2) * 100).toFixed(0)}% short of 2×`,
      limits: "redis-throughput",
      inflight: 256,
    });
  } else notMeasured("redis-256", t256);
  const s16 = redis[16]?.sluice;
  const f16 = redis[16]?.rlf;
  const t16 = "Redis store, GCRA, 16 in flight ≥ 1.2× RateLimiterRedis";
  if (s16 && f16) {
    const x = s16.ops / f16.ops;
    target(
      "redis-16",
      t16,
      x,
      x >= 1.2,
      `${ratioText(s16.ops, f16.ops)}; p50 ${fmtMs(s16.p50)} vs ${fmtMs(f16.p50)}`,
      `${((1 - x / 1.2) * 100).toFixed(0)}% short of 1.2×`,
      { limits: "redis-throughput", inflight: 16 },
    );
  } else notMeasured("redis-16", t16);
  const s1 = redis[1]?.sluice;
  const raw1 = redis[1]?.raw;
  const t1 = "Redis store, GCRA, 1 in flight: p50 within 10% of a raw EVALSHA";
  if (s1 && raw1) {
    const x = s1.p50 / raw1.p50;
    target(
      "redis-1-p50",
      t1,
      x,
      x <= 1.1,
      `${fmtMs(s1.p50)} vs ${fmtMs(raw1.p50)} (${x >= 1 ? "+" : ""}${((x - 1) * 100).toFixed(0)}%)`,
      `${((x - 1.1) * 100).toFixed(0)} points over +10%`,
    );
  } else notMeasured("redis-1-p50", t1);

  // Redis, other policies: shown, no numeric target.
  const pol = r.redisPolicies ?? {};
  const two = config.redisPolicies?.twoRules;
  const twoText = two ? two.map(policyText).join(" AND ") : "";
  for (const inflight of [16, 256]) {
    const text = `Redis store, sliding-window, ${inflight} in flight, vs RateLimiterRedis`;
    const sw = pol["sliding-window"]?.[inflight];
    if (sw?.sluice && sw.rlf) {
      add({
        id: `redis-sliding-window-${inflight}`,
        text,
        measured: ratioText(sw.sluice.ops, sw.rlf.ops),
        status: "shown",
      });
    } else notMeasured(`redis-sliding-window-${inflight}`, text);
  }
  for (const inflight of [16, 256]) {
    const text =
      `Redis store, two rules${two ? ` (${twoText})` : ""}, ${inflight} in flight, vs RateLimiterUnion ` +
      `of two RateLimiterRedis and vs one RateLimiterRedis`;
    const tw = pol["two-rule"]?.[inflight];
    if (tw?.sluice && (tw["rlf-union"] || tw.rlf)) {
      const parts = [];
      if (tw["rlf-union"]) parts.push(`${ratioText(tw.sluice.ops, tw["rlf-union"].ops)} the union`);
      if (tw.rlf) parts.push(`${fmtRatio(tw.sluice.ops / tw.rlf.ops)} one RateLimiterRedis`);
      add({ id: `redis-two-rule-${inflight}`, text, measured: parts.join("; "), status: "shown" });
    } else notMeasured(`redis-two-rule-${inflight}`, text);
  }

  // Memory store, awaited (round robin and hot keys), and limitSync.
  for (const [section, label] of [
    ["memory", "round robin"],
    ["memoryHot", "hot keys"],
  ]) {
    const mem = r[section] ?? {};
    for (const algorithm of ALGORITHMS) {
      const min = MEMORY_TARGET(algorithm);
      const id = `${section === "memory" ? "memory" : "memory-hot"}-${algorithm}`;
      const text = `Memory store, awaited, ${label}: ${algorithm} ≥ ${min}× RateLimiterMemory`;
      const s = mem[algorithm];
      const p = memoryPeer(mem, algorithm);
      if (!s || !p) {
        notMeasured(id, text);
        continue;
      }
      const x = s.ops / p.ops;
      target(
        id,
        algorithm === "concurrency" ? `${text}'s consume + reward (limit + release)` : text,
        x,
        x >= min,
        algorithm === "concurrency" && mem.rlf
          ? `${ratioText(s.ops, p.ops)}; ${fmtRatio(s.ops / mem.rlf.ops)} a bare \`consume\``
          : ratioText(s.ops, p.ops),
        `${((1 - x / min) * 100).toFixed(0)}% short of ${min}×`,
        { limits: "memory", section, algorithm },
      );
    }
  }
  // Memory store, awaited: bytes allocated per decision, each loop (issue 38).
  for (const [section, label] of [
    ["memory", "round robin"],
    ["memoryRandom", "random keys"],
  ]) {
    const mem = r[section] ?? {};
    const id = `${section === "memory" ? "memory" : "memory-random"}-allocation`;
    const text = `Memory store, awaited, ${label}: bytes allocated per decision ≤ RateLimiterMemory's, every algorithm`;
    const measured = ALGORITHMS.filter(
      (a) => mem[a]?.bytesPerOp !== undefined && memoryPeer(mem, a)?.bytesPerOp !== undefined,
    );
    if (measured.length === 0) {
      notMeasured(id, text);
      continue;
    }
    const over = measured.filter((a) => mem[a].bytesPerOp > memoryPeer(mem, a).bytesPerOp);
    target(
      id,
      text,
      over.length,
      over.length === 0,
      measured
        .map((a) => `${a} ${perDecision(mem[a])} vs ${perDecision(memoryPeer(mem, a))}`)
        .join("; "),
      `over the peer's: ${over.join(", ")}`,
      { limits: "memory-allocation", section },
    );
  }
  const sync = r.memorySync?.gcra;
  const syncPeer = r.memory?.rlf;
  const tSync = `Memory store, \`limitSync\`, gcra ≥ ${SYNC_TARGET}× RateLimiterMemory (awaited)`;
  if (sync && syncPeer) {
    const x = sync.ops / syncPeer.ops;
    target(
      "memory-sync-gcra",
      tSync,
      x,
      x >= SYNC_TARGET,
      ratioText(sync.ops, syncPeer.ops),
      `${((1 - x / SYNC_TARGET) * 100).toFixed(0)}% short of ${SYNC_TARGET}×`,
      { limits: "memory-sync", algorithm: "gcra" },
    );
  } else notMeasured("memory-sync-gcra", tSync);

  // Redis bytes per identifier.
  const rm = r.redisMemory ?? {};
  const peer = rm.rlf?.bytesPerId;
  for (const alg of ["gcra", "fixed-window"]) {
    const text = `Redis bytes per identifier, ${alg} ≤ RateLimiterRedis's (keys of the same length)`;
    const m = rm[alg]?.bytesPerId;
    if (m === undefined || peer === undefined) {
      notMeasured(`redis-bytes-${alg}`, text);
      continue;
    }
    const x = m / peer;
    // In whole bytes: Redis allocates in multiples of 8 B, so a fraction of a byte per
    // identifier is the noise of INFO used_memory over 100k keys (it changes sign run to run).
    target(
      `redis-bytes-${alg}`,
      text,
      x,
      Math.round(m) <= Math.round(peer),
      `${bytes(m)} vs ${bytes(peer)} (${fmtRatio(x)})`,
      `${((x - 1) * 100).toFixed(0)}% over`,
      { limits: "redis-bytes", algorithm: alg },
    );
  }

  // Service.
  const svc = r.service;
  const shareOf = (v, base) =>
    `${percent(serviceShare(v, base))} (${fmtRate(v.rps)}/s vs ${fmtRate(base)}/s${v.serverUs === undefined ? "" : `; ${us(v.serverUs)} server CPU per request`})`;
  const share = (id, text, v, base, min) => {
    if (!v || v.error || !base) return notMeasured(id, text);
    const x = serviceShare(v, base);
    if (min === undefined) return add({ id, text, measured: shareOf(v, base), status: "shown" });
    target(
      id,
      text,
      x,
      x >= min,
      shareOf(v, base),
      `${((min - x) * 100).toFixed(0)} points short of ${min * 100}%`,
    );
  };
  const fastify = svc && !svc.skipped ? svc.fastify?.rps : undefined;
  share(
    "service-sluiceMemory",
    "service (memory counters) ≥ 60% of a bare Fastify route's requests/s",
    svc?.sluiceMemory,
    fastify,
    0.6,
  );
  share(
    "service-sluice",
    "service (Redis counters) ≥ 70% of a bare Fastify route's requests/s",
    svc?.sluice,
    fastify,
    0.7,
  );
  share(
    "service-json",
    "POST /json (Envoy, Redis counters) vs a bare Fastify route's requests/s (information)",
    svc?.json,
    fastify,
  );
  if (svc?.sluiceWorkers)
    share(
      "service-workers",
      "service, `--workers 2` (Redis counters), vs a bare Fastify route's requests/s (information)",
      svc.sluiceWorkers,
      fastify,
    );

  // Telemetry (issue 33): the app's SDK registered vs not, same run.
  for (const [store, id, text] of [
    [
      "memory",
      "telemetry-memory",
      `Telemetry: memory store, awaited, SDK registered ≥ ${TELEMETRY_TARGET}× the same run without`,
    ],
    [
      "redis",
      "telemetry-redis",
      `Telemetry: Redis GCRA 256 in flight, SDK registered ≥ ${TELEMETRY_TARGET}× without`,
    ],
  ]) {
    const t = r.telemetry?.[store];
    if (!t?.none || !t.sdk) {
      notMeasured(id, text);
      continue;
    }
    const x = t.sdk.ops / t.none.ops;
    target(
      id,
      text,
      x,
      x >= TELEMETRY_TARGET,
      ratioText(t.sdk.ops, t.none.ops),
      `${((1 - x / TELEMETRY_TARGET) * 100).toFixed(0)}% short of ${TELEMETRY_TARGET}×`,
      { limits: "telemetry", store },
    );
  }

  // Envoy over gRPC (issue 21), against the bare node:http2 server of the same run.
  const g = r.grpc && !r.grpc.skipped ? r.grpc.rows : {};
  const http2 = g.http2?.rps;
  const cpu = (v) => (v?.cpuUs === undefined ? "" : `; ${us(v.cpuUs)} CPU per call`);
  for (const [id, text, min] of [
    [
      "grpc-memory",
      "Envoy gRPC (memory counters) ≥ 75% of a bare node:http2 server's calls/s",
      0.75,
    ],
    ["grpc-redis", "Envoy gRPC (Redis counters) ≥ 60% of a bare node:http2 server's calls/s", 0.6],
    [
      "grpc-redis2",
      "Envoy gRPC, `--workers 2` (Redis counters), vs a bare node:http2 server's calls/s (information)",
      undefined,
    ],
  ]) {
    const v = g[id.slice(5)];
    if (id === "grpc-redis2" && !v) continue;
    share(id, text, v, http2, min);
    const row = out.at(-1);
    if (v && row.status !== "not measured")
      row.measured += `${cpu(v)} (bare: ${us(g.http2.cpuUs)})`;
    row.limits = "grpc";
  }
  return out;
}

/** "1,000 per minute" for `{ limit, periodMs }`. */
function policyText(p) {
  if (!p) return "?";
  const units = { 1000: "second", 60_000: "minute", 3_600_000: "hour", 86_400_000: "day" };
  const per = units[p.periodMs] ?? `${(p.periodMs / 1000).toLocaleString("en")} s`;
  return `${p.limit.toLocaleString("en")} per ${per}`;
}

/** rate-limiter-flexible's options for `{ limit, periodMs }`. */
const peerText = (p) => `points ${p.limit}, duration ${Math.ceil(p.periodMs / 1000)} s`;

/** The policy of the memory figures in results saved before it was kept in the config. */
const OLD_MEMORY_POLICY = { limit: 1000, periodMs: 60_000 };

const notMeasured = (title) => `### ${title}\n\nNot measured in this run.`;

/** Bytes allocated per decision, or "–" for a figure without them (a run saved before). */
const perDecision = (x) => (x?.bytesPerOp === undefined ? "–" : `${x.bytesPerOp.toFixed(0)} B`);

/**
 * A memory throughput table: sluice per algorithm vs the peer's figure for it, decisions/s and
 * bytes allocated per decision.
 */
function memoryTable(mem, peerOf, algorithms, sluiceHead, peerHead) {
  return table(
    [
      "algorithm",
      sluiceHead,
      peerHead,
      "ratio",
      `${sluiceHead}: allocated per decision`,
      `${peerHead}: allocated per decision`,
    ],
    algorithms.map((a) => {
      const peer = peerOf(a);
      return mem[a]
        ? [
            a === "concurrency" && peer === mem["rlf-reward"] ? `${a} (peer: consume + reward)` : a,
            `${fmtRate(mem[a].ops)}/s`,
            `${fmtRate(peer?.ops)}/s`,
            fmtRatio(mem[a].ops / peer?.ops),
            perDecision(mem[a]),
            perDecision(peer),
          ]
        : [a, "not measured", "", "", "", ""];
    }),
  );
}

/** What the awaited loop costs alone, for the memory tables' text (empty when not measured). */
function loopText(loop) {
  if (loop?.bytesPerOp === undefined) return "";
  return (
    ` The loop alone (\`await\` of an already-resolved promise per call, no limiter) runs at ${fmtRate(loop.ops)}/s ` +
    `and allocates ${loop.bytesPerOp.toFixed(0)} B per call, part of both sides' figures.`
  );
}

function sections(r, config) {
  const parts = [];
  const rounds = `Median of ${config.rounds} round(s)`;
  const has = (o) => ALGORITHMS.some((a) => o?.[a]);

  // Memory store, awaited: round robin.
  const mem = r.memory ?? {};
  const memTitle = "Memory store, awaited: decisions/s, round robin";
  if (has(mem)) {
    const c = config.memory;
    const p = c.policy ?? OLD_MEMORY_POLICY;
    parts.push(
      `### ${memTitle}\n\n\`await limiter.limit(key)\`, one call at a time, ${c.keyCount.toLocaleString("en")} identifiers round robin, ` +
        `policy ${policyText(p)} (never reached); peer: rate-limiter-flexible \`RateLimiterMemory\` (${peerText(p)}), \`await consume(key)\`. ` +
        `concurrency: a decision is \`limit\` + \`release\`, and its peer \`consume\` + \`reward\` (RateLimiterMemory's way to give a point back: it has no leases). ${rounds} of ${c.durationMs / 1000} s, each in a fresh process. ` +
        `Allocated per decision: bytes allocated on V8's heap over the measured stretch (the heap's growth plus what each garbage collection freed, from \`v8.GCProfiler\`) ÷ decisions.${loopText(r.memoryLoop)}\n\n` +
        memoryTable(mem, (a) => memoryPeer(mem, a), ALGORITHMS, "sluice", "RateLimiterMemory"),
    );
  } else parts.push(notMeasured(memTitle));

  // Memory store, awaited: the same identifiers in a random order.
  const random = r.memoryRandom ?? {};
  const randomTitle = "Memory store, awaited: decisions/s, random keys";
  if (has(random)) {
    const c = config.memoryRandom;
    parts.push(
      `### ${randomTitle}\n\nAs the round-robin table, over the same ${c.keyCount.toLocaleString("en")} identifiers picked at random (one fixed pseudo-random sequence, the same for every contestant), ` +
        `policy ${policyText(c.policy)} on both sides: each call finds a key that is in no cache, as under real traffic, where the round robin walks the keys in the order they were stored. ` +
        `${rounds} of ${c.durationMs / 1000} s, each in a fresh process.\n\n` +
        memoryTable(
          random,
          (a) => memoryPeer(random, a),
          ALGORITHMS,
          "sluice",
          "RateLimiterMemory",
        ),
    );
  } else parts.push(notMeasured(randomTitle));

  // Memory store, awaited: hot keys.
  const hot = r.memoryHot ?? {};
  const hotTitle = "Memory store, awaited: decisions/s, hot keys";
  if (has(hot)) {
    const c = config.memoryHot;
    parts.push(
      `### ${hotTitle}\n\nAs above over ${c.keyCount.toLocaleString("en")} identifiers, each hit again thousands of times a second: the same keys again and again, ` +
        `where a store updates entries it holds rather than inserting new ones. Policy ${policyText(c.policy)} on both sides ` +
        `(sluice's sliding-log: ${policyText(c.slidingLogPolicy)}, as it allows at most 100,000 per rule), which no key comes near. ` +
        `${rounds} of ${c.durationMs / 1000} s, each in a fresh process.\n\n` +
        memoryTable(hot, (a) => memoryPeer(hot, a), ALGORITHMS, "sluice", "RateLimiterMemory"),
    );
  } else parts.push(notMeasured(hotTitle));

  // Memory store, limitSync.
  const sync = r.memorySync ?? {};
  const syncTitle = "Memory store, `limitSync`: decisions/s";
  if (has(sync)) {
    const c = config.memorySync;
    const rows = SYNC_ALGORITHMS.map((a) => {
      const s = sync[a];
      if (!s) return [a, "not measured", "", "", "", ""];
      return [
        a,
        `${fmtRate(s.ops)}/s`,
        `${fmtRate(mem.rlf?.ops)}/s`,
        fmtRatio(s.ops / mem.rlf?.ops),
        mem[a] ? fmtRatio(s.ops / mem[a].ops) : "–",
        perDecision(s),
      ];
    });
    rows.push([
      "concurrency",
      "not measured: a lease is given back only through the awaited `release`",
      "",
      "",
      "",
      "",
    ]);
    parts.push(
      `### ${syncTitle}\n\n\`limiter.limitSync(key)\` in one synchronous loop (no promise), ${c.keyCount.toLocaleString("en")} identifiers round robin, ` +
        `policy ${policyText(c.policy)}; peer: the awaited \`RateLimiterMemory\` figure of the round-robin table (it has no synchronous path). ` +
        `${rounds} of ${c.durationMs / 1000} s, each in a fresh process.\n\n` +
        table(
          [
            "algorithm",
            "sluice `limitSync`",
            "RateLimiterMemory (awaited)",
            "ratio",
            "÷ sluice awaited",
            "allocated per decision",
          ],
          rows,
        ),
    );
  } else parts.push(notMeasured(syncTitle));

  // Memory store at its cap: a key flood.
  const flood = r.memoryFlood ?? {};
  const floodTitle = "Memory store at its cap: filling vs a key flood";
  if (has(flood)) {
    const c = config.memoryFlood;
    parts.push(
      `### ${floodTitle}\n\n\`limiter.limitSync(key)\` on new identifiers, one decision each (policy 10 per hour): ` +
        `first ${c.maxKeys.toLocaleString("en")} filling an empty store of \`maxKeys: ${c.maxKeys.toLocaleString("en")}\`, ` +
        `then as many again into the full store, each evicting a key; an exhausted hot key must survive the flood (it does, or the run fails). ` +
        `${rounds}, each in a fresh process after a warm-up round.\n\n` +
        table(
          ["algorithm", "filling", "flood", "flood time ÷ filling time"],
          ALGORITHMS.map((a) =>
            flood[a]
              ? [
                  a,
                  `${fmtRate(flood[a].fill)}/s`,
                  `${fmtRate(flood[a].flood)}/s`,
                  flood[a].ratio.toFixed(2),
                ]
              : [a, "not measured", "", ""],
          ),
        ),
    );
  } else parts.push(notMeasured(floodTitle));

  // The same flood, measured in heap: per key held at the cap and after 10× the cap.
  const floodHeap = r.memoryFloodHeap ?? {};
  const floodHeapTitle = "Memory store at its cap: heap after a key flood";
  if (has(floodHeap)) {
    const c = config.memoryFlood;
    const times = Object.values(floodHeap)[0].times;
    parts.push(
      `### ${floodHeapTitle}\n\nheapUsed after full GCs (\`--expose-gc\`): a store of \`maxKeys: ${c.maxKeys.toLocaleString("en")}\` filled with new 16-character identifiers ` +
        `(flat strings), then flooded with ${times}× as many more, one decision each (policy 10 per hour, an exhausted hot key kept); ` +
        `per key held: the heap's growth over the heap before the store, ÷ the keys held (the cap). ${rounds}, each in a fresh process after a warm-up round.\n\n` +
        table(
          [
            "algorithm",
            "heap per key held, at the cap",
            `heap per key held, after ${times}× the cap`,
            "heap after ÷ at the cap",
            "the store's own share, after ÷ at the cap",
          ],
          ALGORITHMS.map((a) =>
            floodHeap[a]
              ? [
                  a,
                  bytes(floodHeap[a].heldPerKey),
                  bytes(floodHeap[a].floodPerKey),
                  `${floodHeap[a].ratio.toFixed(2)}×`,
                  `${floodHeap[a].storeRatio.toFixed(2)}×`,
                ]
              : [a, "not measured", "", "", ""],
          ),
        ),
    );
  } else parts.push(notMeasured(floodHeapTitle));

  if (Object.keys(r.heap ?? {}).length > 0) {
    const peer = r.heap.rlf;
    parts.push(
      `### Memory store: heap bytes per identifier\n\nheapUsed growth after full GCs (\`--expose-gc\`) over ${config.heap.count.toLocaleString("en")} new 16-character identifiers (flat strings, as read from a request), ` +
        `one decision each, policy 100 per hour (state outlives the run); the key strings count, as each store keeps its own.\n\n` +
        table(
          ["algorithm", "sluice", "RateLimiterMemory", "ratio (lower is better)"],
          ALGORITHMS.filter((a) => r.heap[a] !== undefined).map((a) => [
            a,
            bytes(r.heap[a]),
            bytes(peer),
            fmtRatio(r.heap[a] / peer),
          ]),
        ),
    );
  }
  const levels = Object.keys(r.redis ?? {})
    .map(Number)
    .sort((a, b) => a - b);
  if (levels.length > 0) {
    const rows = [];
    for (const n of levels) {
      const s = r.redis[n].sluice;
      for (const [k, v] of Object.entries(r.redis[n])) {
        rows.push([
          String(n),
          NAMES[k] ?? k,
          `${fmtRate(v.ops)}/s`,
          fmtMs(v.p50),
          fmtMs(v.p99),
          k === "sluice" || !s ? "" : fmtRatio(s.ops / v.ops),
          us(v.nodeCpuUs),
          us(v.redisCpuUs),
        ]);
      }
    }
    parts.push(
      `### Redis, GCRA: decisions/s and latency\n\nOne ioredis 6 client per process (for the sluice rows over another client, that client); N loops each awaiting one call; identifiers spread over ` +
        `${config.redis.keyCount.toLocaleString("en")} keys; GCRA 1000 per minute (never exceeded); latency measured in Node around each call ` +
        `(for the explicit pipeline, around each wave of N); CPU time per decision of the Node process (process.cpuUsage) and of redis-server (INFO cpu): a side near 1 s of CPU per second is the bottleneck. Median of ${config.rounds} round(s) of ${config.redis.durationMs / 1000} s.\n\n` +
        table(
          [
            "in flight",
            "contestant",
            "decisions/s",
            "p50",
            "p99",
            "sluice ÷ this",
            "Node CPU per decision",
            "Redis CPU per decision",
          ],
          rows,
        ),
    );
  } else parts.push(notMeasured("Redis, GCRA: decisions/s and latency"));
  parts.push(redisPolicies(r.redisPolicies ?? {}, config));
  if (r.ceiling) {
    parts.push(
      `### Ceiling: redis-benchmark\n\nThe minimal GCRA script (\`bench/lib/minimal-gcra.lua\`: TIME, GET, SET PX) run by Redis's own C client:\n\n` +
        table(
          ["command", "requests/s"],
          [[`\`${r.ceiling.command}\``, `${fmtRate(r.ceiling.rps)}/s`]],
        ),
    );
  }
  const rm = r.redisMemory ?? {};
  if (Object.keys(rm).length > 0) {
    const peer = rm.rlf?.bytesPerId;
    const ids = [...ALGORITHMS, "rlf", "rlr"].filter((k) => rm[k]);
    parts.push(
      `### Redis memory: bytes per identifier\n\nINFO used_memory growth over ${config.redisMemory.count.toLocaleString("en")} identifiers of ${config.redisMemory.idLength} characters, ` +
        `one decision each (FLUSHALL before each store; scripts loaded before the first reading); the peers' key prefixes are padded so that every key is as long as sluice's.\n\n` +
        table(
          [
            "store",
            "bytes per identifier",
            "keys per identifier",
            "sample key",
            "÷ RateLimiterRedis",
          ],
          ids.map((k) => [
            ALGORITHMS.includes(k) ? `sluice ${k}` : NAMES[k],
            bytes(rm[k].bytesPerId),
            rm[k].keysPerId.toFixed(2),
            `\`${rm[k].sampleKey}\``,
            peer ? fmtRatio(rm[k].bytesPerId / peer) : "–",
          ]),
        ),
    );
  }
  const hk = r.hotKey ?? {};
  if (Object.keys(hk).length > 0) {
    const labels = {
      sluice: "sluice, deny cache on (default)",
      "sluice-nocache": "sluice, deny cache off",
      "rlf-block": "RateLimiterRedis, inMemoryBlockOnConsumed",
      rlf: "RateLimiterRedis",
    };
    parts.push(
      `### Hot key under attack\n\n${config.hotKey.requests.toLocaleString("en")} requests at one identifier (limit 10 per minute), ${config.hotKey.inflight} in flight; ` +
        `script calls counted by Redis (INFO commandstats, evalsha + eval), scaled to 100k denied requests.\n\n` +
        table(
          ["contestant", "denied", "script calls", "round trips per 100k denied", "decisions/s"],
          Object.entries(hk).map(([k, v]) => [
            labels[k] ?? k,
            String(v.denied),
            String(v.calls),
            v.perHundredK.toFixed(v.perHundredK < 10 ? 2 : 0),
            `${fmtRate(v.ops)}/s`,
          ]),
        ),
    );
  }
  const svc = r.service;
  if (svc) {
    if (svc.skipped) {
      parts.push(`### Service over HTTP\n\n${svc.skipped}.`);
    } else {
      const rows = [];
      const base = svc.fastify?.rps;
      for (const [id, label] of Object.entries(SERVICE_CONTESTANTS)) {
        const v = svc[id];
        if (!v) continue;
        if (v.error) rows.push([label, `not measured: ${v.error}`, "", "", "", "", ""]);
        else
          rows.push([
            label,
            `${fmtRate(v.rps)}/s`,
            `${v.p50} ms`,
            `${v.p99} ms`,
            base ? percent(serviceShare(v, base)) : "",
            v.serverUs === undefined ? "–" : us(v.serverUs),
            v.loadUs === undefined ? "–" : us(v.loadUs),
          ]);
      }
      parts.push(
        `### Service over HTTP\n\nautocannon, ${svc.connections} connections, POST /v1/limit with \`{ policy, key }\` over ` +
          `${config.service.distinct.toLocaleString("en")} identifiers, each connection cycling through prebuilt requests (GCRA 1000 per minute, never exceeded), on the same machine as the servers and Redis; ` +
          (svc.rounds
            ? `every server started once, ${svc.durationS} s per round after ${svc.warmupS ?? 0} s of warm-up, median of ${svc.rounds} interleaved round(s); "of bare Fastify" is the median of the rounds' ratios to the bare route of the same round. `
            : `${svc.durationS} s each after ${svc.warmupS ?? 0} s of warm-up. `) +
          `CPU per request: user + system time of the server's processes (/proc/<pid>/stat, workers included) and of autocannon's over the round, divided by the requests. autocannon is single-threaded and needs about a core: near its ceiling it, not the server, sets the pace (the bare route's answers are smaller than sluice's, which carry six rate-limit headers and the decision). ` +
          `The POST /json rows are the Envoy rate limit service's JSON door on the same servers: a RateLimitRequest with one descriptor \`remote_address=<identifier>\` over the same identifiers (the same GCRA, in the reference format with \`algorithm: gcra\`); "of bare Fastify" compares them with the bare route too.\n\n` +
          table(
            [
              "server",
              "requests/s",
              "p50",
              "p99",
              "of bare Fastify",
              "server CPU per request",
              "autocannon CPU per request",
            ],
            rows,
          ),
      );
    }
  }
  const g = r.grpc;
  if (g) {
    if (g.skipped) parts.push(`### Envoy rate limit service over gRPC\n\n${g.skipped}.`);
    else {
      const base = g.rows.http2?.rps;
      const rows = Object.entries(GRPC_CONTESTANTS)
        .filter(([id]) => g.rows[id] || g.errors?.[id])
        .map(([id, label]) => {
          const v = g.rows[id];
          if (!v) return [label, `not measured: ${g.errors[id]}`, "", ""];
          return [
            label,
            `${fmtRate(v.rps)}/s`,
            base ? `${((v.rps / base) * 100).toFixed(0)}%` : "–",
            us(v.cpuUs),
          ];
        });
      parts.push(
        `### Envoy rate limit service over gRPC\n\nh2load (nghttp2, a C client: the load generator is not the bottleneck), ${g.clients} connections × ${g.streams} calls in flight, ` +
          `\`ShouldRateLimit\` with one descriptor (\`remote_address=10.0.0.1\` in a domain whose limit no run comes near, so every call is decided and none is limited), ` +
          `${g.durationS} s per round after ${g.warmupS} s of warm-up, median of ${g.rounds} interleaved round(s), every server started once. ` +
          `Baselines: a bare \`node:http2\` server and a bare \`@grpc/grpc-js\` server, each answering every call with the same constant response (shaped as sluice's: one status, two headers). ` +
          `CPU per call: user + system time of the server's processes (/proc/<pid>/stat, workers included) over the round, divided by the calls. Every sluice call is checked OK by the server's own count (sluice_envoy_requests_total).` +
          (g.command ? ` Command: \`${g.command}\`.` : "") +
          `\n\n` +
          table(["server", "calls/s", "of bare node:http2", "server CPU per call"], rows),
      );
    }
  }
  parts.push(compat(r.compat ?? {}, config));
  parts.push(leases(r.leases ?? {}, config));
  parts.push(telemetry(r.telemetry ?? {}, config));
  return parts;
}

/** OpenTelemetry (issue 33): the memory and Redis GCRA rows without and with the app's SDK. */
function telemetry(stores, config) {
  const title = "Telemetry: the app's OpenTelemetry SDK registered vs not";
  const c = config.telemetry;
  if (!c || Object.keys(stores).length === 0) return notMeasured(title);
  const rows = [];
  for (const [store, { none, sdk }] of Object.entries(stores)) {
    for (const [label, v] of [
      ["no SDK", none],
      ["SDK registered", sdk],
    ]) {
      if (!v) continue;
      rows.push([
        TELEMETRY_CASES[store] ?? store,
        label,
        `${fmtRate(v.ops)}/s`,
        v === sdk && none ? fmtRatio(sdk.ops / none.ops) : "",
        us(v.nodeCpuUs),
        store === "memory" ? perDecision(v) : `${fmtMs(v.p50)} / ${fmtMs(v.p99)}`,
        v === sdk && v.collections !== undefined ? String(v.collections) : "",
        v === sdk && v.timed !== undefined
          ? `${fmtRate(v.timed)} of ${fmtRate(v.exported)} (${percent(v.timed / v.exported)})`
          : "",
      ]);
    }
  }
  const mem = config.memory;
  return (
    `### ${title}

The memory round-robin row (gcra, \`await limiter.limit(key)\`, ${mem.keyCount.toLocaleString("en")} identifiers, ${mem.durationMs / 1000} s) ` +
    `and the Redis GCRA row at ${c.inflight} in flight (${config.redis.keyCount.toLocaleString("en")} identifiers, ${config.redis.durationMs / 1000} s), each in a fresh process ` +
    `without an SDK (\`@opentelemetry/api\` installed: its no-op instruments) and with the SDK an app registers before its first limiter: ` +
    `\`MeterProvider\` with a \`PeriodicExportingMetricReader\` (in-memory exporter, every ${c.exportIntervalMs} ms) set globally, and a \`NodeTracerProvider\` ` +
    `(\`BatchSpanProcessor\`, in-memory exporter; AsyncLocalStorage context) registered; no span is active around the calls. ` +
    `Each SDK run fails unless the exporter saw \`ratelimit.decisions\` for every measured decision; the last column is that run's \`ratelimit.decision.duration\` count against its \`ratelimit.decisions\` (warm-up included), how many decisions were timed. ` +
    `Collections in the run: periodic exports during the measured stretch (an awaited in-memory loop never yields to timers, so there the SDK collects only after it). ` +
    `No SDK and SDK alternate within each round; median of ${config.rounds} round(s). Target (issue 33): SDK registered ≥ ${TELEMETRY_TARGET}× without.\n\n` +
    table(
      [
        "case",
        "OpenTelemetry",
        "decisions/s",
        "SDK ÷ no SDK",
        "Node CPU per decision",
        "allocated per decision / p50 / p99",
        "collections in the run",
        "durations recorded of decisions exported",
      ],
      rows,
    )
  );
}

/** Leases (docs/leases.md): hot and cold keys with and without, and rate-limiter-flexible. */
function leases(kinds, config) {
  const title = "Leases: hot keys decided in memory (Redis store)";
  const c = config.leases;
  if (!c || Object.keys(kinds).length === 0) return notMeasured(title);
  const names = {
    lease: "sluice gcra, `lease: true`",
    "no-lease": "sluice gcra, no lease",
    rlf: "RateLimiterRedis",
  };
  const rows = [];
  for (const [kind, xs] of Object.entries(kinds)) {
    const base = xs["no-lease"];
    for (const [id, v] of Object.entries(xs)) {
      rows.push([
        `${kind} (${(kind === "hot" ? c.hotKeys : c.coldKeys).toLocaleString("en")} keys)`,
        names[id] ?? id,
        `${fmtRate(v.ops)}/s`,
        fmtMs(v.p50),
        fmtMs(v.p99),
        id === "lease" && base ? fmtRatio(v.ops / base.ops) : "",
        id === "lease" && xs.rlf ? fmtRatio(v.ops / xs.rlf.ops) : "",
        v.scriptsPerK === undefined ? "" : v.scriptsPerK.toFixed(1),
      ]);
    }
  }
  return (
    `### ${title}\n\n${c.inflight} calls in flight, gcra of 1,000,000,000 per hour (never reached): hot keys are ${c.hotKeys} identifiers, ` +
    `cold keys ${c.coldKeys.toLocaleString("en")} round robin; Redis as one that has served leases before (a fresh one grants none for the first second). ` +
    `Script calls are what Redis counted (INFO commandstats) per 1,000 decisions. Targets: hot keys with a lease ≥ 10× without and ≥ 20× RateLimiterRedis, ` +
    `≤ 2 script calls per 1,000; cold keys with a lease ≥ 0.9× without. ${`Median of ${config.rounds} round(s)`} of ${c.durationMs / 1000} s.\n\n` +
    table(
      [
        "keys",
        "contestant",
        "decisions/s",
        "p50",
        "p99",
        "lease ÷ no lease",
        "lease ÷ RateLimiterRedis",
        "script calls per 1,000",
      ],
      rows,
    )
  );
}

/** The drop-in faces (sluice/compat/*) against the libraries they replace. */
function compat(pairs, config) {
  const title = "Drop-in faces (sluice/compat) vs the libraries they replace";
  const c = config.compat;
  if (!c || Object.keys(pairs).length === 0) return notMeasured(title);
  const rows = [];
  for (const [pair, { peer, face }] of Object.entries(pairs)) {
    for (const [which, v] of [
      ["peer", peer],
      ["face", face],
    ]) {
      if (!v) continue;
      rows.push([
        pair,
        COMPAT_PAIRS[pair]?.[which] ?? which,
        `${fmtRate(v.ops)}/s`,
        fmtMs(v.p50),
        fmtMs(v.p99),
        which === "face" && peer ? fmtRatio(v.ops / peer.ops) : "",
        us(v.nodeCpuUs),
      ]);
    }
  }
  return (
    `### ${title}\n\nThe same calls against each peer and its face from \`sluice/compat/*\`: ${c.inflight} in flight over ` +
    `${c.keyCount.toLocaleString("en")} identifiers, 1000 per minute (never reached; the union adds 100,000 per hour), ` +
    `memory pairs in one process, Redis pairs on the bench's redis-server (express-rate-limit: the store's \`increment\`, ` +
    `the call its middleware makes per request; @nestjs/throttler: the storage's \`increment\`; @upstash/ratelimit: ` +
    `\`slidingWindow\`, the peer over HTTP through the test fixture \`test/support/upstash-rest.ts\`, which no deployment has: ` +
    `its figure is of that fixture as much as of the library). ${`Median of ${config.rounds} round(s)`} of ${c.durationMs / 1000} s.\n\n` +
    table(["pair", "contestant", "calls/s", "p50", "p99", "face ÷ peer", "Node CPU per call"], rows)
  );
}

/** Labels of the Redis policy figures' contestants, by policy. */
const POLICY_NAMES = {
  "sliding-window": {
    sluice: "sluice sliding-window",
    rlf: "RateLimiterRedis (fixed window, its only algorithm)",
  },
  "two-rule": {
    sluice: "sluice gcra, two rules (one script call)",
    "rlf-union": "RateLimiterUnion of two RateLimiterRedis (two script calls)",
    rlf: "one RateLimiterRedis, first rule only",
  },
};

/** The Redis figures of sliding-window and of the two-rule policy. */
function redisPolicies(pol, config) {
  const title = "Redis, sliding-window and two rules: decisions/s and latency";
  const c = config.redisPolicies;
  if (!c || Object.keys(pol).length === 0) return notMeasured(title);
  const [r1, r2] = c.twoRules;
  const rows = [];
  for (const [policy, byLevel] of Object.entries(pol)) {
    for (const n of Object.keys(byLevel)
      .map(Number)
      .sort((a, b) => a - b)) {
      const s = byLevel[n].sluice;
      for (const [k, v] of Object.entries(byLevel[n])) {
        rows.push([
          policy,
          String(n),
          POLICY_NAMES[policy]?.[k] ?? k,
          `${fmtRate(v.ops)}/s`,
          fmtMs(v.p50),
          fmtMs(v.p99),
          k === "sluice" || !s ? "" : fmtRatio(s.ops / v.ops),
          us(v.nodeCpuUs),
          us(v.redisCpuUs),
        ]);
      }
    }
  }
  return (
    `### ${title}\n\nAs the GCRA figures (${c.keyCount.toLocaleString("en")} identifiers, no call denied). ` +
    `sliding-window: sluice \`sliding-window\` 1000 per minute vs \`RateLimiterRedis\` (points 1000, duration 60 s). ` +
    `two rules: sluice GCRA with rules ${policyText(r1)} AND ${policyText(r2)}, both checked and charged in one decision, ` +
    `vs rate-limiter-flexible's \`RateLimiterUnion\` of \`RateLimiterRedis\` (${peerText(r1)}) and \`RateLimiterRedis\` (${peerText(r2)}), ` +
    `and vs one \`RateLimiterRedis\` (${peerText(r1)}), what a single rule costs the peer. ` +
    `${`Median of ${config.rounds} round(s)`} of ${c.durationMs / 1000} s.\n\n` +
    table(
      [
        "policy",
        "in flight",
        "contestant",
        "decisions/s",
        "p50",
        "p99",
        "sluice ÷ this",
        "Node CPU per decision",
        "Redis CPU per decision",
      ],
      rows,
    )
  );
}

function gitCommit() {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], {
      cwd: ROOT,
      encoding: "utf8",
    }).trim();
  } catch {
    return "?";
  }
}

/** What the report says about the machine and versions; taken when the run starts and ends. */
export function environment({ redisVersion, load }) {
  const cpu = cpus();
  return {
    machine: `${type()} ${release()}, ${cpu.length} × ${cpu[0]?.model ?? "?"}`,
    load,
    node: process.version,
    redis: redisVersion,
    packages:
      `sluice ${packageVersion("sluice")} (commit ${gitCommit()}), rate-limiter-flexible ${packageVersion("rate-limiter-flexible")}, ` +
      `express-rate-limit ${packageVersion("express-rate-limit")}, rate-limit-redis ${packageVersion("rate-limit-redis")}, ioredis ${packageVersion("ioredis")}, ` +
      `autocannon ${packageVersion("autocannon")}, fastify ${packageVersion("fastify")}`,
  };
}

/** The 1-minute load average now. */
export const loadNow = () => loadavg()[0].toFixed(2);

/**
 * { console, markdown } for a finished run: `results` from the plan, `meta` from run.mjs
 * (kept with the results in results.json, so a report can be rendered again).
 */
export function renderReport({ results, meta }) {
  const { quick, started, seconds, command, config, dist, env: e } = meta;
  const targets = evaluateTargets(results, config);
  const env = [
    `- Date: ${started} (took ${Math.round(seconds)} s${quick ? ", quick mode: tiny counts, figures meaningless" : ""})`,
    `- Command: \`${command}\``,
    `- Machine: ${e.machine}; 1-minute load average ${e.load.start} at the start, ${e.load.end} at the end`,
    `- Node ${e.node}; Redis ${e.redis} (redis-server started by the bench, no persistence)`,
    `- Packages: ${e.packages}`,
    dist.start === dist.end
      ? `- packages/sluice/dist (*.js): sha1 ${dist.start}…, unchanged during the run`
      : `- **packages/sluice/dist was rebuilt during the run** (sha1 ${dist.start}… → ${dist.end}…): figures may mix two builds`,
    ...(dist.stale
      ? ["- **packages/sluice/src was newer than its dist**: the figures are of an older build"]
      : []),
  ];
  const result = (t) => {
    if (t.status === "missed") return `**missed**: ${t.gap}`;
    return t.note ? `${t.status} (${t.note})` : t.status;
  };
  const limits = (t) =>
    LIMITS[t.limits ?? t.id.replace(/-sluiceMemory$/, "-sluice")]?.(results, t) ?? "";
  const targetRows = targets.map((t) => [
    t.text,
    t.measured,
    result(t),
    t.status === "missed" ? limits(t) : "",
  ]);
  const body = sections(results, config);
  const failures = results.failures.length
    ? `\n\n### Cases that failed\n\n${results.failures.map((f) => `- ${f.replace(/\n/g, " ")}`).join("\n")}`
    : "";
  const markdown =
    `# sluice benchmarks\n\nGenerated by \`bench/run.mjs\`; see [docs/benchmarks.md](../docs/benchmarks.md) for the method. ` +
    `Every figure below was measured in the same run on the same machine; ratios compare figures of this run only.\n\n` +
    `${env.join("\n")}\n\n## Targets (issues 10, 21, 33 and 38)\n\n` +
    table(["target", "measured", "result", "what limits it"], targetRows) +
    `\n\n## Figures\n\n${body.join("\n\n")}${failures}\n`;
  const consoleText =
    `${body.join("\n\n")}\n\nTargets\n\n` +
    table(
      ["target", "measured", "result"],
      targetRows.map((t) => t.slice(0, 3)),
    ) +
    failures;
  return { markdown, console: consoleText };
}
