/**
 * Helpers of the server suites: a service started in this process on a free loopback port,
 * `sluice` CLI processes spawned from the sources, and a small HTTP client.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Logger, pino } from "pino";
import { type Service, createService, loadConfig } from "../src/index.js";
import { freePort, waitFor } from "../../../test/support/ports.js";

/** The repository root. */
export const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** A JSON response (bodies are `any`: tests reach into them freely). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export interface Res<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

/** Calls the API: JSON in, JSON (or text) out. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function call<T = any>(
  base: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; raw?: string; contentType?: string } = {},
): Promise<Res<T>> {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.raw !== undefined) {
    body = options.raw;
    headers["content-type"] = options.contentType ?? "application/json";
  } else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] = "application/json";
  }
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body } : {}),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON
  }
  return { status: res.status, headers: res.headers, body: parsed as T };
}

/**
 * Two requests on one connection around the start of `t.close()`: `first` (its head, then its
 * body in two parts) is in flight when the service starts closing — its head has reached the
 * server, the rest of its body comes after — and `second` is sent behind it once the service
 * no longer listens. Resolves to the raw answers, in order. Nothing waits on a timer: the
 * server's `request` event says the first is in flight, and the wait for the listener to close
 * is turns of the event loop.
 */
export async function requestsAroundClose(
  t: TestService,
  first: { head: string; body: string },
  second: string,
): Promise<string[]> {
  const server = t.service.app.server;
  const socket = connect(Number(new URL(t.url).port), "127.0.0.1");
  let raw = "";
  socket.on("data", (d: Buffer) => (raw += d.toString()));
  const ended = once(socket, "end");
  await once(socket, "connect");
  const taken = once(server, "request");
  socket.write(`${first.head}${first.body.slice(0, 5)}`);
  await taken;
  const closed = t.close();
  while (server.listening) await new Promise((resolve) => setImmediate(resolve));
  socket.write(`${first.body.slice(5)}${second}`);
  await ended;
  await closed;
  return raw.split(/(?=HTTP\/1\.1 )/);
}

/** A pino logger whose JSON lines are kept in `lines` (for tests that read the log). */
export function captureLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "info" },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}

