/**
 * The multi-region store's logic on memory stores, with the WAN between regions played by a
 * wrapper that delays each call on injected timers and can be cut. The same store over real
 * redis-servers behind a real delaying TCP proxy, one process per region, is
 * test/redis/multi-region.test.ts.
 */
import { describe, expect, it } from "vitest";
import { ManualTime, flushPromises } from "../../../../test/support/manual-time.js";
import { StoreError, ValidationError } from "../errors.js";
import { createLimiter } from "../limiter.js";
import { type Policy, definePolicy } from "../policy.js";
import type { Store } from "../store.js";
import { MemoryStore } from "./memory.js";
import { type MultiRegionStoreOptions, multiRegionStore } from "./multi-region.js";

const REGIONS = ["eu", "us", "ap"] as const;
type Region = (typeof REGIONS)[number];

/** A link to another region's store: each call waits `oneWayMs` there and back; `cut` fails it. */
class Wan {
  cut = false;
  calls = 0;
  constructor(
    private readonly time: ManualTime,
    private readonly oneWayMs: number,
  ) {}

  to(store: Store): Store {
    const via = <T>(f: () => Promise<T>): Promise<T> => {
      this.calls++;
      return new Promise<T>((resolve, reject) => {
        this.time.timers.setTimeout(() => {
          if (this.cut) {
            reject(new StoreError("SLUICE_ERR_STORE_TIMEOUT", "cut off"));
            return;
          }
          f().then((v) => this.time.timers.setTimeout(() => resolve(v), this.oneWayMs), reject);
        }, this.oneWayMs);
      });
    };
    return {
      kind: "wan",
      decide: (req) => via(() => store.decide(req)),
      peek: (req) => via(() => store.peek(req)),
      adjust: (p, k, d) => via(() => store.adjust(p, k, d)),
      release: (p, k, id) => via(() => store.release(p, k, id)),
      reset: (p, k) => via(() => store.reset(p, k)),
    };
  }
}

/** Three regions' memory stores, and a multi-region store per region reaching the others over `wan`. */
function world(
  time: ManualTime,
  options: Partial<MultiRegionStoreOptions> = {},
  oneWayMs = 40,
): { wans: Record<Region, Wan>; stores: Record<Region, ReturnType<typeof multiRegionStore>> } {
  const backends = Object.fromEntries(
    REGIONS.map((r) => [r, new MemoryStore({ now: time.now })]),
  ) as Record<Region, MemoryStore>;
  const wans = Object.fromEntries(REGIONS.map((r) => [r, new Wan(time, oneWayMs)])) as Record<
    Region,
    Wan
  >;
  const stores = Object.fromEntries(
    REGIONS.map((here) => [
      here,
      multiRegionStore({
        region: here,
        // What region `here` reaches of region `r`: its own directly, the others through r's link.
        regions: Object.fromEntries(
          REGIONS.map((r) => [r, r === here ? backends[r] : wans[r].to(backends[r])]),
        ),
        now: time.now,
        timers: time.timers,
        ...options,
      }),
    ]),
  ) as Record<Region, ReturnType<typeof multiRegionStore>>;
  return { wans, stores };
}

const hot = definePolicy({
  name: "global",
  algorithm: "fixed-window",
  rules: [{ limit: 600, period: "1s" }],
  lease: true,
});

/**
 * Demand 1:1:4 (1, 1 and 4 requests a millisecond in eu, us and ap) for a key homed in eu, for
 * `windows` one-second windows; eu is cut off from the others in the window `cutWindow`.
 * Answers what each window admitted, the decisions, and the latencies in ms.
 */
async function run(
  time: ManualTime,
  w: ReturnType<typeof world>,
  policy: Policy,
  windows: number,
  cutWindow: number,
): Promise<{ admitted: number[]; decisions: number; latencies: number[] }> {
  const limiters = Object.fromEntries(
    REGIONS.map((r) => [r, createLimiter({ policy, store: w.stores[r] })]),
  ) as Record<Region, ReturnType<typeof createLimiter>>;
  const demand: Record<Region, number> = { eu: 1, us: 1, ap: 4 };
  // One more window: a request that waited for its home may be admitted just after the last.
  const admitted = new Array<number>(windows + 2).fill(0);
  const latencies: number[] = [];
  let decisions = 0;
  const start = Math.ceil(time.now() / 1000) * 1000;
  await time.advance(start - time.now());
  const pending: Promise<void>[] = [];
  for (let ms = 0; ms < windows * 1000; ms++) {
    const window = Math.floor(ms / 1000);
    w.wans.eu.cut = window === cutWindow;
    for (const r of REGIONS)
      for (let i = 0; i < demand[r]; i++) {
        decisions++;
        const asked = time.now();
        pending.push(
          limiters[r].limit("hot").then((d) => {
            latencies.push(time.now() - asked);
            if (d.allowed) admitted[Math.floor((time.now() - start) / 1000)]!++;
          }),
        );
      }
    await time.advance(1);
  }
  await time.advance(1000);
  await Promise.all(pending);
  return { admitted, decisions, latencies };
}

