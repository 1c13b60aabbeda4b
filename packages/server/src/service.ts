/**
 * `sluice serve`: wires the database, the counter store, the live registry and the Fastify
 * server, and shuts them down in order.
 */
import type { Tracer } from "@opentelemetry/api";
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from "fastify";
import { randomBytes } from "node:crypto";
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import { type Logger, pino } from "pino";
import type { Registry as MetricsRegistry } from "prom-client";
import { type Policy, createLimiter } from "sluice";
import { type ClientIp, clientIp } from "./client-ip.js";
import type { ServerConfig } from "./config.js";
import { type Counters, openCounters } from "./counters.js";
import { type Database, openDatabase } from "./db/connect.js";
import { databaseHealth } from "./db/health.js";
import { withDeadline } from "./deadline.js";
import { ApiError, type ApiErrorCode, logRequest, logRequestError, toApiError } from "./errors.js";
import { type Metrics, counterChild, createMetrics } from "./metrics.js";
import { buildOpenApi } from "./openapi.js";
import { Registry } from "./registry.js";
import { registerBodyParsers } from "./json-body.js";
import { Repository } from "./repository.js";
import { adminRoutes } from "./routes/admin.js";
import { type FastRoute, decisionRoutes } from "./routes/decision.js";
import { envoyJsonRoute } from "./routes/envoy.js";
import { type RlsGrpcServer, createRlsGrpcServer } from "./envoy/grpc.js";
import { RateLimitService } from "./envoy/rls.js";
import { policyRoutes } from "./routes/policies.js";
import { readinessMessage, readinessRoutes } from "./routes/readiness.js";
import type { ScryptParams } from "./secrets.js";
import { SetupToken } from "./setup.js";
import { TrafficQueries } from "./traffic/queries.js";
import { TrafficRecorder } from "./traffic/recorder.js";
import type { ServiceContext } from "./context.js";

export type { ServiceContext } from "./context.js";

/** A running (or ready to run) service. */
export interface Service {
  readonly app: FastifyInstance;
  readonly context: ServiceContext;
  /** Listens on the configured host/port; resolves to the base URL. */
  listen(): Promise<string>;
  /** The port of the Envoy rate limit service once listening (undefined when it is off). */
  grpcPort(): number | undefined;
  /** Stops accepting requests, finishes those in flight, then closes stores. Idempotent. */
  close(): Promise<void>;
  /**
   * Why the counter store could not decide when the service started (e.g. `Redis is
   * unreachable: connect ECONNREFUSED 127.0.0.1:6390`), or undefined when it could. Decisions
   * meanwhile follow each policy's `onStoreError`; `/readyz` answers 503 until it can.
   */
  readonly countersUnavailable: string | undefined;
}

/** Options of {@link createService}. */
export interface ServiceOptions {
  /** A logger (default: pino to stdout at the configured level). */
  logger?: Logger;
  /**
   * The cost of new password hashes (default: N=2^17, r=8, p=1, OWASP's floor). Lower it only
   * where hashing time matters more than strength, such as tests.
   */
  scrypt?: ScryptParams;
  /**
   * The clock, in epoch ms (tests): the memory counter store's and the Redis store's (instead
   * of Redis `TIME`), the time rate-limit headers are computed at, the traffic history's
   * buckets and the setup token's expiry. Default `Date.now`.
   */
  now?: () => number;
  /** This node's id in the traffic tables (default: random per start). */
  nodeId?: string;
  /**
   * The text of `/metrics` (default: this process's registry). A worker of `sluice serve
   * --workers` gives every worker's, summed by the primary.
   */
  metricsText?: (registry: MetricsRegistry) => Promise<string>;
  /** This process's number among the workers of `sluice serve --workers` (shown by `/readyz`). */
  worker?: number;
  /**
   * A tracer (`trace.getTracer("sluice", VERSION)` of an OpenTelemetry SDK): each request of
   * the decision API and each Envoy `ShouldRateLimit` call is then a server span carrying its
   * decision, a child of the caller's W3C `traceparent` when the API has a propagator that
   * reads it. Unset (the default): no spans, and no span work on any request. `sluice serve`
   * sets it when it exports traces (OTEL_* variables, docs/server.md#opentelemetry).
   */
  tracer?: Tracer;
}

