import { afterEach, describe, expect, it, vi } from "vitest";
import type { Decision } from "./decision.js";
import { PERMIT_SECONDS, TIMED_PER_SECOND, Tally } from "./telemetry.js";

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
  it("times every decision up to TIMED_PER_SECOND a second, then about one a millisecond", () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    const t = new Tally("p", "memory", false);
    expect(timed(t, TIMED_PER_SECOND)).toBe(TIMED_PER_SECOND);
    // A steady million a second (1,000 a millisecond) for the rest of the second: about one
    // timed a millisecond.
    let k = 0;
    for (let ms = 1; ms < 1000; ms++) {
      vi.advanceTimersByTime(1);
      k += timed(t, 1000);
    }
    expect(k).toBeGreaterThan(500);
    expect(k).toBeLessThan(2000);
    // A burst of a million in one millisecond: a handful timed, not thousands.
    const u = new Tally("q", "memory", false);
    expect(timed(u, TIMED_PER_SECOND + 1_000_000)).toBeLessThan(TIMED_PER_SECOND + 20);
  });

  it("a new second times every decision again (the instruments' timer, or the next timed decision)", () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    const t = new Tally("p", "memory", false);
    timed(t, 100_000);
    t.newSecond();
    expect(timed(t, 500)).toBe(500);
    // Without the timer: a timed decision that sees the second has passed begins a new one.
    const u = new Tally("q", "memory", false);
    timed(u, TIMED_PER_SECOND);
    expect(timed(u, 10)).toBe(1); // the stride after the budget, in the first millisecond
    vi.advanceTimersByTime(1000);
    let k = 0;
    while (u.begin() < 0) k++;
    expect(k).toBeLessThan(TIMED_PER_SECOND + 10);
    expect(timed(u, 999)).toBe(999);
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

  it("permits: taken and released in plain numbers, lapsing a whole period after their second", () => {
    const t = new Tally("p", "memory", false);
    t.permitTaken(2000); // a 2 s period: a ring of 3 seconds
    t.permitTaken(2000);
    expect(t.permitsHeld()).toBe(2);
    t.newSecond();
    t.permitTaken(2000);
    t.permitReleased(); // the newest
    expect(t.permitsHeld()).toBe(2);
    t.newSecond();
    expect(t.permitsHeld()).toBe(2);
    t.newSecond(); // the first second's two lapse
    expect(t.permitsHeld()).toBe(0);
    t.permitReleased(); // nothing held: nothing to give back
    expect(t.permitsHeld()).toBe(0);
  });

  it("a flood of permits never released is a count, not a heap", () => {
    const t = new Tally("p", "memory", false);
    for (let i = 0; i < 100_000; i++) t.permitTaken(60_000);
    expect(t.permitsHeld()).toBe(100_000);
    for (let s = 0; s <= 60; s++) t.newSecond();
    expect(t.permitsHeld()).toBe(0);
    expect(PERMIT_SECONDS).toBe(3600);
  });
});
