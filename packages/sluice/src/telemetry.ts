/**
 * OpenTelemetry for every door: decisions counted in plain numbers where they are made (a
 * {@link Tally} per policy and store), handed to the app's SDK at collection through observable
 * instruments, a sampled duration histogram, and the decision's attributes on the active span.
 *
 * sluice never registers an SDK and never depends on one: it reaches `@opentelemetry/api` (an
 * optional peer dependency) by a dynamic import when the first limiter is made, or through
 * {@link useOpenTelemetry} where a bundle cannot import it by name (Workers). With no API
 * installed nothing is emitted; with the API and no SDK, the instruments are the API's no-ops.
 * Names: docs/observability.md (the convention we propose). Keys never become attributes.
 */
import type { Decision } from "./decision.js";
import { unrefTimer } from "./platform.js";
import { VERSION } from "./version.js";

/** The attribute names of the convention (docs/observability.md). */
export const RATELIMIT_ATTRIBUTES = {
  /** The policy's name. */
  POLICY: "ratelimit.policy",
  /** `allowed` or `denied` (a shadow denial counts as `denied`). */
  RESULT: "ratelimit.result",
  /** Why an unusual decision was made (`blocked`, `store-error`, `insurance`, `deny-cache`, `shadow`, `disabled`). */
  REASON: "ratelimit.reason",
  /** The index of the rule that denied (on denials) or that is reported (on spans). */
  RULE: "ratelimit.rule",
  /** The store kind (`memory`, `redis`, `upstash`, `durable-object`, `service`). */
  STORE: "ratelimit.store",
  /** Requests of cost 1 still allowed after the decision (spans). */
  REMAINING: "ratelimit.remaining",
  /** Until the reported rule is replenished, in ms (spans). */
  RESET_MS: "ratelimit.reset_ms",
  /** On a denial event: the wait after which the same request would pass, in ms. */
  RETRY_AFTER_MS: "ratelimit.retry_after_ms",
} as const;

/** The instrument and event names of the convention. */
export const RATELIMIT_METRICS = {
  /** Counter of decisions (`{decision}`). */
  DECISIONS: "ratelimit.decisions",
  /** Histogram of decision durations (s), sampled (see docs/observability.md). */
  DURATION: "ratelimit.decision.duration",
  /** Concurrency permits this process holds (`{permit}`). */
  PERMITS: "ratelimit.permits",
  /** Allotments (a Redis store's local shares) this process holds (`{allotment}`). */
  ALLOTMENTS: "ratelimit.allotments",
  /** Gauge: the most a multi-region store's regions admit together per window (`{unit}`). */
  REGION_BOUND: "ratelimit.region.bound",
  /** Counter: units a multi-region store denied or let lapse for want of its home (`{unit}`). */
  REGION_UNDER_ADMITTED: "ratelimit.region.under_admitted",
  /** Counter: units a multi-region store admitted from its borrow ledger (`{unit}`). */
  REGION_BORROWED: "ratelimit.region.borrowed",
  /** Gauge: an adaptive concurrency policy's limit in this process (`{permit}`). */
  CONCURRENCY_LIMIT: "ratelimit.concurrency.limit",
  /** Gauge: the permits in flight under that limit in this process (`{permit}`). */
  CONCURRENCY_IN_FLIGHT: "ratelimit.concurrency.in_flight",
  /** Gauge: its RTT baseline, the latency without a queue of ours (s). */
  CONCURRENCY_RTT_BASELINE: "ratelimit.concurrency.rtt_baseline",
  /** The span event of a denial. */
  DENIED_EVENT: "ratelimit.denied",
  /** The span event of a key passing its policy's `warnAt` share. */
  NEAR_LIMIT_EVENT: "ratelimit.near_limit",
} as const;

/** Attribute values, as OpenTelemetry takes them. */
export type TelemetryAttributes = Record<string, string | number | boolean>;

/** What sluice needs of an OpenTelemetry span (a structural subset of the API's `Span`). */
export interface SpanLike {
  /** Sets attributes on the span. */
  setAttributes(attributes: TelemetryAttributes): unknown;
  /** Adds an event to the span. */
  addEvent(name: string, attributes?: TelemetryAttributes): unknown;
  /** False for a span that records nothing (not sampled): sluice then skips it. */
  isRecording(): boolean;
}

