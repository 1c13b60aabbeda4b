// What limits each target when it is missed. The texts are generic on purpose (the library
// changes faster than any explanation of one build): each quotes this run's figures — time and
// CPU per decision, which side is busy — and says where to look next; docs/benchmarks.md
// ("Profiling a figure") says how to profile one case. Each entry takes the run's results and
// the target row (lib/report.mjs: `id`, and the fields it sets for the entry: `inflight`,
// `section`, `algorithm`). Keys are the rows' `limits` (or, without one, their `id`).
import { fmtMs, fmtRate, memoryPeer } from "./util.mjs";

const us = (x) => (x === undefined || Number.isNaN(x) ? "?" : `${x.toFixed(1)} µs`);
const ns = (x) => (x === undefined || !Number.isFinite(x) ? "?" : `${x.toFixed(0)} ns`);
/** Share of one core busy: CPU µs per decision × decisions/s. */
const busy = (cpuUs, ops) => (cpuUs === undefined || !ops ? undefined : (cpuUs * ops) / 1e6);
const pct = (f) => (f === undefined ? "?" : `${(f * 100).toFixed(0)}%`);
const PROFILE = `Profile it: docs/benchmarks.md, "Profiling a figure".`;

/** Wall time and CPU per decision of a one-call-at-a-time memory figure, in ns. */
function perCall(x) {
  return { wall: 1e9 / x.ops, cpu: x.nodeCpuUs === undefined ? undefined : x.nodeCpuUs * 1000 };
}

/** "sluice 250 ns per decision vs RateLimiterMemory 400 ns …" for two memory figures. */
function memoryTimes(s, p, sName, pName) {
  const a = perCall(s);
  const b = perCall(p);
  let text =
    `one call at a time in one process, so the rate is the inverse of the time per call: ` +
    `${sName} ${ns(a.wall)} per decision vs ${pName} ${ns(b.wall)}, ${ns(a.wall - b.wall)} more ` +
    `per call` +
    (a.cpu !== undefined && b.cpu !== undefined
      ? ` (CPU per decision ${ns(a.cpu)} vs ${ns(b.cpu)}).`
      : ".");
  if (a.cpu !== undefined && a.cpu > a.wall * 1.1) {
    text +=
      ` sluice's CPU exceeds its wall time by ${pct(a.cpu / a.wall - 1)}: garbage collection ` +
      `on helper threads, i.e. allocation per decision.`;
  }
  return text;
}

