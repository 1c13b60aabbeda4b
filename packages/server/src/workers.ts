/**
 * `sluice serve --workers N`: N processes behind the same ports (node:cluster; the primary
 * accepts each connection and hands it to a worker in turn), for the HTTP API and the Envoy
 * gRPC service alike. Each worker is a whole node — its registry polling the database, its
 * connections to the database and to Redis, its readiness — so more than one needs counters in
 * Redis (the configuration refuses memory counters: every worker would count apart).
 *
 * The primary serves nothing itself. It starts the first worker alone (it migrates the
 * database and, when no admin exists, issues the one-time setup token, which every later worker
 * is given so that the link works whichever worker a browser reaches), then the others; prints
 * the start banner once they all listen; answers `/metrics` for the workers (the sum of every
 * worker's metrics, asked of each over IPC); replaces a worker that dies; and on SIGTERM or
 * SIGINT tells every worker to shut down gracefully, waiting for them all.
 */
import cluster, { type Worker } from "node:cluster";
import { AggregatorRegistry, type Registry } from "prom-client";
import type { Logger } from "pino";

/** What a worker tells the primary once it listens. */
interface ListeningMessage {
  readonly sluice: "listening";
  /** The start banner (the first worker's is printed). */
  readonly banner: string;
  readonly url: string;
  /** The setup token it issued (the first worker, when no admin exists). */
  readonly setup?: { readonly token: string; readonly expiresAt: number } | undefined;
}

/** A worker is listening for messages (one sent before would be lost). */
interface HelloMessage {
  readonly sluice: "hello";
}

/** A worker asks for the metrics of every worker. */
interface MetricsRequest {
  readonly sluice: "metrics";
  readonly id: number;
}

/** The primary's answer to a {@link MetricsRequest}. */
interface MetricsAnswer {
  readonly sluice: "metrics";
  readonly id: number;
  readonly text?: string;
  readonly error?: string;
}

/** The setup token every worker accepts. */
interface SetupMessage {
  readonly sluice: "setup";
  readonly token: string;
  readonly expiresAt: number;
}

type FromWorker = HelloMessage | ListeningMessage | MetricsRequest;
type ToWorker = MetricsAnswer | SetupMessage;

const isMessage = (m: unknown): m is { sluice: string } =>
  typeof m === "object" && m !== null && typeof (m as { sluice?: unknown }).sluice === "string";

/** The environment variable that tells the first worker to issue the setup token. */
const FIRST = "SLUICE_WORKER_FIRST";

/** This process is a worker of `sluice serve --workers`. */
export function isWorker(): boolean {
  return cluster.isWorker;
}

/** The worker side: what `sluice serve` does differently in a worker. */
export interface WorkerChannel {
  /** This worker's number (1, 2, …), for the log. */
  readonly id: number;
  /** Whether this worker issues the setup token (the first one), else it is given it. */
  readonly issuesSetup: boolean;
  /** Calls `adopt` with the setup token the primary passes on (now, or when it comes). */
  onSetupToken(adopt: (token: string, expiresAt: number) => void): void;
  /** Tells the primary this worker listens. */
  listening(message: Omit<ListeningMessage, "sluice">): void;
  /** Lets the primary read this worker's metrics (from `registry`). */
  shareMetrics(registry: Registry): void;
  /** The metrics of every worker, summed (`/metrics`). */
  metrics(): Promise<string>;
  /** Calls `stop` when the primary has gone (the IPC channel closed). */
  onPrimaryGone(stop: () => void): void;
}

