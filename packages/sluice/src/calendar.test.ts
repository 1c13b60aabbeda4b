import { describe, expect, it } from "vitest";
import { CalendarWindows, anchorProblem, startOfDay, timeZoneProblem } from "./calendar.js";
import { createLimiter } from "./limiter.js";
import { memoryStore } from "./stores/memory.js";

const iso = (s: string) => Date.parse(s);
const edges = (w: CalendarWindows, at: string) => [
  new Date(w.startAt(iso(at))).toISOString(),
  new Date(w.endAt(iso(at))).toISOString(),
];

describe("calendar windows", () => {
  it("a month in America/New_York: local midnights, EST", () => {
    const w = new CalendarWindows("month", "America/New_York", 1);
    // Jan 31 23:30 EST = Feb 1 04:30 UTC: still January's window.
    expect(edges(w, "2026-02-01T04:30:00Z")).toEqual([
      "2026-01-01T05:00:00.000Z",
      "2026-02-01T05:00:00.000Z",
    ]);
    expect(edges(w, "2026-02-01T05:00:00Z")).toEqual([
      "2026-02-01T05:00:00.000Z",
      "2026-03-01T05:00:00.000Z",
    ]);
    // March's window ends at April's local midnight, after the change to EDT (−4 h).
    expect(edges(w, "2026-03-20T12:00:00Z")).toEqual([
      "2026-03-01T05:00:00.000Z",
      "2026-04-01T04:00:00.000Z",
    ]);
  });

  it("a month anchored on the 31st is clamped to a shorter month's last day (as Stripe bills)", () => {
    const w = new CalendarWindows("month", "UTC", 31);
    expect(edges(w, "2026-02-10T00:00:00Z")).toEqual([
      "2026-01-31T00:00:00.000Z",
      "2026-02-28T00:00:00.000Z",
    ]);
    expect(edges(w, "2026-03-01T00:00:00Z")).toEqual([
      "2026-02-28T00:00:00.000Z",
      "2026-03-31T00:00:00.000Z",
    ]);
    expect(edges(w, "2026-04-30T12:00:00Z")).toEqual([
      "2026-04-30T00:00:00.000Z",
      "2026-05-31T00:00:00.000Z",
    ]);
    // A leap year's February has a 29th.
    expect(edges(w, "2028-03-05T00:00:00Z")[0]).toBe("2028-02-29T00:00:00.000Z");
  });

  it("days of 23 and 25 hours in Europe/Berlin", () => {
    const w = new CalendarWindows("day", "Europe/Berlin", 0);
    expect(edges(w, "2026-03-29T12:00:00Z")).toEqual([
      "2026-03-28T23:00:00.000Z",
      "2026-03-29T22:00:00.000Z",
    ]);
    expect(edges(w, "2026-10-25T12:00:00Z")).toEqual([
      "2026-10-24T22:00:00.000Z",
      "2026-10-25T23:00:00.000Z",
    ]);
  });

  it("an ISO week in Asia/Tokyo, from Monday or from another anchor weekday", () => {
    // Saturday 2026-11-28.
    expect(edges(new CalendarWindows("week", "Asia/Tokyo", 1), "2026-11-28T03:00:00Z")).toEqual([
      "2026-11-22T15:00:00.000Z",
      "2026-11-29T15:00:00.000Z",
    ]);
    expect(edges(new CalendarWindows("week", "Asia/Tokyo", 7), "2026-11-28T03:00:00Z")).toEqual([
      "2026-11-21T15:00:00.000Z",
      "2026-11-28T15:00:00.000Z",
    ]);
  });

  it("a year from an anchor date; Feb 29 is Feb 28 in other years", () => {
    expect(edges(new CalendarWindows("year", "UTC", "04-01"), "2027-02-01T00:00:00Z")).toEqual([
      "2026-04-01T00:00:00.000Z",
      "2027-04-01T00:00:00.000Z",
    ]);
    expect(edges(new CalendarWindows("year", "UTC", "02-29"), "2027-03-01T00:00:00Z")).toEqual([
      "2027-02-28T00:00:00.000Z",
      "2028-02-29T00:00:00.000Z",
    ]);
  });

  it("a midnight a DST change skips: the day starts at the change (America/Santiago)", () => {
    // Chile moves from −4 to −3 at 2026-09-06 00:00 local: the day starts at 01:00 −3.
    expect(new Date(startOfDay({ y: 2026, m: 9, d: 6 }, "America/Santiago")).toISOString()).toBe(
      "2026-09-06T04:00:00.000Z",
    );
    const w = new CalendarWindows("day", "America/Santiago", 0);
    expect(edges(w, "2026-09-06T12:00:00Z")).toEqual([
      "2026-09-06T04:00:00.000Z",
      "2026-09-07T03:00:00.000Z",
    ]);
  });

  it("every instant lies in its window, and windows tile time (property over a year, 3 zones)", () => {
    for (const zone of ["America/New_York", "Europe/Berlin", "Australia/Lord_Howe"]) {
      for (const unit of ["day", "week", "month"] as const) {
        const w = new CalendarWindows(unit, zone, unit === "day" ? 0 : 1);
        let t = iso("2026-01-01T00:00:00Z");
        let prevEnd = w.startAt(t);
        while (t < iso("2027-01-01T00:00:00Z")) {
          const start = w.startAt(t);
          const end = w.endAt(t);
          expect(start).toBe(prevEnd);
          expect(end).toBeGreaterThan(start);
          expect(t).toBeGreaterThanOrEqual(start);
          prevEnd = end;
          t = end;
        }
      }
    }
  });

  it("refuses unknown zones and anchors, naming the problem", () => {
    expect(timeZoneProblem("Europe/Berlin")).toBeUndefined();
    expect(timeZoneProblem("Mars/Olympus")).toMatch(/not a time zone/);
    expect(timeZoneProblem("+02:00")).toMatch(/not an offset/);
    expect(anchorProblem("week", 8)).toMatch(/ISO weekday/);
    expect(anchorProblem("month", 0)).toMatch(/1 to 31/);
    expect(anchorProblem("month", 31)).toBeUndefined();
    expect(anchorProblem("year", "02-30")).toMatch(/MM-DD/);
    expect(anchorProblem("year", "02-29")).toBeUndefined();
    expect(anchorProblem("day", 1)).toMatch(/does not apply/);
  });
});

