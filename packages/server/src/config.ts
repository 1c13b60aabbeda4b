/**
 * Configuration: flags override environment variables, which override the config file (YAML or
 * JSON), which overrides the defaults. Validated once with zod into a frozen {@link ServerConfig};
 * every error names the field and where its value came from.
 */
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { resolve } from "node:path";
import { type Duration, ValidationError, formatDuration, parseDuration } from "sluice";
import { compileTrust } from "sluice/http";
import { parse as parseYaml } from "yaml";
import { z } from "zod";

/** The resolved, validated configuration. */
export interface ServerConfig {
  /** TCP port; 0 picks a free one. Default 8080. */
  readonly port: number;
  /** Interface to listen on. Default `127.0.0.1`. */
  readonly host: string;
  /** Directory of the SQLite policy database (`sluice.db`). Default `./.sluice-data`. */
  readonly dataDir: string;
  /**
   * `postgres://…` to keep policies in PostgreSQL, `mysql://…` or `mariadb://…` for MySQL or
   * MariaDB; unset: SQLite under `dataDir`.
   */
  readonly databaseUrl: string | undefined;
  /** `redis://…`, `redis-sentinel://h:p,h:p/master`, or a comma list (Cluster); unset: memory counters. */
  readonly redisUrl: string | undefined;
  /**
   * Most keys the memory counters hold (the memory store's `maxKeys`; unused with Redis). Each
   * costs 70–350 B of heap by algorithm, whatever its length (a key past 64 characters is held
   * by its digest). Default 1,000,000.
   */
  readonly memoryMaxKeys: number;
  /** pino level. Default `info`. */
  readonly logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /** How often each node checks the database for policy changes (ms). Default 250. */
  readonly pollIntervalMs: number;
  /** Longest a graceful shutdown waits for in-flight requests (ms). Default 10000. */
  readonly shutdownTimeoutMs: number;
  /** Lifetime of an admin session token (ms). Default 12 h. */
  readonly sessionTtlMs: number;
  /**
   * Which peers are proxies whose `X-Forwarded-For` is believed (for the client IP of the
   * sign-in limits), in the forms of sluice's `trustProxy`: `false` (none, the default), a hop
   * count (`1`: one load balancer), a list of IPs, CIDRs and the names `loopback`, `linklocal`,
   * `uniquelocal`, or `true` (every hop: the left-most address, which any client can write).
   */
  readonly trustProxy: boolean | number | readonly string[];
  /** Failed sign-ins allowed per username from one client IP per minute. Default 5. */
  readonly loginLimitPerUser: number;
  /** Failed sign-ins allowed per client IP per minute. Default 20. */
  readonly loginLimitPerIp: number;
  /** Largest request body (bytes). Default 1 MiB. */
  readonly bodyLimit: number;
  /** Most requests in one batch. Default 1000. */
  readonly maxBatch: number;
  /** Longest wait for a request's headers, from the first byte (ms). Default 10 000. */
  readonly headersTimeoutMs: number;
  /** Longest wait for a whole request, headers and body (ms); a slow body is cut off. Default 30 000. */
  readonly requestTimeoutMs: number;
  /** How long an idle kept-alive connection stays open (ms). Default 72 000. */
  readonly keepAliveTimeoutMs: number;
  /** Most open connections; more are closed as they arrive. Default 10 000. */
  readonly maxConnections: number;
  /** Deadline of each SQL statement, connection attempt and SQLite lock wait (ms). Default 5000. */
  readonly databaseTimeoutMs: number;
  /** `/readyz` answers within this; a dependency that has not answered by then is down (ms). Default 2000. */
  readonly readinessTimeoutMs: number;
  /**
   * Port of the Envoy rate limit service (gRPC, RLS v3) on `host`; 0 picks a free one. Unset
   * (the default): no gRPC server, and no `POST /json`.
   */
  readonly grpcPort: number | undefined;
  /**
   * The rate-limit headers the Envoy service asks Envoy to add (`response_headers_to_add`):
   * `ietf` (`RateLimit-Policy` / `RateLimit`, the default), `github` (`X-RateLimit-*`), `both`,
   * or `none`.
   */
  readonly envoyHeaders: "ietf" | "github" | "both" | "none";
  /**
   * Processes of `sluice serve` behind its ports (node:cluster), each a node of its own; `auto`
   * resolves to the machine's cores. More than one needs counters in Redis. Default 1.
   */
  readonly workers: number;
}

/** A configuration error: every bad field with where its value came from. */
export class ConfigError extends Error {
  /** Each problem: the field (`port`) and its message, which names the source. */
  readonly issues: readonly { path: string; message: string }[];
  constructor(issues: { path: string; message: string }[]) {
    super(`Invalid configuration:\n${issues.map((i) => `  - ${i.path}: ${i.message}`).join("\n")}`);
    this.name = "ConfigError";
    this.issues = issues;
  }
}

