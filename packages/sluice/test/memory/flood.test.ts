import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  ALGORITHMS,
  type AlgorithmName,
  type PolicyInput,
  createLimiter,
  definePolicy,
  memoryStore,
} from "../../src/index.js";
import type { WindowCount } from "../../src/stores/memory.js";
import { identifierTag } from "../../src/stores/redis-keys.js";
import type { FloodCase, FloodReport } from "./flood-heap-worker.js";

/** An injected clock that moves only when a test says so. */
function clock(): { now: () => number; tick: (ms?: number) => void } {
  let t = 1_700_006_400_000;
  return { now: () => t, tick: (ms = 1) => void (t += ms) };
}

/** Every algorithm with one rule, then a two-rule policy and a penalty-block policy. */
const POLICIES: Array<[string, (name: string) => PolicyInput]> = [
  ...ALGORITHMS.map((algorithm): [string, (name: string) => PolicyInput] => [
    algorithm,
    (name) => ({ name, algorithm, rules: [{ limit: 10, period: "1h" }] }),
  ]),
  [
    "fixed-window, two rules",
    (name) => ({
      name,
      algorithm: "fixed-window",
      rules: [
        { limit: 10, period: "1h" },
        { limit: 100, period: "1d" },
      ],
    }),
  ],
  [
    "sliding-log, penalty block",
    (name) => ({
      name,
      algorithm: "sliding-log",
      rules: [{ limit: 10, period: "1h" }],
      blockDuration: "1h",
    }),
  ],
];

describe("memory store at its cap", () => {
  it.each(POLICIES)("%s: a flood of new keys never evicts the exhausted hot key", (_, policyOf) => {
    const time = clock();
    const store = memoryStore({ now: time.now, maxKeys: 100 });
    const limiter = createLimiter({ store, policy: policyOf("api") });
    for (let i = 0; i < 10; i++) expect(limiter.limitSync("hot").allowed).toBe(true);
    expect(limiter.limitSync("hot").allowed).toBe(false);
    // 5,000 new keys (50× the store), one a millisecond, and the hot key asks every 5th.
    let admitted = 0;
    for (let i = 0; i < 5000; i++) {
      time.tick();
      limiter.limitSync(`flood-${i}`);
      if (i % 5 === 0 && limiter.limitSync("hot").allowed) admitted++;
    }
    expect(admitted).toBe(0);
    expect(limiter.peekSync("hot").allowed).toBe(false);
    expect(store.keyCount).toBe(100);
  });

  it.each(ALGORITHMS)(
    "%s: a key with less than half its limit left outlives a flood of fresh keys",
    (algorithm) => {
      const time = clock();
      const store = memoryStore({ now: time.now, maxKeys: 100 });
      const limiter = createLimiter({
        store,
        policy: { name: "api", algorithm, rules: [{ limit: 10, period: "1h" }] },
      });
      expect(limiter.limitSync("busy", { cost: 8 }).remaining).toBe(2);
      for (let i = 0; i < 5000; i++) {
        time.tick();
        limiter.limitSync(`flood-${i}`);
      }
      expect(limiter.peekSync("busy").remaining).toBe(2);
    },
  );

  it.each(ALGORITHMS)(
    "%s: evicts the oldest calm key, then warm, then held: an exhausted key last",
    (algorithm: AlgorithmName) => {
      const time = clock();
      const store = memoryStore({ now: time.now, maxKeys: 3 });
      const limiter = createLimiter({
        store,
        policy: { name: "api", algorithm, rules: [{ limit: 10, period: "1h" }] },
      });
      const take = (key: string, cost: number) => {
        time.tick();
        expect(limiter.limitSync(key, { cost }).allowed).toBe(true);
      };
      /** What each key has left (10: not held, or evicted). */
      const left = (...keys: string[]) => keys.map((k) => limiter.peekSync(k).remaining);
      take("exhausted", 10); // held
      take("warm", 7); // 3 left: warm
      take("calm", 2); // 8 left: calm
      take("warm-2", 6); // full: the only calm key goes
      expect(left("exhausted", "warm", "calm", "warm-2")).toEqual([0, 3, 10, 4]);
      take("held", 10); // no calm key: the oldest warm one goes
      expect(left("exhausted", "warm", "warm-2", "held")).toEqual([0, 10, 4, 0]);
      take("held-2", 10); // then the other warm one
      expect(left("exhausted", "warm-2", "held", "held-2")).toEqual([0, 10, 0, 0]);
      take("fresh", 1); // all held: the oldest held key goes
      expect(left("exhausted", "held", "held-2", "fresh")).toEqual([10, 0, 0, 9]);
      expect(store.keyCount).toBe(3);
    },
  );

  it("a held key given room back is calm again at its next decision", () => {
    const time = clock();
    const store = memoryStore({ now: time.now, maxKeys: 3 });
    const limiter = createLimiter({
      store,
      policy: { name: "api", algorithm: "fixed-window", rules: [{ limit: 2, period: "1m" }] },
    });
    limiter.limitSync("a");
    limiter.limitSync("a"); // exhausted: held
    limiter.limitSync("b", { cost: 2 }); // held
    time.tick(60_000); // a new window for both
    limiter.limitSync("a"); // 1 of 2 left: calm
    limiter.limitSync("b", { cost: 2 }); // held again
    limiter.limitSync("c", { cost: 2 }); // held
    limiter.limitSync("d", { cost: 2 }); // full: the calm key goes, not the held ones
    expect([..."abcd"].map((k) => limiter.peekSync(k).remaining)).toEqual([2, 0, 0, 0]);
  });

  it("a key exhausted by a settled reservation's debt outlives a flood", async () => {
    const time = clock();
    const store = memoryStore({ now: time.now, maxKeys: 100 });
    const limiter = createLimiter({
      store,
      policy: { name: "llm", algorithm: "fixed-window", rules: [{ limit: 10, period: "1h" }] },
    });
    const r = await limiter.reserve("tenant", 2);
    await r.settle(10); // the work cost 10: the key is exhausted without a denial
    for (let i = 0; i < 5000; i++) {
      time.tick();
      limiter.limitSync(`flood-${i}`);
    }
    expect(limiter.peekSync("tenant").allowed).toBe(false);
  });
});