describe("calendar rules in per-key overrides", () => {
  it("a tenant's plan with a monthly quota of its own: kept as written, decided by its window", async () => {
    let t = Date.UTC(2026, 4, 31, 21, 0); // 2026-05-31 23:00 in Berlin (CEST)
    const limiter = createLimiter({
      store: memoryStore({ now: () => t }),
      policy: {
        name: "plans",
        algorithm: "fixed-window",
        rules: [{ limit: 1, calendar: "month", timeZone: "Europe/Berlin" }],
      },
      overrides: {
        "tenant:big": { rules: [{ limit: 2, calendar: "month", timeZone: "Europe/Berlin" }] },
      },
    });
    expect(limiter.override("tenant:big")).toEqual([
      { limit: 2, calendar: "month", timeZone: "Europe/Berlin" },
    ]);
    expect((await limiter.limit("tenant:big")).remaining).toBe(1);
    expect((await limiter.limit("tenant:big")).allowed).toBe(true);
    const denied = await limiter.limit("tenant:big");
    expect(denied).toMatchObject({ allowed: false, retryAfterMs: 3_600_000 });
    expect((await limiter.limit("tenant:small")).allowed).toBe(true);
    expect((await limiter.limit("tenant:small")).allowed).toBe(false);
    t += 3_600_000; // June, local midnight
    expect((await limiter.limit("tenant:big")).remaining).toBe(1);
    expect(() =>
      limiter.setOverride("tenant:odd", [{ limit: 1, calendar: "month", anchor: 40 }]),
    ).toThrow(/overrides\.tenant:odd\.rules\.0\.anchor/);
  });
});
