/**
 * The multi-region store's own heap, measured: `node --import tsx --expose-gc
 * multi-region-heap-worker.ts <cap>`, forked with IPC (multi-region-heap.test.ts). A process in
 * region "eu" decides keys homed in "us" (a memory store as us's ledger, kept to 1,000 keys so
 * that only the multi-region store's keys grow): `cap` new keys fill it, then `10 × cap` more
 * arrive, each decided once (a cold key: one call to its home, one unit leased). The heap is read
 * after full GCs before, at the cap, and after the flood. Sends (or prints) the report.
 */
import { createLimiter, memoryStore, multiRegionStore } from "../../src/index.js";

/** heapUsed after full GCs (bytes). */
function heapAfterGc(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("run with --expose-gc");
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

/** What the worker measured. */
export interface RegionHeapReport {
  base: number;
  atCap: number;
  end: number;
  trackedAtCap: number;
  trackedAtEnd: number;
}

async function run(cap: number): Promise<RegionHeapReport> {
  let now = 1_700_006_400_000;
  const clock = () => now;
  const us = memoryStore({ now: clock, maxKeys: 1000 });
  const eu = memoryStore({ now: clock, maxKeys: 1000 });
  const base = heapAfterGc();
  const store = multiRegionStore({
    region: "eu",
    regions: { eu, us },
    homes: { api: "us" },
    maxKeys: cap,
    now: clock,
  });
  const limiter = createLimiter({
    store,
    policy: {
      name: "api",
      algorithm: "fixed-window",
      rules: [{ limit: 10, period: "1h" }],
      lease: true,
    },
  });
  let next = 0;
  const add = async (count: number): Promise<void> => {
    for (let i = 0; i < count; i++) {
      now++;
      const d = await limiter.limit(String(1e15 + next++));
      if (!d.allowed) throw new Error(`a cold key was denied: ${JSON.stringify(d)}`);
    }
  };
  await add(cap);
  const atCap = heapAfterGc();
  const trackedAtCap = store.trackedKeys;
  await add(10 * cap);
  const end = heapAfterGc();
  const trackedAtEnd = store.trackedKeys;
  await store.close();
  return { base, atCap, end, trackedAtCap, trackedAtEnd };
}

const report = await run(Number(process.argv[2] ?? 100_000));
if (process.send) process.send(report);
else console.log(JSON.stringify(report));