const int = (min: number, max: number) =>
  z.unknown().transform((v, ctx) => {
    const n = typeof v === "string" && /^\s*-?\d+\s*$/.test(v) ? Number(v) : v;
    if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > max) {
      ctx.addIssue({
        code: "custom",
        message: `must be an integer from ${min} to ${max} (got ${show(v)})`,
      });
      return z.NEVER;
    }
    return n;
  });

const duration = (minMs: number) =>
  z.unknown().transform((v, ctx) => {
    const raw = typeof v === "string" && /^\s*\d+\s*$/.test(v) ? Number(v) : v;
    let ms: number;
    try {
      ms = parseDuration(raw as Duration);
    } catch (err) {
      ctx.addIssue({
        code: "custom",
        message:
          err instanceof ValidationError ? (err.issues[0]?.message ?? err.message) : String(err),
      });
      return z.NEVER;
    }
    if (ms < minMs) {
      ctx.addIssue({
        code: "custom",
        message: `must be at least ${formatDuration(minMs)} (got ${show(v)})`,
      });
      return z.NEVER;
    }
    return ms;
  });

/**
 * `trustProxy`: true/false, a hop count, or a list (YAML list or comma-separated string) of
 * IPs, CIDRs and names, checked by sluice's own parser (`compileTrust`).
 */
const trustProxy = z.unknown().transform((v, ctx): boolean | number | readonly string[] => {
  let value: unknown = v;
  if (v === "true") value = true;
  else if (v === "false") value = false;
  else if (typeof v === "string" && /^\s*\d+\s*$/.test(v)) value = Number(v);
  else if (typeof v === "string")
    value = v
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
  const ok =
    typeof value === "boolean" ||
    (typeof value === "number" && Number.isInteger(value) && value >= 0) ||
    (Array.isArray(value) && value.length > 0 && value.every((x) => typeof x === "string"));
  if (!ok) {
    ctx.addIssue({
      code: "custom",
      message: `must be true, false, a hop count (0, 1, 2…) or a list of proxy IPs, CIDRs or the names loopback, linklocal, uniquelocal (got ${show(v)})`,
    });
    return z.NEVER;
  }
  try {
    compileTrust(value as boolean | number | string[]);
  } catch (err) {
    const issue = err instanceof ValidationError ? err.issues[0] : undefined;
    ctx.addIssue({ code: "custom", message: issue?.message ?? String(err) });
    return z.NEVER;
  }
  return Array.isArray(value)
    ? Object.freeze([...(value as string[])])
    : (value as boolean | number);
});

const nonEmpty = (what: string) =>
  z
    .string({ error: `must be a string (${what})` })
    .trim()
    .min(1, { error: "must not be empty" });

/** The schema of the configuration (camelCase keys, as in the config file). */
export const configSchema = z.object({
  port: int(0, 65535).default(8080),
  host: nonEmpty("an interface address").default("127.0.0.1"),
  dataDir: nonEmpty("a directory").default("./.sluice-data"),
  databaseUrl: nonEmpty("a URL")
    .refine((v) => /^(postgres(ql)?|mysql|mariadb):\/\//i.test(v), {
      error: "must be a postgres://, postgresql://, mysql:// or mariadb:// URL",
    })
    .refine((v) => !/^(mysql|mariadb):/i.test(v) || /^\w+:\/\/[^/]+\/[^/?#]+/.test(v), {
      error: "must name the database: mysql://user:password@host:3306/<database>",
    })
    .optional(),
  redisUrl: nonEmpty("a URL")
    .refine((v) => /^(rediss?|redis-sentinel):\/\//.test(v.split(",")[0]!) || v.includes(","), {
      error:
        "must be redis://…, rediss://…, redis-sentinel://host:port,host:port/master, or a comma list of cluster nodes",
    })
    .optional(),
  memoryMaxKeys: int(1, 100_000_000).default(1_000_000),
  logLevel: z
    .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"], {
      error: "must be one of fatal, error, warn, info, debug, trace, silent",
    })
    .default("info"),
  pollIntervalMs: int(20, 10_000).default(250),
  shutdownTimeoutMs: int(0, 600_000).default(10_000),
  sessionTtl: duration(60_000).default(12 * 3_600_000),
  trustProxy: trustProxy.default(false),
  loginLimitPerUser: int(1, 10_000).default(5),
  loginLimitPerIp: int(1, 100_000).default(20),
  bodyLimit: int(1024, 100 * 1024 * 1024).default(1024 * 1024),
  maxBatch: int(1, 100_000).default(1000),
  headersTimeoutMs: int(100, 600_000).default(10_000),
  requestTimeoutMs: int(100, 3_600_000).default(30_000),
  keepAliveTimeoutMs: int(100, 600_000).default(72_000),
  maxConnections: int(1, 1_000_000).default(10_000),
  databaseTimeoutMs: int(100, 600_000).default(5000),
  readinessTimeoutMs: int(100, 60_000).default(2000),
  grpcPort: int(0, 65535).optional(),
  envoyHeaders: z
    .enum(["ietf", "github", "both", "none"], { error: "must be one of ietf, github, both, none" })
    .default("ietf"),
  workers: z
    .unknown()
    .transform((v, ctx) => {
      if (v === "auto") return availableParallelism();
      const n = typeof v === "string" && /^\s*\d+\s*$/.test(v) ? Number(v) : v;
      if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 256) {
        ctx.addIssue({
          code: "custom",
          message: `must be auto (one per core) or an integer from 1 to 256 (got ${show(v)})`,
        });
        return z.NEVER;
      }
      return n;
    })
    .default(1),
});

