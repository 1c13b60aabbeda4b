/**
 * `sluice serve`: starts the service, says where it listens (and how to make the first admin),
 * and shuts it down in order on SIGTERM or SIGINT within its deadline. With OTEL_* variables
 * that ask for it, OpenTelemetry's SDK is started first and shut down (flushed) last (../otel.ts).
 */
import type { Command } from "commander";
import type { Logger } from "pino";
import { CONFIG_KEYS, type ServerConfig, redactUrl } from "../config.js";
import type { LogDestination } from "../log-destination.js";
import type { OpenTelemetry, OtelSettings } from "../otel.js";
import type { Service } from "../service.js";
import type { WorkerChannel } from "../workers.js";
import { type Key, addConfigOptions, configFrom, sameDatabaseFlags } from "./options.js";

/** Registers `serve`. */
export function serveCommand(cli: Command): void {
  addConfigOptions(
    cli.command("serve").description("start the decision and admin API (Fastify)"),
    Object.keys(CONFIG_KEYS) as Key[],
  ).action(serve);
}

async function serve(opts: Record<string, unknown>): Promise<void> {
  outliveClosedOutput();
  const config = configFrom(opts, Object.keys(CONFIG_KEYS) as Key[]);
  // Checked here, before anything starts (by the primary of --workers too): a bad value stops
  // the start, naming the variable.
  const { otelSettings, startOpenTelemetry } = await import("../otel.js");
  const otel = otelSettings(process.env);
  const [{ pino }, { fdDestination }, workers] = await Promise.all([
    import("pino"),
    import("../log-destination.js"),
    import("../workers.js"),
  ]);
  // Never blocks the process, whatever the reader of stdout does (see log-destination.ts).
  const logs = fdDestination(1);
  const inWorker = workers.isWorker();
  if (config.workers > 1 && !inWorker) {
    // The primary of `--workers`: it serves nothing, it runs the workers (workers.ts).
    const logger = pino(
      { level: config.logLevel, base: { service: "sluice", role: "primary" } },
      logs.stream,
    );
    workers.runPrimary({
      workers: config.workers,
      logger,
      shutdownTimeoutMs: config.shutdownTimeoutMs,
      banner: (text) => process.stderr.write(text),
      exit: (code) => void logs.drain().then(() => process.exit(code)),
    });
    return;
  }
  const { createService } = await import("../service.js");
  const worker = inWorker ? workers.workerChannel() : undefined;
  const logger = pino(
    {
      level: config.logLevel,
      base: { service: "sluice", ...(worker ? { worker: worker.id } : {}) },
    },
    logs.stream,
  );
  // Before the service makes its limiters: sluice binds its instruments to the meter provider
  // registered when the first one is made.
  const telemetry = otel ? await startTelemetry(otel, startOpenTelemetry, logger) : undefined;
  const service = await createService(config, {
    logger,
    ...(worker ? { metricsText: () => worker.metrics(), worker: worker.id } : {}),
    ...(telemetry?.tracer ? { tracer: telemetry.tracer } : {}),
  });
  worker?.shareMetrics(service.context.metrics.registry);
  const admin = await firstAdmin(service, opts, logger, worker);
  stopOnSignals(service, config.shutdownTimeoutMs, logger, logs, worker, telemetry);
  const url = await service.listen();
  announce(service, config, url, logger, admin, worker);
}

/** Starts OpenTelemetry's SDK as the OTEL_* variables ask, and says where it exports. */
async function startTelemetry(
  settings: OtelSettings,
  start: (settings: OtelSettings, logger: Logger) => Promise<OpenTelemetry>,
  logger: Logger,
): Promise<OpenTelemetry> {
  const telemetry = await start(settings, logger);
  const { metrics, traces } = settings;
  logger.info(
    {
      otel: {
        ...(metrics
          ? {
              metrics: metrics.url,
              metricsProtocol: metrics.protocol,
              intervalMs: metrics.intervalMs,
            }
          : {}),
        ...(traces ? { traces: traces.url, tracesProtocol: traces.protocol } : {}),
        serviceName: settings.resource["service.name"],
      },
    },
    `OpenTelemetry: exporting ${[metrics && "metrics", traces && "traces"].filter(Boolean).join(" and ")} over OTLP`,
  );
  return telemetry;
}