/** Joins the primary (call once, early: the setup token may come at any time). */
export function workerChannel(): WorkerChannel {
  const worker = cluster.worker!;
  // prom-client's cluster support: the primary's AggregatorRegistry asks each worker for its
  // registries' metrics over IPC; making one here adds this worker's listener at once (a worker
  // still starting answers with no metrics rather than not at all).
  new AggregatorRegistry();
  const asked = new Map<number, { resolve: (t: string) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  let setup: SetupMessage | undefined;
  let adopt: ((token: string, expiresAt: number) => void) | undefined;
  process.on("message", (m: unknown) => {
    if (!isMessage(m)) return;
    const msg = m as ToWorker;
    if (msg.sluice === "metrics") {
      const waiting = asked.get(msg.id);
      asked.delete(msg.id);
      if (msg.text !== undefined) waiting?.resolve(msg.text);
      else waiting?.reject(new Error(msg.error ?? "no metrics"));
    } else if (msg.sluice === "setup") {
      setup = msg;
      adopt?.(msg.token, msg.expiresAt);
    }
  });
  const send = (m: FromWorker) => {
    if (process.connected) process.send!(m);
  };
  // Now the primary may send: the setup token, if there is one already, comes back.
  send({ sluice: "hello" });
  return {
    id: worker.id,
    issuesSetup: process.env[FIRST] === "1",
    onSetupToken(fn) {
      adopt = fn;
      if (setup) fn(setup.token, setup.expiresAt);
    },
    listening(message) {
      send({ sluice: "listening", ...message });
    },
    shareMetrics(registry) {
      AggregatorRegistry.setRegistries([registry]);
    },
    metrics() {
      return new Promise<string>((resolve, reject) => {
        const id = nextId++;
        const timer = setTimeout(() => {
          asked.delete(id);
          reject(new Error("the primary process did not answer within 5 s"));
        }, 5000);
        timer.unref();
        asked.set(id, {
          resolve: (t) => {
            clearTimeout(timer);
            resolve(t);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        });
        send({ sluice: "metrics", id });
      });
    },
    onPrimaryGone(stop) {
      process.once("disconnect", stop);
    },
  };
}

/** Options of {@link runPrimary}. */
export interface PrimaryOptions {
  readonly workers: number;
  readonly logger: Logger;
  /** The longest a worker's graceful shutdown may take (it is then killed). */
  readonly shutdownTimeoutMs: number;
  /** Writes the start banner (stderr). */
  readonly banner: (text: string) => void;
  /** Ends the process with this code once the log is written. */
  readonly exit: (code: number) => void;
}

/** Runs the primary process: see the module's comment. */
export function runPrimary(options: PrimaryOptions): void {
  const { logger, workers } = options;
  const aggregator = new AggregatorRegistry();
  let stopping = false;
  let started = 0;
  let banner: ListeningMessage | undefined;
  let setup: SetupMessage | undefined;
  /** Restarts in a row, for the backoff; reset when a worker has run a minute. */
  let restarts = 0;

  const fork = (first: boolean): Worker => {
    const w = cluster.fork(first ? { [FIRST]: "1" } : {});
    const born = Date.now();
    w.on("message", (m: unknown) => {
      if (!isMessage(m)) return;
      const msg = m as FromWorker;
      if (msg.sluice === "hello") {
        if (setup) w.send(setup);
      } else if (msg.sluice === "listening") onListening(w, msg);
      else if (msg.sluice === "metrics") {
        aggregator.clusterMetrics().then(
          (text) => w.isConnected() && w.send({ sluice: "metrics", id: msg.id, text }),
          (err: unknown) =>
            w.isConnected() && w.send({ sluice: "metrics", id: msg.id, error: String(err) }),
        );
      }
    });
    w.on("exit", (code, signal) => {
      if (stopping) return;
      if (started < workers) {
        // A worker that cannot start (the database, the port) will not start on a retry.
        logger.fatal({ worker: w.id, code, signal }, "a worker failed to start; stopping");
        stop("worker-failed", 1);
        return;
      }
      if (Date.now() - born > 60_000) restarts = 0;
      const delayMs = Math.min(30_000, 1000 * 2 ** restarts++);
      logger.error(
        { worker: w.id, code, signal, restartInMs: delayMs },
        "worker exited; replacing it",
      );
      setTimeout(() => {
        if (!stopping) fork(false);
      }, delayMs).unref();
    });
    return w;
  };

  const onListening = (w: Worker, msg: ListeningMessage) => {
    if (msg.setup && !setup) {
      setup = { sluice: "setup", ...msg.setup };
      for (const other of Object.values(cluster.workers ?? {}))
        if (other && other !== w && other.isConnected()) other.send(setup);
    }
    if (started >= workers) {
      logger.info({ worker: w.id }, "replacement worker listening");
      return;
    }
    started++;
    banner ??= msg;
    if (started === 1) for (let i = 1; i < workers; i++) fork(false);
    if (started === workers) {
      logger.info(
        { url: msg.url, workers },
        `sluice listening on ${msg.url} with ${workers} workers`,
      );
      options.banner(banner.banner);
    }
  };

  const stop = (signal: string, code = 0) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down: stopping every worker");
    const live = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w);
    let failed = code !== 0;
    const exits = live.map(
      (w) =>
        new Promise<void>((resolve) => {
          if (w.isDead()) return resolve();
          w.once("exit", (c) => {
            if (c !== 0) failed = true;
            resolve();
          });
          w.process.kill("SIGTERM");
        }),
    );
    // Each worker ends by its own shutdown deadline; a margin more, and it is killed.
    const timer = setTimeout(() => {
      for (const w of live) if (!w.isDead()) w.process.kill("SIGKILL");
      failed = true;
    }, options.shutdownTimeoutMs + 2000);
    timer.unref();
    void Promise.all(exits).then(() => {
      clearTimeout(timer);
      logger.info({ code: failed ? 1 : 0 }, "stopped");
      options.exit(failed ? 1 : 0);
    });
  };

  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  logger.info({ workers }, `starting ${workers} workers`);
  fork(true);
}
