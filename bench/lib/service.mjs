// The service figure: `sluice serve` (POST /v1/limit) vs a bare Fastify route, under autocannon.
/* global fetch */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCaseRetry } from "./children.mjs";
import { BENCH_DIR, ROOT, freePort, run, runVisible, sleep } from "./util.mjs";

const CLI = join(ROOT, "packages/server/dist/cli.js");
const POLICY = "bench";
/** The Envoy domain of the gRPC figure: the same GCRA of 1000 per minute as the policy. */
const DOMAIN = "bench";
const DOMAIN_YAML = `domain: ${DOMAIN}
descriptors:
  - key: remote_address
    rate_limit:
      algorithm: gcra
      requests_per_unit: 1000
      unit: minute
`;

/** Spawns a server process; resolves { child, stop } once `ready()` resolves true. */
async function startServer(args, ready, env = {}) {
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
async function ensureServerBuilt(log) {
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
 * Starts `sluice serve` (SQLite in a temp dir; counters in the bench's Redis, or in memory),
 * creates an admin, an app and a generous GCRA policy through the admin API, and returns its
 * URL and the app's API key.
 */
export async function startSluice({ counters, redisPort, nodeArgs = [] }) {
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
    // The Envoy domain of the gRPC figure (the reference format, through the admin API).
    const put = await fetch(`${url}/v1/admin/envoy/domains/${DOMAIN}`, {
      method: "PUT",
      headers: { "content-type": "application/yaml", authorization: `Bearer ${admin}` },
      body: DOMAIN_YAML,
    });
    if (put.status !== 201)
      throw new Error(`create Envoy domain: ${put.status} ${await put.text()}`);
    return {
      url,
      apiKey,
      grpcAddress: `127.0.0.1:${grpcPort}`,
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
    stop: async () => {
      child.kill("SIGTERM");
      await Promise.race([new Promise((r) => child.once("exit", r)), sleep(2000)]);
    },
  };
}

/**
 * Requests/s of `sluice serve` (Redis counters, then memory counters) and of the bare Fastify
 * route, one after another, same autocannon settings; and, on the same servers, gRPC decisions/s
 * of the Envoy rate limit service (ShouldRateLimit, as many calls in flight as autocannon has
 * connections). Resolves `{ skipped }` when the service cannot be built or started yet.
 */
export async function measureService({
  durationS,
  warmupS,
  connections,
  distinct,
  redisPort,
  log,
}) {
  if (!(await ensureServerBuilt(log))) return { skipped: "not measured: service not ready" };
  const load = (target, seconds) =>
    runCaseRetry("service", "load", {
      url: target.url,
      token: target.apiKey,
      policy: POLICY,
      distinct,
      durationS: seconds,
      connections,
    });
  const loadOf = async (target) => {
    // Warm up first: the JIT of a fresh server is not what is measured.
    if (warmupS > 0) await load(target, warmupS);
    const r = await load(target, durationS);
    if (r.errors > 0 || r.non2xx > 0) {
      throw new Error(`${r.errors} errors, ${r.non2xx} non-2xx answers out of ${r.total}`);
    }
    return r;
  };
  const grpcLoad = (target, seconds) =>
    runCaseRetry("grpc", "load", {
      address: target.grpcAddress,
      domain: DOMAIN,
      distinct,
      durationS: seconds,
      connections,
    });
  const grpcOf = async (target) => {
    try {
      if (warmupS > 0) await grpcLoad(target, warmupS);
      const r = await grpcLoad(target, durationS);
      if (r.errors > 0 || r.non2xx > 0)
        throw new Error(`${r.errors} errors, ${r.non2xx} over-limit answers out of ${r.total}`);
      return r;
    } catch (err) {
      log(`\nbench: gRPC not measured: ${err.message}`);
      return { error: String(err.message) };
    }
  };
  const out = { connections, durationS, warmupS };
  const bare = await startBare();
  try {
    out.fastify = await loadOf(bare);
  } finally {
    await bare.stop();
  }
  for (const counters of ["redis", "memory"]) {
    let svc;
    try {
      svc = await startSluice({ counters, redisPort });
    } catch (err) {
      log(`\nbench: sluice serve (${counters}) not measured: ${err.message}`);
      out[counters === "redis" ? "sluice" : "sluiceMemory"] = { error: String(err.message) };
      continue;
    }
    try {
      out[counters === "redis" ? "sluice" : "sluiceMemory"] = await loadOf(svc);
      out[counters === "redis" ? "grpc" : "grpcMemory"] = await grpcOf(svc);
    } finally {
      await svc.stop();
    }
  }
  if (out.sluice?.error && out.sluiceMemory?.error) {
    return { skipped: `not measured: service not ready (${out.sluice.error})` };
  }
  return out;
}