/**
 * Logs store failures decided by `onStoreError` at most once per policy every 10 s (with how
 * many were suppressed), so an outage under load does not flood the log; metrics count them all.
 */
function throttledStoreErrorLog(
  logger: Logger,
): (err: unknown, policy: Policy, what?: string) => void {
  const last = new Map<string, { at: number; suppressed: number }>();
  return (err, policy, what) => {
    const now = Date.now();
    const seen = last.get(policy.name);
    if (seen && now - seen.at < 10_000) {
      seen.suppressed++;
      return;
    }
    last.set(policy.name, { at: now, suppressed: 0 });
    logger.warn(
      { err, policy: policy.name, suppressed: seen?.suppressed ?? 0 },
      `counter store failed; the policy's onStoreError (${policy.onStoreError}) decided${what ? `: ${what}` : ""}`,
    );
  };
}

/**
 * What {@link createService} has opened so far: closed again, last first, when a later step
 * fails.
 */
interface Opened {
  database?: Database;
  counters?: Counters;
  registry?: Registry;
  traffic?: TrafficRecorder;
}

/** Closes what a failed start opened, last first (their own failures are not the news). */
async function closeOpened(opened: Opened): Promise<void> {
  await opened.traffic?.stop();
  await opened.registry?.stop();
  await opened.counters?.close().catch(() => {});
  await opened.database?.close().catch(() => {});
}

/** Opens the stores and builds the server (does not listen yet). */
export async function createService(
  config: ServerConfig,
  options: ServiceOptions = {},
): Promise<Service> {
  const logger = options.logger ?? pino({ level: config.logLevel, base: { service: "sluice" } });
  const opened: Opened = {};
  try {
    const context = await openContext(config, options, logger, opened);
    const app = buildApp(context);
    const grpc = context.envoy
      ? createRlsGrpcServer(context.envoy, logger, {
          maxMessageBytes: config.bodyLimit,
          requestTimeoutMs: config.requestTimeoutMs,
          tracer: options.tracer,
        })
      : undefined;
    const database = opened.database!;
    const countersUnavailable = await countersReadiness(context);
    logStarted(context, database, countersUnavailable);
    return makeService(app, context, database, grpc, countersUnavailable);
  } catch (err) {
    await closeOpened(opened);
    throw err;
  }
}

/**
 * Opens the database and the counter store, loads the registry and starts the traffic history:
 * the {@link ServiceContext} every route is handed. Each store is noted in `opened` as it opens.
 */
async function openContext(
  config: ServerConfig,
  options: ServiceOptions,
  logger: Logger,
  opened: Opened,
): Promise<ServiceContext> {
  const metrics = createMetrics();
  const database = (opened.database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    timeoutMs: config.databaseTimeoutMs,
    notice: (message) => logger.warn(message),
  }));
  // Taken at once, so the identity of the SQLite file is the one just opened.
  const health = databaseHealth(database);
  const counters = (opened.counters = openCounters({
    redisUrl: config.redisUrl,
    memoryMaxKeys: config.memoryMaxKeys,
    metrics,
    now: options.now,
    // The Redis store says once that it cannot reach Redis, and once that it can again.
    logger: { warn: (message) => logger.warn(message) },
  }));
  const repo = new Repository(health.guarded, options.scrypt ? { scrypt: options.scrypt } : {});
  const now = options.now ?? Date.now;
  const traffic = new TrafficRecorder({
    sink: repo.traffic,
    nodeId: options.nodeId ?? randomBytes(6).toString("hex"),
    now,
    logger,
  });
  const registry = (opened.registry = new Registry({
    repo,
    store: counters.store,
    logger,
    pollIntervalMs: config.pollIntervalMs,
    onStoreError: throttledStoreErrorLog(logger),
    onLoad: (load) => {
      metrics.policies.set(load.live.policies);
      metrics.envoyDomains.set(load.live.envoyDomains);
      metrics.revision.set(load.revision);
    },
    traffic,
  }));
  await registry.start();
  opened.traffic = traffic;
  traffic.start();
  const loginLimiters = signInLimiters(config, counters.store, logger);
  const ip = trustedClientIp(config, logger);
  return {
    config,
    logger,
    repo,
    registry,
    counters,
    metrics,
    loginLimiters,
    clientIp: ip,
    databaseHealth: health,
    envoy: envoyService(config, registry, counters.store, now, metrics, logger),
    traffic,
    trafficQueries: new TrafficQueries(repo.traffic, now),
    setup: new SetupToken(now),
    now,
    metricsText: options.metricsText,
    worker: options.worker,
    tracer: options.tracer,
  };
}

