import { describe, expect, it } from "vitest";
import { PatternError, arrivals, bucketFor, simulate } from "./simulate.js";

describe("arrivals", () => {
  it("spaces a steady rate evenly", () => {
    expect(arrivals({ kind: "steady", ratePerSec: 4, durationMs: 1000 })).toEqual([
      0, 250, 500, 750,
    ]);
  });
  it("repeats bursts, or plays one when everyMs is 0", () => {
    expect(arrivals({ kind: "burst", size: 3, everyMs: 0, durationMs: 5000 })).toEqual([0, 0, 0]);
    expect(arrivals({ kind: "burst", size: 2, everyMs: 1000, durationMs: 3000 })).toEqual([
      0, 0, 1000, 1000, 2000, 2000,
    ]);
  });
  it("ramps: the count is the integral of the rate", () => {
    const t = arrivals({ kind: "ramp", fromPerSec: 0, toPerSec: 100, durationMs: 10_000 });
    expect(t.length).toBe(500);
    // Later seconds carry more requests than earlier ones.
    expect(t.filter((x) => x >= 9000).length).toBeGreaterThan(t.filter((x) => x < 1000).length * 5);
  });
  it("refuses bad numbers, naming the field", () => {
    expect(() => arrivals({ kind: "steady", ratePerSec: -1, durationMs: 1000 })).toThrow(
      PatternError,
    );
    expect(() => arrivals({ kind: "burst", size: 1.5, everyMs: 0, durationMs: 1000 })).toThrow(
      expect.objectContaining({ name: "PatternError", field: "size" }),
    );
    expect(() => arrivals({ kind: "steady", ratePerSec: 1e6, durationMs: 3_600_000 })).toThrow(
      /max/,
    );
  });
});

describe("simulate", () => {
  it("a burst of 100 against 20/min: every algorithm admits 20", () => {
    const sim = simulate(
      { rules: [{ limit: 20, period: "1m" }] },
      { kind: "burst", size: 100, everyMs: 0, durationMs: 60_000 },
    );
    for (const r of sim.runs) {
      expect(r.error).toBeUndefined();
      expect([r.algorithm, r.admitted, r.offered]).toEqual([r.algorithm, 20, 100]);
      expect(r.series.reduce((a, b) => a + b, 0)).toBe(20);
    }
    expect(sim.offered.reduce((a, b) => a + b, 0)).toBe(100);
  });

  it("steady 2/s for a minute against 60/min with burst 10: gcra admits 10 + 1/s refill", () => {
    const sim = simulate(
      { rules: [{ limit: 60, period: "1m", burst: 10 }] },
      { kind: "steady", ratePerSec: 2, durationMs: 60_000 },
      ["gcra", "token-bucket", "fixed-window"],
    );
    const by = Object.fromEntries(sim.runs.map((r) => [r.algorithm, r.admitted]));
    // Fixed window has no burst: 60 of the 120 pass in the one window.
    expect(by["fixed-window"]).toBe(60);
    // gcra and token bucket agree (same shape). Requests come every 500 ms and a unit refills
    // every 1000 ms: before the k-th request (k from 0) the bucket holds 10 − k/2, so k = 0…18
    // pass (19 requests, until 9 s); it is then empty, and one passes each whole second from
    // 10 s to 59 s (50 more): 69, exactly, since the run is deterministic.
    expect(by.gcra).toBe(69);
    expect(by["token-bucket"]).toBe(69);
  });

  it("reports a policy an algorithm cannot run, per algorithm", () => {
    const sim = simulate(
      { rules: [{ limit: 0, period: "1m" }] },
      { kind: "burst", size: 1, everyMs: 0, durationMs: 1000 },
      ["gcra"],
    );
    expect(sim.runs[0]?.error).toMatch(/rules\.0\.limit/);
  });

  it("a penalty block denies the rest of the run", () => {
    const sim = simulate(
      { rules: [{ limit: 5, period: "1s" }], blockDuration: "1m" },
      { kind: "steady", ratePerSec: 10, durationMs: 10_000 },
      ["fixed-window"],
    );
    expect(sim.runs[0]?.admitted).toBe(5);
  });

  it("picks round buckets", () => {
    expect(bucketFor(60_000)).toBe(1000);
    expect(bucketFor(10_000)).toBe(200);
    expect(bucketFor(3_600_000)).toBe(60_000);
  });
});