/** Every configuration key with its flag and environment variable (for `--help` and the docs). */
export const CONFIG_KEYS: Record<
  keyof z.input<typeof configSchema>,
  { flag: string; env: string[] }
> = {
  port: { flag: "--port", env: ["PORT", "SLUICE_PORT"] },
  host: { flag: "--host", env: ["SLUICE_HOST"] },
  dataDir: { flag: "--data-dir", env: ["SLUICE_DATA_DIR"] },
  databaseUrl: { flag: "--database-url", env: ["DATABASE_URL"] },
  redisUrl: { flag: "--redis-url", env: ["REDIS_URL"] },
  memoryMaxKeys: { flag: "--memory-max-keys", env: ["SLUICE_MEMORY_MAX_KEYS"] },
  logLevel: { flag: "--log-level", env: ["SLUICE_LOG_LEVEL", "LOG_LEVEL"] },
  pollIntervalMs: { flag: "--poll-interval-ms", env: ["SLUICE_POLL_INTERVAL_MS"] },
  shutdownTimeoutMs: { flag: "--shutdown-timeout-ms", env: ["SLUICE_SHUTDOWN_TIMEOUT_MS"] },
  sessionTtl: { flag: "--session-ttl", env: ["SLUICE_SESSION_TTL"] },
  trustProxy: { flag: "--trust-proxy", env: ["SLUICE_TRUST_PROXY"] },
  loginLimitPerUser: { flag: "--login-limit-per-user", env: ["SLUICE_LOGIN_LIMIT_PER_USER"] },
  loginLimitPerIp: { flag: "--login-limit-per-ip", env: ["SLUICE_LOGIN_LIMIT_PER_IP"] },
  bodyLimit: { flag: "--body-limit", env: ["SLUICE_BODY_LIMIT"] },
  maxBatch: { flag: "--max-batch", env: ["SLUICE_MAX_BATCH"] },
  headersTimeoutMs: { flag: "--headers-timeout-ms", env: ["SLUICE_HEADERS_TIMEOUT_MS"] },
  requestTimeoutMs: { flag: "--request-timeout-ms", env: ["SLUICE_REQUEST_TIMEOUT_MS"] },
  keepAliveTimeoutMs: { flag: "--keep-alive-timeout-ms", env: ["SLUICE_KEEP_ALIVE_TIMEOUT_MS"] },
  maxConnections: { flag: "--max-connections", env: ["SLUICE_MAX_CONNECTIONS"] },
  databaseTimeoutMs: { flag: "--database-timeout-ms", env: ["SLUICE_DATABASE_TIMEOUT_MS"] },
  readinessTimeoutMs: { flag: "--readiness-timeout-ms", env: ["SLUICE_READINESS_TIMEOUT_MS"] },
  grpcPort: { flag: "--grpc-port", env: ["SLUICE_GRPC_PORT"] },
  envoyHeaders: { flag: "--envoy-headers", env: ["SLUICE_ENVOY_HEADERS"] },
  workers: { flag: "--workers", env: ["SLUICE_WORKERS"] },
};

/** Where configuration comes from; each part optional. */
export interface ConfigSources {
  /** Values from command-line flags, by config key (already camelCase). */
  flags?: Partial<Record<string, unknown>>;
  /** The environment (default: none; the CLI passes `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Path of a YAML or JSON config file (else `SLUICE_CONFIG` from `env`). */
  file?: string | undefined;
  /** Values given in code (lowest precedence after defaults), e.g. by tests. */
  values?: Partial<Record<string, unknown>>;
}

/**
 * Loads and validates the configuration. Throws a {@link ConfigError} naming every bad field
 * and the source of its value (`--port`, `env PORT`, `config.yaml`).
 */
