/**
 * One key flood into a memory store, measured: `node --import tsx --expose-gc
 * --max-old-space-size=… flood-heap-worker.ts '<case>'`, forked with IPC (flood.test.ts). It reads
 * its case (a {@link FloodCase}, JSON) from argv[2], sends a {@link FloodReport} (or prints it,
 * run by hand) and exits.
 *
 * `flood`: a hot key is exhausted, `cap − 1` new keys fill the store, then `10 × cap` new keys
 * arrive (the hot key asks every 100th), one a millisecond of the injected clock. The heap is
 * read after full GCs before the store is made, at the cap, halfway through the flood and at
 * its end. `churn`: `cap` keys stay, and each changes class (calm, then exhausted) every minute
 * for `rounds` minutes, no new key; the heap is read after a fifth of the rounds and at the end.
 */
import { type PolicyInput, createLimiter, memoryStore } from "../../src/index.js";

/** What to run. */
export interface FloodCase {
  kind: "flood" | "churn";
  policy: PolicyInput;
  /** The store's `maxKeys`. */
  cap: number;
  /** Characters of each key: 16 (digits), or 4096 ("€" and a number: 12 KiB of UTF-8). */
  keyLength: 16 | 4096;
  /** `churn` only: minutes of class changes. */
  rounds?: number;
}

/** heapUsed after full GCs (bytes) at each point, and what the store did. */
export interface FloodReport {
  base: number;
  atCap: number;
  half: number;
  end: number;
  keyCount: number;
  /** Decisions of the exhausted hot key that were allowed during the flood (must be 0). */
  hotAllowed: number;
}

function heapAfterGc(): number {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error("run with --expose-gc");
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

/**
 * The `i`-th key: 16 digits (a flat string, as a key read from a request is), or 4,090 "€"
 * after 6 digits (a cons string, made in a fraction of the time a flat one takes; the store
 * flattens it to hash it, and a store that kept it would keep both).
 */
function keyMaker(length: 16 | 4096): (i: number) => string {
  if (length === 16) return (i) => String(1e15 + i);
  const euros = "€".repeat(4090);
  return (i) => String(1e6 + i).slice(1) + euros;
}

function run(c: FloodCase): FloodReport {
  let now = 1_700_006_400_000;
  const key = keyMaker(c.keyLength);
  const base = heapAfterGc();
  const store = memoryStore({ now: () => now, maxKeys: c.cap });
  const limiter = createLimiter({ store, policy: c.policy });
  if (c.kind === "churn") {
    const rounds = c.rounds ?? 100;
    const keys = Array.from({ length: c.cap }, (_, i) => key(i));
    let atCap = 0;
    let half = 0;
    for (let round = 0; round < rounds; round++) {
      for (const k of keys) while (limiter.limitSync(k).allowed);
      now += 3_600_000; // every window, rule and block of the cases has ended
      if (round === 0) atCap = heapAfterGc();
      if (round === Math.floor(rounds / 5)) half = heapAfterGc();
    }
    return { base, atCap, half, end: heapAfterGc(), keyCount: store.keyCount, hotAllowed: 0 };
  }
  const hot = "hot";
  while (limiter.limitSync(hot).allowed);
  let next = 0;
  const add = (count: number): number => {
    let allowed = 0;
    for (let i = 0; i < count; i++) {
      now++;
      limiter.limitSync(key(next++));
      if (next % 100 === 0 && limiter.limitSync(hot).allowed) allowed++;
    }
    return allowed;
  };
  let hotAllowed = add(c.cap - 1);
  const atCap = heapAfterGc();
  hotAllowed += add(5 * c.cap);
  const half = heapAfterGc();
  hotAllowed += add(5 * c.cap);
  const end = heapAfterGc();
  if (limiter.peekSync(hot).allowed) hotAllowed++;
  return { base, atCap, half, end, keyCount: store.keyCount, hotAllowed };
}

const report = run(JSON.parse(process.argv[2]!) as FloodCase);
// Forked: to the test; run by hand: to stdout.
if (process.send) process.send(report);
else console.log(JSON.stringify(report));
