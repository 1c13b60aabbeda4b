/**
 * The `sluice` command: `serve`, `admin create-user|set-password`, `policy export|import|validate`,
 * `check`, `key peek|reset`.
 */
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import type { ValidationIssue } from "sluice";
import { Command, Option } from "commander";
import { ZodError } from "zod";
import type { Limiter } from "sluice";
import { passwordChangeSchema, userCreateSchema } from "@sluice/api";
import { CONFIG_KEYS, ConfigError, type ServerConfig, loadConfig, redactUrl } from "./config.js";
import { ApiError, zodIssues } from "./errors.js";
import { type PolicyDocument, documentToInput } from "./model.js";
import type { EnvoyDomainDocument } from "./envoy/config.js";
import { exportPolicyFile, parsePolicyFile } from "./policy-file.js";
import type { Repository } from "./repository.js";

// The server, database drivers and Redis client load only for the commands that use them, so
// `--help` and `policy validate` start fast.

const DESCRIPTIONS: Record<keyof typeof CONFIG_KEYS, string> = {
  port: "port to listen on (default 8080; 0 picks a free one)",
  host: "interface to listen on (default 127.0.0.1; 0.0.0.0 for all)",
  dataDir: "directory of the SQLite policy database (default ./.sluice-data)",
  databaseUrl:
    "postgres://…, mysql://… or mariadb://… to keep policies in PostgreSQL or MySQL/MariaDB instead of SQLite",
  redisUrl:
    "redis://…, redis-sentinel://h:p,h:p/master, or a comma list (Cluster) for shared counters",
  logLevel: "fatal|error|warn|info|debug|trace|silent (default info)",
  pollIntervalMs: "how often to check the database for policy changes, ms (default 250)",
  shutdownTimeoutMs: "longest wait for in-flight requests on SIGTERM, ms (default 10000)",
  sessionTtl: "admin session lifetime, e.g. 12h (default 12h)",
  trustProxy:
    "proxies whose X-Forwarded-For is believed: a hop count (1: one load balancer), IPs/CIDRs/loopback,linklocal,uniquelocal, or true (every hop) (default false)",
  loginLimitPerUser: "failed sign-ins per username from one client IP per minute (default 5)",
  loginLimitPerIp: "failed sign-ins per client IP per minute (default 20)",
  bodyLimit: "largest request body in bytes (default 1048576)",
  maxBatch: "most requests in one batch (default 1000)",
  headersTimeoutMs: "longest wait for a request's headers, ms (default 10000)",
  requestTimeoutMs: "longest wait for a whole request, body included, ms (default 30000)",
  keepAliveTimeoutMs: "how long an idle kept-alive connection stays open, ms (default 72000)",
  maxConnections: "most open connections; more are closed on arrival (default 10000)",
  databaseTimeoutMs:
    "deadline of each SQL statement, connection and SQLite lock wait, ms (default 5000)",
  readinessTimeoutMs: "/readyz answers within this, naming what did not, ms (default 2000)",
  grpcPort:
    "serve Envoy's rate limit service (gRPC RLS v3) on this port, and POST /json (default: off)",
  envoyHeaders:
    "rate-limit headers the Envoy service returns: ietf|github|both|none (default ietf)",
};

type Key = keyof typeof CONFIG_KEYS;
const DB_KEYS: Key[] = ["dataDir", "databaseUrl"];

function addConfigOptions(cmd: Command, keys: readonly Key[]): Command {
  cmd.option("-c, --config <file>", "config file (YAML or JSON; env SLUICE_CONFIG)");
  for (const key of keys) {
    const { flag, env } = CONFIG_KEYS[key];
    const value = key === "trustProxy" ? `${flag} [value]` : `${flag} <value>`;
    cmd.addOption(new Option(value, `${DESCRIPTIONS[key]} [env ${env.join(", ")}]`));
  }
  return cmd;
}

function configFrom(opts: Record<string, unknown>, keys: readonly Key[]): ServerConfig {
  const flags: Record<string, unknown> = {};
  for (const key of keys) if (opts[key] !== undefined) flags[key] = opts[key];
  return loadConfig({
    flags,
    env: process.env,
    file: typeof opts.config === "string" ? opts.config : undefined,
  });
}