export function loadConfig(sources: ConfigSources = {}): ServerConfig {
  const env = sources.env ?? {};
  const raw: Record<string, unknown> = {};
  const origin: Record<string, string> = {};
  const set = (key: string, value: unknown, from: string) => {
    if (value === undefined) return;
    raw[key] = value;
    origin[key] = from;
  };

  for (const [k, v] of Object.entries(sources.values ?? {})) set(k, v, "options");

  const file = sources.file ?? env.SLUICE_CONFIG;
  if (file) {
    const content = readConfigFile(file);
    for (const [k, v] of Object.entries(content)) set(k, v, file);
  }
  for (const [key, { env: names }] of Object.entries(CONFIG_KEYS)) {
    for (const name of [...names].reverse()) {
      const v = env[name];
      if (v !== undefined && v !== "") set(key, v, `env ${name}`);
    }
  }
  for (const [k, v] of Object.entries(sources.flags ?? {})) {
    const flag = (CONFIG_KEYS as Record<string, { flag: string } | undefined>)[k]?.flag ?? k;
    set(k, v, flag);
  }

  const issues: { path: string; message: string }[] = Object.keys(raw)
    .filter((k) => !(k in CONFIG_KEYS))
    .map((k) => ({
      path: k,
      message: `unknown configuration key (from ${origin[k]}); known keys: ${Object.keys(CONFIG_KEYS).join(", ")}`,
    }));
  const r = configSchema.safeParse(raw);
  if (!r.success) {
    for (const i of r.error.issues) {
      const key = String(i.path[0] ?? "");
      issues.push({
        path: key,
        message: `${i.message}${origin[key] ? ` (from ${origin[key]})` : ""}`,
      });
    }
  }
  if (r.success && r.data.headersTimeoutMs > r.data.requestTimeoutMs) {
    // Node refuses a headers timeout longer than the request timeout.
    issues.push({
      path: "headersTimeoutMs",
      message: `must not exceed requestTimeoutMs (${r.data.requestTimeoutMs}) (got ${r.data.headersTimeoutMs})${origin.headersTimeoutMs ? ` (from ${origin.headersTimeoutMs})` : ""}`,
    });
  }
  if (r.success && r.data.workers > 1 && r.data.redisUrl === undefined) {
    // Each worker is a node of its own: with memory counters every limit would be enforced by
    // each of them apart, N times over.
    issues.push({
      path: "workers",
      message: `${r.data.workers} workers need counters in Redis (redisUrl, --redis-url): with memory counters each worker would count on its own and let every limit through ${r.data.workers} times; use 1 worker, or set redisUrl${origin.workers ? ` (from ${origin.workers})` : ""}`,
    });
  }
  if (issues.length > 0 || !r.success) throw new ConfigError(issues);
  const c = r.data;
  return Object.freeze({
    port: c.port,
    host: c.host,
    dataDir: resolve(c.dataDir),
    databaseUrl: c.databaseUrl,
    redisUrl: c.redisUrl,
    memoryMaxKeys: c.memoryMaxKeys,
    logLevel: c.logLevel,
    pollIntervalMs: c.pollIntervalMs,
    shutdownTimeoutMs: c.shutdownTimeoutMs,
    sessionTtlMs: c.sessionTtl,
    trustProxy: c.trustProxy,
    loginLimitPerUser: c.loginLimitPerUser,
    loginLimitPerIp: c.loginLimitPerIp,
    bodyLimit: c.bodyLimit,
    maxBatch: c.maxBatch,
    headersTimeoutMs: c.headersTimeoutMs,
    requestTimeoutMs: c.requestTimeoutMs,
    keepAliveTimeoutMs: c.keepAliveTimeoutMs,
    maxConnections: c.maxConnections,
    databaseTimeoutMs: c.databaseTimeoutMs,
    readinessTimeoutMs: c.readinessTimeoutMs,
    grpcPort: c.grpcPort,
    envoyHeaders: c.envoyHeaders,
    workers: c.workers,
  });
}

function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError([
      { path: "config", message: `cannot read ${file}: ${(err as Error).message}` },
    ]);
  }
  let data: unknown;
  try {
    data = file.endsWith(".json") ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new ConfigError([
      {
        path: "config",
        message: `${file} is not valid ${file.endsWith(".json") ? "JSON" : "YAML"}: ${(err as Error).message}`,
      },
    ]);
  }
  if (data === null || data === undefined) return {};
  if (typeof data !== "object" || Array.isArray(data)) {
    throw new ConfigError([
      { path: "config", message: `${file} must hold a mapping of configuration keys` },
    ]);
  }
  return data as Record<string, unknown>;
}

function show(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (v === null) return "null";
  if (typeof v === "object") return Array.isArray(v) ? "a list" : "an object";
  return String(v);
}

/** The URL with any password replaced by `***`, for logs. */
export function redactUrl(url: string): string {
  return url.replace(/(\/\/[^:/@]*:)[^@/]*@/g, "$1***@");
}