/**
 * The limiters of failed sign-ins, per (username, client IP) and per client IP. When the counter
 * store is down, each node counts on its own (insurance) rather than lock every admin out.
 */
function signInLimiters(
  config: ServerConfig,
  store: Counters["store"],
  logger: Logger,
): ServiceContext["loginLimiters"] {
  const logStoreError = throttledStoreErrorLog(logger);
  const loginLimiter = (name: string, limit: number) =>
    createLimiter({
      store,
      policy: { name, rules: [{ limit, period: "1m" }], onStoreError: "insurance" },
      onError: (err, policy) =>
        logStoreError(err, policy, "sign-in attempts are counted on this node only"),
    });
  return {
    user: loginLimiter("sluice.login.user", config.loginLimitPerUser),
    ip: loginLimiter("sluice.login.ip", config.loginLimitPerIp),
  };
}

/** A request's client, through the trusted proxies only (warning when every proxy is trusted). */
function trustedClientIp(config: ServerConfig, logger: Logger): ClientIp {
  if (config.trustProxy === true)
    logger.warn(
      "trustProxy is true: the client IP is the left-most X-Forwarded-For entry, which any client can write; set a hop count or your proxies' addresses instead (docs/server.md)",
    );
  return clientIp(config.trustProxy);
}

/** The Envoy rate limit service over the registry's domains, when `grpcPort` is set. */
function envoyService(
  config: ServerConfig,
  registry: Registry,
  store: Counters["store"],
  now: () => number,
  metrics: Metrics,
  logger: Logger,
): RateLimitService | undefined {
  if (config.grpcPort === undefined) return undefined;
  return new RateLimitService({
    domain: (name) => registry.envoyDomain(name),
    store,
    headers: config.envoyHeaders === "none" ? false : config.envoyHeaders,
    now,
    metrics: {
      descriptor: (domain, descriptor, outcome) =>
        counterChild(metrics.envoyDescriptors, { domain, descriptor, outcome }),
      request: (domain, code) => counterChild(metrics.envoyRequests, { domain, code }),
      draft: (domain, code) => counterChild(metrics.envoyDraftRequests, { domain, code }),
    },
    onStoreError: throttledStoreErrorLog(logger),
    onDraftError: (err, domain) =>
      logger.warn({ err, domain }, "Envoy domain draft evaluation failed"),
  });
}

/**
 * Why the counters cannot decide now, or undefined when they can: "ready" only when they can
 * (`/readyz`'s check, within its deadline).
 */
function countersReadiness(ctx: ServiceContext): Promise<string | undefined> {
  return withDeadline(ctx.counters.ping(), ctx.config.readinessTimeoutMs, "the counter store").then(
    () => undefined,
    (err: unknown) => readinessMessage(err),
  );
}

