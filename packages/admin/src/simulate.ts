/**
 * The simulator: plays a traffic pattern against a policy under every algorithm and counts what
 * each admits. It runs sluice's own code — `definePolicy` and `evaluate` (the function the
 * memory store calls, and the Redis script ports) — with an injected clock, so a run is
 * instant and exact: the numbers are the ones the service would produce for one key.
 */
import {
  ALGORITHMS,
  type AlgorithmName,
  type Duration,
  type KeyState,
  type Policy,
  type RuleInput,
  ValidationError,
  definePolicy,
  evaluate,
} from "sluice/algorithms";

/** Every algorithm, in the order the simulator shows them. */
export const SIM_ALGORITHMS: readonly AlgorithmName[] = ALGORITHMS;

/**
 * A traffic pattern for one key. Times are milliseconds from the start of the run; rates are
 * requests per second.
 * - `steady`: `ratePerSec` evenly spaced requests for `durationMs`.
 * - `burst`: `size` requests at the same instant, at 0 and then every `everyMs` (0: once).
 * - `ramp`: a rate growing linearly from `fromPerSec` to `toPerSec` over `durationMs`.
 */
export type Pattern =
  | { kind: "steady"; ratePerSec: number; durationMs: number }
  | { kind: "burst"; size: number; everyMs: number; durationMs: number }
  | { kind: "ramp"; fromPerSec: number; toPerSec: number; durationMs: number };

/** The most requests one run generates (larger patterns are refused, to keep the page responsive). */
export const MAX_REQUESTS = 200_000;

/**
 * The simulated clock's start: 2026-01-01T00:00:00Z, a multiple of every whole-day period, so
 * fixed windows start with the run (the numbers do not depend on when the page was opened).
 */
export const SIM_START_MS = 1_767_225_600_000;

/** The policy fields the simulator uses (a subset of a policy document). */
export interface SimPolicy {
  rules: RuleInput[];
  blockDuration?: Duration | undefined;
}

/** What one algorithm did over the run. */
export interface AlgorithmRun {
  readonly algorithm: AlgorithmName;
  /** Requests admitted, in total. */
  readonly admitted: number;
  /** Requests offered (the pattern's size). */
  readonly offered: number;
  /** Admitted requests per bucket. */
  readonly series: number[];
  /** Why this algorithm could not run the policy (e.g. a burst larger than it allows), if so. */
  readonly error?: string;
}

/** The result of {@link simulate}. */
export interface Simulation {
  /** Width of each bucket of the series (ms). */
  readonly bucketMs: number;
  /** Length of the run (ms). */
  readonly durationMs: number;
  /** Offered requests per bucket. */
  readonly offered: number[];
  /** One entry per algorithm, in {@link SIM_ALGORITHMS} order. */
  readonly runs: AlgorithmRun[];
}

/** Thrown for a pattern that cannot be played (bad numbers, too many requests). */
export class PatternError extends Error {
  /** The pattern field at fault, e.g. `ratePerSec`. */
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.name = "PatternError";
    this.field = field;
  }
}

function check(field: string, value: number, min: number, integer = false): void {
  if (!Number.isFinite(value) || value < min || (integer && !Number.isInteger(value))) {
    const kind = integer ? "a whole number" : "a number";
    throw new PatternError(field, `${field} must be ${kind} ≥ ${min} (got ${String(value)})`);
  }
}

/** The arrival times (ms from the start, ascending, whole ms) of a pattern's requests. */
export function arrivals(pattern: Pattern): number[] {
  check("durationMs", pattern.durationMs, 1, true);
  const out: number[] = [];
  const push = (t: number) => {
    if (out.length >= MAX_REQUESTS) {
      throw new PatternError("pattern", `the pattern makes more than ${MAX_REQUESTS} requests`);
    }
    out.push(t);
  };
  const d = pattern.durationMs;
  switch (pattern.kind) {
    case "steady": {
      check("ratePerSec", pattern.ratePerSec, 0);
      const n = Math.floor((pattern.ratePerSec * d) / 1000 + 1e-9);
      if (n > MAX_REQUESTS)
        throw new PatternError("pattern", `the pattern makes ${n} requests (max ${MAX_REQUESTS})`);
      for (let i = 0; i < n; i++) push(Math.floor((i * 1000) / pattern.ratePerSec));
      break;
    }
    case "burst": {
      check("size", pattern.size, 1, true);
      check("everyMs", pattern.everyMs, 0, true);
      for (let t = 0; t < d; t += pattern.everyMs) {
        for (let i = 0; i < pattern.size; i++) push(t);
        if (pattern.everyMs === 0) break;
      }
      break;
    }
    case "ramp": {
      check("fromPerSec", pattern.fromPerSec, 0);
      check("toPerSec", pattern.toPerSec, 0);
      // Requests due by the end of ms t: the integral of the rate, issued as soon as each is due.
      let due = 0;
      for (let t = 0; t < d; t++) {
        const rate = pattern.fromPerSec + ((pattern.toPerSec - pattern.fromPerSec) * (t + 0.5)) / d;
        due += rate / 1000;
        while (due >= 1 - 1e-9) {
          push(t);
          due -= 1;
        }
      }
      break;
    }
  }
  return out;
}

