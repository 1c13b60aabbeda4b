/**
 * Adaptive concurrency (docs/adaptive.md): a limit of permits in flight that moves from what
 * released permits report — their latency, measured from acquire to release on the limiter's
 * clock, and whether they were dropped (a timeout or an overload answer). Three controllers
 * move it (gradient2, vegas, aimd), each written from its published description; priorities
 * shed the lowest tier first and keep a reserve for the top tier; a short priority line lets a
 * request wait, with a deadline, for a permit another one releases.
 *
 * Per limiter, in this process: the limit is the backend's capacity as this process sees it,
 * which every key of the policy shares. The store still enforces the rule's `limit` per key (on
 * Redis, across processes: the shared ceiling).
 */
import type { Clock, Timers } from "./clock.js";
import type { AdaptiveSettings } from "./policy.js";

/** The priority tiers: 0 = critical, 1 = default, 2 = degradable, 3 = sheddable. */
export const PRIORITY_TIERS = 4;

/** The tier of a request that names none. */
export const DEFAULT_PRIORITY = 1;

/** What a released permit reports (see `Permit.release`). */
export interface ReleaseOutcome {
  /**
   * The work timed out or the backend answered "overloaded": the limit backs off, and the
   * latency is not taken as a sample of the backend's speed. Default false.
   */
  readonly dropped?: boolean;
}

/** One window of samples, summed as they come. */
interface Window {
  start: number;
  count: number;
  rttSum: number;
  dropped: number;
  /** The most permits in flight seen at a release in this window. */
  maxInFlight: number;
}

/**
 * A window closes once it is this long and holds {@link WINDOW_MIN_SAMPLES} samples, or once it
 * is {@link WINDOW_MAX_MS} long with any: the limit moves at most ten times a second, from a
 * mean of several samples (one request's latency is noise).
 */
export const WINDOW_MS = 100;
export const WINDOW_MIN_SAMPLES = 20;
export const WINDOW_MAX_MS = 1000;

/** A window's figures, as a controller is told them. */
export interface WindowSample {
  /** Mean latency of the window's samples not dropped (ms); NaN when all were dropped. */
  readonly rttMs: number;
  /** Samples dropped in the window. */
  readonly dropped: number;
  /** Samples in the window. */
  readonly count: number;
  /** The most permits in flight at a release in the window. */
  readonly maxInFlight: number;
}

/**
 * The latency the backend gives when nothing of ours waits in it (ms). It falls at once toward
 * a lower window mean; it rises only when the rise cannot be a queue we made: when the
 * window's in-flight stayed under half the limit (the traffic, not the limit, set it), or when
 * the limit is already at its floor. So a steady overload never lifts it (Gradient2's drift,
 * Netflix/concurrency-limits#134), and no window ever pins live traffic to a floor to measure
 * it (Envoy's minRTT probe, envoy#8337).
 */
export class RttBaseline {
  value = Number.NaN;

  update(rttMs: number, queueCannotBeOurs: boolean): void {
    if (!Number.isFinite(rttMs)) return;
    if (Number.isNaN(this.value)) this.value = rttMs;
    else if (rttMs < this.value) this.value += (rttMs - this.value) * BASELINE_FALL;
    else if (queueCannotBeOurs) this.value += (rttMs - this.value) * BASELINE_RISE;
  }
}

/** How far the baseline moves toward a lower window's mean (a share of the gap). */
const BASELINE_FALL = 0.5;
/** How far it moves toward a higher one, when that one cannot be our queue. */
const BASELINE_RISE = 0.1;

/** Moves a limit from windows of samples. */
export interface LimitController {
  /** The limit now (a real number in [min, max]; the gate admits its whole part). */
  readonly limit: number;
  /** The RTT baseline (ms), NaN before the first sample. */
  readonly rttBaselineMs: number;
  /** One closed window. */
  update(w: WindowSample): void;
}

abstract class BaseController implements LimitController {
  limit: number;
  protected readonly baseline = new RttBaseline();

  constructor(protected readonly s: AdaptiveSettings) {
    this.limit = s.initial;
  }

  get rttBaselineMs(): number {
    return this.baseline.value;
  }

  update(w: WindowSample): void {
    const appLimited = w.maxInFlight * 2 < this.limit;
    this.baseline.update(w.rttMs, appLimited || Math.floor(this.limit) <= this.s.min);
    const next = this.next(w, appLimited, this.baseline.value);
    this.limit = Math.min(this.s.max, Math.max(this.s.min, next));
  }

  protected abstract next(w: WindowSample, appLimited: boolean, baseline: number): number;
}

