import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type Summary, SpaceSaving, mergeSummaries } from "./sketch.js";

/** Exact counts of a stream. */
function exact(stream: readonly string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const k of stream) m.set(k, (m.get(k) ?? 0) + 1);
  return m;
}

function sketchOf(stream: readonly string[], capacity: number): SpaceSaving {
  const s = new SpaceSaving(capacity);
  for (const k of stream) s.offer(k);
  return s;
}

/** Every bound a summary promises, checked against the exact counts. */
function expectBounds(summary: Summary, truth: Map<string, number>): void {
  const watched = new Set(summary.entries.map((e) => e.key));
  for (const e of summary.entries) {
    const t = truth.get(e.key) ?? 0;
    expect(e.count).toBeGreaterThanOrEqual(t);
    expect(e.count - e.overcount).toBeLessThanOrEqual(t);
  }
  for (const [key, t] of truth) if (!watched.has(key)) expect(t).toBeLessThanOrEqual(summary.floor);
}

describe("SpaceSaving", () => {
  it("counts exactly while it has free slots", () => {
    const s = sketchOf(["a", "b", "a", "c", "a", "b"], 4);
    expect(s.top()).toEqual([
      { key: "a", count: 3, overcount: 0 },
      { key: "b", count: 2, overcount: 0 },
      { key: "c", count: 1, overcount: 0 },
    ]);
    expect(s.floor).toBe(0);
  });

  it("evicts the smallest count, and the newcomer inherits it as overcount", () => {
    const s = sketchOf(["a", "a", "a", "b", "c"], 2);
    // c replaced b (count 1): c's count is 2, of which 1 may be b's.
    expect(s.top()).toEqual([
      { key: "a", count: 3, overcount: 0 },
      { key: "c", count: 2, overcount: 1 },
    ]);
    expect(s.floor).toBe(2);
  });

  it("keeps at most `capacity` keys and finds every key above total/capacity", () => {
    const stream = [...Array(1000).keys()].map((i) => (i % 3 === 0 ? "hot" : `k${i}`));
    const s = sketchOf(stream, 10);
    expect(s.size).toBe(10);
    expect(s.top(1)[0]).toMatchObject({ key: "hot" });
    expect(s.top(1)[0]!.count - s.top(1)[0]!.overcount).toBeLessThanOrEqual(334);
    expect(s.top(1)[0]!.count).toBeGreaterThanOrEqual(334);
  });

  it("holds its bounds on any stream (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 30 }).map(String), { maxLength: 300 }),
        fc.integer({ min: 1, max: 12 }),
        (stream, capacity) => {
          const s = sketchOf(stream, capacity);
          expect(s.size).toBeLessThanOrEqual(capacity);
          expectBounds(s.summary(), exact(stream));
          const total = stream.length;
          // Every key seen more than total/capacity times is watched.
          for (const [key, t] of exact(stream))
            if (t > total / capacity) expect(s.top().map((e) => e.key)).toContain(key);
        },
      ),
    );
  });

  it("reports each changed key once (takeDirty), and again after markDirty", () => {
    const s = sketchOf(["a", "b", "a"], 2);
    expect(s.takeDirty().map((e) => [e.key, e.count])).toEqual([
      ["a", 2],
      ["b", 1],
    ]);
    expect(s.takeDirty()).toEqual([]);
    s.offer("b");
    expect(s.takeDirty()).toEqual([{ key: "b", count: 2, overcount: 0 }]);
    s.markDirty(["a", "gone"]);
    expect(s.takeDirty().map((e) => e.key)).toEqual(["a"]);
  });

  it("weights, and refuses a capacity that is not a positive integer", () => {
    const s = new SpaceSaving(1);
    s.offer("a", 5);
    expect(s.top()).toEqual([{ key: "a", count: 5, overcount: 0 }]);
    expect(() => new SpaceSaving(0)).toThrow(/capacity must be a positive integer \(got 0\)/);
  });
});

describe("mergeSummaries", () => {
  it("adds counts; a key missing from a summary counts at its floor", () => {
    const a: Summary = {
      entries: [
        { key: "x", count: 10, overcount: 0 },
        { key: "y", count: 4, overcount: 1 },
      ],
      floor: 4,
    };
    const b: Summary = { entries: [{ key: "x", count: 3, overcount: 0 }], floor: 0 };
    expect(mergeSummaries([a, b], 5)).toEqual({
      entries: [
        { key: "x", count: 13, overcount: 0 },
        { key: "y", count: 4, overcount: 1 },
      ],
      floor: 4,
    });
  });

  it("keeps at most `capacity` keys; the floor bounds those left out", () => {
    const a: Summary = {
      entries: [
        { key: "x", count: 9, overcount: 0 },
        { key: "y", count: 7, overcount: 0 },
        { key: "z", count: 5, overcount: 0 },
      ],
      floor: 0,
    };
    expect(mergeSummaries([a], 2)).toEqual({
      entries: [
        { key: "x", count: 9, overcount: 0 },
        { key: "y", count: 7, overcount: 0 },
      ],
      floor: 5,
    });
  });

  it("holds the bounds of the whole stream when its parts are merged (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.integer({ min: 0, max: 20 }).map(String), { maxLength: 120 }), {
          minLength: 1,
          maxLength: 5,
        }),
        fc.integer({ min: 1, max: 8 }),
        (parts, capacity) => {
          const merged = mergeSummaries(
            parts.map((p) => sketchOf(p, capacity).summary()),
            capacity,
          );
          expect(merged.entries.length).toBeLessThanOrEqual(capacity);
          expectBounds(merged, exact(parts.flat()));
        },
      ),
    );
  });
});