/** Moves time a millisecond at a time until `p` settles: its value, and the ms it took. */
async function waitFor<T>(time: ManualTime, p: Promise<T>): Promise<[T, number]> {
  const from = time.now();
  let done = false;
  const settled = p.finally(() => {
    done = true;
  });
  for (let i = 0; i < 100_000; i++) {
    await flushPromises();
    if (done) break;
    await time.advance(1);
  }
  return [await settled, time.now() - from];
}

function p99(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length * 0.99)]!;
}

describe("multiRegionStore", () => {
  it("refuses bad options, naming each field", () => {
    const m = new MemoryStore();
    const bad = (o: unknown) => {
      try {
        multiRegionStore(o as MultiRegionStoreOptions);
      } catch (err) {
        expect(err).toBeInstanceOf(ValidationError);
        return (err as ValidationError).issues.map((i) => `${i.path}: ${i.message}`);
      }
      throw new Error("accepted");
    };
    expect(bad({ region: "eu", regions: { us: m } })).toEqual([
      "region: must be one of regions (us)",
    ]);
    expect(bad({ region: "eu", regions: { eu: m }, mode: "bounded" })[0]).toMatch(
      /^borrow: is required in mode "bounded"/,
    );
    expect(bad({ region: "eu", regions: { eu: m }, borrow: 5 })[0]).toMatch(
      /^borrow: applies to mode "bounded" only/,
    );
    expect(bad({ region: "eu", regions: { eu: m }, homes: { global: "mars" } })).toEqual([
      'homes.global: must be one of regions (got "mars")',
    ]);
    expect(bad({ region: "eu", regions: { eu: {} } })).toEqual([
      "regions: eu must be a store (redisStore(...))",
    ]);
    expect(bad({ region: "eu", regions: { eu: m }, mode: "eventual" })).toEqual([
      'mode: must be "strict" or "bounded"',
    ]);
  });

  it("refuses a policy without allotments, or concurrency, naming the field", async () => {
    const store = multiRegionStore({ region: "eu", regions: { eu: new MemoryStore() } });
    const plain = definePolicy({
      name: "p",
      algorithm: "gcra",
      rules: [{ limit: 5, period: "1s" }],
    });
    await expect(createLimiter({ policy: plain, store }).limit("k")).rejects.toThrow(
      /cannot be decided by multiRegionStore.*lease: region leases need allotments/,
    );
    const c = definePolicy({
      name: "c",
      algorithm: "concurrency",
      rules: [{ limit: 5, period: "1m" }],
      lease: true,
    });
    await expect(createLimiter({ policy: c, store }).limit("k")).rejects.toThrow(
      /algorithm: concurrency permits are not region-leased/,
    );
  });

  it("homes keys by a stable hash spread over the regions, or where a policy is pinned", () => {
    const time = new ManualTime();
    const { stores } = world(time);
    const counts: Record<string, number> = { eu: 0, us: 0, ap: 0 };
    for (let i = 0; i < 3000; i++) {
      const home = stores.eu.homeOf(hot, `user-${i}`);
      // Every region's store agrees on every key's home.
      expect(stores.ap.homeOf(hot, `user-${i}`)).toBe(home);
      counts[home]!++;
    }
    for (const n of Object.values(counts)) expect(n).toBeGreaterThan(800);
    const pinned = multiRegionStore({
      region: "us",
      regions: { eu: new MemoryStore(), us: new MemoryStore() },
      homes: { global: "eu" },
    });
    expect(pinned.homeOf(hot, "anything")).toBe("eu");
  });

  it("strict: never over the limit in any window, the home's cut-off included; ≥ 90% used while reachable", async () => {
    const time = new ManualTime();
    const w = world(time, { homes: { global: "eu" } });
    const { admitted, decisions, latencies } = await run(time, w, hot, 6, 4);
    for (const n of admitted) expect(n).toBeLessThanOrEqual(600);
    for (const i of [0, 1, 2, 3, 5]) expect(admitted[i]).toBeGreaterThanOrEqual(540);
    const calls = w.wans.eu.calls + w.wans.us.calls + w.wans.ap.calls;
    expect((calls / decisions) * 1000).toBeLessThanOrEqual(5);
    // Hot decisions do not wait for the WAN: the 40 ms each way shows in fewer than 1%.
    expect(p99(latencies)).toBeLessThan(25);
    const s = w.stores.ap.regionStats(hot);
    expect(s.bound).toBe(600);
    expect(s.underAdmitted).toBeGreaterThan(0);
    expect(s.borrowed).toBe(0);
  });

  it("bounded: at most limit + (regions − 1) × borrow in the cut-off window", async () => {
    const time = new ManualTime();
    const w = world(time, { homes: { global: "eu" }, mode: "bounded", borrow: 30 });
    const { admitted } = await run(time, w, hot, 6, 4);
    expect(w.stores.us.regionStats(hot).bound).toBe(660);
    for (const n of admitted) expect(n).toBeLessThanOrEqual(660);
    for (const i of [0, 1, 2, 3, 5]) expect(admitted[i]).toBeGreaterThanOrEqual(540);
    expect(admitted[4]).toBeGreaterThan(600 - 30);
    const borrowed = w.stores.ap.regionStats(hot).borrowed + w.stores.us.regionStats(hot).borrowed;
    expect(borrowed).toBeGreaterThan(0);
    expect(borrowed).toBeLessThanOrEqual(2 * 30 * 6);
  });

  it("a cold key waits one round trip in strict mode; bounded decides it at once from the borrow ledger", async () => {
    const time = new ManualTime();
    const strict = world(time, { homes: { global: "eu" } });
    const limiter = createLimiter({ policy: hot, store: strict.stores.us });
    const [d, took] = await waitFor(time, limiter.limit("cold"));
    expect(d.allowed).toBe(true);
    expect(took).toBe(80); // 40 ms each way

    const bounded = world(time, { homes: { global: "eu" }, mode: "bounded", borrow: 5 });
    const [b, tookBounded] = await waitFor(
      time,
      createLimiter({ policy: hot, store: bounded.stores.us }).limit("cold"),
    );
    expect(b.allowed).toBe(true);
    expect(tookBounded).toBe(0);
    // Reported against the policy's limit; remaining is what the borrow ledger has left.
    expect(b.limit).toBe(600);
    expect(b.remaining).toBe(4);
    expect(bounded.wans.eu.calls).toBe(0);
    // The borrowed unit is charged to the home afterwards (at the next upkeep), in its window.
    await time.advance(300);
    expect(bounded.wans.eu.calls).toBe(1);
    const atHome = await createLimiter({ policy: hot, store: bounded.stores.eu }).peek("cold");
    expect(atHome.remaining).toBe(599);
  });

  it("gives back what a token bucket's lease did not spend", async () => {
    const time = new ManualTime();
    const tb = definePolicy({
      name: "tb",
      algorithm: "token-bucket",
      rules: [{ limit: 100, period: "1s" }],
      lease: { ttl: "1s", hotAfter: 5 },
    });
    const w = world(time, { homes: { tb: "eu" } }, 5);
    const us = createLimiter({ policy: tb, store: w.stores.us });
    for (let i = 0; i < 20; i++) {
      const [d] = await waitFor(time, us.limit("k"));
      expect(d.allowed).toBe(true);
    }
    // Idle: the lease ends and what it holds goes back to eu's bucket.
    await time.advance(3000);
    const atHome = await createLimiter({ policy: tb, store: w.stores.eu }).peek("k");
    expect(atHome.remaining).toBe(100);
    expect(w.stores.us.allotmentsHeld("tb")).toBe(0);
  });

  it("keeps at most maxKeys keys: a flood of cold keys does not grow it", async () => {
    const time = new ManualTime();
    const w = world(time, { homes: { global: "eu" }, maxKeys: 100 }, 0);
    const limiter = createLimiter({ policy: hot, store: w.stores.us });
    for (let i = 0; i < 1000; i++) await waitFor(time, limiter.limit(`k${i}`));
    expect(w.stores.us.trackedKeys).toBeLessThanOrEqual(100);
  });
});