/**
 * Keeps the service running when the reader of stdout or stderr goes away (`sluice serve 2>&1 |
 * head -n 1`, a log shipper restarted): a write to the closed pipe fails (EPIPE) and that
 * output is lost, but the service goes on. Without a listener the failed write of a start line
 * would throw from the stream and end the process.
 */
function outliveClosedOutput(): void {
  for (const out of [process.stdout, process.stderr]) out.on("error", () => undefined);
}

/** How the first admin is made while there is none: a command, and the setup link's token. */
interface FirstAdmin {
  /** `sluice admin create-user` for this database. */
  readonly command: string;
  /** The one-time setup token, when this process issued it (with workers: the first one). */
  readonly setup: { readonly token: string; readonly expiresAt: Date } | undefined;
}

/**
 * Whether an admin must be made first (undefined: one exists), and how. The one-time setup
 * token goes to the terminal only (stderr), never to the JSON log. With workers, the first
 * issues it and the others are given it.
 */
async function firstAdmin(
  service: Service,
  opts: Record<string, unknown>,
  logger: Logger,
  worker: WorkerChannel | undefined,
): Promise<FirstAdmin | undefined> {
  const needsAdmin = (await service.context.repo.countAdmins()) === 0;
  const command = `npx sluice admin create-user ${[...sameDatabaseFlags(opts), ""].join(" ")}--username <name> --password <password> --role admin`;
  const issues = needsAdmin && (!worker || worker.issuesSetup);
  const setup = issues ? service.context.setup.issue() : undefined;
  worker?.onSetupToken((token, expiresAt) => service.context.setup.adopt(token, expiresAt));
  if (issues)
    logger.warn(
      `No admin user exists yet. Open the setup link printed on this node's terminal (stderr), or run: ${command}`,
    );
  return needsAdmin ? { command, setup } : undefined;
}

/**
 * Shuts the service down on SIGTERM (and SIGINT, outside a worker), within `timeoutMs`, and
 * exits. A second signal exits at once. OpenTelemetry's SDK, when on, exports what it still
 * holds once the service has stopped (the last requests' spans and counts included).
 */
