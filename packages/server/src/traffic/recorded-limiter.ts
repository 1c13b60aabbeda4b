/**
 * A limiter whose decisions the traffic history counts: for doors that decide through a
 * limiter without a route of their own to count at — the Envoy rate limit service, whose
 * limits the registry builds with it (envoy/live.ts). Every `limit()` is recorded, as
 * `POST /v1/limit` records its decisions; a `peek` decides nothing and is not.
 */
import type {
  AcquireOptions,
  AdaptiveState,
  ReleaseOutcome,
  Decision,
  Explanation,
  LimitOptions,
  Limiter,
  Permit,
  Policy,
  Reservation,
  RuleInput,
  SetCountOptions,
  SyncLimiter,
} from "sluice";
import { type TrafficRecorder, trafficOutcome } from "./recorder.js";

/** Where the decisions go: the node's traffic recorder. */
export type DecisionSink = Pick<TrafficRecorder, "record">;

/**
 * Over a store that decides in-process the limiter is a {@link SyncLimiter} (the Envoy door's
 * synchronous path takes `limitSync` when the store is one): so is this one, recording alike.
 */
class RecordedLimiter implements SyncLimiter {
  constructor(
    private readonly inner: Limiter,
    private readonly sink: DecisionSink,
    private readonly app: string,
  ) {}

  get policy(): Policy {
    return this.inner.policy;
  }
  get store(): SyncLimiter["store"] {
    return this.inner.store as SyncLimiter["store"];
  }
  ready(): Promise<void> {
    return this.inner.ready();
  }
  limit(key: string, options?: LimitOptions): Promise<Decision> {
    return this.inner.limit(key, options).then((d) => {
      this.sink.record(this.inner.policy.name, this.app, trafficOutcome(d), key);
      return d;
    });
  }
  limitSync(key: string, options?: LimitOptions): Decision {
    const d = (this.inner as SyncLimiter).limitSync(key, options);
    this.sink.record(this.inner.policy.name, this.app, trafficOutcome(d), key);
    return d;
  }
  tryLimitSync(key: string, options?: LimitOptions): Decision | undefined {
    const d = this.inner.tryLimitSync(key, options);
    if (d !== undefined) this.sink.record(this.inner.policy.name, this.app, trafficOutcome(d), key);
    return d;
  }
  peek(key: string, options?: LimitOptions): Promise<Decision> {
    return this.inner.peek(key, options);
  }
  peekSync(key: string, options?: LimitOptions): Decision {
    return (this.inner as SyncLimiter).peekSync(key, options);
  }
  explain(key: string, options?: LimitOptions): Promise<Explanation> {
    return this.inner.explain(key, options);
  }
  reset(key: string): Promise<void> {
    return this.inner.reset(key);
  }
  refund(key: string, cost?: number): Promise<void> {
    return this.inner.refund(key, cost);
  }
  acquire(key: string, options?: AcquireOptions): Promise<Permit> {
    return this.inner.acquire(key, options);
  }
  release(key: string, leaseId: string, outcome?: ReleaseOutcome): Promise<boolean> {
    return this.inner.release(key, leaseId, outcome);
  }
  adaptiveState(): AdaptiveState | undefined {
    return this.inner.adaptiveState();
  }
  reserve(key: string, estimate: number): Promise<Reservation> {
    return this.inner.reserve(key, estimate);
  }
  setCount(key: string, count: number, options?: SetCountOptions): Promise<void> {
    return this.inner.setCount(key, count, options);
  }
  setOverride(key: string, rules: RuleInput[]): void {
    this.inner.setOverride(key, rules);
  }
  deleteOverride(key: string): boolean {
    return this.inner.deleteOverride(key);
  }
  override(key: string): RuleInput[] | undefined {
    return this.inner.override(key);
  }
}

/** `limiter`, its decisions counted in `sink` under its policy's name and `app`. */
export function recordedLimiter(limiter: Limiter, sink: DecisionSink, app: string): Limiter {
  return new RecordedLimiter(limiter, sink, app);
}
