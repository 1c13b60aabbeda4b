/**
 * `sluice serve`: wires the database, the counter store, the live registry and the Fastify
 * server, and shuts them down in order.
 */
import Fastify, {
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  LogController,
} from "fastify";
import { type Logger, pino } from "pino";
import { type Limiter, type Policy, StoreError, ValidationError, createLimiter } from "sluice";
import type { ServerConfig } from "./config.js";
import { type Counters, openCounters } from "./counters.js";
import { type Database, openDatabase } from "./db/connect.js";
import { ApiError, type ApiErrorCode, isDatabaseOutage } from "./errors.js";
import { type Metrics, createMetrics } from "./metrics.js";
import { buildOpenApi } from "./openapi.js";
import { Registry } from "./registry.js";
import { Repository } from "./repository.js";
import { adminRoutes } from "./routes/admin.js";
import { decisionRoutes } from "./routes/decision.js";

/** What route handlers share. */
export interface ServiceContext {
  readonly config: ServerConfig;
  readonly logger: Logger;
  readonly repo: Repository;
  readonly registry: Registry;
  readonly counters: Counters;
  readonly metrics: Metrics;
  /** Sign-in limiters: per username and per client IP. */
  readonly loginLimiters: { readonly user: Limiter; readonly ip: Limiter };
}

/** A running (or ready to run) service. */
export interface Service {
  readonly app: FastifyInstance;
  readonly context: ServiceContext;
  /** Listens on the configured host/port; resolves to the base URL. */
  listen(): Promise<string>;
  /** Stops accepting requests, finishes those in flight, then closes stores. Idempotent. */
  close(): Promise<void>;
}

/** Options of {@link createService}. */
export interface ServiceOptions {
  /** A logger (default: pino to stdout at the configured level). */
  logger?: Logger;
}

/**
 * Logs store failures decided by `onStoreError` at most once per policy every 10 s (with how
 * many were suppressed), so an outage under load does not flood the log; metrics count them all.
 */
function throttledStoreErrorLog(logger: Logger): (err: unknown, policy: Policy) => void {
  const last = new Map<string, { at: number; suppressed: number }>();
  return (err, policy) => {
    const now = Date.now();
    const seen = last.get(policy.name);
    if (seen && now - seen.at < 10_000) {
      seen.suppressed++;
      return;
    }
    last.set(policy.name, { at: now, suppressed: 0 });
    logger.warn(
      { err, policy: policy.name, suppressed: seen?.suppressed ?? 0 },
      "counter store failed; the policy's onStoreError decided",
    );
  };
}

/** Opens the stores and builds the server (does not listen yet). */
export async function createService(
  config: ServerConfig,
  options: ServiceOptions = {},
): Promise<Service> {
  const logger = options.logger ?? pino({ level: config.logLevel, base: { service: "sluice" } });
  const metrics = createMetrics();
  let database: Database | undefined;
  let counters: Counters | undefined;
  let registry: Registry | undefined;
  try {
    database = await openDatabase({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      notice: (message) => logger.warn(message),
    });
    counters = openCounters({ redisUrl: config.redisUrl, metrics });
    const repo = new Repository(database);
    const reg = new Registry({
      repo,
      store: counters.store,
      logger,
      pollIntervalMs: config.pollIntervalMs,
      onStoreError: throttledStoreErrorLog(logger),
      onLoad: (snap) => {
        metrics.policies.set(snap.policies.length);
        metrics.revision.set(snap.revision);
      },
    });
    registry = reg;
    await reg.start();
    const loginLimiters = {
      user: createLimiter({
        store: counters.store,
        policy: {
          name: "sluice.login.user",
          rules: [{ limit: config.loginLimitPerUser, period: "1m" }],
          onStoreError: "deny",
        },
      }),
      ip: createLimiter({
        store: counters.store,
        policy: {
          name: "sluice.login.ip",
          rules: [{ limit: config.loginLimitPerIp, period: "1m" }],
          onStoreError: "deny",
        },
      }),
    };
    const context: ServiceContext = {
      config,
      logger,
      repo,
      registry: reg,
      counters,
      metrics,
      loginLimiters,
    };
    const app = buildApp(context);
    logger.info(
      {
        database: `${database.dialect} ${database.location}`,
        counters: counters.kind,
        policies: reg.all().length,
      },
      "sluice service ready",
    );
    return makeService(app, context, database);
  } catch (err) {
    await registry?.stop();
    await counters?.close().catch(() => {});
    await database?.close().catch(() => {});
    throw err;
  }
}

