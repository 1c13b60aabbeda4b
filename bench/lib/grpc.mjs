// The gRPC figure: Envoy's ShouldRateLimit driven by h2load (a C HTTP/2 client, so the load
// generator is not the bottleneck) against two bare baselines — a node:http2 server and a
// @grpc/grpc-js server answering a constant OK — and `sluice serve --grpc-port`, all started
// once and measured in interleaved rounds; the server's CPU time per call from /proc.
import { spawn } from "node:child_process";
import http2 from "node:http2";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureH2load, h2load, treeCpuMs } from "./h2load.mjs";
import { grpcFrame, loadRls } from "./rls-proto.mjs";
import { ensureServerBuilt, startSluice } from "./service.mjs";
import { BENCH_DIR, ROOT, median, sleep } from "./util.mjs";

const METHOD = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
/** The request every call sends: one descriptor of the `bench-h2` domain (lib/service.mjs). */
const REQUEST = {
  domain: "bench-h2",
  descriptors: [{ entries: [{ key: "remote_address", value: "10.0.0.1" }] }],
};

/** The contestants, in table order: id → label. */
export const GRPC_CONTESTANTS = {
  http2: "bare `node:http2` server, constant OK",
  grpcjs: "bare `@grpc/grpc-js` server, constant OK",
  memory: "`sluice serve --grpc-port`, memory counters",
  redis: "`sluice serve --grpc-port`, Redis counters",
  redis2: "`sluice serve --grpc-port --workers 2`, Redis counters",
};

/** Starts a bare baseline (`bench/lib/<file>`); resolves { port, pid, stop }. */
async function startBaseline(file) {
  const child = spawn(process.execPath, [join(BENCH_DIR, "lib", file), "0"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise((resolve, reject) => {
    child.stdout.on("data", (d) => {
      const m = /LISTENING (\d+)/.exec(String(d));
      if (m) resolve(Number(m[1]));
    });
    child.on("exit", () => reject(new Error(`${file} exited`)));
  });
  return {
    port,
    pid: child.pid,
    stop: async () => {
      child.kill("SIGTERM");
      await Promise.race([new Promise((r) => child.once("exit", r)), sleep(2000)]);
    },
  };
}

/**
 * One call over a raw node:http2 client (not the servers' libraries): resolves the gRPC status
 * and the decoded response.
 */
function call(port, frame, Response) {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", reject);
    const req = session.request({
      ":method": "POST",
      ":path": METHOD,
      "content-type": "application/grpc",
      te: "trailers",
    });
    const chunks = [];
    let status;
    req.on("response", (h) => (status = h["grpc-status"]));
    req.on("trailers", (t) => (status = t["grpc-status"]));
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      session.close();
      const body = Buffer.concat(chunks);
      resolve({
        grpcStatus: status,
        response:
          body.length > 5 ? Response.toObject(Response.decode(body.subarray(5))) : undefined,
      });
    });
    req.on("error", reject);
    req.end(frame);
  });
}

/** `sluice_envoy_requests_total` of the bench domain by code, from a server's /metrics. */
function envoyRequests(text) {
  const out = { ok: 0, over_limit: 0, invalid: 0 };
  for (const m of text.matchAll(
    /^sluice_envoy_requests_total\{([^}]*)\} (\d+(?:\.\d+)?(?:e\+\d+)?)$/gm,
  )) {
    if (!m[1].includes('domain="bench-h2"')) continue;
    const code = /code="([^"]+)"/.exec(m[1])?.[1];
    if (code) out[code] = (out[code] ?? 0) + Number(m[2]);
  }
  return out;
}

/**
 * Calls/s and server CPU time per call of each contestant, median of `rounds` interleaved
 * rounds of `durationS` seconds (after `warmupS` seconds of the same load, not counted):
 * h2load with `clients` connections × `streams` calls in flight. Resolves `{ skipped }` when
 * h2load or the service is not there.
 */
