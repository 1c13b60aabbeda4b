// Memory store cases: decisions/s, bytes allocated per decision and heap bytes per identifier,
// sluice vs RateLimiterMemory.
import { setImmediate } from "node:timers";
import { allocationMeter, drive, driveSync, keyAt, makeKeys } from "../lib/util.mjs";

/** The default policy (round robin): every key stays well inside it, so both sides only allow. */
export const THROUGHPUT = { limit: 1000, periodMs: 60_000 };

/** The flood policy: a key exhausted before the flood stays exhausted all run long. */
export const FLOOD = { limit: 10, periodMs: 3_600_000 };

/** The heap policy: state of one decision outlives the run (a GCRA TAT lasts period/limit). */
export const HEAP = { limit: 100, periodMs: 3_600_000 };

/** rate-limiter-flexible's RateLimiterMemory with `limit` per `periodMs`. */
async function peer({ limit, periodMs }) {
  const { RateLimiterMemory } = await import("rate-limiter-flexible");
  return new RateLimiterMemory({ points: limit, duration: periodMs / 1000 });
}

/** A sluice limiter (memory store, the default) with one rule of `limit` per `periodMs`. */
async function sluiceLimiter(algorithm, { limit, periodMs }) {
  const { createLimiter, memoryStore } = await import("sluice");
  return createLimiter({
    store: memoryStore(),
    policy: { name: "bench", algorithm, rules: [{ limit, period: periodMs }] },
  });
}

/**
 * Builds `op(key)` for a contestant: "sluice" (with `algorithm`), "rlf" (RateLimiterMemory) or
 * "rlf-reward" (RateLimiterMemory's `consume` + `reward`), all with `limit` per `periodMs`. For
 * concurrency, `release` gives each lease back at once (the decision is `limit` + `release`). A
 * denial resolves a Decision with `allowed: false` (sluice) or rejects with a RateLimiterRes
 * (rlf): see `drive`.
 */
async function contestant(name, algorithm, policy, release = true) {
  if (name === "rlf") {
    const rl = await peer(policy);
    return (key) => rl.consume(key);
  }
  if (name === "rlf-reward") {
    // RateLimiterMemory has no leases: "at most N in flight" is a point consumed when the work
    // starts and given back (`reward`) when it ends — the peer of sluice's limit + release.
    const rl = await peer(policy);
    return async (key) => {
      const r = await rl.consume(key);
      await rl.reward(key, 1);
      return r;
    };
  }
  const limiter = await sluiceLimiter(algorithm, policy);
  if (algorithm === "concurrency" && release) {
    // A lease is one decision; releasing it keeps the key's lease set from filling up.
    return async (key) => {
      const d = await limiter.limit(key);
      if (d.leaseId !== undefined) await limiter.release(key, d.leaseId);
      return d;
    };
  }
  return (key) => limiter.limit(key);
}

/** True for a sluice Decision that denied (rate-limiter-flexible's denials reject instead). */
const isDenied = (d) => d !== undefined && d !== null && d.allowed === false;

/**
 * Picks the identifier of call `i`: round robin over `keys`, or (`order` "random") the next of
 * a fixed pseudo-random sequence (xorshift32 from one seed: every contestant gets the same
 * identifiers in the same order).
 */
function picker(keys, order) {
  const n = keys.length;
  if (order !== "random") return (i) => keys[i % n];
  let s = 0x2545f491;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return keys[(s >>> 0) % n];
  };
}

/**
 * Hooks for `drive`/`driveSync` that count the bytes allocated over the measured stretch:
 * the result gets `bytesPerOp` (allocated ÷ calls, the bench's loop included).
 */
function metered() {
  const meter = allocationMeter();
  return { onStart: () => meter.start(), onEnd: (count) => ({ bytesPerOp: meter.stop() / count }) };
}

/**
 * Decisions/s and bytes allocated per decision, one call at a time (each awaited), over
 * `keyCount` identifiers in `order` ("round-robin", the default, or "random": see
 * {@link picker}), `policy` `{ limit, periodMs }` on both sides (default {@link THROUGHPUT}).
 */
export async function throughput({
  name,
  algorithm,
  durationMs,
  warmupMs,
  keyCount,
  order = "round-robin",
  policy = THROUGHPUT,
}) {
  const op = await contestant(name, algorithm, policy);
  const key = picker(makeKeys(keyCount), order);
  const r = await drive((i) => op(key(i)), { durationMs, warmupMs, isDenied, ...metered() });
  return pick(r);
}

/**
 * What the awaited loop costs without a limiter: `await` of one already-resolved promise per
 * call, in the loop of {@link throughput} (decisions/s and bytes allocated per call). Part of
 * every awaited figure, on both sides.
 */
export async function loopAlone({ durationMs, warmupMs }) {
  const resolved = Promise.resolve({ allowed: true });
  const r = await drive(() => resolved, { durationMs, warmupMs, isDenied, ...metered() });
  return pick(r);
}

/**
 * Decisions/s of sluice's `limitSync(key)` (no promise at all), one call after another in one
 * synchronous loop, over `keyCount` identifiers round robin (`policy` as in {@link throughput}),
 * and bytes allocated per decision.
 * Not for concurrency: a lease could only be given back through the awaited `release`.
 */