/** An observable instrument, as sluice registers it (structural; the API's type fits it). */
export type ObservableLike = object;

/** What sluice needs of an OpenTelemetry meter (a structural subset of the API's `Meter`). */
export interface MeterLike {
  /** See the API's `Meter.createHistogram`. */
  createHistogram(
    name: string,
    options?: {
      description?: string;
      unit?: string;
      advice?: { explicitBucketBoundaries?: number[] };
    },
  ): { record(value: number, attributes?: TelemetryAttributes): void };
  /** See the API's `Meter.createObservableCounter`. */
  createObservableCounter(
    name: string,
    options?: { description?: string; unit?: string },
  ): ObservableLike;
  /** See the API's `Meter.createObservableUpDownCounter`. */
  createObservableUpDownCounter(
    name: string,
    options?: { description?: string; unit?: string },
  ): ObservableLike;
  /** See the API's `Meter.createObservableGauge` (API ≥ 1.3; without it the gauges are not made). */
  createObservableGauge?(
    name: string,
    options?: { description?: string; unit?: string },
  ): ObservableLike;
  /** See the API's `Meter.addBatchObservableCallback`. */
  addBatchObservableCallback(
    callback: (result: {
      observe(observable: ObservableLike, value: number, attributes?: TelemetryAttributes): void;
    }) => void,
    observables: ObservableLike[],
  ): void;
}

/** What sluice needs of `@opentelemetry/api` (structural: pass the module itself). */
export interface OpenTelemetryApi {
  /** The API's `metrics`. */
  readonly metrics: { getMeterProvider(): { getMeter(name: string, version?: string): MeterLike } };
  /** The API's `trace`. */
  readonly trace: { getActiveSpan(): SpanLike | undefined };
}

/**
 * Durations are timed for every decision until this many have been timed in a second, then for
 * one decision in a stride sized from the second's rate so far (about one a millisecond): a
 * histogram's shape needs no more, and timing each of millions of in-memory decisions would
 * cost more than deciding them. The exact count is `ratelimit.decisions`.
 */
export const TIMED_PER_SECOND = 1000;

/**
 * The longest life, in seconds, the permits gauge follows a permit for: a permit of a longer
 * period is taken to lapse after it (unless released before).
 */
export const PERMIT_SECONDS = 3600;

/** Bucket boundaries of the duration histogram (s): 1 µs to 1 s. */
const DURATION_BOUNDARIES = [
  1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
  5e-2, 0.1, 0.25, 0.5, 1,
];

/** Monotonic ms (every runtime sluice supports has `performance`). */
const now = (): number => performance.now();

/** One series of the decisions counter: its attributes, made once, and its count. */
interface Series {
  readonly attributes: TelemetryAttributes;
  n: number;
}

/**
 * The decisions of one policy on one kind of store in this process, in plain numbers: what
 * every limiter of that policy adds to (versions of a policy share it, so a new version makes
 * no new series), and what the instruments read at collection.
 */
export class Tally {
  /** `ratelimit.policy` and `ratelimit.store`: the duration histogram's attributes. */
  readonly attributes: TelemetryAttributes;
  /** Allowed decisions without a reason (the hot path: a field, not a map). */
  allowed = 0;
  /** Denials without a reason, by rule index. */
  readonly denied: number[] = [];
  /** Every other series (a reason, or a reason and a rule), by `result|reason|rule`. */
  readonly other = new Map<string, Series>();
  /**
   * Concurrency permits held, in plain numbers: taken per second in a ring as long as a permit
   * lives (its period, in whole seconds), the slot a second leaves behind lapsing; a release
   * takes one from the newest second that has one. No per-permit state: a flood of permits
   * never released costs nothing, and taking one is an increment.
   */
  private permitRing: number[] | undefined;
  private permitSlot = 0;
  private permitsInUse = 0;
  /** Whether this policy ever took a permit (its gauge is reported from then on, 0 included). */
  hasPermits = false;
  /** Reads the allotments held for this policy (set by a store that has them). */
  allotments: (() => number) | undefined;
  /** Reads a multi-region store's figures for this policy (set by a limiter over one). */
  regions: (() => { bound: number; underAdmitted: number; borrowed: number }) | undefined;
  /** Reads an adaptive concurrency policy's limit, in-flight count and RTT baseline (ms). */
  adaptive: (() => { limit: number; inFlight: number; rttBaselineMs: number }) | undefined;
  /** Denials count with reason `shadow` (a draft's policy: it only ever reports). */
  readonly shadow: boolean;
  /**
   * False for a face's counting policy (compat/shared.ts): its "decisions" only count, the face
   * decides, and counts its verdict with {@link Tally.verdict}.
   */
  readonly counting: boolean;
  /** Decisions still timed, each, in this second. */
  private budget = TIMED_PER_SECOND;
  /** Decisions until the next timed one, once the budget is spent. */
  private countdown = 0;
  /** Decisions this second, and when it began (ms). */
  private seen = 0;
  private windowStart = now();