function stopOnSignals(
  service: Service,
  timeoutMs: number,
  logger: Logger,
  logs: LogDestination,
  worker: WorkerChannel | undefined,
  telemetry: OpenTelemetry | undefined,
): void {
  const flush = () =>
    telemetry
      ?.shutdown()
      .catch((err: unknown) => logger.warn({ err }, "OpenTelemetry: the last export failed"));
  let stopping = false;
  const stop = (signal: string) => {
    // A worker may be told twice (by the primary, and by a service manager that signals every
    // process of the group, as systemd does): it goes on with the same shutdown. The primary
    // kills it if that takes too long.
    if (stopping && worker) return;
    if (stopping) {
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, "shutting down: finishing in-flight requests");
    // The whole shutdown — requests in flight, stores, and writing out the log — ends by this
    // deadline. Nothing is left to run at exit, so the exit itself cannot hang.
    const timer = setTimeout(() => {
      logger.error({ timeoutMs }, "shutdown timed out; exiting");
      process.exit(1);
    }, timeoutMs);
    timer.unref();
    service.close().then(
      async () => {
        await flush();
        logger.info("stopped");
        await logs.drain();
        process.exit(0);
      },
      async (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        await flush();
        await logs.drain();
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  if (worker) {
    // A worker stops when the primary says (SIGTERM), or when the primary is gone. Ctrl-C in a
    // terminal reaches every process of the group: the primary handles it for all.
    process.on("SIGINT", () => undefined);
    worker.onPrimaryGone(() => stop("primary gone"));
  } else process.on("SIGINT", () => stop("SIGINT"));
}

/**
 * Says where the service listens: a line of the JSON log, and for the person who just started
 * it the same in words, on stderr (stdout is the JSON log). With workers, the primary prints the
 * first worker's, once they all listen.
 */
function announce(
  service: Service,
  config: ServerConfig,
  url: string,
  logger: Logger,
  admin: FirstAdmin | undefined,
  worker: WorkerChannel | undefined,
): void {
  const grpcPort = service.grpcPort();
  const grpc =
    grpcPort === undefined
      ? undefined
      : `${config.host.includes(":") ? `[${config.host}]` : config.host}:${grpcPort}`;
  logger.info(
    {
      url,
      ...(grpc ? { envoyRateLimitService: grpc } : {}),
      database: config.databaseUrl ? redactUrl(config.databaseUrl) : `sqlite ${config.dataDir}`,
      counters: config.redisUrl ? "redis" : "memory",
    },
    `sluice listening on ${url}`,
  );
  const { repo, counters } = service.context;
  const setup = admin?.setup;
  const banner = startBanner({
    url,
    host: config.host,
    database: `${repo.database.dialect} ${repo.database.location}`,
    counters: counters.kind,
    countersUnavailable: service.countersUnavailable,
    createAdmin: admin?.command,
    grpc,
    setupToken: setup?.token,
    workers: config.workers,
  });
  if (worker)
    worker.listening({
      banner,
      url,
      setup: setup ? { token: setup.token, expiresAt: setup.expiresAt.getTime() } : undefined,
    });
  else process.stderr.write(banner);
}

/** What `sluice serve` prints once it listens: where, the admin page, and what to do first. */
function startBanner(o: {
  url: string;
  host: string;
  database: string;
  counters: string;
  /** Why the counters could not decide at start (see `Service.countersUnavailable`). */
  countersUnavailable: string | undefined;
  createAdmin: string | undefined;
  /** host:port of the Envoy rate limit service, when on. */
  grpc: string | undefined;
  setupToken: string | undefined;
  /** Processes serving the ports (`--workers`). */
  workers: number;
}): string {
  // On a wildcard address, the page is reached through loopback on this machine.
  const wildcard = o.host === "0.0.0.0" || o.host === "::";
  const local = wildcard ? o.url.replace(/\/\/(0\.0\.0\.0|\[::\])/, "//127.0.0.1") : o.url;
  const lines = [
    "",
    `sluice is listening on ${o.url}${wildcard ? " (every interface)" : ""}`,
    `  admin page:    ${local}/admin/`,
    `  decision API:  POST ${local}/v1/limit   (reference: ${local}/openapi.json)`,
    ...(o.grpc
      ? [`  Envoy RLS:     gRPC ${o.grpc} (envoy.service.ratelimit.v3), POST ${local}/json`]
      : []),
    `  policies in:   ${o.database}`,
    `  counters in:   ${o.counters}${o.counters === "memory" ? " (this process only)" : ""}`,
    ...(o.countersUnavailable !== undefined
      ? [
          "",
          `The counters are UNAVAILABLE: ${o.countersUnavailable}.`,
          "Until they answer, each policy's onStoreError decides (allow by default: every request",
          "passes) and /readyz answers 503. Check the Redis address (--redis-url, SLUICE_REDIS_URL).",
        ]
      : []),
    ...(o.workers > 1 ? [`  workers:       ${o.workers} processes on the same ports`] : []),
    "",
    ...(o.createAdmin
      ? [
          "No admin user exists yet. Create the first one in the browser with this one-time link",
          "(it works once, on this node, for an hour):",
          `  ${local}/admin/#/setup?token=${o.setupToken ?? ""}`,
          "or here:",
          `  ${o.createAdmin}`,
          "",
        ]
      : []),
  ];
  return `${lines.join("\n")}\n`;
}