const NICE_BUCKETS_MS = [
  10, 20, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000,
  300_000, 600_000, 900_000, 1_800_000, 3_600_000,
];

/** A round bucket width giving at most about `maxBuckets` buckets over `durationMs`. */
export function bucketFor(durationMs: number, maxBuckets = 60): number {
  for (const b of NICE_BUCKETS_MS) if (durationMs / b <= maxBuckets) return b;
  return Math.ceil(durationMs / maxBuckets);
}

/** The sluice policy a simulation runs for `algorithm` (`burst` dropped where it does not apply). */
export function policyFor(input: SimPolicy, algorithm: AlgorithmName): Policy {
  const usesBurst = algorithm === "gcra" || algorithm === "token-bucket";
  return definePolicy({
    name: "simulation",
    algorithm,
    rules: input.rules.map((r) =>
      usesBurst || r.burst === undefined ? r : { limit: r.limit, period: r.period },
    ),
    ...(input.blockDuration !== undefined ? { blockDuration: input.blockDuration } : {}),
  });
}

/** Plays `times` (ms from the start) against one key of `policy`; returns the admitted times. */
export function play(policy: Policy, times: readonly number[]): number[] {
  let state: KeyState | undefined;
  let expiresAt = 0;
  let permitId = 0;
  const admitted: number[] = [];
  for (const t of times) {
    const now = SIM_START_MS + t;
    // As in the memory store: state past its TTL is equivalent to no state.
    if (state !== undefined && now >= expiresAt) state = undefined;
    permitId += 1;
    const ev = evaluate(policy, state, now, 1, true, permitId);
    if (ev.changed) {
      state = ev.next;
      expiresAt = now + ev.ttlMs;
    }
    if (ev.allowed) admitted.push(t);
  }
  return admitted;
}

function histogram(times: readonly number[], bucketMs: number, buckets: number): number[] {
  const out = new Array<number>(buckets).fill(0);
  for (const t of times) {
    const i = Math.min(buckets - 1, Math.floor(t / bucketMs));
    out[i] = (out[i] ?? 0) + 1;
  }
  return out;
}

/**
 * Plays `pattern` against `input` under each of `algorithms` (default: all). Concurrency's
 * permits are never released in a simulation: each is held until it expires (`period`).
 * Throws a {@link PatternError} for a bad pattern; a policy one algorithm cannot run is reported
 * in that algorithm's `error`.
 */
export function simulate(
  input: SimPolicy,
  pattern: Pattern,
  algorithms: readonly AlgorithmName[] = SIM_ALGORITHMS,
): Simulation {
  const times = arrivals(pattern);
  const bucketMs = bucketFor(pattern.durationMs);
  const buckets = Math.max(1, Math.ceil(pattern.durationMs / bucketMs));
  const runs = algorithms.map((algorithm): AlgorithmRun => {
    let policy: Policy;
    try {
      policy = policyFor(input, algorithm);
    } catch (err) {
      const message =
        err instanceof ValidationError
          ? err.issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ")
          : String(err);
      return {
        algorithm,
        admitted: 0,
        offered: times.length,
        series: new Array<number>(buckets).fill(0),
        error: message,
      };
    }
    const admitted = play(policy, times);
    return {
      algorithm,
      admitted: admitted.length,
      offered: times.length,
      series: histogram(admitted, bucketMs, buckets),
    };
  });
  return {
    bucketMs,
    durationMs: pattern.durationMs,
    offered: histogram(times, bucketMs, buckets),
    runs,
  };
}