  constructor(
    readonly policy: string,
    readonly store: string,
    shadow: boolean,
    counting = true,
  ) {
    this.counting = counting;
    this.attributes = {
      [RATELIMIT_ATTRIBUTES.POLICY]: policy,
      [RATELIMIT_ATTRIBUTES.STORE]: store,
    };
    this.shadow = shadow;
  }

  /**
   * When this decision is timed, the time it started (ms); else -1. Cheap when not timed: a
   * counter and a compare.
   */
  begin(): number {
    if (!this.counting) return -1;
    this.seen++;
    if (this.budget > 0) {
      this.budget--;
      return now();
    }
    if (--this.countdown > 0) return -1;
    const t = now();
    const elapsed = t - this.windowStart;
    if (elapsed >= 1000) {
      this.newSecond(t);
      this.budget--;
      return t;
    }
    // One in a stride: this second's decisions per ms so far (a first millisecond counts as
    // one), so about one is timed a millisecond whatever the rate.
    this.countdown = Math.max(1, Math.ceil(this.seen / Math.max(elapsed, 1)));
    return t;
  }

  /**
   * A new second: time every decision again up to the budget. Called each second by the
   * instruments' timer (so a rate that fell is noticed without waiting out a long stride), and
   * by {@link Tally.begin} when it sees the second has passed.
   */
  newSecond(t = now()): void {
    const ring = this.permitRing;
    if (ring !== undefined) {
      // The slot a second moves onto held the permits taken a whole life ago: they lapse.
      this.permitSlot = (this.permitSlot + 1) % ring.length;
      this.permitsInUse -= ring[this.permitSlot]!;
      ring[this.permitSlot] = 0;
    }
    this.budget = TIMED_PER_SECOND;
    this.countdown = 0;
    this.seen = 0;
    this.windowStart = t;
  }

  /** Counts a decision (and records its duration when {@link Tally.begin} timed it). */
  count(d: Decision, started: number): void {
    if (!this.counting) return;
    if (started >= 0) state.otel?.duration.record((now() - started) / 1000, this.attributes);
    const reason = d.reason;
    if (reason === undefined && !(this.shadow && !d.allowed)) {
      if (d.allowed) this.allowed++;
      else this.denied[d.rule] = (this.denied[d.rule] ?? 0) + 1;
      return;
    }
    this.countOther(d.allowed && reason !== "shadow", reason ?? "shadow", d.rule);
  }

  /** A face's verdict on a counting policy's answer (rule 0: faces have one). */
  verdict(allowed: boolean): void {
    if (allowed) this.allowed++;
    else this.denied[0] = (this.denied[0] ?? 0) + 1;
  }

  /** A denial the HTTP `shadow` strategy let through: moved to reason `shadow`. */
  shadowed(d: Decision): void {
    if (d.allowed || d.reason !== undefined || this.shadow) return;
    const n = this.denied[d.rule];
    if (n !== undefined && n > 0) this.denied[d.rule] = n - 1;
    this.countOther(false, "shadow", d.rule);
  }

  /** A permit taken, held until it is released or its period lapses. */
  permitTaken(periodMs: number): void {
    let ring = this.permitRing;
    if (ring === undefined) {
      const life = Math.min(PERMIT_SECONDS, Math.max(1, Math.ceil(periodMs / 1000)));
      ring = this.permitRing = new Array<number>(life + 1).fill(0);
      this.hasPermits = true;
    }
    ring[this.permitSlot]!++;
    this.permitsInUse++;
  }

