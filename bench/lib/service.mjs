// The service figure: `sluice serve` (POST /v1/limit, and the Envoy service's POST /json) vs a
// bare Fastify route, under autocannon; and the servers the gRPC figure (lib/grpc.mjs) starts.
/* global fetch */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCaseRetry } from "./children.mjs";
import { treeCpuMs } from "./h2load.mjs";
import { BENCH_DIR, ROOT, freePort, median, run, runVisible, sleep } from "./util.mjs";

const CLI = join(ROOT, "packages/server/dist/cli.js");
const POLICY = "bench";
/** The Envoy domain of the POST /json figure: the same GCRA of 1000 per minute as the policy. */
const DOMAIN = "bench";
/**
 * The Envoy domains `sluice serve` gets: `bench` (POST /json, many identifiers) and the gRPC
 * figure's `bench-h2` (h2load sends one request again and again: one identifier, with a limit
 * no run comes near, in the reference service's default fixed window).
 */
const DOMAINS = {
  [DOMAIN]: `domain: ${DOMAIN}
descriptors:
  - key: remote_address
    rate_limit:
      algorithm: gcra
      requests_per_unit: 1000
      unit: minute
`,
  "bench-h2": `domain: bench-h2
descriptors:
  - key: remote_address
    rate_limit:
      requests_per_unit: 1000000000
      unit: second
`,
};

/** Spawns a server process; resolves { child, stop } once `ready()` resolves true. */
export async function startServer(args, ready, env = {}) {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  let exited = false;
  child.on("exit", () => (exited = true));
  const stop = async () => {
    if (exited) return;
    child.kill("SIGTERM");
    await Promise.race([new Promise((r) => child.once("exit", r)), sleep(3000)]);
    if (!exited) child.kill("SIGKILL");
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (exited)
      throw new Error(`server exited: ${output.trim().split("\n").slice(-5).join(" | ")}`);
    if (await ready().catch(() => false)) return { child, stop, output: () => output };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`server did not become ready: ${output.trim().slice(-500)}`);
    }
    await sleep(100);
  }
}

