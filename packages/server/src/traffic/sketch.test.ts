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
    expect(s.takeDirty()).toEqual([{ key: "b", count: 2, overcount: 0, slot: 1 }]);
    s.markDirty(["a", "gone"]);
    expect(s.takeDirty().map((e) => e.key)).toEqual(["a"]);
  });

  it("a newcomer takes the slot of the key it evicts", () => {
    const s = sketchOf(["a", "a", "b"], 2);
    expect(s.takeDirty().map((e) => [e.key, e.slot])).toEqual([
      ["a", 0],
      ["b", 1],
    ]);
    s.offer("c");
    expect(s.takeDirty()).toEqual([{ key: "c", count: 2, overcount: 1, slot: 1 }]);
  });

  it("a copy kept by slot from what takeDirty reports is the sketch, whatever the churn (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.integer({ min: 0, max: 40 }).map(String), { maxLength: 30 }), {
          maxLength: 12,
        }),
        fc.integer({ min: 1, max: 8 }),
        (flushes, capacity) => {
          const s = new SpaceSaving(capacity);
          const copy = new Map<number, { key: string; count: number; overcount: number }>();
          for (const between of flushes) {
            for (const k of between) s.offer(k);
            for (const { slot, ...e } of s.takeDirty()) copy.set(slot, e);
            expect(copy.size).toBeLessThanOrEqual(capacity);
            expect([...copy.keys()].every((i) => i >= 0 && i < capacity)).toBe(true);
            const byKey = (a: { key: string }, b: { key: string }) => (a.key < b.key ? -1 : 1);
            expect([...copy.values()].sort(byKey)).toEqual(s.top().sort(byKey));
          }
        },
      ),
    );
  });

  it("counts exactly while the stream has no more distinct keys than the sketch has slots", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 9 }).map(String)), (stream) => {
        const s = sketchOf(stream, 10);
        expect(s.floor).toBe(0);
        expect(new Map(s.top().map((e) => [e.key, e.count]))).toEqual(exact(stream));
        expect(s.top().every((e) => e.overcount === 0)).toBe(true);
      }),
    );
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