/** The flags that point a follow-up command at the same database. */
function sameDatabaseFlags(opts: Record<string, unknown>): string[] {
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

function fail(message: string, code = 1): never {
  process.stderr.write(`${message}\n`);
  process.exit(code);
}

function printIssues(subject: string, issues: readonly { path: string; message: string }[]): void {
  process.stderr.write(
    `${subject}:\n${issues.map((i) => `  - ${i.path || "(file)"}: ${i.message}`).join("\n")}\n`,
  );
}

async function withRepo<T>(config: ServerConfig, fn: (repo: Repository) => Promise<T>): Promise<T> {
  const [{ openDatabase }, { Repository }] = await Promise.all([
    import("./db/connect.js"),
    import("./repository.js"),
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

async function serve(opts: Record<string, unknown>): Promise<void> {
  // The reader of stdout or stderr may go away while the service runs (`sluice serve 2>&1 |
  // head -n 1`, a log shipper restarted): a write to the closed pipe fails (EPIPE) and that
  // output is lost, but the service goes on. Without a listener the failed write of a start
  // line would throw from the stream and end the process.
  for (const out of [process.stdout, process.stderr]) out.on("error", () => undefined);
  const config = configFrom(opts, Object.keys(CONFIG_KEYS) as Key[]);
  const [{ pino }, { createService }, { fdDestination }] = await Promise.all([
    import("pino"),
    import("./service.js"),
    import("./log-destination.js"),
  ]);
  // Never blocks the process, whatever the reader of stdout does (see log-destination.ts).
  const logs = fdDestination(1);
  const logger = pino({ level: config.logLevel, base: { service: "sluice" } }, logs.stream);
  const service = await createService(config, { logger });
  const needsAdmin = (await service.context.repo.countAdmins()) === 0;
  const createAdmin = `npx sluice admin create-user ${[...sameDatabaseFlags(opts), ""].join(" ")}--username <name> --password <password> --role admin`;
  // The one-time setup token goes to the terminal only (stderr), never to the JSON log.
  const setup = needsAdmin ? service.context.setup.issue() : undefined;
  if (needsAdmin)
    logger.warn(
      `No admin user exists yet. Open the setup link printed on this node's terminal (stderr), or run: ${createAdmin}`,
    );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, "shutting down: finishing in-flight requests");
    // The whole shutdown — requests in flight, stores, and writing out the log — ends by this
    // deadline. Nothing is left to run at exit, so the exit itself cannot hang.
    const timer = setTimeout(() => {
      logger.error({ timeoutMs: config.shutdownTimeoutMs }, "shutdown timed out; exiting");
      process.exit(1);
    }, config.shutdownTimeoutMs);
    timer.unref();
    service.close().then(
      async () => {
        logger.info("stopped");
        await logs.drain();
        process.exit(0);
      },
      async (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        await logs.drain();
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  const url = await service.listen();
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
  // For the person who just started it: the same in words, on stderr (stdout is the JSON log).
  process.stderr.write(
    startBanner({
      url,
      host: config.host,
      database: `${service.context.repo.database.dialect} ${service.context.repo.database.location}`,
      counters: service.context.counters.kind,
      createAdmin: needsAdmin ? createAdmin : undefined,
      grpc,
      setupToken: setup?.token,
    }),
  );
}

/** What `sluice serve` prints once it listens: where, the admin page, and what to do first. */
function startBanner(o: {
  url: string;
  host: string;
  database: string;
  counters: string;
  createAdmin: string | undefined;
  /** host:port of the Envoy rate limit service, when on. */
  grpc: string | undefined;
  setupToken: string | undefined;
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

/** Builds the command-line program. */
export function program(): Command {
  const cli = new Command("sluice")
    .description("sluice: rate-limit decision service, policy store and admin")
    .showHelpAfterError()
    .configureHelp({ sortSubcommands: false });

  addConfigOptions(
    cli.command("serve").description("start the decision and admin API (Fastify)"),
    Object.keys(CONFIG_KEYS) as Key[],
  ).action(serve);

  const admin = cli.command("admin").description("manage admin users directly in the database");
  addConfigOptions(
    admin
      .command("create-user")
      .description("create an admin user (the first admin is made this way)")
      .requiredOption("--username <name>", "username")
      .option(
        "--password <password>",
        "password (at least 8 characters; or env SLUICE_ADMIN_PASSWORD)",
      )
      .option("--role <role>", "viewer | owner | admin", "admin")
      .option("--apps <apps>", "owner: comma-separated apps the user owns"),
    DB_KEYS,
  ).action(async (opts: Record<string, unknown>) => {
    const config = configFrom(opts, DB_KEYS);
    const input = {
      username: opts.username,
      password: opts.password ?? process.env.SLUICE_ADMIN_PASSWORD,
      role: opts.role,
      ...(typeof opts.apps === "string" ? { apps: opts.apps.split(",").filter(Boolean) } : {}),
    };
    const r = userCreateSchema.safeParse(input);
    if (!r.success) {
      printIssues(
        "Invalid user",
        zodIssues(r.error, "", input).map((i) => ({ ...i, path: `--${i.path}` })),
      );
      process.exit(1);
    }
    const user = await withRepo(config, (repo) =>
      repo.createUser({ ...r.data, apps: r.data.apps ?? [] }, "cli"),
    ).catch((err: unknown) => {
      // The database's refusals name fields (`apps.0`); here they are flags (`--apps`).
      if (!(err instanceof ApiError) || !err.issues) throw err;
      printIssues(
        err.subject ?? "Invalid user",
        err.issues.map((i) => ({ ...i, path: `--${i.path.split(".")[0] ?? ""}` })),
      );
      process.exit(1);
    });
    process.stdout.write(`created ${user.role} "${user.username}"\n`);
  });

  addConfigOptions(
    admin
      .command("set-password")
      .description(
        "set a user's password directly in the database (a locked-out admin); their sessions end",
      )
      .requiredOption("--username <name>", "username")
      .option(
        "--password <password>",
        "the new password (at least 8 characters; or env SLUICE_ADMIN_PASSWORD)",
      ),
    DB_KEYS,
  ).action(async (opts: Record<string, unknown>) => {
    const config = configFrom(opts, DB_KEYS);
    const password = opts.password ?? process.env.SLUICE_ADMIN_PASSWORD;
    const r = passwordChangeSchema.shape.newPassword.safeParse(password);
    if (!r.success) {
      printIssues(
        "Invalid password",
        zodIssues(r.error, "", password).map((i) => ({ ...i, path: "--password" })),
      );
      process.exit(1);
    }
    const username = String(opts.username);
    await withRepo(config, async (repo) => {
      if (!(await repo.getUser(username))) fail(`unknown user "${username}"`);
      await repo.updateUser(username, { password: r.data }, "cli", { via: "cli" });
    });
    process.stdout.write(`password of "${username}" set; their sessions have ended\n`);
  });

  const policy = cli
    .command("policy")
    .description(
      "export, import and validate policy files (YAML, for GitOps) and Envoy rate limit service files",
    );
  addConfigOptions(
    policy
      .command("export")
      .description(
        "write every policy as a YAML policy file (--envoy: every Envoy domain in the reference format)",
      )
      .option(
        "-o, --output <file|dir>",
        "write to a file instead of stdout (--envoy: a directory, created if missing, with one <domain>.yaml each; a path ending in .yaml/.yml is one file)",
      )
      .option("--envoy", "export the Envoy domains (the reference rate limit service's files)"),
    DB_KEYS,
  ).action(async (opts: Record<string, unknown>) => {
    const config = configFrom(opts, DB_KEYS);
    const output = typeof opts.output === "string" ? opts.output : undefined;
    if (opts.envoy) {
      const { exportEnvoyYaml } = await import("./envoy/config.js");
      const docs = await withRepo(config, async (repo) =>
        (await repo.envoyDomains.list()).map((r) => r.doc),
      );
      // The reference service reads one domain per file: a directory unless a .yaml file is named.
      if (output !== undefined && (isDirectory(output) || !/\.ya?ml$/i.test(output))) {
        mkdirSync(output, { recursive: true });
        const used = new Set<string>();
        for (const d of docs) {
          const base = d.domain.replace(/[^A-Za-z0-9._-]/g, "_");
          let name = `${base}.yaml`;
          for (let i = 2; used.has(name); i++) name = `${base}-${i}.yaml`;
          used.add(name);
          writeFileSync(join(output, name), exportEnvoyYaml(d));
        }
        process.stdout.write(`wrote ${docs.length} domain file(s) to ${output}\n`);
        return;
      }
      const text = docs.map((d) => exportEnvoyYaml(d)).join("---\n");
      if (output !== undefined) {
        writeFileSync(output, text);
        process.stdout.write(`wrote ${docs.length} domain(s) to ${output}\n`);
      } else process.stdout.write(text);
      return;
    }
    const text = await withRepo(config, async (repo) =>
      exportPolicyFile((await repo.policies.list()).map((r) => r.doc)),
    );
    if (output !== undefined) writeFileSync(output, text);
    else process.stdout.write(text);
  });
  addConfigOptions(
    policy
      .command("import <file|dir>")
      .description(
        "validate every policy and Envoy domain in the file (or the directory's .yaml/.yml/.json files), then apply them in one transaction (nothing changes on any error)",
      )
      .option(
        "--prune",
        "delete what the import does not hold: policies if it holds policy files, Envoy domains if it holds Envoy files",
      )
      .option("--dry-run", "print what would change; change nothing")
      .option("--actor <name>", "name recorded in the audit log", "cli"),
    DB_KEYS,
  ).action(async (path: string, opts: Record<string, unknown>) => {
    const config = configFrom(opts, DB_KEYS);
    const input = await readImport(path);
    if ("issues" in input) {
      printIssues(`${path}: import refused, nothing was changed`, input.issues);
      process.exit(1);
    }
    const prune = opts.prune === true;
    const dry = opts.dryRun === true;
    const { policies, domains } = input;
    const plans = await withRepo(config, async (repo) =>
      dry
        ? {
            ...(policies ? { policies: await repo.policies.planImport(policies, prune) } : {}),
            ...(domains ? { domains: await repo.envoyDomains.planImport(domains, prune) } : {}),
          }
        : repo.importAll({ policies, domains }, String(opts.actor), { prune }),
    );
    const verb = dry ? "would " : "";
    const describePlan = (
      what: string,
      plan: { create: string[]; update: string[]; delete: string[]; unchanged: string[] },
    ) =>
      `${dry ? "dry run: " : ""}${what}${verb}create ${plan.create.length}, ${verb}update ${plan.update.length}, ${verb}delete ${plan.delete.length}, unchanged ${plan.unchanged.length}\n` +
      [
        ...plan.create.map((n) => `  + ${n}`),
        ...plan.update.map((n) => `  ~ ${n}`),
        ...plan.delete.map((n) => `  - ${n}`),
      ]
        .map((l) => `${l}\n`)
        .join("");
    if (plans.policies) process.stdout.write(describePlan("", plans.policies));
    if (plans.domains) process.stdout.write(describePlan("Envoy domains: ", plans.domains));
  });
  policy
    .command("validate <file|dir>")
    .description(
      "check a policy file or Envoy rate limit service file (or a directory of them) without touching any database",
    )
    .action(async (path: string) => {
      const input = await readImport(path);
      if ("issues" in input) {
        printIssues(`${path} is invalid`, input.issues);
        process.exit(1);
      }
      const parts = [];
      const n = input.policies?.length;
      if (n !== undefined) parts.push(`${n} valid ${n === 1 ? "policy" : "policies"}`);
      const d = input.domains?.length;
      if (d !== undefined) parts.push(`${d} valid Envoy ${d === 1 ? "domain" : "domains"}`);
      process.stdout.write(`${path}: ${parts.join(", ")}\n`);
    });

  addConfigOptions(
    cli
      .command("check <policy> <key>")
      .description(
        "decide one request against the shared counters (--redis-url) and print the decision (exit 0 allowed, 2 denied)",
      )
      .option("--cost <n>", "units to charge", "1")
      .option("--peek", "do not charge; show what a request of --cost units would get")
      .option(
        "--memory",
        "without Redis: decide on fresh counters in this process (what an unused key gets)",
      ),
    [...DB_KEYS, "redisUrl"],
  ).action(async (name: string, key: string, opts: Record<string, unknown>) => {
    const cost = Number(opts.cost);
    await withLimiter(opts, name, "check", async (limiter) => {
      const d = opts.peek ? await limiter.peek(key, { cost }) : await limiter.limit(key, { cost });
      process.stdout.write(`${JSON.stringify(d, null, 2)}\n`);
      process.exitCode = d.allowed ? 0 : 2;
    });
  });

  const keyCmd = cli
    .command("key")
    .description("look up and unblock one key of a policy on the shared counters (Redis)");
  addConfigOptions(
    keyCmd
      .command("peek <policy> <key>")
      .description(
        "what the key has left: the decision a cost-1 request would get (charges nothing)",
      ),
    [...DB_KEYS, "redisUrl"],
  ).action(async (name: string, key: string, opts: Record<string, unknown>) => {
    await withLimiter(opts, name, "key peek", async (limiter) => {
      const d = await limiter.peek(key);
      process.stdout.write(`${JSON.stringify(d, null, 2)}\n`);
    });
  });
  addConfigOptions(
    keyCmd
      .command("reset <policy> <key>")
      .description("unblock the key: reset its counters (recorded in the audit log)")
      .option("--actor <name>", "name recorded in the audit log", "cli"),
    [...DB_KEYS, "redisUrl"],
  ).action(async (name: string, key: string, opts: Record<string, unknown>) => {
    await withLimiter(opts, name, "key reset", async (limiter, repo) => {
      const before = await limiter.peek(key);
      await limiter.reset(key);
      const after = await limiter.peek(key);
      const brief = (d: typeof before) => ({
        allowed: d.allowed,
        remaining: d.remaining,
        retryAfterMs: d.retryAfterMs,
      });
      await repo.recordAudit(String(opts.actor), "key.reset", "policy", name, {
        key,
        counters: "redis",
        via: "cli",
        before: brief(before),
        after: brief(after),
      });
      process.stdout.write(
        `reset "${key}" under "${name}": ${after.remaining} of ${after.limit} left (was ${before.remaining}${before.allowed ? "" : ", denied"})\n`,
      );
    });
  });

  return cli;
}

/**
 * Runs `fn` with a limiter of the stored policy `name` on the shared counters (Redis). Without a
 * Redis URL it refuses: a service's memory counters live inside its own process, and fresh ones
 * here would say nothing about them — except for `check --memory`, which asks for exactly that.
 */
async function withLimiter(
  opts: Record<string, unknown>,
  name: string,
  command: string,
  fn: (limiter: Limiter, repo: Repository) => Promise<void>,
): Promise<void> {
  const config = configFrom(opts, [...DB_KEYS, "redisUrl"]);
  if (!config.redisUrl && !(command === "check" && opts.memory === true)) {
    fail(
      [
        `sluice ${command}: no Redis given (--redis-url or REDIS_URL).`,
        "A service with memory counters keeps them inside its own process: this command cannot",
        "see them, and fresh counters here would say nothing about them.",
        command === "check"
          ? "Pass --redis-url to decide on the shared counters, or --memory to try the policy on fresh counters in this process."
          : "Pass --redis-url to use the shared counters, or use the admin page or API of the node (its Keys page, GET /v1/admin/policies/{name}/key).",
      ].join("\n"),
    );
  }
  const { createLimiter, definePolicy, memoryStore } = await import("sluice");
  const [{ openCounters }, { createMetrics }] = await Promise.all([
    import("./counters.js"),
    import("./metrics.js"),
  ]);
  await withRepo(config, async (repo) => {
    const rec = await repo.policies.get(name);
    if (!rec) fail(`unknown policy "${name}"`, 1);
    const counters = config.redisUrl
      ? openCounters({ redisUrl: config.redisUrl, metrics: createMetrics() })
      : { store: memoryStore(), close: () => Promise.resolve() };
    try {
      let storeError: unknown;
      const limiter = createLimiter({
        store: counters.store,
        policy: definePolicy(documentToInput(rec.doc)),
        onError: (err) => (storeError ??= err),
      });
      await fn(limiter, repo);
      // `check` prints what the policy's onStoreError decided; the key commands report the failure.
      if (storeError !== undefined && command !== "check")
        fail(
          `sluice ${command}: the counter store failed: ${storeError instanceof Error ? storeError.message : String(storeError)}`,
        );
    } finally {
      await counters.close();
    }
  });
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * What `policy import` and `validate` read: one file (`-`: stdin) or every .yaml/.yml/.json file
 * of a directory, each a sluice policy file or an Envoy rate limit service file (it has `domain`).
 * Issues are prefixed with the file's name when a directory is read.
 */
async function readImport(path: string): Promise<
  | {
      policies: PolicyDocument[] | undefined;
      domains: EnvoyDomainDocument[] | undefined;
    }
  | { issues: ValidationIssue[] }
> {
  const { looksLikeEnvoyFile, parseEnvoyFile } = await import("./envoy/config.js");
  const { parseAllDocuments } = await import("yaml");
  const dir = path !== "-" && isDirectory(path);
  const files = dir
    ? readdirSync(path)
        .filter((f) => /\.(ya?ml|json)$/i.test(f))
        .sort()
        .map((f) => join(path, f))
    : [path];
  if (dir && files.length === 0)
    return { issues: [{ path: "", message: "holds no .yaml, .yml or .json file" }] };
  let policies: PolicyDocument[] | undefined;
  let domains: EnvoyDomainDocument[] | undefined;
  const issues: ValidationIssue[] = [];
  const policyFrom = new Map<string, string>();
  const domainFrom = new Map<string, string>();
  for (const file of files) {
    const text = readText(file);
    const at = (p: string) => (dir ? (p ? `${basename(file)}: ${p}` : basename(file)) : p);
    // Only to tell the two formats apart (the first document that holds something); each
    // parser then reports its own errors.
    let first: unknown;
    try {
      for (const d of parseAllDocuments(text)) {
        first = d.toJS();
        if (first !== null && first !== undefined) break;
      }
    } catch {
      first = undefined;
    }
    if (looksLikeEnvoyFile(first)) {
      const r = parseEnvoyFile(text);
      if ("issues" in r) {
        issues.push(...r.issues.map((i) => ({ ...i, path: at(i.path) })));
        continue;
      }
      for (const d of r.docs) {
        const seen = domainFrom.get(d.domain);
        if (seen !== undefined)
          issues.push({
            path: at("domain"),
            message: `duplicate domain '${d.domain}' (also in ${seen})`,
          });
        domainFrom.set(d.domain, basename(file));
      }
      domains = [...(domains ?? []), ...r.docs];
    } else {
      const r = parsePolicyFile(text);
      if ("issues" in r) {
        issues.push(...r.issues.map((i) => ({ ...i, path: at(i.path) })));
        continue;
      }
      for (const d of r.docs) {
        const seen = policyFrom.get(d.name);
        if (seen !== undefined && dir)
          issues.push({
            path: at("policies"),
            message: `policy "${d.name}" is also defined in ${seen}`,
          });
        policyFrom.set(d.name, basename(file));
      }
      policies = [...(policies ?? []), ...r.docs];
    }
  }
  return issues.length > 0 ? { issues } : { policies, domains };
}

function readText(file: string): string {
  try {
    return file === "-" ? readFileSync(0, "utf8") : readFileSync(file, "utf8");
  } catch (err) {
    return fail(`cannot read ${file}: ${(err as Error).message}`);
  }
}

async function main(): Promise<void> {
  try {
    await program().parseAsync(process.argv);
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    if (err instanceof ApiError && err.issues && err.subject !== undefined) {
      printIssues(err.subject, err.issues);
      process.exit(1);
    }
    if (err instanceof ApiError) fail(err.message);
    if (err instanceof ZodError) fail(err.message);
    fail(`sluice: ${err instanceof Error ? err.message : String(err)}`);
  }
}

void main();