async function postJson(url, body, token) {
  const headers = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

/** Builds packages/server when its dist is missing; false when that fails (not ready yet). */
export async function ensureServerBuilt(log) {
  if (existsSync(CLI)) return true;
  if (!existsSync(join(ROOT, "packages/server/src/cli.ts"))) return false;
  log("bench: building packages/server…");
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  return (
    (await runVisible(npm, ["run", "build", "-w", "packages/server"], { cwd: ROOT })) === 0 &&
    existsSync(CLI)
  );
}

/**
 * Starts `sluice serve` (SQLite in a temp dir; counters in the bench's Redis, or in memory;
 * `workers` processes), creates an admin, an app, a generous GCRA policy and the Envoy domains
 * through the admin API, and returns its URL, gRPC address, process id and the app's API key.
 */
export async function startSluice({ counters, redisPort, nodeArgs = [], workers = 1 }) {
  const dir = mkdtempSync(join(tmpdir(), "sluice-bench-serve-"));
  const common = ["--data-dir", dir];
  const created = await run(
    process.execPath,
    [CLI, "admin", "create-user", "--username", "bench"].concat([
      "--password",
      "bench-password",
      "--role",
      "admin",
      ...common,
    ]),
    { cwd: ROOT },
  );
  if (created.code !== 0)
    throw new Error(`admin create-user failed: ${created.stderr || created.stdout}`);
  const port = await freePort();
  const grpcPort = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const args = [
    ...nodeArgs,
    CLI,
    "serve",
    "--port",
    String(port),
    "--grpc-port",
    String(grpcPort),
    "--log-level",
    "warn",
    ...common,
  ];
  if (counters === "redis") args.push("--redis-url", `redis://127.0.0.1:${redisPort}`);
  if (workers !== 1) args.push("--workers", String(workers));
  const server = await startServer(
    args,
    async () => (await fetch(`${url}/v1/admin/me`)).status > 0,
  );
  try {
    const login = await postJson(`${url}/v1/admin/login`, {
      username: "bench",
      password: "bench-password",
    });
    if (login.status !== 200) throw new Error(`login: ${login.status} ${login.text}`);
    const admin = login.json.token;
    const app = await postJson(`${url}/v1/admin/apps`, { name: "bench" }, admin);
    if (app.status !== 201 && app.status !== 200)
      throw new Error(`create app: ${app.status} ${app.text}`);
    const apiKey = app.json.apiKey;
    const policy = {
      name: POLICY,
      algorithm: "gcra",
      rules: [{ limit: 1000, period: "1m" }],
      apps: ["bench"],
    };
    const p = await postJson(`${url}/v1/admin/policies`, policy, admin);
    if (p.status !== 201 && p.status !== 200)
      throw new Error(`create policy: ${p.status} ${p.text}`);
    // Policies reach the decision API within a poll interval.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const d = await postJson(`${url}/v1/limit`, { policy: POLICY, key: "warm-up" }, apiKey);
      if (d.status === 200 && d.json?.allowed === true) break;
      if (Date.now() > deadline) throw new Error(`POST /v1/limit: ${d.status} ${d.text}`);
      await sleep(100);
    }
    // The Envoy domains (the reference format, through the admin API).
    for (const [name, yaml] of Object.entries(DOMAINS)) {
      const put = await fetch(`${url}/v1/admin/envoy/domains/${name}`, {
        method: "PUT",
        headers: { "content-type": "application/yaml", authorization: `Bearer ${admin}` },
        body: yaml,
      });
      if (put.status !== 201)
        throw new Error(`create Envoy domain ${name}: ${put.status} ${await put.text()}`);
    }
    return {
      url,
      apiKey,
      pid: server.child.pid,
      grpcPort,
      metrics: async () => (await fetch(`${url}/metrics`)).text(),
      stop: async () => {
        await server.stop();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

export async function startBare() {
  let port;
  const child = spawn(process.execPath, [join(BENCH_DIR, "lib/bare-fastify.mjs"), "0"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise((resolve, reject) => {
    child.stdout.on("data", (d) => {
      const m = /LISTENING (\d+)/.exec(String(d));
      if (m) {
        port = Number(m[1]);
        resolve();
      }
    });
    child.on("exit", () => reject(new Error("bare Fastify server exited")));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid,
    stop: async () => {
      child.kill("SIGTERM");
      await Promise.race([new Promise((r) => child.once("exit", r)), sleep(2000)]);
    },
  };
}

/** The service figure's contestants, in table order: id → label. */
export const SERVICE_CONTESTANTS = {
  fastify: "bare Fastify route",
  sluice: "`sluice serve`, Redis counters",
  sluiceMemory: "`sluice serve`, memory counters",
  sluiceWorkers: "`sluice serve --workers 2`, Redis counters",
  json: "`sluice serve` POST /json (Envoy), Redis counters",
  jsonMemory: "`sluice serve` POST /json (Envoy), memory counters",
};

/**
 * Requests/s of `sluice serve` (Redis counters, memory counters, and Redis counters with
 * `workers` processes; POST /v1/limit, and on the first two the Envoy service's POST /json) and
 * of the bare Fastify route, every server started once and measured in `rounds` interleaved
 * rounds of `durationS` seconds (after `warmupS` seconds of warm-up each), same autocannon
 * settings. Each row: the median requests/s, the median of its rounds' ratios to the bare route
 * in the same round, and the median CPU per request of the server's processes (/proc) and of
 * autocannon. Resolves `{ skipped }` when the service cannot be built or started yet.
 */
export async function measureService({
  durationS,
  warmupS,
  rounds = 1,
  connections,
  distinct,
  workers = 1,
  redisPort,
  log,
}) {
  if (!(await ensureServerBuilt(log))) return { skipped: "not measured: service not ready" };
  const load = (target, seconds, domain) =>
    runCaseRetry("service", "load", {
      url: target.url,
      token: domain ? undefined : target.apiKey,
      policy: POLICY,
      domain,
      distinct,
      durationS: seconds,
      connections,
    });
  const out = { connections, durationS, warmupS, rounds };
  const servers = {};
  const starters = {
    bare: () => startBare(),
    redis: () => startSluice({ counters: "redis", redisPort }),
    memory: () => startSluice({ counters: "memory", redisPort }),
    ...(workers > 1
      ? { workers: () => startSluice({ counters: "redis", redisPort, workers }) }
      : {}),
  };
  // id → [server, domain (POST /json) or undefined (POST /v1/limit)]
  const plan = {
    fastify: ["bare"],
    sluice: ["redis"],
    json: ["redis", DOMAIN],
    sluiceMemory: ["memory"],
    jsonMemory: ["memory", DOMAIN],
    sluiceWorkers: ["workers"],
  };
  const samples = {};
  try {
    for (const [name, start] of Object.entries(starters)) {
      try {
        servers[name] = await start();
      } catch (err) {
        log(
          `\nbench: ${name === "bare" ? "bare Fastify" : `sluice serve (${name})`} not measured: ${err.message}`,
        );
      }
    }
    const ids = Object.keys(plan).filter((id) => servers[plan[id][0]] !== undefined);
    for (const id of Object.keys(plan))
      if (!ids.includes(id) && starters[plan[id][0]]) out[id] = { error: "server did not start" };
    // Warm up first: the JIT of a fresh server is not what is measured.
    if (warmupS > 0)
      for (const id of ids) await load(servers[plan[id][0]], warmupS, plan[id][1]).catch(() => {});
    for (let round = 1; round <= rounds; round++) {
      const base = {};
      for (const id of ids) {
        const [name, domain] = plan[id];
        const s = servers[name];
        try {
          const cpu0 = await treeCpuMs(s.pid);
          const r = await load(s, durationS, domain);
          const cpu1 = await treeCpuMs(s.pid);
          if (r.errors > 0 || r.non2xx > 0)
            throw new Error(`${r.errors} errors, ${r.non2xx} non-2xx answers out of ${r.total}`);
          if (id === "fastify") base.rps = r.rps;
          (samples[id] ??= []).push({
            ...r,
            ratio: base.rps ? r.rps / base.rps : undefined,
            serverUs: cpu0 === undefined ? undefined : ((cpu1 - cpu0) * 1000) / r.total,
          });
          log(`\n  round ${round}/${rounds} ${id}: ${r.rps.toFixed(0)}/s`);
        } catch (err) {
          log(`\nbench: ${id} not measured: ${err.message}`);
          out[id] = { error: String(err.message) };
        }
      }
    }
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
  }
  const mid = (xs, f) => {
    const v = xs.map(f).filter((x) => x !== undefined);
    return v.length ? median(v) : undefined;
  };
  for (const [id, xs] of Object.entries(samples)) {
    if (out[id]?.error) continue;
    out[id] = {
      rps: mid(xs, (x) => x.rps),
      ratio: mid(xs, (x) => x.ratio),
      p50: mid(xs, (x) => x.p50),
      p99: mid(xs, (x) => x.p99),
      serverUs: mid(xs, (x) => x.serverUs),
      loadUs: mid(xs, (x) => x.loadUs),
      rounds: xs.length,
    };
  }
  if (!out.sluice?.rps && !out.sluiceMemory?.rps) {
    return { skipped: `not measured: service not ready (${out.sluice?.error ?? "no server"})` };
  }
  return out;
}
