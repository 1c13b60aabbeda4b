/**
 * Live traffic from the service's `/metrics` (Prometheus text format): parse the decision
 * counters, and turn successive scrapes into per-interval deltas for the charts.
 */

/** One sample line of the Prometheus text format. */
export interface PromSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?\s*$/;
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?/gy;

function unescapeLabel(v: string): string {
  return v.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
}

function parseValue(v: string): number {
  if (v === "+Inf") return Infinity;
  if (v === "-Inf") return -Infinity;
  return Number(v);
}

/** Parses Prometheus text exposition; comments and malformed lines are skipped. */
export function parsePrometheus(text: string): PromSample[] {
  const out: PromSample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const m = LINE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    if (m[2]) {
      LABEL.lastIndex = 0;
      let lm: RegExpExecArray | null;
      while (LABEL.lastIndex < m[2].length && (lm = LABEL.exec(m[2])) !== null) {
        labels[lm[1]!] = unescapeLabel(lm[2]!);
      }
    }
    out.push({ name: m[1]!, labels, value: parseValue(m[3]!) });
  }
  return out;
}

/** Decision counts of one policy (cumulative, or per interval after {@link deltaCounts}). */
export interface PolicyCounts {
  allowed: number;
  denied: number;
  /** What the policy's draft (in shadow) would have allowed / denied. */
  draftAllowed: number;
  draftDenied: number;
}

/** Counts by policy name. */
export type CountsByPolicy = Map<string, PolicyCounts>;

/** The decision metric (labels `policy`, `outcome`, `reason`). */
export const DECISIONS_METRIC = "sluice_decisions_total";
/** The draft decision metric (labels `policy`, `outcome`). */
export const DRAFT_DECISIONS_METRIC = "sluice_draft_decisions_total";

const zero = (): PolicyCounts => ({ allowed: 0, denied: 0, draftAllowed: 0, draftDenied: 0 });

/** Sums the decision counters by policy and outcome (over every `reason`). */
export function decisionCounts(samples: readonly PromSample[]): CountsByPolicy {
  const out: CountsByPolicy = new Map();
  for (const s of samples) {
    const draft = s.name === DRAFT_DECISIONS_METRIC;
    if (!draft && s.name !== DECISIONS_METRIC) continue;
    const policy = s.labels.policy;
    const outcome = s.labels.outcome;
    if (policy === undefined || !Number.isFinite(s.value)) continue;
    const c = out.get(policy) ?? zero();
    if (outcome === "allowed") c[draft ? "draftAllowed" : "allowed"] += s.value;
    else if (outcome === "denied") c[draft ? "draftDenied" : "denied"] += s.value;
    out.set(policy, c);
  }
  return out;
}

/**
 * What happened between two scrapes, per policy. A counter that went down means the service
 * restarted; the new value is then the whole interval's count.
 */
export function deltaCounts(prev: CountsByPolicy, next: CountsByPolicy): CountsByPolicy {
  const out: CountsByPolicy = new Map();
  for (const [policy, n] of next) {
    const p = prev.get(policy) ?? zero();
    const d = (k: keyof PolicyCounts) => (n[k] >= p[k] ? n[k] - p[k] : n[k]);
    out.set(policy, {
      allowed: d("allowed"),
      denied: d("denied"),
      draftAllowed: d("draftAllowed"),
      draftDenied: d("draftDenied"),
    });
  }
  return out;
}

/** One interval between two scrapes. */
export interface Interval {
  /** When the later scrape was taken (epoch ms, browser clock). */
  readonly atMs: number;
  readonly counts: CountsByPolicy;
}

/** A rolling window of intervals, fed one scrape at a time. */
export class TrafficHistory {
  private last: CountsByPolicy | undefined;
  private readonly intervals: Interval[] = [];
  /** Cumulative counts at the latest scrape. */
  latest: CountsByPolicy = new Map();

  /** @param capacity - intervals kept (e.g. 60 × 2 s = the last two minutes). */
  constructor(readonly capacity = 60) {}

  /** Adds a scrape; from the second one on, appends the interval since the previous. */
  add(atMs: number, counts: CountsByPolicy): void {
    if (this.last !== undefined) {
      this.intervals.push({ atMs, counts: deltaCounts(this.last, counts) });
      if (this.intervals.length > this.capacity) this.intervals.shift();
    }
    this.last = counts;
    this.latest = counts;
  }

  /** The kept intervals, oldest first. */
  get all(): readonly Interval[] {
    return this.intervals;
  }

  /** Every policy seen so far, sorted. */
  policies(): string[] {
    return [...this.latest.keys()].sort();
  }

  /** One field of one policy per interval, oldest first. */
  series(policy: string, field: keyof PolicyCounts): number[] {
    return this.intervals.map((i) => i.counts.get(policy)?.[field] ?? 0);
  }

  /** Sums of one policy over the kept intervals. */
  totals(policy: string): PolicyCounts {
    const t = zero();
    for (const i of this.intervals) {
      const c = i.counts.get(policy);
      if (!c) continue;
      t.allowed += c.allowed;
      t.denied += c.denied;
      t.draftAllowed += c.draftAllowed;
      t.draftDenied += c.draftDenied;
    }
    return t;
  }
}