function makeService(app: FastifyInstance, context: ServiceContext, database: Database): Service {
  let closing: Promise<void> | undefined;
  return {
    app,
    context,
    async listen() {
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
        // buildApp), and waits for in-flight requests.
        await app.close();
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

/** Builds the Fastify app with every route and the error mapping. */
export function buildApp(ctx: ServiceContext): FastifyInstance {
  const app = Fastify({
    loggerInstance: ctx.logger as FastifyBaseLogger,
    // One line per failed request (onResponse below) instead of two per request.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: ctx.config.bodyLimit,
    trustProxy: ctx.config.trustProxy,
    // While closing, requests that still arrive (on kept-alive connections) get our own 503
    // `shutting_down` body from the hook below, not Fastify's.
    return503OnClosing: false,
    forceCloseConnections: "idle",
  });

  let closing = false;
  app.addHook("preClose", (done) => {
    closing = true;
    done();
  });
  app.addHook("onRequest", (_req, _reply, done) => {
    if (!closing) return done();
    // Fastify has set `Connection: close`, so the client's next try opens a new connection
    // (to another node, behind a balancer).
    done(new ApiError("shutting_down", "this node is shutting down; retry on another node"));
  });

  // Accept YAML bodies (policy import) as text.
  app.addContentTypeParser(
    ["application/yaml", "application/x-yaml", "text/yaml"],
    { parseAs: "string" },
    (_req, body, done) => done(null, body),
  );

  app.setErrorHandler((err: unknown, req, reply) => {
    const e = toApiError(err);
    if (e.code === "store_unavailable")
      req.log.warn({ err, url: req.url }, "counter store unavailable");
    else if (e.status >= 500 && e.code !== "shutting_down")
      req.log.error({ err, url: req.url }, "request failed");
    for (const [k, v] of Object.entries(e.headers)) void reply.header(k, v);
    return reply.status(e.status).send(e.toBody());
  });
  app.setNotFoundHandler((req, reply) =>
    reply
      .status(404)
      .send(new ApiError("not_found", `no route ${req.method} ${req.url.split("?")[0]}`).toBody()),
  );

  app.addHook("onRequest", (_req, reply, done) => {
    ctx.metrics.inFlight.inc();
    // "close" fires once, when the response is finished or the connection dropped.
    reply.raw.once("close", () => ctx.metrics.inFlight.dec());
    done();
  });
  app.addHook("onResponse", (req, reply, done) => {
    if (reply.statusCode >= 400 || ctx.logger.isLevelEnabled("debug")) {
      req.log[reply.statusCode >= 400 ? "info" : "debug"](
        {
          method: req.method,
          url: req.url,
          status: reply.statusCode,
          ms: Math.round(reply.elapsedTime),
        },
        "request",
      );
    }
    done();
  });

  // A browser pointed at the service lands on the admin page.
  app.get("/", (_req, reply) => reply.redirect("/admin/", 302));
  app.get("/healthz", () => ({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    const checks: Record<string, string> = {};
    await Promise.all([
      ctx.repo.database.ping().then(
        () => (checks.database = "ok"),
        (err: unknown) => (checks.database = `unreachable: ${(err as Error).message}`),
      ),
      ctx.counters.ping().then(
        () => (checks.counters = "ok"),
        (err: unknown) => (checks.counters = `unreachable: ${(err as Error).message}`),
      ),
    ]);
    const ok = Object.values(checks).every((v) => v === "ok");
    return reply.status(ok ? 200 : 503).send({
      status: ok ? "ready" : "unavailable",
      checks,
      revision: ctx.registry.currentRevision,
    });
  });
  app.get("/metrics", async (_req, reply) => {
    const text = await ctx.metrics.registry.metrics();
    return reply.type(ctx.metrics.registry.contentType).send(text);
  });
  const openapi = buildOpenApi();
  app.get("/openapi.json", () => openapi);

  decisionRoutes(app, ctx);
  adminRoutes(app, ctx);
  void app.register(import("./routes/admin-ui.js")); // the admin web page at /admin/
  return app;
}

const CLIENT_STATUS_CODES: Partial<Record<number, ApiErrorCode>> = {
  401: "unauthorized",
  404: "not_found",
  413: "payload_too_large",
  415: "unsupported_media_type",
};

/** Maps anything thrown in a request to an {@link ApiError}: caller mistakes are 4xx, never 500. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof ValidationError) {
    return new ApiError("invalid_request", err.message, { issues: [...err.issues], cause: err });
  }
  if (err instanceof StoreError)
    return new ApiError("store_unavailable", "the counter store is unavailable; retry later", {
      cause: err,
    });
  if (isDatabaseOutage(err))
    return new ApiError("database_unavailable", "the policy database is unavailable; retry later", {
      cause: err,
    });
  // Fastify's own 4xx (bad JSON, empty body, wrong content type, body too large…).
  const fe = err as Partial<FastifyError> | undefined;
  const status = typeof fe?.statusCode === "number" ? fe.statusCode : 500;
  if (status >= 400 && status < 500) {
    const code = CLIENT_STATUS_CODES[status] ?? "invalid_request";
    const message = fe?.message ?? "bad request";
    return new ApiError(code, message, {
      issues: code === "invalid_request" ? [{ path: "", message }] : undefined,
      cause: err,
    });
  }
  return new ApiError("internal", "internal error", { cause: err });
}
