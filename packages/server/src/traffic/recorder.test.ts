/**
 * The recorder alone, with a sink that keeps what it is given (test/console.test.ts runs it
 * against every SQL database, across two nodes).
 */
import { describe, expect, it } from "vitest";
import type { KeyRow, TrafficRow } from "../repository/traffic.js";
import { type TrafficSink, TrafficRecorder } from "./recorder.js";

function sink() {
  const counts: TrafficRow[] = [];
  const keys: KeyRow[] = [];
  const sweeps: number[] = [];
  let failing = false;
  const s: TrafficSink & {
    counts: TrafficRow[];
    keys: KeyRow[];
    sweeps: number[];
    fail(on: boolean): void;
  } = {
    counts,
    keys,
    sweeps,
    fail(on) {
      failing = on;
    },
    addCounts(rows) {
      if (failing) return Promise.reject(new Error("database down"));
      counts.push(...rows);
      return Promise.resolve();
    },
    putKeys(rows) {
      if (failing) return Promise.reject(new Error("database down"));
      keys.push(...rows);
      return Promise.resolve();
    },
    sweep(nowSec) {
      sweeps.push(nowSec);
      return Promise.resolve();
    },
  };
  return s;
}

const T0 = 1_800_000_000_000; // a whole minute

describe("TrafficRecorder", () => {
  it("writes per-second and per-minute counts per policy and app", async () => {
    let now = T0;
    const out = sink();
    const r = new TrafficRecorder({ sink: out, nodeId: "n1", now: () => now });
    r.record("api", "web", "allowed", "u1");
    r.record("api", "web", "denied", "u1");
    now += 1500;
    r.record("api", "web", "shadow", "u2");
    r.record("api", "mobile", "allowed", "u3");
    await r.flush();
    const s = T0 / 1000;
    expect(out.counts).toEqual(
      expect.arrayContaining([
        { policy: "api", app: "web", span: 1, at: s, allowed: 1, denied: 1, shadow: 0 },
        { policy: "api", app: "web", span: 1, at: s + 1, allowed: 0, denied: 0, shadow: 1 },
        { policy: "api", app: "mobile", span: 1, at: s + 1, allowed: 1, denied: 0, shadow: 0 },
        { policy: "api", app: "web", span: 60, at: s, allowed: 1, denied: 1, shadow: 1 },
        { policy: "api", app: "mobile", span: 60, at: s, allowed: 1, denied: 0, shadow: 0 },
      ]),
    );
    expect(out.counts).toHaveLength(5);
    // Nothing new: nothing written.
    await r.flush();
    expect(out.counts).toHaveLength(5);
  });

  it("adds counts reported in bulk (embedded clients) to the second they arrive in, without keys", async () => {
    const now = T0 + 2000;
    const out = sink();
    const r = new TrafficRecorder({ sink: out, nodeId: "n1", now: () => now });
    r.record("api", "web", "allowed", "u1");
    r.recordCount("api", "web", "allowed", 7);
    r.recordCount("api", "web", "shadow", 2);
    r.recordCount("api", "web", "denied", 0);
    await r.flush();
    const s = T0 / 1000;
    expect(out.counts).toEqual(
      expect.arrayContaining([
        { policy: "api", app: "web", span: 1, at: s + 2, allowed: 8, denied: 0, shadow: 2 },
        { policy: "api", app: "web", span: 60, at: s, allowed: 8, denied: 0, shadow: 2 },
      ]),
    );
    expect(out.keys.map((k) => k.key)).toEqual(["u1"]);
  });

  it("reports the keys each flush changed, busiest, denied and shadow would-deny apart", async () => {
    const now = T0 + 5000;
    const out = sink();
    const r = new TrafficRecorder({ sink: out, nodeId: "n1", now: () => now });
    for (let i = 0; i < 3; i++) r.record("api", "web", "allowed", "hot");
    r.record("api", "web", "denied", "bad");
    r.record("api", "web", "shadow", "meh");
    await r.flush();
    const of = (kind: string) =>
      out.keys
        .filter((k) => k.kind === kind)
        .map((k) => [k.key, k.hits])
        .sort();
    expect(of("requests")).toEqual([
      ["bad", 1],
      ["hot", 3],
      ["meh", 1],
    ]);
    expect(of("denied")).toEqual([["bad", 1]]);
    expect(of("shadow")).toEqual([["meh", 1]]);
    expect(out.keys.every((k) => k.node === "n1" && k.minute === T0 / 1000)).toBe(true);
    out.keys.length = 0;
    r.record("api", "web", "allowed", "hot");
    await r.flush();
    expect(out.keys).toEqual([
      {
        policy: "api",
        kind: "requests",
        node: "n1",
        minute: T0 / 1000,
        slot: 0,
        key: "hot",
        hits: 4,
        overcount: 0,
        floor: 0,
      },
    ]);
  });

  it("keeps what it could not write, bounded, and writes it when the database answers", async () => {
    let now = T0;
    const out = sink();
    const r = new TrafficRecorder({
      sink: out,
      nodeId: "n1",
      now: () => now,
      maxPendingSeconds: 3,
    });
    out.fail(true);
    for (let i = 0; i < 5; i++) {
      r.record("api", "web", "allowed", "k");
      await expect(r.flush()).rejects.toThrow("database down");
      now += 1000;
    }
    // 5 seconds counted, at most 3 kept: the 2 oldest dropped.
    expect(r.droppedSeconds).toBe(2);
    out.fail(false);
    await r.flush();
    const seconds = out.counts.filter((c) => c.span === 1).map((c) => c.at - T0 / 1000);
    expect(seconds.sort()).toEqual([2, 3, 4]);
    // The key counts were kept too: 5 decisions of "k" in this minute.
    expect(out.keys).toMatchObject([{ key: "k", hits: 5, kind: "requests" }]);
  });

  it("sweeps old rows at most once a minute", async () => {
    let now = T0;
    const out = sink();
    const r = new TrafficRecorder({ sink: out, nodeId: "n1", now: () => now });
    await r.flush();
    now += 30_000;
    await r.flush();
    now += 30_000;
    await r.flush();
    expect(out.sweeps).toEqual([T0 / 1000, T0 / 1000 + 60]);
  });

  it("forgets a minute's keys once the minute is over and written", async () => {
    let now = T0;
    const out = sink();
    const r = new TrafficRecorder({ sink: out, nodeId: "n1", now: () => now, keyCapacity: 2 });
    for (const k of ["a", "b", "c", "d"]) r.record("api", "web", "allowed", k);
    now += 60_000;
    await r.flush();
    out.keys.length = 0;
    r.record("api", "web", "allowed", "e");
    await r.flush();
    // A new minute: a fresh sketch, with nothing inherited.
    expect(out.keys).toMatchObject([{ key: "e", hits: 1, overcount: 0, minute: T0 / 1000 + 60 }]);
  });
});