export async function measureGrpc({
  durationS,
  warmupS,
  rounds,
  clients,
  streams,
  workers,
  redisPort,
  log,
}) {
  const tool = await ensureH2load(log);
  if (!tool.path) return { skipped: `not measured: ${tool.reason}` };
  if (!(await ensureServerBuilt(log))) return { skipped: "not measured: service not ready" };
  const { Request, Response } = loadRls();
  const frame = grpcFrame(Request.encode(Request.fromObject(REQUEST)).finish());
  const dir = mkdtempSync(join(tmpdir(), "sluice-bench-grpc-"));
  const data = join(dir, "request.bin");
  writeFileSync(data, frame);

  const starters = {
    http2: () => startBaseline("bare-http2.mjs"),
    grpcjs: () => startBaseline("bare-grpc.mjs"),
    memory: () => startSluice({ counters: "memory", redisPort }),
    redis: () => startSluice({ counters: "redis", redisPort }),
    ...(workers > 1
      ? { redis2: () => startSluice({ counters: "redis", redisPort, workers }) }
      : {}),
  };
  const servers = {};
  const samples = {};
  const out = { clients, streams, durationS, warmupS, rounds, rows: {}, errors: {} };
  try {
    for (const [id, start] of Object.entries(starters)) {
      try {
        const s = await start();
        const port = s.grpcPort ?? s.port;
        const first = await call(port, frame, Response);
        if (first.grpcStatus !== "0" || first.response?.overallCode !== 1)
          throw new Error(`a call answered ${JSON.stringify(first)}`);
        servers[id] = { ...s, port };
      } catch (err) {
        log(`\nbench: gRPC ${id} not measured: ${err.message}`);
        out.errors[id] = String(err.message);
      }
    }
    const run = (port, seconds) =>
      h2load({
        path: tool.path,
        url: `http://127.0.0.1:${port}${METHOD}`,
        data,
        headers: ["content-type: application/grpc", "te: trailers"],
        clients,
        streams,
        durationS: seconds,
      });
    for (let round = 1; round <= rounds; round++) {
      for (const [id, s] of Object.entries(servers)) {
        try {
          if (warmupS > 0) await run(s.port, warmupS);
          const before = s.metrics ? envoyRequests(await s.metrics()) : undefined;
          const cpu0 = await treeCpuMs(s.pid);
          const r = await run(s.port, durationS);
          const cpu1 = await treeCpuMs(s.pid);
          if (r.failed > 0 || r.non2xx > 0)
            throw new Error(`${r.failed} failed, ${r.non2xx} non-2xx out of ${r.done}`);
          if (before) {
            // h2load sees HTTP statuses only: the server's own count says every call was OK.
            const after = envoyRequests(await s.metrics());
            const bad = after.over_limit - before.over_limit + (after.invalid - before.invalid);
            if (bad > 0) throw new Error(`${bad} calls were not answered OK`);
          }
          out.command = r.command.replace(/ -D \S+/, " -D <seconds>").replace(data, "<request>");
          (samples[id] ??= []).push({
            rps: r.rps,
            cpuUs: cpu0 === undefined ? undefined : ((cpu1 - cpu0) * 1000) / r.done,
          });
          log(
            `\n  round ${round}/${rounds} ${id}: ${r.rps.toFixed(0)}/s` +
              (cpu0 === undefined
                ? ""
                : `, ${samples[id].at(-1).cpuUs.toFixed(1)} µs CPU per call`),
          );
        } catch (err) {
          out.errors[id] = String(err.message);
        }
      }
    }
  } finally {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
  for (const [id, xs] of Object.entries(samples)) {
    const cpu = xs.map((x) => x.cpuUs).filter((x) => x !== undefined);
    out.rows[id] = {
      rps: median(xs.map((x) => x.rps)),
      cpuUs: cpu.length ? median(cpu) : undefined,
      rounds: xs.length,
    };
  }
  return out;
}