  /** A permit given back (the newest still counted). */
  permitReleased(): void {
    const ring = this.permitRing;
    if (ring === undefined || this.permitsInUse === 0) return;
    for (let i = 0, j = this.permitSlot; i < ring.length; i++) {
      if (ring[j]! > 0) {
        ring[j]!--;
        this.permitsInUse--;
        return;
      }
      j = j === 0 ? ring.length - 1 : j - 1;
    }
  }

  /** Permits held now. */
  permitsHeld(): number {
    return this.permitsInUse;
  }

  private countOther(allowed: boolean, reason: string, rule: number): void {
    const id = allowed ? `allowed|${reason}` : `denied|${reason}|${rule}`;
    let s = this.other.get(id);
    if (s === undefined) {
      const attributes: TelemetryAttributes = {
        ...this.attributes,
        [RATELIMIT_ATTRIBUTES.RESULT]: allowed ? "allowed" : "denied",
        [RATELIMIT_ATTRIBUTES.REASON]: reason,
      };
      if (!allowed) attributes[RATELIMIT_ATTRIBUTES.RULE] = rule;
      s = { attributes, n: 0 };
      this.other.set(id, s);
    }
    s.n++;
  }
}

/** The instruments on one meter provider. */
interface Instruments {
  readonly provider: unknown;
  readonly duration: { record(value: number, attributes?: TelemetryAttributes): void };
}

/** What every copy of sluice in the process shares (one registry, one set of instruments). */
interface TelemetryState {
  readonly tallies: Map<string, Tally>;
  api: OpenTelemetryApi | undefined;
  otel: Instruments | undefined;
  importing: boolean;
  /** The new-second timer (null where none could start). */
  seconds?: unknown;
}

const STATE_KEY = Symbol.for("sluice.telemetry.1");
const state: TelemetryState = ((globalThis as Record<symbol, unknown>)[STATE_KEY] ??= {
  tallies: new Map(),
  api: undefined,
  otel: undefined,
  importing: false,
}) as TelemetryState;

/** The draft policies' prefix (live-document.ts's, repeated here to keep this module a leaf). */
const DRAFT_PREFIX = "sluice.draft.";

/**
 * The tally of a policy on a kind of store, made on first use. Also binds the instruments to the
 * app's meter provider when it has changed (an SDK registered after the first limiter).
 */
export function tallyFor(policy: string, store: string, counting = true): Tally {
  const id = `${store}\u0000${policy}`;
  let t = state.tallies.get(id);
  if (t === undefined) {
    t = new Tally(policy, store, policy.startsWith(DRAFT_PREFIX), counting);
    state.tallies.set(id, t);
  }
  connect();
  return t;
}

/**
 * Gives sluice the OpenTelemetry API where it cannot import `@opentelemetry/api` itself (a
 * bundle for Workers or the edge): `useOpenTelemetry(await import("@opentelemetry/api"))`. In
 * Node there is no need: sluice imports it when the first limiter is made.
 */
export function useOpenTelemetry(api: OpenTelemetryApi): void {
  state.api = api;
  bind();
}

/** The active span when the API is loaded and the span records, else undefined. */
export function activeSpan(): SpanLike | undefined {
  const span = state.api?.trace.getActiveSpan();
  return span !== undefined && span.isRecording() ? span : undefined;
}

/**
 * Puts a decision on a span: `ratelimit.policy`, `ratelimit.result`, `ratelimit.rule`,
 * `ratelimit.remaining`, `ratelimit.reset_ms` (and `ratelimit.reason` when set); a denial adds
 * the event `ratelimit.denied` with its retry time. The key is never put on a span.
 */
