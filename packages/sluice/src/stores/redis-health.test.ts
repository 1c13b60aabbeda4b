import { describe, expect, it } from "vitest";
import { CallTimes, SLOW_CALL_FACTOR, SLOW_CALL_MS } from "./redis-health.js";

describe("CallTimes: when a call is slow enough that its slot is taken to be moving", () => {
  it("is SLOW_CALL_MS while calls are fast, and before any call came back", () => {
    const t = new CallTimes();
    expect(t.slowMs).toBe(SLOW_CALL_MS);
    for (let i = 0; i < 50; i++) t.sample(0.5);
    expect(t.slowMs).toBe(SLOW_CALL_MS);
  });

  it("follows calls that are slow on a busy machine: 8× their usual time", () => {
    const t = new CallTimes();
    for (let i = 0; i < 200; i++) t.sample(40);
    expect(t.slowMs).toBeCloseTo(SLOW_CALL_FACTOR * 40, 6);
    // Faster again: the threshold comes back down.
    for (let i = 0; i < 200; i++) t.sample(1);
    expect(t.slowMs).toBe(SLOW_CALL_MS);
  });

  it("one call that waited out a move raises it by a little, not eightfold", () => {
    const t = new CallTimes();
    for (let i = 0; i < 400; i++) t.sample(20);
    expect(t.slowMs).toBeCloseTo(160, 6);
    t.sample(5_000);
    // The sample counts for at most the threshold (160 ms): usual 20 + (160 − 20)/16 = 28.75 ms.
    // Taken whole it would have made the usual time 331 ms and the threshold 2.6 s.
    expect(t.slowMs).toBeCloseTo(8 * 28.75, 6);
  });
});
