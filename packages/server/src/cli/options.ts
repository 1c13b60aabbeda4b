/**
 * What the commands share: the configuration's flags (each key of the config file, with its
 * environment variable), the database they work on, and how they say what went wrong.
 */
import { type Command, Option } from "commander";
import { CONFIG_KEYS, type ServerConfig, loadConfig } from "../config.js";
import type { Repository } from "../repository.js";

const DESCRIPTIONS: Record<keyof typeof CONFIG_KEYS, string> = {
  port: "port to listen on (default 8080; 0 picks a free one)",
  host: "interface to listen on (default 127.0.0.1; 0.0.0.0 for all)",
  dataDir: "directory of the SQLite policy database (default ./.sluice-data)",
  databaseUrl:
    "postgres://…, mysql://… or mariadb://… to keep policies in PostgreSQL or MySQL/MariaDB instead of SQLite",
  redisUrl:
    "redis://…, redis-sentinel://h:p,h:p/master, or a comma list (Cluster) for shared counters",
  memoryMaxKeys:
    "most keys the memory counters hold; 70–350 B of heap each by algorithm, whatever the key's length (default 1000000)",
  logLevel: "fatal|error|warn|info|debug|trace|silent (default info)",
  pollIntervalMs: "how often to check the database for policy changes, ms (default 250)",
  shutdownTimeoutMs: "longest wait for in-flight requests on SIGTERM, ms (default 10000)",
  sessionTtl: "admin session lifetime, e.g. 12h (default 12h)",
  trustProxy:
    "proxies whose X-Forwarded-For is believed: a hop count (1: one load balancer), IPs/CIDRs/loopback,linklocal,uniquelocal, or true (every hop) (default false)",
  loginLimitPerUser: "failed sign-ins per username from one client IP per minute (default 5)",
  loginLimitPerIp: "failed sign-ins per client IP per minute (default 20)",
  bodyLimit: "largest request body in bytes, and largest gRPC request message (default 1048576)",
  maxBatch: "most requests in one batch (default 1000)",
  headersTimeoutMs: "longest wait for a request's headers, ms (default 10000)",
  requestTimeoutMs:
    "longest wait for a whole request, body included (HTTP and gRPC), ms (default 30000)",
  keepAliveTimeoutMs: "how long an idle kept-alive connection stays open, ms (default 72000)",
  maxConnections: "most open connections; more are closed on arrival (default 10000)",
  databaseTimeoutMs:
    "deadline of each SQL statement, connection and SQLite lock wait, ms (default 5000)",
  readinessTimeoutMs: "/readyz answers within this, naming what did not, ms (default 2000)",
  grpcPort:
    "serve Envoy's rate limit service (gRPC RLS v3) on this port, and POST /json (default: off)",
  envoyHeaders:
    "rate-limit headers the Envoy service returns: ietf|github|both|none (default ietf)",
  workers:
    "processes serving the same ports, or auto (one per core); more than 1 needs --redis-url (default 1)",
};

/** A configuration key: each is a flag of the commands that take it. */
export type Key = keyof typeof CONFIG_KEYS;
/** The keys that say where the database is. */
export const DB_KEYS: Key[] = ["dataDir", "databaseUrl"];

export function addConfigOptions(cmd: Command, keys: readonly Key[]): Command {
  cmd.option("-c, --config <file>", "config file (YAML or JSON; env SLUICE_CONFIG)");
  for (const key of keys) {
    const { flag, env } = CONFIG_KEYS[key];
    const value = key === "trustProxy" ? `${flag} [value]` : `${flag} <value>`;
    cmd.addOption(new Option(value, `${DESCRIPTIONS[key]} [env ${env.join(", ")}]`));
  }
  return cmd;
}

export function configFrom(opts: Record<string, unknown>, keys: readonly Key[]): ServerConfig {
  const flags: Record<string, unknown> = {};
  for (const key of keys) if (opts[key] !== undefined) flags[key] = opts[key];
  return loadConfig({
    flags,
    env: process.env,
    file: typeof opts.config === "string" ? opts.config : undefined,
  });
}

/** The flags that point a follow-up command at the same database. */
export function sameDatabaseFlags(opts: Record<string, unknown>): string[] {
  const out: string[] = [];
  if (typeof opts.config === "string") out.push(`--config ${shellQuote(opts.config)}`);
  if (typeof opts.dataDir === "string") out.push(`--data-dir ${shellQuote(opts.dataDir)}`);
  if (typeof opts.databaseUrl === "string") out.push(`--database-url '<the same URL>'`);
  return out;
}

/** Quotes a word for a POSIX shell when it needs it. */
function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** Says why on stderr and ends the command with `code`. */
export function fail(message: string, code = 1): never {
  process.stderr.write(`${message}\n`);
  process.exit(code);
}

/** Prints every problem of `subject`, one a line, on stderr. */
export function printIssues(
  subject: string,
  issues: readonly { path: string; message: string }[],
): void {
  process.stderr.write(
    `${subject}:\n${issues.map((i) => `  - ${i.path || "(file)"}: ${i.message}`).join("\n")}\n`,
  );
}

/** Runs `fn` with the repository of the configured database, closed after. */
export async function withRepo<T>(
  config: ServerConfig,
  fn: (repo: Repository) => Promise<T>,
): Promise<T> {
  const [{ openDatabase }, { Repository }] = await Promise.all([
    import("../db/connect.js"),
    import("../repository.js"),
  ]);
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    notice: (message) => process.stderr.write(`${message}\n`),
  });
  try {
    return await fn(new Repository(database));
  } finally {
    await database.close();
  }
}