describe("memory store: keys longer than 64 characters are held by their digest", () => {
  const stem = "€".repeat(4094);
  const long = (last: string) => `${stem}${last}!`;

  it.each(ALGORITHMS)(
    "%s: keys that differ only in their last characters are counted apart, and every call reaches its own",
    async (algorithm) => {
      const time = clock();
      const store = memoryStore({ now: time.now });
      const limiter = createLimiter({
        store,
        policy: { name: "api", algorithm, rules: [{ limit: 10, period: "1h" }] },
      });
      expect(limiter.limitSync(long("a"), { cost: 10 }).allowed).toBe(true);
      expect(limiter.limitSync(long("a")).allowed).toBe(false);
      expect(limiter.peekSync(long("a")).allowed).toBe(false);
      expect(limiter.limitSync(long("b"), { cost: 4 }).remaining).toBe(6);
      // A key of 64 characters is held as it is; one of 65, by its digest: the name the Redis
      // store gives it, 28 characters, which a short key spelling it reaches too (only someone
      // who knows the long key can spell it).
      expect(limiter.limitSync("k".repeat(64)).remaining).toBe(9);
      expect(identifierTag(long("a"))).toMatch(/^#[\w-]{27}$/);
      expect(limiter.peekSync(identifierTag(long("a"))).allowed).toBe(false);
      expect(store.keyCount).toBe(3);
      await limiter.reset(long("a"));
      expect(limiter.peekSync(long("a")).remaining).toBe(10);
      expect(limiter.peekSync(long("b")).remaining).toBe(6);
      if (algorithm === "concurrency") {
        const lease = await limiter.acquire(long("c"));
        expect(limiter.peekSync(long("c")).remaining).toBe(9);
        expect(await lease.release()).toBe(true);
      } else {
        const r = await limiter.reserve(long("c"), 5);
        await r.settle(2); // an adjust of -3
        expect(limiter.peekSync(long("c")).remaining).toBe(8);
      }
    },
  );

  it("the drop-in faces' count and set-count paths reach the same counter", () => {
    const time = clock();
    const store = memoryStore({ now: time.now });
    const policy = definePolicy({
      name: "faces",
      algorithm: "fixed-window",
      windowStart: "first-request",
      rules: [{ limit: 100, period: "1m" }],
    });
    const out: WindowCount = { allowed: false, count: 0, resetAfterMs: 0, nowMs: 0 };
    store.countSync(policy, long("a"), 3, out);
    expect(out).toMatchObject({ allowed: true, count: 3 });
    store.setCountSync(policy, long("a"), 50, 60_000);
    store.countSync(policy, long("a"), 1, out);
    expect(out.count).toBe(51);
    store.countSync(policy, long("b"), 1, out);
    expect(out.count).toBe(1);
    // (The store's peek tells what a request of 1 would leave.)
    expect(store.peekSync(policy, long("a"), 1).rules[0]!.remaining).toBe(48);
  });
});

const WORKER = fileURLToPath(new URL("./flood-heap-worker.ts", import.meta.url));

/**
 * Runs one flood in a process of its own, with `gc()` and a bounded heap (64 MB: a store that
 * kept what it evicts, or 10,000 keys of 4,096 characters as they came, dies there).
 */
function measure(c: FloodCase): Promise<FloodReport> {
  return new Promise((resolve, reject) => {
    const child = fork(WORKER, [JSON.stringify(c)], {
      execArgv: ["--import", "tsx", "--expose-gc", "--max-old-space-size=64"],
      stdio: ["ignore", "inherit", "pipe", "ipc"],
    });
    let report: FloodReport | undefined;
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("message", (m: FloodReport) => (report = m));
    child.on("exit", (code, signal) => {
      if (report !== undefined && code === 0) resolve(report);
      else
        reject(new Error(`the flood's process ended (${code ?? signal}): ${stderr.slice(-1500)}`));
    });
  });
}

const CAP = 10_000;
const MB = (bytes: number) => `${(bytes / 1e6).toFixed(2)} MB`;

/** The policies flooded: every algorithm, a first-request window, penalties, several rules. */
const FLOODED: Array<[string, PolicyInput]> = [
  ...ALGORITHMS.map((algorithm): [string, PolicyInput] => [
    algorithm,
    { name: "api", algorithm, rules: [{ limit: 10, period: "1d" }] },
  ]),
  [
    "fixed-window from the first request",
    {
      name: "api",
      algorithm: "fixed-window",
      windowStart: "first-request",
      rules: [{ limit: 10, period: "1d" }],
    },
  ],
  [
    "gcra, penalty block",
    { name: "api", algorithm: "gcra", rules: [{ limit: 10, period: "1d" }], blockDuration: "1d" },
  ],
  [
    "sliding-log, penalty block",
    {
      name: "api",
      algorithm: "sliding-log",
      rules: [{ limit: 10, period: "1d" }],
      blockDuration: "1d",
    },
  ],
  [
    "token-bucket, two rules and a penalty block",
    {
      name: "api",
      algorithm: "token-bucket",
      rules: [
        { limit: 10, period: "1d" },
        { limit: 100, period: "7d" },
      ],
      blockDuration: "1d",
    },
  ],
];

/**
 * What a flood of 10× the cap may do to the heap (heapUsed after full GCs): the rule,
 * the whole heap within 1.5× of what it was at the cap; the store's own share (over the heap
 * before it was made) at most twice its share at the cap (under churn V8 doubles a Map's hash
 * table once, and keeps it: a bare Map churned so does the same); and nothing kept per key once
 * that is done (the second half of the flood; the store that kept what it evicted grew by
 * ~51 B a key).
 */
function expectBounded(r: FloodReport, keyLength: number): void {
  const share = r.atCap - r.base;
  const info = `base ${MB(r.base)}, at the cap ${MB(r.atCap)}, halfway ${MB(r.half)}, end ${MB(r.end)}`;
  expect(r.keyCount, info).toBe(CAP);
  expect(r.end, info).toBeLessThanOrEqual(1.5 * r.atCap);
  expect(r.end - r.base, info).toBeLessThanOrEqual(2 * share);
  expect((r.end - r.half) / (5 * CAP), info).toBeLessThan(10);
  // The cap bounds bytes, not only keys: a key of 4,096 characters is held as its digest.
  expect(share / CAP, `bytes per key held (${keyLength} characters): ${info}`).toBeLessThan(512);
}

describe("memory store's heap under a key flood (10× the cap, heap bounded)", () => {
  it.each(FLOODED)("%s, 16-character keys", async (_, policy) => {
    const r = await measure({ kind: "flood", policy, cap: CAP, keyLength: 16 });
    expect(r.hotAllowed).toBe(0);
    expectBounded(r, 16);
  });

  // One algorithm: what a key costs does not depend on it, and hashing 110,000 keys of 12 KiB
  // takes a while (every algorithm holds a long key by its digest: the tests of long keys above).
  it("gcra, 4,096-character keys", async () => {
    const policy = FLOODED.find(([name]) => name === "gcra")![1];
    const r = await measure({ kind: "flood", policy, cap: CAP, keyLength: 4096 });
    expect(r.hotAllowed).toBe(0);
    expectBounded(r, 4096);
  });

  it.each(
    FLOODED.filter(([name]) =>
      [
        "fixed-window",
        "gcra",
        "sliding-log",
        "token-bucket, two rules and a penalty block",
      ].includes(name),
    ).map(([name, policy]): [string, PolicyInput] => [
      name,
      {
        ...policy,
        rules: policy.rules.map((rule) => ({
          limit: 2,
          period: "1m",
          ...(rule.burst !== undefined ? { burst: rule.burst } : {}),
        })),
        ...(policy.blockDuration !== undefined ? { blockDuration: "1m" } : {}),
      },
    ]),
  )("%s: keys that change class every minute, and no new key, keep the heap", async (_, policy) => {
    const r = await measure({ kind: "churn", policy, cap: 2000, keyLength: 16, rounds: 100 });
    const info = `base ${MB(r.base)}, first round ${MB(r.atCap)}, round 20 ${MB(r.half)}, round 100 ${MB(r.end)}`;
    expect(r.keyCount, info).toBe(2000);
    // Four class changes a key a minute for 80 minutes: the store that kept every hash table a
    // changed class map went through grew by ~20 B a change (6 MB here).
    expect(r.end - r.half, info).toBeLessThan(500_000);
  });
});