export function annotateSpan(span: SpanLike, d: Decision): void {
  const denied = !d.allowed || d.reason === "shadow";
  const attributes: TelemetryAttributes = {
    [RATELIMIT_ATTRIBUTES.POLICY]: d.policy,
    [RATELIMIT_ATTRIBUTES.RESULT]: denied ? "denied" : "allowed",
    [RATELIMIT_ATTRIBUTES.RULE]: d.rule,
    [RATELIMIT_ATTRIBUTES.REMAINING]: d.remaining,
    [RATELIMIT_ATTRIBUTES.RESET_MS]: d.resetAfterMs,
  };
  if (d.reason !== undefined) attributes[RATELIMIT_ATTRIBUTES.REASON] = d.reason;
  span.setAttributes(attributes);
  if (denied) {
    span.addEvent(RATELIMIT_METRICS.DENIED_EVENT, {
      [RATELIMIT_ATTRIBUTES.POLICY]: d.policy,
      [RATELIMIT_ATTRIBUTES.RULE]: d.rule,
      [RATELIMIT_ATTRIBUTES.RETRY_AFTER_MS]: d.retryAfterMs,
    });
  }
}

/** {@link annotateSpan} on the active span, when there is one that records. */
export function annotateActiveSpan(d: Decision): void {
  const span = activeSpan();
  if (span !== undefined) annotateSpan(span, d);
}

/** The API's package name, in a variable: bundlers leave an import of it alone. */
const API_NAME = "@opentelemetry/api";

/**
 * The API loaded at once where the runtime can (Node's `createRequire`, reached through
 * `process.getBuiltinModule`, Node ≥ 20.16), so the first decisions are timed too; undefined
 * elsewhere (then it is imported).
 */
function requireApi(): OpenTelemetryApi | undefined {
  try {
    const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } })
      .process;
    const mod = proc?.getBuiltinModule?.("node:module") as
      { createRequire(from: string): (id: string) => unknown } | undefined;
    // The CommonJS build has `__filename` (its `import.meta.url` is defined away: tsup.config.ts).
    const from = typeof __filename === "string" ? __filename : import.meta.url;
    return mod !== undefined && typeof from === "string"
      ? (mod.createRequire(from)(API_NAME) as OpenTelemetryApi)
      : undefined;
  } catch {
    return undefined; // not installed, or no synchronous way: imported below
  }
}

/** Loads the API once, then binds the instruments. */
function connect(): void {
  if (state.api !== undefined) {
    bind();
    return;
  }
  if (state.importing) return;
  state.importing = true;
  const api = requireApi();
  if (api !== undefined) {
    state.api = api;
    bind();
    return;
  }
  import(/* @vite-ignore */ API_NAME).then(
    (api: OpenTelemetryApi) => {
      state.api ??= api;
      bind();
    },
    () => undefined, // not installed: nothing to emit to
  );
}

/** Makes the instruments on the app's meter provider, unless they are already there. */
function bind(): void {
  const api = state.api;
  if (api === undefined) return;
  const provider = api.metrics.getMeterProvider();
  if (state.otel?.provider === provider) return;
  const meter = provider.getMeter("sluice", VERSION);
  const decisions = meter.createObservableCounter(RATELIMIT_METRICS.DECISIONS, {
    description: "Rate-limit decisions made, by policy, result, reason, rule and store",
    unit: "{decision}",
  });
  const permits = meter.createObservableUpDownCounter(RATELIMIT_METRICS.PERMITS, {
    description: "Concurrency permits this process holds, by policy",
    unit: "{permit}",
  });
  const allotments = meter.createObservableUpDownCounter(RATELIMIT_METRICS.ALLOTMENTS, {
    description: "Allotments (local shares of a Redis store's counters) this process holds",
    unit: "{allotment}",
  });
  const gauges = adaptiveGauges(meter);
  const regions = regionInstruments(meter);
  meter.addBatchObservableCallback(
    (result) => {
      for (const t of state.tallies.values()) {
        observeTally(t, result, decisions, permits, allotments);
        if (t.regions !== undefined) {
          const r = t.regions();
          if (regions.bound !== undefined) result.observe(regions.bound, r.bound, t.attributes);
          result.observe(regions.underAdmitted, r.underAdmitted, t.attributes);
          result.observe(regions.borrowed, r.borrowed, t.attributes);
        }
        if (gauges !== undefined && t.adaptive !== undefined) {
          const a = t.adaptive();
          result.observe(gauges.limit, a.limit, t.attributes);
          result.observe(gauges.inFlight, a.inFlight, t.attributes);
          if (!Number.isNaN(a.rttBaselineMs))
            result.observe(gauges.rttBaseline, a.rttBaselineMs / 1000, t.attributes);
        }
      }
    },
    [
      decisions,
      permits,
      allotments,
      regions.underAdmitted,
      regions.borrowed,
      ...(regions.bound === undefined ? [] : [regions.bound]),
      ...(gauges === undefined ? [] : [gauges.limit, gauges.inFlight, gauges.rttBaseline]),
    ],
  );
  startSeconds();
  const duration = meter.createHistogram(RATELIMIT_METRICS.DURATION, {
    description: "Time to decide, sampled (see TIMED_PER_SECOND); the count is ratelimit.decisions",
    unit: "s",
    advice: { explicitBucketBoundaries: DURATION_BOUNDARIES },
  });
  state.otel = { provider, duration };
}

