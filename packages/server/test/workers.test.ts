/**
 * `sluice serve --workers`: refused with memory counters; with Redis, two processes serve one
 * HTTP port and one gRPC port, each a node of its own (readiness says which answered, the
 * setup link works on either), share every limit exactly through Redis, and answer /metrics
 * with every worker's counts summed; a worker that dies is replaced; SIGTERM stops them all.
 * Real processes (the CLI from the sources), a real redis-server, real connections: a new TCP
 * connection per request reaches the workers in turn.
 */
import { readFileSync } from "node:fs";
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { freePort, waitFor } from "../../../test/support/ports.js";
import { type ServeProcess, runCli, spawnServe } from "./helpers.js";
import { rlsClient } from "./envoy-client.js";

/**
 * One request on a connection of its own (so that the primary hands it to the next worker), or
 * on `agent`'s. The JSON body is `any`: the tests reach into it freely.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

function fresh(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  token?: string,
  agent: http.Agent | false = false,
): Promise<{ status: number; json: Json; text: string }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      `${url}${path}`,
      {
        method,
        agent,
        headers: {
          ...(data ? { "content-type": "application/json" } : {}),
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
      },
      (res) => {
        let text = "";
        res.on("data", (d: Buffer) => (text += d.toString()));
        res.on("end", () => {
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, json, text });
        });
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

/** The worker processes under the primary (Linux: /proc). */
function workerPids(primary: number): number[] {
  const out: number[] = [];
  const tasks = readFileSync(`/proc/${primary}/task/${primary}/children`, "utf8").trim();
  if (tasks) out.push(...tasks.split(/\s+/).map(Number));
  return out;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("sluice serve --workers with memory counters", () => {
  it("is refused, naming the option and what to do", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-workers-"));
    try {
      const r = await runCli(["serve", "--workers", "2", "--data-dir", dir, "--port", "0"]);
      expect(r.code).toBe(1);
      expect(r.output).toContain(
        "workers: 2 workers need counters in Redis (redisUrl, --redis-url): with memory counters each worker would count on its own and let every limit through 2 times; use 1 worker, or set redisUrl (from --workers)",
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("sluice serve --workers 2 with Redis counters", () => {
  let redis: RedisServer;
  let serve: ServeProcess;
  let data: string;
  let grpcPort: number;
  let admin: string;
  let apiKey: string;

  beforeAll(async () => {
    redis = await startRedis();
    data = mkdtempSync(join(tmpdir(), "sluice-workers-"));
    grpcPort = await freePort();
    serve = await spawnServe(
      ["--workers", "2", "--data-dir", data, "--grpc-port", String(grpcPort)],
      {
        REDIS_URL: `redis://127.0.0.1:${redis.port}`,
        SLUICE_POLL_INTERVAL_MS: "100",
        SLUICE_SHUTDOWN_TIMEOUT_MS: "5000",
      },
    );
    // The banner comes once every worker listens.
    await waitFor(() => serve.stderr().includes("workers:"), 30_000);
  });
  afterAll(async () => {
    await serve?.stop("SIGKILL");
    await redis?.stop();
    if (data) rmSync(data, { recursive: true, force: true });
  });

  it("prints one banner, with the setup link every worker accepts", async () => {
    expect(serve.stderr().match(/sluice is listening on/g)).toHaveLength(1);
    expect(serve.stderr()).toContain("  workers:       2 processes on the same ports");
    const token = /setup\?token=(su_[\w-]+)/.exec(serve.stderr())?.[1];
    expect(token).toBeDefined();
    // Each worker holds the token: readiness (which worker) and the setup state, connection by
    // connection, until both workers have answered.
    const seen = new Map<number, boolean>();
    await waitFor(async () => {
      // Both questions on one connection, so to one worker.
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const ready = await fresh(serve.url, "GET", "/readyz", undefined, undefined, agent);
        const state = await fresh(serve.url, "GET", "/v1/admin/setup", undefined, undefined, agent);
        expect(ready.json.status).toBe("ready");
        seen.set(ready.json.worker as number, state.json.tokenActive as boolean);
      } finally {
        agent.destroy();
      }
      return seen.size === 2;
    }, 10_000);
    expect([...seen.keys()].sort()).toEqual([1, 2]);
    expect([...seen.values()]).toEqual([true, true]);
    const setup = await fresh(serve.url, "POST", "/v1/admin/setup", {
      token,
      username: "root",
      password: "root-password",
    });
    expect(setup.status).toBe(200);
    admin = setup.json.token as string;
  });

  it("shares every limit exactly through Redis: 100 concurrent requests per door, limit 5 → 5", async () => {
    const app = await fresh(serve.url, "POST", "/v1/admin/apps", { name: "web" }, admin);
    expect(app.status).toBe(201);
    apiKey = app.json.apiKey as string;
    const policy = await fresh(
      serve.url,
      "POST",
      "/v1/admin/policies",
      {
        name: "five",
        algorithm: "fixed-window",
        rules: [{ limit: 5, period: "1h" }],
        apps: ["web"],
      },
      admin,
    );
    expect(policy.status).toBe(201);
    const domain = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        `${serve.url}/v1/admin/envoy/domains/edge`,
        {
          method: "PUT",
          agent: false,
          headers: { "content-type": "application/yaml", authorization: `Bearer ${admin}` },
        },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        },
      );
      req.on("error", reject);
      req.end(
        "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n",
      );
    });
    expect(domain).toBe(201);
    // Every worker has loaded both (a key of their own, so the counted one stays untouched).
    let loaded = 0;
    await waitFor(async () => {
      const r = await fresh(
        serve.url,
        "POST",
        "/v1/limit",
        { policy: "five", key: "warm" },
        apiKey,
      );
      loaded = r.status === 200 ? loaded + 1 : 0;
      return loaded >= 4;
    }, 10_000);
    const warm = rlsClient(`127.0.0.1:${grpcPort}`);
    try {
      await waitFor(async () => {
        const r = await warm.shouldRateLimit({
          domain: "edge",
          descriptors: [{ entries: [{ key: "k", value: "warm" }] }],
        });
        return r.statuses[0]!.currentLimit !== null;
      }, 10_000);
    } finally {
      warm.close();
    }

    const answers = await Promise.all(
      Array.from({ length: 100 }, () =>
        fresh(serve.url, "POST", "/v1/limit", { policy: "five", key: "shared" }, apiKey),
      ),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(100).fill(200));
    expect(answers.filter((r) => r.json.allowed === true)).toHaveLength(5);

    // gRPC: four channels (four connections, so both workers), 25 calls in flight on each.
    const clients = Array.from({ length: 4 }, () => rlsClient(`127.0.0.1:${grpcPort}`));
    try {
      const codes = (
        await Promise.all(
          clients.flatMap((c) =>
            Array.from({ length: 25 }, () =>
              c.shouldRateLimit({
                domain: "edge",
                descriptors: [{ entries: [{ key: "k", value: "shared" }] }],
              }),
            ),
          ),
        )
      ).map((r) => r.overallCode);
      expect(codes.filter((c) => c === "OK")).toHaveLength(5);
      expect(codes.filter((c) => c === "OVER_LIMIT")).toHaveLength(95);
    } finally {
      for (const c of clients) c.close();
    }
  });

  it("/metrics, on any worker, sums every worker's counts", async () => {
    for (let i = 0; i < 2; i++) {
      const text = (await fresh(serve.url, "GET", "/metrics")).text;
      expect(text).toMatch(/^sluice_envoy_requests_total\{domain="edge",code="over_limit"\} 95$/m);
      // Denied by a script call, or by the deny cache: 95 in all.
      const denied = [
        ...text.matchAll(
          /^sluice_decisions_total\{policy="five",outcome="denied",[^}]*\} (\d+)$/gm,
        ),
      ].reduce((sum, m) => sum + Number(m[1]), 0);
      expect(denied).toBe(95);
      // A gauge every worker holds alike is shown once.
      expect(text).toMatch(/^sluice_envoy_domains 1$/m);
    }
  });

  it("replaces a worker that dies", async () => {
    const [first] = workerPids(serve.child.pid!);
    process.kill(first!, "SIGKILL");
    await waitFor(() => serve.output().includes("replacement worker listening"), 20_000);
    expect(serve.output()).toContain('"msg":"worker exited; replacing it"');
    const seen = new Set<number>();
    await waitFor(async () => {
      seen.add((await fresh(serve.url, "GET", "/readyz")).json.worker as number);
      return seen.size === 2;
    }, 10_000);
    expect(seen.has(3)).toBe(true);
  });

  it("SIGTERM to the primary stops every worker gracefully", async () => {
    const pids = workerPids(serve.child.pid!);
    expect(pids).toHaveLength(2);
    expect(await serve.stop("SIGTERM")).toBe(0);
    expect(pids.filter(alive)).toEqual([]);
    const stopped = serve
      .output()
      .split("\n")
      .filter((l) => l.includes('"msg":"stopped"'));
    // Each worker, then the primary.
    expect(stopped).toHaveLength(3);
    expect(serve.output()).not.toContain("second signal");
  });
});
