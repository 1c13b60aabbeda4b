// Memory store cases: decisions/s and heap bytes per identifier, sluice vs RateLimiterMemory.
import { setImmediate } from "node:timers";
import { drive, keyAt, makeKeys } from "../lib/util.mjs";

/** The throughput policy: every key stays well inside it during a run, so both sides only allow. */
export const THROUGHPUT = { limit: 1000, periodMs: 60_000 };

/** The heap policy: state of one decision outlives the run (a GCRA TAT lasts period/limit). */
export const HEAP = { limit: 100, periodMs: 3_600_000 };

/**
 * Builds `op(key)` for a contestant: "sluice" (with `algorithm`) or "rlf" (RateLimiterMemory),
 * both with `limit` per `periodMs`. For concurrency, `release` gives each lease back at once.
 */
async function contestant(name, algorithm, { limit, periodMs }, release = true) {
  if (name === "rlf") {
    const { RateLimiterMemory } = await import("rate-limiter-flexible");
    const rl = new RateLimiterMemory({ points: limit, duration: periodMs / 1000 });
    return (key) => rl.consume(key);
  }
  const { createLimiter, memoryStore } = await import("sluice");
  const limiter = createLimiter({
    store: memoryStore(),
    policy: { name: "bench", algorithm, rules: [{ limit, period: periodMs }] },
  });
  if (algorithm === "concurrency" && release) {
    // A lease is one decision; releasing it keeps the key's lease set from filling up.
    return async (key) => {
      const d = await limiter.limit(key);
      if (d.leaseId !== undefined) await limiter.release(key, d.leaseId);
    };
  }
  return (key) => limiter.limit(key);
}

/** Decisions/s, one call at a time (each awaited), over `keyCount` identifiers. */
export async function throughput({ name, algorithm, durationMs, warmupMs, keyCount }) {
  const keys = makeKeys(keyCount);
  const op = await contestant(name, algorithm, THROUGHPUT);
  const n = keys.length;
  const r = await drive((i) => op(keys[i % n]), { durationMs, warmupMs });
  return { ops: r.ops, errors: r.errors, error: r.error };
}

/**
 * The `i`-th 16-character identifier as a flat string, as a key read from a request would be
 * (a concatenation would make a cons string, and a Map keeps both it and its flattened copy).
 */
const flatKey = (i) => String(1e15 + i);

/**
 * Heap bytes per identifier: heapUsed growth (after full GCs) over `count` new identifiers,
 * each decided once. Identifiers are made on the fly and not kept by the benchmark, so each
 * side pays for the key strings it retains. Needs `--expose-gc`.
 */
export async function heap({ name, algorithm, count }) {
  const gc = globalThis.gc;
  if (typeof gc !== "function") throw new Error("run with --expose-gc");
  // concurrency: the lease is held, so that its state is what stays in memory.
  const op = await contestant(name, algorithm, HEAP, false);
  // Warm up: code paths compiled, maps allocated.
  for (let i = 0; i < 2000; i++) await op(keyAt(i, 16, "w"));
  const settle = async () => {
    for (let i = 0; i < 4; i++) {
      gc();
      await new Promise((r) => setImmediate(r));
    }
    return process.memoryUsage().heapUsed;
  };
  const before = await settle();
  for (let i = 0; i < count; i++) await op(flatKey(i));
  const after = await settle();
  // Use the limiter after the reading, or V8 may free it (and its store) before the reading.
  await op(keyAt(0, 16, "w"));
  return { bytesPerKey: (after - before) / count };
}