/** The multi-region instruments (the bound is a gauge: left out where the meter makes none). */
function regionInstruments(meter: MeterLike): {
  bound: ObservableLike | undefined;
  underAdmitted: ObservableLike;
  borrowed: ObservableLike;
} {
  return {
    bound: meter.createObservableGauge?.(RATELIMIT_METRICS.REGION_BOUND, {
      description: "The most a multi-region store's regions admit together per window",
      unit: "{unit}",
    }),
    underAdmitted: meter.createObservableCounter(RATELIMIT_METRICS.REGION_UNDER_ADMITTED, {
      description: "Units denied or lapsed for want of the key's home region (strict's cost)",
      unit: "{unit}",
    }),
    borrowed: meter.createObservableCounter(RATELIMIT_METRICS.REGION_BORROWED, {
      description: "Units admitted from a region's borrow ledger (bounded mode)",
      unit: "{unit}",
    }),
  };
}

/** The adaptive concurrency gauges, where the meter makes gauges. */
function adaptiveGauges(
  meter: MeterLike,
): { limit: ObservableLike; inFlight: ObservableLike; rttBaseline: ObservableLike } | undefined {
  if (meter.createObservableGauge === undefined) return undefined;
  return {
    limit: meter.createObservableGauge(RATELIMIT_METRICS.CONCURRENCY_LIMIT, {
      description: "An adaptive concurrency policy's limit in this process",
      unit: "{permit}",
    }),
    inFlight: meter.createObservableGauge(RATELIMIT_METRICS.CONCURRENCY_IN_FLIGHT, {
      description: "Permits in flight under an adaptive concurrency policy in this process",
      unit: "{permit}",
    }),
    rttBaseline: meter.createObservableGauge(RATELIMIT_METRICS.CONCURRENCY_RTT_BASELINE, {
      description: "An adaptive concurrency policy's RTT baseline: latency without a queue",
      unit: "s",
    }),
  };
}

/**
 * Starts, once per process, the timer that begins each tally's new second (unref'd: it never
 * keeps a process alive). Where a timer cannot start here (a Worker's global scope), each tally
 * notices a new second at its next timed decision instead.
 */
function startSeconds(): void {
  if (state.seconds !== undefined) return;
  try {
    const timer = setInterval(() => {
      for (const t of state.tallies.values()) t.newSecond();
    }, 1000);
    unrefTimer(timer);
    state.seconds = timer;
  } catch {
    state.seconds = null;
  }
}

/** Hands one tally's numbers over at collection. */
function observeTally(
  t: Tally,
  result: {
    observe(observable: ObservableLike, value: number, attributes?: TelemetryAttributes): void;
  },
  decisions: ObservableLike,
  permits: ObservableLike,
  allotments: ObservableLike,
): void {
  const base = t.attributes;
  if (t.allowed > 0)
    result.observe(decisions, t.allowed, { ...base, [RATELIMIT_ATTRIBUTES.RESULT]: "allowed" });
  t.denied.forEach((n, rule) => {
    if (n > 0)
      result.observe(decisions, n, {
        ...base,
        [RATELIMIT_ATTRIBUTES.RESULT]: "denied",
        [RATELIMIT_ATTRIBUTES.RULE]: rule,
      });
  });
  for (const s of t.other.values()) result.observe(decisions, s.n, s.attributes);
  if (t.hasPermits) result.observe(permits, t.permitsHeld(), base);
  if (t.allotments !== undefined) result.observe(allotments, t.allotments(), base);
}
