/**
 * What every route of the service shares: the node's configuration, stores, registry, metrics,
 * traffic recorder and clock. Built once by `createService` (./service.ts) and handed to each
 * route module, which imports this type and nothing of the service's wiring.
 */
import type { Tracer } from "@opentelemetry/api";
import type { Logger } from "pino";
import type { Limiter } from "sluice";
import type { ClientIp } from "./client-ip.js";
import type { ServerConfig } from "./config.js";
import type { Counters } from "./counters.js";
import type { DatabaseHealth } from "./db/health.js";
import type { RateLimitService } from "./envoy/rls.js";
import type { Metrics } from "./metrics.js";
import type { Registry } from "./registry.js";
import type { Repository } from "./repository.js";
import type { SetupToken } from "./setup.js";
import type { TrafficQueries } from "./traffic/queries.js";
import type { TrafficRecorder } from "./traffic/recorder.js";
import type { Registry as MetricsRegistry } from "prom-client";

/** What route handlers share. */
export interface ServiceContext {
  readonly config: ServerConfig;
  readonly logger: Logger;
  readonly repo: Repository;
  readonly registry: Registry;
  readonly counters: Counters;
  readonly metrics: Metrics;
  /**
   * Sign-in limiters, which count failed sign-ins: per username and client IP (`user`), and per
   * client IP (`ip`). When the counter store fails they count on this node alone (insurance).
   */
  readonly loginLimiters: { readonly user: Limiter; readonly ip: Limiter };
  /** The client of a request, through the trusted proxies only. */
  readonly clientIp: ClientIp;
  /** Whether the policy database can take writes (readiness). */
  readonly databaseHealth: DatabaseHealth;
  /** The Envoy rate limit service, when `grpcPort` is set (gRPC and `POST /json`). */
  readonly envoy: RateLimitService | undefined;
  /** This node's decision counts and heavy hitters, written to the database every second. */
  readonly traffic: TrafficRecorder;
  /** The console's reads of the traffic history (every node's, from the database). */
  readonly trafficQueries: TrafficQueries;
  /** The one-time token that creates the first admin (see setup.ts). */
  readonly setup: SetupToken;
  /** Now, in epoch ms: the clock of the service (injected in tests). */
  readonly now: () => number;
  /** The text of `/metrics`, when not this process's registry's (`ServiceOptions.metricsText`). */
  readonly metricsText?: ((registry: MetricsRegistry) => Promise<string>) | undefined;
  /** This process's number among the workers of `sluice serve --workers`. */
  readonly worker?: number | undefined;
  /**
   * The tracer of the decision doors' server spans (`ServiceOptions.tracer`); undefined: no
   * spans, and no span work on any request.
   */
  readonly tracer?: Tracer | undefined;
}