/** Says the service is ready, or started without its counters (and what that means). */
function logStarted(
  ctx: ServiceContext,
  database: Database,
  countersUnavailable: string | undefined,
): void {
  const started = {
    database: `${database.dialect} ${database.location}`,
    counters: ctx.counters.kind,
    policies: ctx.registry.all().length,
    envoyDomains: ctx.registry.envoyDomains().size,
  };
  if (countersUnavailable === undefined) ctx.logger.info(started, "sluice service ready");
  else
    ctx.logger.warn(
      { ...started, countersUnavailable },
      "sluice service started, but its counters are unavailable: each policy's onStoreError decides, and /readyz answers 503, until they answer",
    );
}

function makeService(
  app: FastifyInstance,
  context: ServiceContext,
  database: Database,
  grpc: RlsGrpcServer | undefined,
  countersUnavailable: string | undefined,
): Service {
  let closing: Promise<void> | undefined;
  let grpcPort: number | undefined;
  return {
    app,
    context,
    countersUnavailable,
    grpcPort: () => grpcPort,
    async listen() {
      if (grpc && context.config.grpcPort !== undefined)
        grpcPort = await grpc.listen(context.config.host, context.config.grpcPort);
      await app.listen({ port: context.config.port, host: context.config.host });
      const addr = app.server.address();
      const port = typeof addr === "object" && addr ? addr.port : context.config.port;
      const host = context.config.host.includes(":")
        ? `[${context.config.host}]`
        : context.config.host;
      return `http://${host}:${port}`;
    },
    close() {
      closing ??= (async () => {
        // Fastify stops accepting, answers 503 shutting_down on kept-alive connections (see
        // buildApp), and waits for in-flight requests. The gRPC server stops taking calls
        // (GOAWAY) and lets those in flight finish, within most of the shutdown deadline.
        const graceMs = Math.max(100, Math.floor(context.config.shutdownTimeoutMs * 0.8));
        await Promise.all([app.close(), grpc?.close(graceMs)]);
        // The last counts go to the database before it closes.
        await context.traffic.stop();
        await context.registry.stop();
        await context.counters
          .close()
          .catch((err: unknown) =>
            context.logger.warn({ err }, "closing the counter store failed"),
          );
        await database
          .close()
          .catch((err: unknown) => context.logger.warn({ err }, "closing the database failed"));
      })();
      return closing;
    },
  };
}

/** The answers to a body refused before it was read whole. */
const REFUSED_BODY: ReadonlySet<ApiErrorCode> = new Set([
  "payload_too_large",
  "unsupported_media_type",
]);

/**
 * Lets a client that is still sending a body we refused (413 over `bodyLimit`, 415) read the
 * answer. Fastify asks for the connection to close after it; closing with the body unread
 * resets the connection, and a client that sends its whole body before it reads (most do)
 * gets ECONNRESET or EPIPE instead of the answer. Instead the connection stays open and the
 * rest of the body is read and thrown away, as for any request body a handler leaves unread;
 * it must still arrive within `requestTimeoutMs`, after which Node closes the connection.
 */
function readRestOfBody(raw: FastifyRequest["raw"], reply: FastifyReply): void {
  reply.removeHeader("connection");
  raw.resume();
}