export const LIMITS = {
  "redis-throughput": (r, t) => {
    const n = t.inflight;
    const s = r.redis?.[n]?.sluice ?? {};
    const f = r.redis?.[n]?.rlf ?? {};
    const node = busy(s.nodeCpuUs, s.ops);
    const redis = busy(s.redisCpuUs, s.ops);
    let text =
      `CPU per decision in this run: sluice ${us(s.nodeCpuUs)} in Node + ${us(s.redisCpuUs)} in ` +
      `Redis, RateLimiterRedis ${us(f.nodeCpuUs)} + ${us(f.redisCpuUs)}. At sluice's ` +
      `${fmtRate(s.ops)}/s Node was busy ${pct(node)} of a core and Redis ${pct(redis)} (the ` +
      `cores also carry the kernel's loopback networking)`;
    const top = Math.max(node ?? 0, redis ?? 0);
    if (top >= 0.8) {
      text +=
        `: ${(node ?? 0) >= (redis ?? 0) ? "Node" : "Redis"} is near a full core, so its CPU ` +
        `per decision is the limit. ${PROFILE}`;
    } else {
      const mean = (x) => (x.ops ? (n / x.ops) * 1000 : undefined);
      text +=
        `: neither side is saturated, so the figure is bound by waiting. By Little's law, ${n} ` +
        `in flight at ${fmtRate(s.ops)}/s means ${fmtMs(mean(s))} from a call to its answer on ` +
        `average (RateLimiterRedis ${fmtMs(mean(f))}; p50 ${fmtMs(s.p50)} vs ${fmtMs(f.p50)}): ` +
        `what raises it is a shorter wait (how soon a batch is sent, whether Node prepares the ` +
        `next batch while Redis runs one) more than less CPU. ${PROFILE}`;
    }
    return text;
  },
  "redis-1-p50": (r) => {
    const s = r.redis?.[1]?.sluice ?? {};
    const raw = r.redis?.[1]?.raw ?? {};
    const d = (a, b) => (a === undefined || b === undefined ? undefined : a - b);
    const gap = d(s.p50, raw.p50);
    return (
      `At 1 in flight each decision is one round trip. CPU per decision in this run: sluice ` +
      `${us(s.nodeCpuUs)} in Node + ${us(s.redisCpuUs)} in Redis, the raw EVALSHA ` +
      `${us(raw.nodeCpuUs)} + ${us(raw.redisCpuUs)}: sluice adds ${us(d(s.nodeCpuUs, raw.nodeCpuUs))} ` +
      `in Node (limiter, batching, reply decoding) and ${us(d(s.redisCpuUs, raw.redisCpuUs))} in ` +
      `Redis (the script's work per call beyond GET/SET) against a p50 gap of ` +
      `${us(gap === undefined ? undefined : gap * 1000)}. ${PROFILE}`
    );
  },
  memory: (r, t) => {
    const mem = r[t.section] ?? {};
    const s = mem[t.algorithm];
    const p = memoryPeer(mem, t.algorithm);
    if (!s || !p) return "";
    const peerName =
      t.algorithm === "concurrency" ? "RateLimiterMemory's consume + reward" : "RateLimiterMemory";
    let text = `${t.section === "memoryHot" ? "Hot keys" : "Round robin"}: ${memoryTimes(s, p, "sluice", peerName)}`;
    if (t.algorithm === "concurrency")
      text +=
        " Here a decision is `limit` + `release`: two awaited calls, two clock reads and two " +
        "look-ups of the key, plus the lease list's bookkeeping.";
    const sync = r.memorySync?.[t.algorithm];
    if (sync && t.section === "memory") {
      const a = perCall(s).wall;
      const y = perCall(sync).wall;
      text +=
        ` The same decision through \`limitSync\` takes ${ns(y)}: ${ns(a - y)} of each ` +
        `awaited call is the promise and the await, ${ns(y)} the decision itself.`;
    }
    return `${text} ${PROFILE}`;
  },
  "memory-sync": (r, t) => {
    const s = r.memorySync?.[t.algorithm];
    const p = r.memory?.rlf;
    if (!s || !p) return "";
    return `${memoryTimes(s, p, "sluice `limitSync`", "RateLimiterMemory's awaited `consume`")} ${PROFILE}`;
  },
  "memory-allocation": (r, t) => {
    const mem = r[t.section] ?? {};
    const loop = r.memoryLoop?.bytesPerOp;
    return (
      `Bytes allocated per decision count every object a call leaves behind, the bench's loop ` +
      `included (${loop === undefined ? "?" : `${loop.toFixed(0)} B`} per call without a ` +
      `limiter): sluice's are the Decision, its rules array and each rule's outcome, the store's ` +
      `answer and the promise (sliding-log and concurrency: the algorithm's step too); ` +
      `RateLimiterMemory's its RateLimiterRes, its promise with its two resolving functions, ` +
      `and its prefixed key string. gcra in this run: sluice ${mem.gcra?.bytesPerOp?.toFixed(0) ?? "?"} B, ` +
      `the peer ${mem.rlf?.bytesPerOp?.toFixed(0) ?? "?"} B. See where they come from with ` +
      `\`node --heap-prof\` on one case (docs/benchmarks.md, "Profiling a figure"), sampling ` +
      `interval 128 B.`
    );
  },
  "redis-bytes": (r, t) => {
    const m = r.redisMemory?.[t.algorithm] ?? {};
    const p = r.redisMemory?.rlf ?? {};
    const b = (x) => (x === undefined ? "?" : `${x.toFixed(0)} B`);
    return (
      `sluice ${t.algorithm}: ${b(m.bytesPerId)} per identifier in ${m.keysPerId ?? "?"} key(s), ` +
      `e.g. \`${m.sampleKey ?? "?"}\`; RateLimiterRedis: ${b(p.bytesPerId)} in ${p.keysPerId ?? "?"}, ` +
      `\`${p.sampleKey ?? "?"}\` (keys of the same length). The difference is what the value ` +
      `holds and how Redis encodes it: compare \`MEMORY USAGE\` and \`OBJECT ENCODING\` of the two ` +
      `sample keys (an integer value below 10,000 is a shared object and costs no allocation; ` +
      `any other value costs one, and an expiry costs an entry in the expires table).`
    );
  },
  "service-sluice": (r, t) => {
    const svc = r.service ?? {};
    const s = svc[t?.id === "service-sluiceMemory" ? "sluiceMemory" : "sluice"] ?? {};
    const f = svc.fastify ?? {};
    const pct = (x) => (x?.rps && f.rps ? `${Math.round((100 * x.rps) / f.rps)}%` : "?");
    return (
      `This run: \`sluice serve\` ${fmtRate(s.rps)}/s (p50 ${s.p50 ?? "?"} ms) vs the bare route ` +
      `${fmtRate(f.rps)}/s (p50 ${f.p50 ?? "?"} ms). Per request the service authenticates the ` +
      `app's API key, validates the body, decides through the limiter, counts metrics and writes ` +
      `rate-limit headers; the bare route only parses the JSON body. autocannon, the servers and ` +
      `Redis share the machine's cores: autocannon needs most of one to read these answers (six ` +
      `rate-limit headers more than the bare route's), and the same server answers the Envoy JSON ` +
      `door, whose answers are smaller, at ${pct(svc.json)} with Redis counters and ` +
      `${pct(svc.jsonMemory)} with memory counters (POST /v1/limit: ${pct(svc.sluice)} and ` +
      `${pct(svc.sluiceMemory)}). Profile the server under load to see which step costs most.`
    );
  },
  telemetry: (r, t) => {
    const { none = {}, sdk = {} } = r.telemetry?.[t.store] ?? {};
    const extra = (a, b) => (a === undefined || b === undefined ? undefined : a - b);
    const wall = (x) => (x.ops ? 1e9 / x.ops : undefined);
    const cpu = (x) => (x.nodeCpuUs === undefined ? undefined : x.nodeCpuUs * 1000);
    let text =
      `Time per decision in this run: ${ns(wall(sdk))} with the SDK vs ${ns(wall(none))} ` +
      `without (${ns(extra(wall(sdk), wall(none)))} more); Node CPU per decision ` +
      `${ns(cpu(sdk))} vs ${ns(cpu(none))}`;
    if (t.store === "memory" && sdk.bytesPerOp !== undefined && none.bytesPerOp !== undefined)
      text += `, allocated ${sdk.bytesPerOp.toFixed(0)} B vs ${none.bytesPerOp.toFixed(0)} B`;
    if (sdk.timed !== undefined && sdk.exported)
      text +=
        `. The SDK recorded ${fmtRate(sdk.timed)} durations for ${fmtRate(sdk.exported)} decisions ` +
        `(warm-up included, ${pct(sdk.timed / sdk.exported)}): a recorded duration goes through ` +
        `the SDK's histogram (attributes hashed, a bucket found, objects allocated), while counting ` +
        `is a field increment with or without an SDK. A large share means the sampling ` +
        `(TIMED_PER_SECOND, packages/sluice/src/telemetry.ts) timed most decisions of this run`;
    text += `. Compare CPU profiles of the two runs (cases/telemetry.mjs). ${PROFILE}`;
    return text;
  },
  service: () => "",
  grpc: (r, t) => {
    const g = r.grpc?.rows ?? {};
    const s = g[t.id.slice(5)] ?? {};
    const bare = g.http2 ?? {};
    const lib = g.grpcjs ?? {};
    const extra =
      s.cpuUs !== undefined && bare.cpuUs !== undefined ? s.cpuUs - bare.cpuUs : undefined;
    return (
      `Server CPU per call in this run: sluice ${us(s.cpuUs)}, the bare node:http2 server ` +
      `${us(bare.cpuUs)} (bare grpc-js ${us(lib.cpuUs)}): sluice spends ${us(extra)} more per ` +
      `call on decoding, matching, deciding, metrics and encoding (and, with Redis, on the ` +
      `round trip's client side). When the server is near a full core the CPU per call is the ` +
      `limit: profile \`sluice serve\` under h2load with \`node --cpu-prof\`. ${PROFILE}`
    );
  },
};
