/** Per-key overrides on the memory store (time injected). */
import { describe, expect, it } from "vitest";
import { createLimiter, memoryStore } from "../../src/index.js";
import { carryOverrides } from "../../src/service.js";
import { overrideCases } from "./shared.js";

let seq = 0;

describe("per-key overrides, memory store", () => {
  overrideCases(() => {
    const time = { t: 1_700_000_000_000 };
    return { store: memoryStore({ now: () => time.t }), time, name: `ovr-${++seq}` };
  });

  it("decides synchronously with the key's override", () => {
    const limiter = createLimiter({
      store: memoryStore({ now: () => 0 }),
      policy: { name: "sync", algorithm: "gcra", rules: [{ limit: 1, period: "1s" }] },
      overrides: { vip: { rules: [{ limit: 3, period: "1s" }] } },
    });
    expect([1, 2, 3, 4].map(() => limiter.limitSync("vip").allowed)).toEqual([
      true,
      true,
      true,
      false,
    ]);
    expect(limiter.limitSync("anyone").allowed).toBe(true);
    expect(limiter.limitSync("anyone").allowed).toBe(false);
  });

  it("warnAt weighs a key by its override's capacity", () => {
    const events: { key: string; used: number }[] = [];
    const limiter = createLimiter({
      store: memoryStore({ now: () => 0 }),
      policy: { name: "warn", algorithm: "fixed-window", rules: [{ limit: 10, period: "1m" }] },
      overrides: { small: { rules: [{ limit: 2, period: "1m" }] } },
      warnAt: 0.5,
      onNearLimit: (e) => events.push({ key: e.key, used: e.used }),
    });
    limiter.limitSync("small");
    expect(events).toEqual([{ key: "small", used: 0.5 }]);
  });

  it("keys on the same rules share one resolved policy", () => {
    const limiter = createLimiter({
      store: memoryStore({ now: () => 0 }),
      policy: { name: "shared", rules: [{ limit: 1, period: "1s" }] },
    });
    for (let i = 0; i < 1000; i++) limiter.setOverride(`k${i}`, [{ limit: 5, period: "1s" }]);
    expect(limiter.override("k999")).toEqual([{ limit: 5, period: 1000 }]);
  });

  it("a new version of the policy takes the overrides over; one it refuses is told and left out", () => {
    const store = memoryStore({ now: () => 0 });
    const v1 = createLimiter({
      store,
      policy: { name: "plans", algorithm: "gcra", rules: [{ limit: 1, period: "1s" }] },
      overrides: {
        small: { rules: [{ limit: 3, period: "1s" }] },
        bursty: { rules: [{ limit: 3, period: "1s", burst: 6 }] },
      },
    });
    // Version 2 is a fixed window: a burst is no longer a field it takes.
    const v2 = createLimiter({
      store,
      policy: { name: "plans", algorithm: "fixed-window", rules: [{ limit: 2, period: "1s" }] },
    });
    const dropped: string[] = [];
    carryOverrides(v1, v2, (key) => dropped.push(key));
    expect(dropped).toEqual(["bursty"]);
    expect(v2.override("small")).toEqual([{ limit: 3, period: 1000 }]);
    expect(v2.override("bursty")).toBeUndefined();
    expect(v2.limitSync("small").limit).toBe(3);
    expect(v2.limitSync("bursty").limit).toBe(2);
  });
});
