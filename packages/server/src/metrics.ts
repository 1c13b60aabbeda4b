/**
 * Prometheus metrics, on a registry of their own (so several servers can live in one process).
 */
import type { AllotmentCounters } from "sluice";
import {
  Counter,
  type CounterConfiguration,
  Gauge,
  Histogram,
  type LabelValues,
  Registry,
  collectDefaultMetrics,
} from "prom-client";

/** A counter to add one to (a labelled child of a counter). */
export interface CounterChild {
  inc(): void;
}

/** A child counted in a plain number until its counter is read. */
class LocalCount implements CounterChild {
  n = 0;
  constructor(readonly labels: LabelValues<string>) {}
  inc(): void {
    this.n++;
  }
}

/** The children of each counter made by {@link countingCounter}. */
const children = new WeakMap<Counter<string>, LocalCount[]>();

/**
 * A counter whose children ({@link counterChild}) count in plain numbers, added to the counter
 * whenever it is read (a scrape, or any `get()`): an increment on a request's path is one
 * addition. prom-client's own labelled child hashes and checks its labels on every `inc()`.
 */
function countingCounter<T extends string>(config: CounterConfiguration<T>): Counter<T> {
  const local: LocalCount[] = [];
  const counter = new Counter<T>({
    ...config,
    collect() {
      for (const c of local) {
        if (c.n === 0) continue;
        const n = c.n;
        c.n = 0;
        this.inc(c.labels as LabelValues<T>, n);
      }
    },
  });
  children.set(counter as unknown as Counter<string>, local);
  return counter;
}

/**
 * A child of one of the service's counters for these labels, to keep and increment per request
 * (made once per label set: each call makes a new child).
 */
export function counterChild<T extends string>(
  counter: Counter<T>,
  labels: LabelValues<T>,
): CounterChild {
  const local = children.get(counter as unknown as Counter<string>);
  if (local === undefined) return counter.labels(labels);
  const c = new LocalCount(labels);
  local.push(c);
  return c;
}

/** The service's metrics. */
export interface Metrics {
  readonly registry: Registry;
  /** Decisions by policy and outcome (`allowed`, `denied`), with the decision's reason when unusual. */
  readonly decisions: Counter<"policy" | "outcome" | "reason">;
  /** What drafts (shadow) would have decided, by policy and outcome. */
  readonly draftDecisions: Counter<"policy" | "outcome">;
  /** Latency of counter-store calls. */
  readonly storeLatency: Histogram<"store" | "operation">;
  /** Failed counter-store calls. */
  readonly storeErrors: Counter<"store" | "operation">;
  /** Policies loaded on this node. */
  readonly policies: Gauge;
  /** The policy revision this node runs. */
  readonly revision: Gauge;
  /** HTTP requests being handled (headers received, response not yet finished). */
  readonly inFlight: Gauge;
  /**
   * Envoy descriptor decisions by domain, descriptor path (as configured: never a request's
   * values) and outcome: `ok`, `over_limit`, `shadow`, `store_error`, `unlimited`.
   */
  readonly envoyDescriptors: Counter<"domain" | "descriptor" | "outcome">;
  /** Envoy rate limit requests by domain (`(unknown)` for one not configured) and code: `ok`, `over_limit`, `invalid`. */
  readonly envoyRequests: Counter<"domain" | "code">;
  /** What Envoy domain drafts (evaluated in shadow) would have answered, by domain and code. */
  readonly envoyDraftRequests: Counter<"domain" | "code">;
  /** Envoy domains loaded on this node. */
  readonly envoyDomains: Gauge;
  /**
   * Where the allotment counts come from at a scrape: set once the counter store is open (a
   * Redis store's `allotmentCounters`; nothing for memory counters). See docs/leases.md.
   */
  readonly allotments: { source: (() => Readonly<AllotmentCounters> | undefined) | undefined };
}

/** Creates the metrics (and Node's default process metrics) on a new registry. */
export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "sluice_process_" });
  const allotments: Metrics["allotments"] = { source: undefined };
  // Allotment counts, read from the store at each scrape (they are kept by the store itself).
  // The metrics keep their first names (sluice_lease_*): dashboards and alerts read them.
  new Counter({
    name: "sluice_lease_events_total",
    help: "Allotments taken, units given back early, and allotments that ended with units unspent",
    labelNames: ["event"],
    registers: [registry],
    collect() {
      const c = allotments.source?.();
      if (c === undefined) return;
      this.reset();
      this.inc({ event: "taken" }, c.taken);
      this.inc({ event: "returned_units" }, c.returned);
      this.inc({ event: "expired" }, c.expired);
    },
  });
  new Counter({
    name: "sluice_lease_decisions_total",
    help: "Decisions of policies with allotments, answered in memory from an allotment or by Redis",
    labelNames: ["answered"],
    registers: [registry],
    collect() {
      const c = allotments.source?.();
      if (c === undefined) return;
      this.reset();
      this.inc({ answered: "memory" }, c.local);
      this.inc({ answered: "redis" }, c.remote);
    },
  });
  return {
    allotments,
    registry,
    decisions: countingCounter({
      name: "sluice_decisions_total",
      help: "Rate-limit decisions by policy and outcome",
      labelNames: ["policy", "outcome", "reason"],
      registers: [registry],
    }),
    draftDecisions: countingCounter({
      name: "sluice_draft_decisions_total",
      help: "What policy drafts (evaluated in shadow) would have decided",
      labelNames: ["policy", "outcome"],
      registers: [registry],
    }),
    storeLatency: new Histogram({
      name: "sluice_store_duration_seconds",
      help: "Latency of counter-store calls",
      labelNames: ["store", "operation"],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
    storeErrors: new Counter({
      name: "sluice_store_errors_total",
      help: "Failed counter-store calls",
      labelNames: ["store", "operation"],
      registers: [registry],
    }),
    // With `--workers`, /metrics sums every worker's metrics (workers.ts); a gauge every
    // worker holds alike is shown once.
    policies: new Gauge({
      name: "sluice_policies",
      help: "Policies loaded on this node",
      aggregator: "max",
      registers: [registry],
    }),
    revision: new Gauge({
      name: "sluice_policy_revision",
      help: "Policy revision this node runs",
      aggregator: "min",
      registers: [registry],
    }),
    inFlight: new Gauge({
      name: "sluice_http_requests_in_flight",
      help: "HTTP requests being handled",
      registers: [registry],
    }),
    envoyDescriptors: countingCounter({
      name: "sluice_envoy_descriptor_decisions_total",
      help: "Envoy descriptor decisions by domain, descriptor path and outcome",
      labelNames: ["domain", "descriptor", "outcome"],
      registers: [registry],
    }),
    envoyRequests: countingCounter({
      name: "sluice_envoy_requests_total",
      help: "Envoy rate limit requests (gRPC and POST /json) by domain and code",
      labelNames: ["domain", "code"],
      registers: [registry],
    }),
    envoyDraftRequests: countingCounter({
      name: "sluice_envoy_draft_requests_total",
      help: "What Envoy domain drafts (evaluated in shadow) would have answered",
      labelNames: ["domain", "code"],
      registers: [registry],
    }),
    envoyDomains: new Gauge({
      name: "sluice_envoy_domains",
      help: "Envoy domains loaded on this node",
      aggregator: "max",
      registers: [registry],
    }),
  };
}
