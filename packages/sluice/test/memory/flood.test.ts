import { describe, expect, it } from "vitest";
import {
  ALGORITHMS,
  type AlgorithmName,
  type PolicyInput,
  createLimiter,
  memoryStore,
} from "../../src/index.js";

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
