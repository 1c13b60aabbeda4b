// Small helpers shared by the benchmark orchestrator and its child processes.
import { execFile, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { createHistogram, performance } from "node:perf_hooks";
import { GCProfiler, getHeapStatistics } from "node:v8";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const BENCH_DIR = dirname(dirname(fileURLToPath(import.meta.url)));
export const ROOT = dirname(BENCH_DIR);
export const SLUICE_DIST = join(ROOT, "packages/sluice/dist/index.js");

/** Resolves after `ms` milliseconds. */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A free TCP port on 127.0.0.1 (the OS picks it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => resolve(addr.port));
    });
  });
}

/** Runs a command; resolves { code, stdout, stderr } (never rejects on a non-zero exit). */
export function run(cmd, args, options = {}) {
  return new Promise((resolve) => {
    execFile(cmd, args, { maxBuffer: 64 << 20, ...options }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/** Runs a command with inherited output (for builds and installs); resolves the exit code. */
export function runVisible(cmd, args, options = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "inherit", "inherit"], ...options });
    child.on("exit", (code) => resolve(code ?? 1));
    child.on("error", () => resolve(1));
  });
}

/** Path of a binary on PATH, or undefined. */
export async function which(bin) {
  const r = await run("sh", ["-c", `command -v ${bin}`]);
  return r.code === 0 ? r.stdout.trim() : undefined;
}

/**
 * Installs Debian packages with apt-get (as root, or through sudo), `apt-get update` first;
 * resolves whether it worked.
 */
export async function aptInstall(packages, log = console.error) {
  log(`bench: installing ${packages.join(" ")} (apt-get)…`);
  const sudo = process.getuid?.() === 0 ? [] : ["sudo"];
  if (sudo.length > 0 && !(await which("sudo"))) return false;
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const apt = (args) =>
    sudo.length
      ? runVisible("sudo", ["apt-get", ...args], { env })
      : runVisible("apt-get", args, { env });
  return (
    (await apt(["update", "-qq"])) === 0 && (await apt(["install", "-y", "-qq", ...packages])) === 0
  );
}

/** The installed version of a package (from its package.json), or "?" when it is missing. */
export function packageVersion(name, from = ROOT) {
  for (let dir = from; ; dir = dirname(dir)) {
    const file = join(dir, "node_modules", name, "package.json");
    if (existsSync(file)) return JSON.parse(readFileSync(file, "utf8")).version;
    if (dirname(dir) === dir) return "?";
  }
}

/** `count` identifiers of exactly `length` characters: `u` and a zero-padded number. */
export function makeKeys(count, length = 16, tag = "u") {
  const keys = new Array(count);
  for (let i = 0; i < count; i++) keys[i] = keyAt(i, length, tag);
  return keys;
}

/** The `i`-th identifier of {@link makeKeys}. */
export function keyAt(i, length = 16, tag = "u") {
  return tag + String(i).padStart(length - tag.length, "0");
}

/**
 * Runs `op` back to back (`inflight` loops awaiting one call each) for `durationMs` after
 * `warmupMs`; returns decisions/s and, with `latency`, p50/p99 in ms.
 * `op(i)` gets a running index (use it to pick a key). `denied` counts the calls (warm-up
 * included) whose result `isDenied(result)` says was a denial, and the calls that rejected with
 * something other than an Error (rate-limiter-flexible rejects a denial with a RateLimiterRes):
 * a throughput figure is only meaningful when it is 0.
 */
