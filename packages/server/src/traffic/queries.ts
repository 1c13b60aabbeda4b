/**
 * The console's questions about traffic, answered from the shared tables (so every node gives
 * the same answer): an overview of every policy, one policy's (or app's) history, and the
 * heaviest keys of a policy.
 */
import type { KeyKind, TrafficCounts, TrafficRepository } from "../repository/traffic.js";
import { type HeavyHitter, type Summary, mergeSummaries } from "./sketch.js";

/** The history windows offered, with the bucket width each is drawn at. */
export const TRAFFIC_WINDOWS = {
  "5m": { seconds: 300, stepSec: 1, span: 1 },
  "15m": { seconds: 900, stepSec: 5, span: 1 },
  "1h": { seconds: 3600, stepSec: 10, span: 1 },
  "6h": { seconds: 6 * 3600, stepSec: 60, span: 60 },
  "24h": { seconds: 86_400, stepSec: 300, span: 60 },
} as const satisfies Record<string, { seconds: number; stepSec: number; span: 1 | 60 }>;

/** A history window: `5m`, `15m`, `1h`, `6h`, `24h`. */
export type TrafficWindow = keyof typeof TRAFFIC_WINDOWS;

/** The windows of the top keys, in minutes. */
export const KEY_WINDOWS = { "1m": 1, "5m": 5, "15m": 15, "1h": 60 } as const;

/** A top-keys window: `1m`, `5m`, `15m`, `1h`. */
export type KeyWindow = keyof typeof KEY_WINDOWS;

/**
 * The overview's windows: the current rate over the last 10 s; the totals and the sparkline
 * (30 points of 10 s) over the last 5 minutes.
 */
export const OVERVIEW = {
  recentSec: 10,
  windowSec: 300,
  sparkStepSec: 10,
  sparkPoints: 30,
} as const;

/** One bucket of a history. */
export interface TrafficPoint extends TrafficCounts {
  /** The bucket's start, epoch seconds. */
  readonly at: number;
}

/** A policy as the overview needs it. */
export interface OverviewPolicyInput {
  readonly name: string;
  readonly enabled: boolean;
  readonly shadow: boolean;
  readonly hasDraft: boolean;
  readonly apps: readonly string[];
}

/** One row of the overview. */
export interface OverviewRow extends OverviewPolicyInput {
  /** Decisions per second over the last {@link OVERVIEW.recentSec} seconds. */
  readonly rate: number;
  /** Totals over the last {@link OVERVIEW.windowSec} seconds. */
  readonly recent: TrafficCounts;
  /** Per {@link OVERVIEW.sparkStepSec} s over the last 5 minutes, oldest first. */
  readonly spark: TrafficCounts[];
}

const zero = (): TrafficCounts => ({ allowed: 0, denied: 0, shadow: 0 });
const total = (c: TrafficCounts) => c.allowed + c.denied + c.shadow;
const add = (into: TrafficCounts, c: TrafficCounts) => {
  into.allowed += c.allowed;
  into.denied += c.denied;
  into.shadow += c.shadow;
};

/** Reads traffic for the admin API; `now` is the node's clock (epoch ms). */
export class TrafficQueries {
  constructor(
    private readonly repo: TrafficRepository,
    private readonly now: () => number,
  ) {}

  private nowSec(): number {
    return Math.floor(this.now() / 1000);
  }

