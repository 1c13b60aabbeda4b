// Renders the results: the console table and bench/RESULTS.md.
import { execFileSync } from "node:child_process";
import { cpus, loadavg, release, type } from "node:os";
import { ALGORITHMS } from "./plan.mjs";
import { ROOT, fmtMs, fmtRate, fmtRatio, packageVersion } from "./util.mjs";
import { LIMITS } from "./targets.mjs";

const NAMES = {
  sluice: "sluice",
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

const us = (x) => (x === undefined || Number.isNaN(x) ? "–" : `${x.toFixed(1)} µs`);
const bytes = (b) => (b === undefined || Number.isNaN(b) ? "–" : `${b.toFixed(0)} B`);

/** Each target: what was measured, and whether it is met. */
function evaluateTargets(r) {
  const out = [];
  const add = (id, text, measured, ok, gap) => out.push({ id, text, measured, ok, gap });
  const redis = r.redis;
  const s256 = redis[256]?.sluice;
  const f256 = redis[256]?.rlf;
  if (s256 && f256) {
    const x = s256.ops / f256.ops;
    add(
      "redis-256",
      "Redis store at 256 in flight ≥ 2× RateLimiterRedis",
      `${fmtRatio(x)} (${fmtRate(s256.ops)}/s vs ${fmtRate(f256.ops)}/s)`,
      x >= 2,
      `${((1 - x / 2) * 100).toFixed(0)}% short of 2×`,
    );
  }
  const s1 = redis[1]?.sluice;
  const raw1 = redis[1]?.raw;
  if (s1 && raw1) {
    const x = s1.p50 / raw1.p50;
    add(
      "redis-1-p50",
      "at 1 in flight, p50 within 10% of a raw EVALSHA round trip",
      `${fmtMs(s1.p50)} vs ${fmtMs(raw1.p50)} (${x >= 1 ? "+" : ""}${((x - 1) * 100).toFixed(0)}%)`,
      x <= 1.1,
      `${((x - 1.1) * 100).toFixed(0)} points over +10%`,
    );
  }
  const s16 = redis[16]?.sluice;
  const f16 = redis[16]?.rlf;
  if (s16 && f16) {
    const x = s16.p99 / f16.p99;
    add(
      "redis-16-p99",
      "p99 at 16 in flight ≤ RateLimiterRedis's",
      `${fmtMs(s16.p99)} vs ${fmtMs(f16.p99)}`,
      x <= 1,
      `${((x - 1) * 100).toFixed(0)}% higher`,
    );
  }
  const mg = r.memory.gcra;
  const mr = r.memory.rlf;
  if (mg && mr) {
    const x = mg.ops / mr.ops;
    add(
      "memory-ops",
      "memory store GCRA ≥ 3× RateLimiterMemory decisions/s",
      `${fmtRatio(x)} (${fmtRate(mg.ops)}/s vs ${fmtRate(mr.ops)}/s)`,
      x >= 3,
      `${((1 - x / 3) * 100).toFixed(0)}% short of 3×`,
    );
  }
  if (r.heap.gcra !== undefined && r.heap.rlf !== undefined) {
    const x = r.heap.gcra / r.heap.rlf;
    add(
      "memory-heap",
      "memory store GCRA ≤ 0.5× RateLimiterMemory heap bytes per identifier",
      `${fmtRatio(x)} (${bytes(r.heap.gcra)} vs ${bytes(r.heap.rlf)})`,
      x <= 0.5,
      `${((x / 0.5 - 1) * 100).toFixed(0)}% over 0.5×`,
    );
  }
  const peer = r.redisMemory.rlf?.bytesPerId;
  for (const [alg, limit] of [
    ["gcra", 1],
    ["fixed-window", 1],
    ["sliding-window", 1.5],
  ]) {
    const m = r.redisMemory[alg]?.bytesPerId;
    if (m === undefined || peer === undefined) continue;
    const x = m / peer;
    add(
      `redis-bytes-${alg}`,
      `Redis bytes per identifier, ${alg} ≤ ${limit === 1 ? "" : `${limit}× `}RateLimiterRedis's`,
      `${bytes(m)} vs ${bytes(peer)} (${fmtRatio(x)})`,
      x <= limit,
      `${((x / limit - 1) * 100).toFixed(0)}% over`,
    );
  }
  const withCache = r.hotKey.sluice;
  const without = r.hotKey["sluice-nocache"];
  if (withCache && without) {
    const x = without.perHundredK / Math.max(withCache.perHundredK, 1e-9);
    add(
      "deny-cache",
      "deny cache: ≥ 100× fewer round trips for a blocked hot key",
      `${withCache.calls} vs ${without.calls} script calls (${withCache.calls === 0 ? "∞" : fmtRatio(x)} fewer)`,
      x >= 100,
      `${fmtRatio(x)} instead of 100×`,
    );
  }
  const svc = r.service;
  if (svc && !svc.skipped && svc.fastify) {
    for (const [k, label] of [
      ["sluice", "Redis counters"],
      ["sluiceMemory", "memory counters"],
    ]) {
      const s = svc[k];
      if (!s || s.error) continue;
      const x = s.rps / svc.fastify.rps;
      add(
        `service-${k}`,
        `service (${label}) ≥ 60% of a bare Fastify route's requests/s`,
        `${(x * 100).toFixed(0)}% (${fmtRate(s.rps)}/s vs ${fmtRate(svc.fastify.rps)}/s)`,
        x >= 0.6,
        `${((0.6 - x) * 100).toFixed(0)} points short of 60%`,
      );
    }
  } else if (svc?.skipped) {
    add(
      "service",
      "service ≥ 60% of a bare Fastify route's requests/s",
      svc.skipped,
      undefined,
      "",
    );
  }
  return out;
}

function sections(r, config) {
  const parts = [];
  const mem = r.memory;
  if (Object.keys(mem).length > 0) {
    const peer = mem.rlf?.ops;
    parts.push(
      `### Memory store: decisions/s\n\nOne call at a time (each awaited), ${config.memory.keyCount.toLocaleString("en")} identifiers round robin, ` +
        `policy 1000 per minute (never exceeded); peer: rate-limiter-flexible \`RateLimiterMemory\` (points 1000, duration 60 s). ` +
        `Median of ${config.rounds} round(s) of ${config.memory.durationMs / 1000} s, each in a fresh process.\n\n` +
        table(
          ["algorithm", "sluice", "RateLimiterMemory", "ratio"],
          ALGORITHMS.filter((a) => mem[a]).map((a) => [
            a,
            `${fmtRate(mem[a].ops)}/s`,
            `${fmtRate(peer)}/s`,
            fmtRatio(mem[a].ops / peer),
          ]),
        ),
    );
  }
  if (Object.keys(r.heap).length > 0) {
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
  const levels = Object.keys(r.redis)
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
      `### Redis: decisions/s and latency\n\nOne ioredis client per process; N loops each awaiting one call; identifiers spread over ` +
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
  }
  if (r.ceiling) {
    parts.push(
      `### Ceiling: redis-benchmark\n\nThe minimal GCRA script (\`bench/lib/minimal-gcra.lua\`: TIME, GET, SET PX) run by Redis's own C client:\n\n` +
        table(
          ["command", "requests/s"],
          [[`\`${r.ceiling.command}\``, `${fmtRate(r.ceiling.rps)}/s`]],
        ),
    );
  }
  const rm = r.redisMemory;
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
  const hk = r.hotKey;
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
      const add = (label, v) => {
        if (!v) return;
        if (v.error) rows.push([label, `not measured: ${v.error}`, "", "", ""]);
        else
          rows.push([
            label,
            `${fmtRate(v.rps)}/s`,
            `${v.p50} ms`,
            `${v.p99} ms`,
            svc.fastify ? `${((v.rps / svc.fastify.rps) * 100).toFixed(0)}%` : "",
          ]);
      };
      add("bare Fastify route", svc.fastify);
      add("`sluice serve`, Redis counters", svc.sluice);
      add("`sluice serve`, memory counters", svc.sluiceMemory);
      parts.push(
        `### Service over HTTP\n\nautocannon, ${svc.connections} connections, ${svc.durationS} s each after ${svc.warmupS ?? 0} s of warm-up, POST /v1/limit with \`{ policy, key }\` over ` +
          `${config.service.distinct.toLocaleString("en")} identifiers, each connection cycling through prebuilt requests (GCRA 1000 per minute, never exceeded), on the same machine as the servers and Redis. autocannon itself needs about a core: near its ceiling the ratio understates how much faster the bare route is.\n\n` +
          table(["server", "requests/s", "p50", "p99", "of bare Fastify"], rows),
      );
    }
  }
  return parts;
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
  const targets = evaluateTargets(results);
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
  const targetRows = targets.map((t) => [
    t.text,
    t.measured,
    t.ok === undefined ? "not measured" : t.ok ? "met" : `**missed**: ${t.gap}`,
    t.ok === false ? (LIMITS[t.id.replace(/-sluiceMemory$/, "-sluice")]?.(results) ?? "") : "",
  ]);
  const body = sections(results, config);
  const failures = results.failures.length
    ? `\n\n### Cases that failed\n\n${results.failures.map((f) => `- ${f.replace(/\n/g, " ")}`).join("\n")}`
    : "";
  const markdown =
    `# sluice benchmarks\n\nGenerated by \`bench/run.mjs\`; see [docs/benchmarks.md](../docs/benchmarks.md) for the method. ` +
    `Every figure below was measured in the same run on the same machine; ratios compare figures of this run only.\n\n` +
    `${env.join("\n")}\n\n## Targets (issue 6)\n\n` +
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
