import { afterEach, describe, expect, it, vi } from "vitest";
import type { Decision } from "./decision.js";
import { PERMITS_TRACKED, TIMED_PER_SECOND, Tally } from "./telemetry.js";

afterEach(() => {
  vi.useRealTimers();
});

/** How many of `n` decisions, made at once, the tally times. */
function timed(t: Tally, n: number): number {
  let k = 0;
  for (let i = 0; i < n; i++) if (t.begin() >= 0) k++;
  return k;
}

describe("Tally: the duration sample", () => {
  it("times every decision up to TIMED_PER_SECOND a second, then one in a stride sized by the last second's rate", () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    const t = new Tally("p", "memory", false);
    expect(timed(t, TIMED_PER_SECOND)).toBe(TIMED_PER_SECOND);
    // Over the budget within the same second: one more (the stride is still 1 until a second ends).
    expect(timed(t, 10)).toBe(10);
    vi.advanceTimersByTime(1000);
    // The last second saw 1,011 decisions: the stride is 2 once this second's budget is spent.
    expect(timed(t, 1)).toBe(1); // the decision that opened the second
    expect(timed(t, TIMED_PER_SECOND - 1)).toBe(TIMED_PER_SECOND - 1);
    expect(timed(t, 100_000)).toBe(50_000);
  });

  it("a busy second makes a long stride; a quiet one brings it back to every decision", () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    const t = new Tally("p", "memory", false);
    timed(t, 1_000_000);
    vi.advanceTimersByTime(1000);
    const busy = timed(t, 1_000_000);
    expect(busy).toBeLessThan(3 * TIMED_PER_SECOND);
    vi.advanceTimersByTime(1000);
    // Still the long stride until a timed decision sees the new second…
    let k = 0;
    while (t.begin() < 0) k++;
    expect(k).toBeGreaterThan(100);
    // …then, as the last second was long, strides stay long for one more second, and after a
    // quiet second every decision is timed again.
    vi.advanceTimersByTime(1000);
    while (t.begin() < 0);
    vi.advanceTimersByTime(1000);
    while (t.begin() < 0);
    expect(timed(t, 500)).toBe(500);
  });
});

describe("Tally: counts", () => {
  const decision = (allowed: boolean, rule = 0, reason?: Decision["reason"]): Decision => ({
    allowed,
    limit: 5,
    remaining: 0,
    resetAfterMs: 0,
    retryAfterMs: 0,
    policy: "p",
    rule,
    rules: [],
    cost: 1,
    ...(reason ? { reason } : {}),
  });

  it("counts allowed in a field, denials by rule, and reasons apart", () => {
    const t = new Tally("p", "memory", false);
    t.count(decision(true), -1);
    t.count(decision(false, 1), -1);
    t.count(decision(false, 1), -1);
    t.count(decision(true, 0, "deny-cache"), -1);
    t.count(decision(false, 0, "blocked"), -1);
    expect(t.allowed).toBe(1);
    expect(t.denied[1]).toBe(2);
    expect([...t.other.values()].map((s) => [s.attributes, s.n])).toEqual([
      [
        {
          "ratelimit.policy": "p",
          "ratelimit.store": "memory",
          "ratelimit.result": "allowed",
          "ratelimit.reason": "deny-cache",
        },
        1,
      ],
      [
        {
          "ratelimit.policy": "p",
          "ratelimit.store": "memory",
          "ratelimit.result": "denied",
          "ratelimit.reason": "blocked",
          "ratelimit.rule": 0,
        },
        1,
      ],
    ]);
  });

  it("a draft's tally counts its denials as shadow", () => {
    const t = new Tally("sluice.draft.7", "redis", true);
    t.count(decision(false, 0), -1);
    expect(t.denied).toEqual([]);
    expect([...t.other.values()][0]!.attributes["ratelimit.reason"]).toBe("shadow");
  });

  it("permits lapse after their period", () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    const t = new Tally("p", "memory", false);
    t.permitTaken("a", 1000);
    t.permitTaken("b", 5000);
    expect(t.permitsHeld()).toBe(2);
    vi.advanceTimersByTime(1000);
    expect(t.permitsHeld()).toBe(1);
    t.permitReleased("b");
    expect(t.permitsHeld()).toBe(0);
  });
});

describe("Tally: permits are bounded", () => {
  it("past PERMITS_TRACKED held at once, the oldest is taken to have lapsed", () => {
    const t = new Tally("p", "memory", false);
    for (let i = 0; i < PERMITS_TRACKED + 5; i++) t.permitTaken(`id${i}`, 60_000);
    expect(t.permitsHeld()).toBe(PERMITS_TRACKED);
    t.permitReleased("id0"); // evicted already: nothing changes
    expect(t.permitsHeld()).toBe(PERMITS_TRACKED);
    t.permitReleased(`id${PERMITS_TRACKED + 4}`);
    expect(t.permitsHeld()).toBe(PERMITS_TRACKED - 1);
  });
});