/**
 * Gradient2 (Netflix concurrency-limits): the limit is scaled by the gradient baseline/latency
 * (with a tolerance, clamped to [0.5, 1]), plus a headroom that lets it grow while latency holds,
 * smoothed. Unlike the published one, the baseline is {@link RttBaseline} (it does not follow a
 * queue up), the tolerance is small (a queue past the knee is what collapses goodput), and the
 * headroom (√limit, at least 1) is added only in windows whose latency held: added always, it sets the
 * fixed point at `gradient = 1 − headroom/limit`, a standing queue.
 */
export class Gradient2Controller extends BaseController {
  protected next(w: WindowSample, appLimited: boolean, baseline: number): number {
    if (w.dropped > 0 && w.dropped * 10 >= w.count) return this.limit * DROP_BACKOFF;
    if (!Number.isFinite(w.rttMs)) return this.limit;
    const gradient = Math.max(0.5, Math.min(1, (GRADIENT_TOLERANCE * baseline) / w.rttMs));
    // Traffic under half the limit says nothing of what more would do: hold, unless it shrinks.
    if (appLimited && gradient >= 1) return this.limit;
    // Headroom only while latency holds: added always (as published), it sets the fixed point
    // at gradient = 1 − headroom/limit, a standing queue past the knee.
    const headroom = gradient >= 1 ? Math.max(1, Math.sqrt(this.limit)) : 0;
    const target = this.limit * gradient + headroom;
    return this.limit * (1 - GRADIENT_SMOOTHING) + target * GRADIENT_SMOOTHING;
  }
}

/** Gradient2's latency tolerance: a window this much slower than the baseline still grows. */
export const GRADIENT_TOLERANCE = 1.3;
/** The share of each window's target the limit moves to. */
export const GRADIENT_SMOOTHING = 0.2;
/** The factor a window with drops (a tenth of its samples or more) applies. */
export const DROP_BACKOFF = 0.9;

/**
 * Vegas (TCP Vegas as Netflix's VegasLimit applies it): the queue is estimated as
 * `limit × (1 − baseline/latency)`; under α it grows (by β when there is next to no queue),
 * over β it shrinks, by log10 of the limit; α = 3·log10(limit), β = 6·log10(limit).
 */
export class VegasController extends BaseController {
  protected next(w: WindowSample, appLimited: boolean, baseline: number): number {
    const l = this.limit;
    const step = Math.max(1, Math.log10(l));
    if (w.dropped > 0 && w.dropped * 10 >= w.count) return l - step;
    if (!Number.isFinite(w.rttMs) || appLimited) return l;
    const queue = l * (1 - baseline / w.rttMs);
    const alpha = Math.max(1, 3 * Math.log10(l));
    const beta = Math.max(2, 6 * Math.log10(l));
    if (queue <= step) return l + beta;
    if (queue < alpha) return l + step;
    if (queue > beta) return l - step;
    return l;
  }
}

/**
 * AIMD: one permit more each window in which latency stayed under twice the baseline and
 * nothing was dropped (and the limit was used); ×0.9 otherwise.
 */
export class AimdController extends BaseController {
  protected next(w: WindowSample, appLimited: boolean, baseline: number): number {
    const slow = Number.isFinite(w.rttMs) && w.rttMs > AIMD_LATENCY_FACTOR * baseline;
    if ((w.dropped > 0 && w.dropped * 10 >= w.count) || slow) return this.limit * DROP_BACKOFF;
    return appLimited ? this.limit : this.limit + 1;
  }
}

/** AIMD backs off when a window's latency passes this multiple of the baseline. */
export const AIMD_LATENCY_FACTOR = 2;

/** The controller of a policy's settings. */
export function controllerFor(s: AdaptiveSettings): LimitController {
  switch (s.algorithm) {
    case "vegas":
      return new VegasController(s);
    case "aimd":
      return new AimdController(s);
    default:
      return new Gradient2Controller(s);
  }
}

/** A permit the gate counts: when it was taken, and in which tier. */
interface Held {
  readonly at: number;
  readonly priority: number;
}

/** A request waiting in the priority line. */
interface Waiter {
  readonly priority: number;
  readonly admit: () => void;
  readonly expire: () => void;
  timer: unknown;
  done: boolean;
}

/**
 * One limiter's adaptive limit: counts the permits it admitted (until released, or lapsed after
 * the rule's period, which counts as a drop), gives each tier its share of the limit, moves the
 * limit from released permits' samples, and holds the priority line.
 */
export class AdaptiveGate {
  readonly controller: LimitController;
  /** Permits in flight by id, oldest first (ids are taken in clock order). */
  private readonly held = new Map<string, Held>();
  private readonly lines: Waiter[][] = Array.from({ length: PRIORITY_TIERS }, () => []);
  private waiting = 0;
  private window: Window;
  /** Requests let in whose permit the store has not answered yet. */
  pending = 0;