/** Signs in at the service at `url` (by default as the admin `root`); the session token. */
export async function signIn(
  url: string,
  username = "root",
  password = "root-password",
): Promise<string> {
  const r = await call(url, "POST", "/v1/admin/login", { body: { username, password } });
  if (r.status !== 200) throw new Error(`login ${username}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.token as string;
}

/** A service running in this process, with an admin signed in. */
export interface TestService {
  readonly url: string;
  readonly service: Service;
  readonly dataDir: string;
  /** Session token of the admin `root`. */
  readonly adminToken: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  call<T = any>(
    method: string,
    path: string,
    options?: { token?: string; body?: unknown; raw?: string; contentType?: string },
  ): Promise<Res<T>>;
  /** Creates an app (as admin) and returns its API key. */
  createApp(name: string): Promise<string>;
  /** Creates a user and signs them in; returns the session token. */
  createUser(
    username: string,
    role: "viewer" | "owner" | "admin",
    apps?: string[],
  ): Promise<string>;
  /** Creates a policy as admin (it is live on return). */
  createPolicy(doc: Record<string, unknown>): Promise<void>;
  /** Waits until this node runs the latest revision. */
  sync(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Password hashing cost in the suites: cheap, so that the many users and sign-ins of the
 * suites take milliseconds. The service's default (N=2^17) is tested on its own (sign-in.test.ts).
 */
export const TEST_SCRYPT = { N: 2 ** 10, r: 8, p: 1 } as const;

/** Starts a service in this process (SQLite in a temp dir unless `databaseUrl`). */
export async function startService(
  options: {
    databaseUrl?: string;
    redisUrl?: string;
    values?: Record<string, unknown>;
    /** Password hashing cost (default {@link TEST_SCRYPT}). */
    scrypt?: { N: number; r: number; p: number };
    /** An existing data directory (default: a new temp dir, removed on close). */
    dataDir?: string;
    /** The service's logger (default: silent). */
    logger?: Logger;
    /** The service's clock (default: the real one): counters, headers, traffic history, setup token. */
    now?: () => number;
    /** This node's id in the traffic tables. */
    nodeId?: string;
    /** Leave the database without the admin `root` (`adminToken` is then empty). */
    noAdmin?: boolean;
  } = {},
): Promise<TestService> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "sluice-server-"));
  const config = loadConfig({
    values: {
      port: 0,
      host: "127.0.0.1",
      dataDir,
      logLevel: "silent",
      pollIntervalMs: 100,
      ...options.values,
      ...(options.databaseUrl ? { databaseUrl: options.databaseUrl } : {}),
      ...(options.redisUrl ? { redisUrl: options.redisUrl } : {}),
    },
  });
  const service = await createService(config, {
    logger: options.logger ?? pino({ level: "silent" }),
    scrypt: options.scrypt ?? TEST_SCRYPT,
    ...(options.now ? { now: options.now } : {}),
    ...(options.nodeId ? { nodeId: options.nodeId } : {}),
  });
  const url = await service.listen();
  const repo = service.context.repo;
  if (!options.noAdmin && !(await repo.getUser("root")))
    await repo.createUser(
      { username: "root", password: "root-password", role: "admin", apps: [] },
      "test",
    );
  const login = (username: string, password: string) => signIn(url, username, password);
  const adminToken = options.noAdmin ? "" : await signIn(url);
  const sync = async () => {
    await service.context.registry.poll();
  };
  return {
    url,
    service,
    dataDir,
    adminToken,
    call: (method, path, o = {}) => call(url, method, path, { token: adminToken, ...o }),
    async createApp(name) {
      const r = await call(url, "POST", "/v1/admin/apps", { token: adminToken, body: { name } });
      if (r.status !== 201) throw new Error(`createApp: ${r.status} ${JSON.stringify(r.body)}`);
      await sync();
      return r.body.apiKey as string;
    },
    async createUser(username, role, apps) {
      const r = await call(url, "POST", "/v1/admin/users", {
        token: adminToken,
        body: { username, password: `${username}-password`, role, ...(apps ? { apps } : {}) },
      });
      if (r.status !== 201) throw new Error(`createUser: ${r.status} ${JSON.stringify(r.body)}`);
      return login(username, `${username}-password`);
    },
    async createPolicy(doc) {
      const r = await call(url, "POST", "/v1/admin/policies", { token: adminToken, body: doc });
      if (r.status !== 201) throw new Error(`createPolicy: ${r.status} ${JSON.stringify(r.body)}`);
      await sync();
    },
    sync,
    async close() {
      await service.close();
      if (options.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A `sluice` CLI process spawned from the sources (tsx), with its output collected. */
export interface CliProcess {
  readonly child: ChildProcess;
  /** stdout and stderr, as they came. */
  output(): string;
  /** stderr alone. */
  stderr(): string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

/** Spawns `sluice <args>` from the TypeScript sources (`sluice` itself from packages/sluice/src). */
export function spawnCli(args: string[], env: Record<string, string | undefined> = {}): CliProcess {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(ROOT, "packages/server/src/cli.ts"), ...args],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        TSX_TSCONFIG_PATH: join(ROOT, "packages/server/test/tsconfig.spawn.json"),
        SLUICE_LOG_LEVEL: "info",
        ...env,
      },
      stdio: ["pipe", "pipe", "pipe"],
    },
  );
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => {
    out += d.toString();
    err += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, output: () => out, stderr: () => err, exited };
}

/** Runs `sluice <args>` to completion. */
export async function runCli(
  args: string[],
  env: Record<string, string | undefined> = {},
  stdin?: string,
): Promise<{ code: number | null; output: string }> {
  const p = spawnCli(args, env);
  if (stdin !== undefined) p.child.stdin?.end(stdin);
  else p.child.stdin?.end();
  const code = await p.exited;
  return { code, output: p.output() };
}

/**
 * `sluice admin create-user` of the admin `root` (password `root-password`, as
 * {@link startService} makes it), with `args` before the user's flags (`--data-dir <dir>`).
 */
export function createRootWithCli(
  env: Record<string, string | undefined> = {},
  args: string[] = [],
): Promise<{ code: number | null; output: string }> {
  return runCli(
    [
      "admin",
      "create-user",
      ...args,
      "--username",
      "root",
      "--password",
      "root-password",
      "--role",
      "admin",
    ],
    env,
  );
}

/** A `sluice serve` process on a free port, ready to answer. */
export interface ServeProcess extends CliProcess {
  readonly url: string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Spawns `sluice serve` and waits for `/healthz`. */
export async function spawnServe(
  args: string[],
  env: Record<string, string | undefined> = {},
): Promise<ServeProcess> {
  const port = await freePort();
  const p = spawnCli(["serve", "--port", String(port), "--host", "127.0.0.1", ...args], env);
  const url = `http://127.0.0.1:${port}`;
  let code: number | null | undefined;
  void p.exited.then((c) => (code = c));
  await waitFor(
    async () => {
      if (code !== undefined) throw new Error(`sluice serve exited (${code}): ${p.output()}`);
      return (await fetch(`${url}/healthz`)).ok;
    },
    30_000,
    100,
  ).catch((err: unknown) => {
    p.child.kill("SIGKILL");
    throw new Error(`sluice serve did not start: ${String(err)}\n${p.output()}`);
  });
  return {
    ...p,
    url,
    async stop(signal = "SIGTERM") {
      if (code === undefined) p.child.kill(signal);
      return p.exited;
    },
  };
}