  /**
   * Every policy with its current rate, its last five minutes and a sparkline, in order of
   * attention: policies with denials (or shadow would-denials) first, most first; then by rate;
   * idle ones last, by name.
   */
  async overview(policies: readonly OverviewPolicyInput[]): Promise<{
    at: number;
    sparkFrom: number;
    rows: OverviewRow[];
  }> {
    const nowSec = this.nowSec();
    const step = OVERVIEW.sparkStepSec;
    const to = nowSec - (nowSec % step) + step;
    const from = to - step * OVERVIEW.sparkPoints;
    const [spark, recent] = await Promise.all([
      this.repo.buckets({ span: 1, stepSec: step, fromSec: from, toSec: to, by: "policy" }),
      this.repo.totalsBy("policy", nowSec - OVERVIEW.recentSec, nowSec),
    ]);
    const rows = policies.map((p): OverviewRow => {
      const buckets = spark.get(p.name);
      const points: TrafficCounts[] = [];
      const window = zero();
      for (let at = from; at < to; at += step) {
        const c = buckets?.get(at) ?? zero();
        points.push({ ...c });
        add(window, c);
      }
      const r = recent.get(p.name);
      return {
        ...p,
        rate: r ? Math.round((total(r) / OVERVIEW.recentSec) * 10) / 10 : 0,
        recent: window,
        spark: points,
      };
    });
    const denials = (r: OverviewRow) => r.recent.denied + r.recent.shadow;
    rows.sort(
      (a, b) =>
        denials(b) - denials(a) ||
        b.rate - a.rate ||
        total(b.recent) - total(a.recent) ||
        (a.name < b.name ? -1 : 1),
    );
    return { at: nowSec, sparkFrom: from, rows };
  }

  /** The history of a policy or app (or everything) over a window, with totals per app or policy. */
  async history(q: { window: TrafficWindow; policy?: string; app?: string }): Promise<{
    from: number;
    to: number;
    stepSec: number;
    points: TrafficPoint[];
    totals: TrafficCounts;
    by: { name: string; counts: TrafficCounts }[];
  }> {
    const w = TRAFFIC_WINDOWS[q.window];
    const nowSec = this.nowSec();
    const to = nowSec - (nowSec % w.stepSec) + w.stepSec;
    const from = to - w.seconds;
    const by = q.policy !== undefined ? "app" : "policy";
    const grouped = await this.repo.buckets({
      span: w.span,
      stepSec: w.stepSec,
      fromSec: from,
      toSec: to,
      policy: q.policy,
      app: q.app,
      by,
    });
    const merged = new Map<number, TrafficCounts>();
    const perGroup: { name: string; counts: TrafficCounts }[] = [];
    for (const [name, m] of grouped) {
      const t = zero();
      for (const [at, c] of m) {
        add(t, c);
        const into = merged.get(at);
        if (into) add(into, c);
        else merged.set(at, { ...c });
      }
      perGroup.push({ name, counts: t });
    }
    const points: TrafficPoint[] = [];
    const totals = zero();
    for (let at = from; at < to; at += w.stepSec) {
      const c = merged.get(at) ?? zero();
      add(totals, c);
      points.push({ at, ...c });
    }
    perGroup.sort((a, b) => total(b.counts) - total(a.counts) || (a.name < b.name ? -1 : 1));
    return { from, to, stepSec: w.stepSec, points, totals, by: perGroup };
  }

  /**
   * The heaviest keys of a policy over the last `window`: that many whole minutes and the
   * current one, every node's summary of each minute, merged. Counts are upper bounds;
   * `count − overcount` is a lower bound; both are the key's exact count when every node saw
   * at most its sketch's capacity of distinct keys in each minute.
   */
  async topKeys(
    policy: string,
    window: KeyWindow,
    limit = 20,
  ): Promise<{
    from: number;
    busiest: readonly HeavyHitter[];
    denied: readonly HeavyHitter[];
    shadow: readonly HeavyHitter[];
  }> {
    const nowSec = this.nowSec();
    const from = nowSec - (nowSec % 60) - KEY_WINDOWS[window] * 60;
    const read = async (kind: KeyKind) => {
      const rows = await this.repo.keyRows(policy, kind, from);
      const summaries = new Map<string, { entries: HeavyHitter[]; floor: number }>();
      for (const r of rows) {
        const id = `${r.node}\u0000${r.minute}`;
        let s = summaries.get(id);
        if (!s) summaries.set(id, (s = { entries: [], floor: 0 }));
        s.entries.push({ key: r.key, count: r.hits, overcount: r.overcount });
        // The floor only grows within a minute: the latest write holds the largest.
        s.floor = Math.max(s.floor, r.floor);
      }
      return mergeSummaries([...summaries.values()] satisfies Summary[], limit).entries;
    };
    const [busiest, denied, shadow] = await Promise.all([
      read("requests"),
      read("denied"),
      read("shadow"),
    ]);
    return { from, busiest, denied, shadow };
  }
}