  constructor(
    readonly settings: AdaptiveSettings,
    private readonly periodMs: number,
    readonly clock: Clock,
    private readonly timers: Timers,
  ) {
    this.controller = controllerFor(settings);
    this.window = { start: clock(), count: 0, rttSum: 0, dropped: 0, maxInFlight: 0 };
  }

  /** The limit admitted now (its whole part). */
  get limit(): number {
    return Math.floor(this.controller.limit);
  }

  /** Permits in flight (and requests let in, waiting for the store's answer). */
  get inFlight(): number {
    this.lapse(this.clock());
    return this.held.size + this.pending;
  }

  /**
   * The limit a tier sees: the whole limit for tier 0, less `reserve × tier/3` of it below
   * (tier 3 sees 80% of it by default); at least 1.
   */
  limitFor(priority: number): number {
    const share = 1 - (this.settings.reserve * priority) / (PRIORITY_TIERS - 1);
    // (The epsilon: 30 × 0.8 is 23.999… in floating point.)
    return Math.max(1, Math.floor(this.controller.limit * share + 1e-9));
  }

  /**
   * Whether a request of this tier may take a permit now (its share has room, and nobody of its
   * tier or above waits). When it may, the caller counts it as {@link AdaptiveGate.pending} and
   * asks the store, then calls {@link AdaptiveGate.settled}.
   */
  admits(priority: number): boolean {
    this.lapse(this.clock());
    if (this.held.size + this.pending >= this.limitFor(priority)) return false;
    for (let p = 0; p <= priority; p++) if (this.lines[p]!.length > 0) return false;
    return true;
  }

  /** The store answered a pending request: `id` is its permit, or undefined when refused. */
  settled(id: string | undefined, priority: number): void {
    this.pending--;
    if (id !== undefined) this.held.set(id, { at: this.clock(), priority });
  }

  /**
   * A permit given back: its latency (or drop) is a sample; then the line is served. Unknown
   * ids (already released, lapsed, or taken by another limiter) are ignored.
   */
  released(id: string, outcome: ReleaseOutcome | undefined): void {
    const now = this.clock();
    const h = this.held.get(id);
    if (h !== undefined) {
      this.held.delete(id);
      this.sample(now, now - h.at, outcome?.dropped === true, this.held.size + 1);
    }
    this.serve();
  }

  /**
   * Waits up to `maxWaitMs` for the tier's turn: `admit` is called when it may take a permit
   * (counted pending: the caller asks the store and calls {@link AdaptiveGate.settled}),
   * `expire` when the wait ran out.
   */
  wait(priority: number, maxWaitMs: number, admit: () => void, expire: () => void): void {
    const w: Waiter = { priority, admit, expire, timer: undefined, done: false };
    w.timer = this.timers.setTimeout(() => {
      if (w.done) return;
      w.done = true;
      const line = this.lines[priority]!;
      line.splice(line.indexOf(w), 1);
      this.waiting--;
      expire();
    }, maxWaitMs);
    this.lines[priority]!.push(w);
    this.waiting++;
  }

  /** Admits waiters, highest tier first, while the limit has room for them. */
  serve(): void {
    if (this.waiting === 0) return;
    this.lapse(this.clock());
    for (let p = 0; p < PRIORITY_TIERS; p++) {
      const line = this.lines[p]!;
      while (line.length > 0 && this.held.size + this.pending < this.limitFor(p)) {
        const w = line.shift()!;
        this.waiting--;
        w.done = true;
        this.timers.clearTimeout(w.timer);
        this.pending++;
        w.admit();
      }
      // A tier that cannot be served holds every tier below it.
      if (line.length > 0) return;
    }
  }

  /** Permits held past the rule's period have lapsed (the store forgot them): drops. */
  private lapse(now: number): void {
    if (this.held.size === 0) return;
    for (const [id, h] of this.held) {
      if (h.at + this.periodMs > now) break;
      this.held.delete(id);
      this.sample(now, 0, true, this.held.size + 1);
    }
  }

  private sample(now: number, rttMs: number, dropped: boolean, inFlight: number): void {
    const w = this.window;
    w.count++;
    if (dropped) w.dropped++;
    else w.rttSum += rttMs;
    if (inFlight > w.maxInFlight) w.maxInFlight = inFlight;
    const age = now - w.start;
    if ((age >= WINDOW_MS && w.count >= WINDOW_MIN_SAMPLES) || age >= WINDOW_MAX_MS) {
      const kept = w.count - w.dropped;
      this.controller.update({
        rttMs: kept > 0 ? w.rttSum / kept : Number.NaN,
        dropped: w.dropped,
        count: w.count,
        maxInFlight: w.maxInFlight,
      });
      this.window = { start: now, count: 0, rttSum: 0, dropped: 0, maxInFlight: 0 };
    }
  }
}
