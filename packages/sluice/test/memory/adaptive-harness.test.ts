/**
 * The adaptive concurrency targets (issue 36), checked on the bench's simulation
 * (bench/lib/adaptive-sim.mjs) driving the library's own limiter in virtual time, with a fixed
 * seed: the same run every time, in seconds. The default algorithm, gradient2, must meet every
 * target; the bench (`node bench/run.mjs --only=adaptive`) reports the others' figures.
 */
import { beforeAll, describe, expect, it } from "vitest";
import * as sluice from "sluice";
import { type Comparison, adaptiveComparison } from "../../../../bench/lib/adaptive-sim.mjs";

describe("adaptive concurrency on a backend with a knee (c = 8, 10 ms, deadline 500 ms)", () => {
  let r: Comparison;
  beforeAll(async () => {
    r = await adaptiveComparison({ sluice, seed: 1, loads: [4], sweep: [4, 6, 7, 8, 9, 10, 12] });
  }, 120_000);

  it("at 4× load, gradient2's goodput is at least 0.9 × the best static limit's", () => {
    const row = r.rows[0]!;
    expect(row.none.goodput).toBeLessThan(0.1 * row.oracle.goodput); // the knee collapses it
    expect(row.gradient2.goodput).toBeGreaterThanOrEqual(0.9 * row.oracle.goodput);
  });

  it("at 4× load, gradient2's admitted p99 is at most twice the unloaded p99", () => {
    expect(r.rows[0]!.gradient2.p99Ms).toBeLessThanOrEqual(2 * r.unloadedP99Ms);
  });

  it("after capacity halves (8 → 4 workers), gradient2 is within 5% of the new oracle in ≤ 5 s", () => {
    const g = r.drop.algorithms.gradient2;
    expect(g.recoveryMs).toBeLessThanOrEqual(5000);
    expect(g.after).toBeGreaterThanOrEqual(0.95 * r.drop.newOracle.goodput);
  });

  it("priority 0 keeps ≥ 95% of its offered load while priority 3 floods at 4×", () => {
    const p = r.priority.gradient2;
    expect(p.top.goodput).toBeGreaterThanOrEqual(0.95 * p.top.offered);
    expect(p.lowest.rejected).toBeGreaterThan(0.5 * p.lowest.offered); // the flood was shed
  });
});