export async function drive(
  op,
  { inflight = 1, durationMs, warmupMs = 0, latency = false, isDenied, onStart, onEnd },
) {
  const hist = latency ? createHistogram() : undefined;
  let next = 0;
  let count = 0;
  let measuring = false;
  let stopAt = 0;
  let errors = 0;
  let denied = 0;
  let firstError;
  const loop = async () => {
    for (let local = 1; ; local++) {
      const i = next++;
      // Latency is sampled (one call in 8 per loop): reading the clock twice and recording costs
      // a few µs here, more than a decision, and would make every contestant Node-bound.
      const sampled = hist !== undefined && (local & 7) === 0;
      const t0 = sampled ? process.hrtime.bigint() : 0n;
      try {
        const result = await op(i);
        if (isDenied !== undefined && isDenied(result)) denied++;
      } catch (err) {
        if (err instanceof Error) {
          errors++;
          firstError ??= err;
        } else denied++;
      }
      if (measuring) {
        count++;
        if (sampled) hist.record(process.hrtime.bigint() - t0 || 1n);
      }
      // Check the clock every 16 calls per loop: reading it costs more than a decision.
      if ((local & 15) === 0 && performance.now() >= stopAt) return;
    }
  };
  if (warmupMs > 0) {
    stopAt = performance.now() + warmupMs;
    await Promise.all(Array.from({ length: inflight }, loop));
  }
  await onStart?.();
  measuring = true;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  stopAt = t0 + durationMs;
  await Promise.all(Array.from({ length: inflight }, loop));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const extra = await onEnd?.(count);
  // CPU time of this process per call (µs): who is the bottleneck, Node or the server.
  const nodeCpuUs = (cpu.user + cpu.system) / count;
  const out = { ops: count / seconds, count, seconds, errors, denied, nodeCpuUs, ...extra };
  if (firstError) out.error = String(firstError?.message ?? firstError);
  if (hist) {
    out.p50 = hist.percentile(50) / 1e6;
    out.p99 = hist.percentile(99) / 1e6;
  }
  return out;
}

/**
 * {@link drive} for a synchronous `op(i)`: one loop, no promise, the clock read every 1024
 * calls. Returns decisions/s, CPU time per decision and `denied` (see {@link drive}; a throw
 * counts as an error).
 */
export function driveSync(op, { durationMs, warmupMs = 0, isDenied, onStart, onEnd }) {
  let i = 0;
  let denied = 0;
  const runFor = (ms) => {
    const stopAt = performance.now() + ms;
    let count = 0;
    do {
      for (let j = 0; j < 1024; j++) if (isDenied(op(i++))) denied++;
      count += 1024;
    } while (performance.now() < stopAt);
    return count;
  };
  try {
    if (warmupMs > 0) runFor(warmupMs);
    onStart?.();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const count = runFor(durationMs);
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const nodeCpuUs = (cpu.user + cpu.system) / count;
    const extra = onEnd?.(count);
    return { ops: count / seconds, count, seconds, errors: 0, denied, nodeCpuUs, ...extra };
  } catch (err) {
    return { ops: 0, count: 0, seconds: 0, errors: 1, denied, error: String(err?.message ?? err) };
  }
}

/**
 * Counts the bytes allocated on V8's heap between `start()` and `stop()` (which returns them):
 * the used heap's growth over the stretch, plus what each garbage collection in it freed (its
 * used heap before less after, from a `v8.GCProfiler`, which records every collection without
 * running any JavaScript). Objects allocated and collected within the stretch count, which
 * the heap's growth alone would miss; memory outside the V8 heap (ArrayBuffers' contents,
 * Node's own) does not.
 */
export function allocationMeter() {
  let profiler;
  let before = 0;
  return {
    start() {
      profiler = new GCProfiler();
      profiler.start();
      before = getHeapStatistics().used_heap_size;
    },
    stop() {
      const after = getHeapStatistics().used_heap_size;
      let freed = 0;
      for (const gc of profiler.stop().statistics) {
        freed += gc.beforeGC.heapStatistics.usedHeapSize - gc.afterGC.heapStatistics.usedHeapSize;
      }
      return after - before + freed;
    },
  };
}

/** Median of numbers. */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** 1234567 → "1.23M", 98765 → "98.8k". */
export function fmtRate(n) {
  if (n === undefined || Number.isNaN(n)) return "–";
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return n.toFixed(0);
}

/** A latency in ms with sensible precision. */
export function fmtMs(ms) {
  if (ms === undefined || Number.isNaN(ms)) return "–";
  return ms >= 10 ? `${ms.toFixed(1)} ms` : `${ms.toFixed(3)} ms`;
}

/** A ratio "2.31×". */
export function fmtRatio(r) {
  if (r === undefined || !Number.isFinite(r)) return "–";
  return r >= 100 ? `${r.toFixed(0)}×` : `${r.toFixed(2)}×`;
}

/**
 * The peer figure an awaited memory figure is compared with: RateLimiterMemory's `consume`, or
 * for concurrency (`limit` + `release`) its `consume` + `reward`, when the run has it.
 */
export function memoryPeer(mem, algorithm) {
  return algorithm === "concurrency" ? mem["rlf-reward"] : mem.rlf;
}