/** Builds the Fastify app with every route and the error mapping. */
export function buildApp(ctx: ServiceContext): FastifyInstance {
  const { config } = ctx;
  // `POST /v1/limit` is served before Fastify routes a request (see routes/decision.ts).
  const early: { route?: FastRoute } = {};
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    // One line per failed request (onResponse below) instead of two per request.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.bodyLimit,
    // `request.ip` (in logs) through the same trusted-proxy walk as the sign-in limits.
    trustProxy: ctx.clientIp.fastifyTrust,
    serverFactory: (handler) => httpServer(config, early, handler),
    // While closing, requests that still arrive (on kept-alive connections) get our own 503
    // `shutting_down` body from the hook below, not Fastify's.
    return503OnClosing: false,
    forceCloseConnections: "idle",
  });
  // Connections beyond this are closed as they arrive.
  app.server.maxConnections = config.maxConnections;
  const closing = refuseWhileClosing(app);
  // JSON with precise errors, and no text/plain (see json-body.ts).
  registerBodyParsers(app);
  // Accept YAML bodies (policy import) as text.
  app.addContentTypeParser(
    ["application/yaml", "application/x-yaml", "text/yaml"],
    { parseAs: "string" },
    (_req, body, done) => done(null, body),
  );
  registerErrorAnswers(app);
  countRequests(app, ctx);

  // A browser pointed at the service lands on the admin page.
  app.get("/", (_req, reply) => reply.redirect("/admin/", 302));
  readinessRoutes(app, ctx);
  app.get("/metrics", async (_req, reply) => {
    const registry = ctx.metrics.registry;
    const text = await (ctx.metricsText?.(registry) ?? registry.metrics());
    return reply.type(registry.contentType).send(text);
  });
  const openapi = buildOpenApi();
  app.get("/openapi.json", () => openapi);

  early.route = decisionRoutes(app, ctx, closing);
  envoyJsonRoute(app, ctx);
  policyRoutes(app, ctx);
  adminRoutes(app, ctx);
  void app.register(import("./routes/admin-ui.js")); // the admin web page at /admin/
  return app;
}

/**
 * The node:http server Fastify runs on: each request is offered to the fast route first, then
 * to Fastify's `handler`. Limits and timeouts (docs/server.md): a request must arrive whole —
 * headers, then body — within its deadlines, or Node answers 408 and closes the connection.
 * They are the server's, so they hold for the fast route too.
 */
function httpServer(
  config: ServerConfig,
  early: { readonly route?: FastRoute },
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Server {
  const server = createServer(
    {
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      // How often Node looks for requests past those deadlines (its default, 30 s, would let a
      // slow client stay that much longer).
      connectionsCheckingInterval: Math.max(
        25,
        Math.min(1000, Math.floor(config.headersTimeoutMs / 4)),
      ),
    },
    (req, res) => {
      if (early.route === undefined || !early.route(req, res)) handler(req, res);
    },
  );
  server.keepAliveTimeout = config.keepAliveTimeoutMs;
  return server;
}

/**
 * Once the app closes, requests that still arrive get 503 `shutting_down`. Fastify has set
 * `Connection: close`, so the client's next try opens a new connection (to another node,
 * behind a balancer). Returns whether the app is closing.
 */
function refuseWhileClosing(app: FastifyInstance): () => boolean {
  let closing = false;
  app.addHook("preClose", (done) => {
    closing = true;
    done();
  });
  app.addHook("onRequest", (_req, _reply, done) => {
    if (!closing) return done();
    done(new ApiError("shutting_down", "this node is shutting down; retry on another node"));
  });
  return () => closing;
}

/** Every error answered as an {@link ApiError} (caller mistakes are 4xx, never 500), and 404. */
function registerErrorAnswers(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, req, reply) => {
    const e = toApiError(err, req.headers["content-type"]);
    if (REFUSED_BODY.has(e.code) && !req.raw.complete) readRestOfBody(req.raw, reply);
    logRequestError(req.log as Logger, e, err, req.url);
    for (const [k, v] of Object.entries(e.headers)) void reply.header(k, v);
    return reply.status(e.status).send(e.toBody());
  });
  app.setNotFoundHandler((req, reply) =>
    reply
      .status(404)
      .send(new ApiError("not_found", `no route ${req.method} ${req.url.split("?")[0]}`).toBody()),
  );
}

/** The requests in flight (a gauge), and one log line per answered request. */
function countRequests(app: FastifyInstance, ctx: ServiceContext): void {
  const { inFlight } = ctx.metrics;
  // "close" fires once, when the response is finished or the connection dropped.
  const leave = () => inFlight.dec();
  app.addHook("onRequest", (_req, reply, done) => {
    inFlight.inc();
    reply.raw.once("close", leave);
    done();
  });
  app.addHook("onResponse", (req, reply, done) => {
    logRequest(req.log as Logger, req.method, req.url, reply.statusCode, reply.elapsedTime);
    done();
  });
}