export async function throughputSync({
  algorithm,
  durationMs,
  warmupMs,
  keyCount,
  policy = THROUGHPUT,
}) {
  if (algorithm === "concurrency") throw new Error("concurrency has no synchronous release");
  const keys = makeKeys(keyCount);
  const limiter = await sluiceLimiter(algorithm, policy);
  if (typeof limiter.limitSync !== "function")
    throw new Error("this sluice has no limitSync on memory-store limiters");
  const n = keys.length;
  const r = driveSync((i) => limiter.limitSync(keys[i % n]), {
    durationMs,
    warmupMs,
    isDenied,
    ...metered(),
  });
  return pick(r);
}

/** What the plan keeps of a drive result. */
const pick = (r) => ({
  ops: r.ops,
  count: r.count,
  nodeCpuUs: r.nodeCpuUs,
  bytesPerOp: r.bytesPerOp,
  errors: r.errors,
  denied: r.denied,
  ...(r.error !== undefined ? { error: r.error } : {}),
});

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

/**
 * A key flood against a full store: decisions/s of `limitSync` on new identifiers, first while
 * they fill an empty store of `maxKeys` (fill), then while as many again arrive at the full
 * store, each evicting one (flood); `ratio` is flood time ÷ fill time per decision (1: a flood
 * costs what filling costs). One policy of `policy` ({@link FLOOD}: one decision per new key), a
 * hot key exhausted first (it must survive the flood), and a warm-up round on a separate store.
 */
export async function flood({ algorithm, maxKeys, policy = FLOOD }) {
  const { createLimiter, memoryStore } = await import("sluice");
  const ids = (n, tag) => Array.from({ length: n }, (_, i) => flatKey(i) + tag);
  const round = (keys) => {
    const store = memoryStore({ maxKeys });
    const limiter = createLimiter({
      store,
      policy: {
        name: "flood",
        algorithm,
        rules: [{ limit: policy.limit, period: policy.periodMs }],
      },
    });
    for (let i = 0; i <= policy.limit; i++) limiter.limitSync("hot");
    const time = (from, to) => {
      const t0 = process.hrtime.bigint();
      for (let i = from; i < to; i++) limiter.limitSync(keys[i]);
      return Number(process.hrtime.bigint() - t0) / 1e9;
    };
    const fillS = time(0, maxKeys - 1);
    const floodS = time(maxKeys - 1, keys.length);
    return { fillS, floodS, hotDenied: !limiter.peekSync("hot").allowed };
  };
  round(ids(2 * maxKeys, "w")); // warm-up: code compiled for both paths
  const r = round(ids(2 * maxKeys, "f"));
  const fill = (maxKeys - 1) / r.fillS;
  const flooded = (maxKeys + 1) / r.floodS;
  return { fill, flood: flooded, ratio: fill / flooded, hotDenied: r.hotDenied };
}

/**
 * The heap of a store at its cap and after a key flood of `times` × the cap (heapUsed after
 * full GCs; needs `--expose-gc`): a store of `maxKeys`, one policy of `policy` ({@link FLOOD}),
 * a hot key exhausted first, filled with new 16-character identifiers (flat strings), then
 * flooded with `times × maxKeys` more, one decision each. `heldPerKey`: the growth at the cap
 * over the heap before the store, per key held; `floodPerKey`: the growth after the flood, per
 * key held; `ratio`: the whole heap after the flood ÷ at the cap; `storeRatio`: the store's own
 * share after ÷ at the cap. A warm-up round on a separate store compiles both paths first.
 */
export async function floodHeap({ algorithm, maxKeys, times = 10, policy = FLOOD }) {
  const gc = globalThis.gc;
  if (typeof gc !== "function") throw new Error("run with --expose-gc");
  const { createLimiter, memoryStore } = await import("sluice");
  const settle = async () => {
    for (let i = 0; i < 4; i++) {
      gc();
      await new Promise((r) => setImmediate(r));
    }
    return process.memoryUsage().heapUsed;
  };
  const round = async (cap, flood, tag, measure) => {
    const before = measure ? await settle() : 0;
    const store = memoryStore({ maxKeys: cap });
    const limiter = createLimiter({
      store,
      policy: {
        name: "flood",
        algorithm,
        rules: [{ limit: policy.limit, period: policy.periodMs }],
      },
    });
    for (let i = 0; i <= policy.limit; i++) limiter.limitSync("hot");
    for (let i = 0; i < cap - 1; i++) limiter.limitSync(flatKey(i) + tag);
    const atCap = measure ? await settle() : 0;
    for (let i = cap; i < cap + flood; i++) limiter.limitSync(flatKey(i) + tag);
    const after = measure ? await settle() : 0;
    // Used after the reading, or V8 may free the store before it.
    return {
      before,
      atCap,
      after,
      hotDenied: !limiter.peekSync("hot").allowed,
      keys: store.keyCount,
    };
  };
  await round(Math.min(maxKeys, 20_000), 2 * Math.min(maxKeys, 20_000), "w", false);
  const r = await round(maxKeys, times * maxKeys, "f", true);
  return {
    heldPerKey: (r.atCap - r.before) / maxKeys,
    floodPerKey: (r.after - r.before) / maxKeys,
    ratio: r.after / r.atCap,
    storeRatio: (r.after - r.before) / (r.atCap - r.before),
    times,
    hotDenied: r.hotDenied,
    keyCount: r.keys,
  };
}
