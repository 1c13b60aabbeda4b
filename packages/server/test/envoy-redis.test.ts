/**
 * The Envoy rate limit service on Redis: exactness across processes and nodes (4 client OS
 * processes × 250 concurrent gRPC calls, through two `sluice serve` processes sharing one
 * Redis, at a limit of 5 on one descriptor: exactly 5 pass), on standalone Redis and on a
 * Cluster (the nodes are the built CLI: `npm test` builds first); and a real redis-server stopped under a running service, where each limit's
 * `onStoreError` answers.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../src/db/connect.js";
import { parseEnvoyFile } from "../src/envoy/config.js";
import { Repository } from "../src/repository.js";
import { freePort, waitFor } from "../../../test/support/ports.js";
import { type RedisCluster, startCluster } from "../../../test/support/redis-cluster.js";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { allReady, forkWorker } from "../../../test/support/workers.js";
import { type TestRequest, rlsClient } from "./envoy-client.js";
import { ROOT, type TestService, call, startService } from "./helpers.js";

const WORKER = fileURLToPath(new URL("./envoy-worker.ts", import.meta.url));
const CLI = join(ROOT, "packages/server/dist/cli.js");

// A year-long window: no window edge can fall inside the burst.
const HOT = `
domain: edge
descriptors:
  - key: remote_address
    value: 10.1.1.1
    rate_limit:
      unit: year
      requests_per_unit: 5
  - key: warm
    rate_limit: { unit: year, requests_per_unit: 1000000 }
`;

/** Four client processes. */
async function startWorkers(n: number): Promise<ChildProcess[]> {
  const children = Array.from({ length: n }, () => forkWorker(WORKER));
  await allReady(children);
  return children;
}

let seq = 0;
/** Each worker fires `n` concurrent calls at its address; resolves with the total of each code. */
async function fire(
  workers: ChildProcess[],
  addresses: string[],
  request: TestRequest,
  n: number,
): Promise<Record<string, number>> {
  const id = ++seq;
  const answers = await Promise.all(
    workers.map(
      (w, i) =>
        new Promise<Record<string, number>>((resolve, reject) => {
          w.on("message", function done(m: unknown) {
            const a = m as { id?: number; codes?: Record<string, number>; error?: string };
            if (a.id !== id) return;
            w.off("message", done);
            if (a.error) reject(new Error(a.error));
            else resolve(a.codes!);
          });
          w.send({ id, address: addresses[i % addresses.length], request, n });
        }),
    ),
  );
  const total: Record<string, number> = {};
  for (const a of answers) for (const [k, v] of Object.entries(a)) total[k] = (total[k] ?? 0) + v;
  return total;
}

/** A data directory whose SQLite database holds the domains of `yaml`. */
async function dataDirWith(yaml: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-envoy-"));
  const database = await openDatabase({ databaseUrl: undefined, dataDir: dir });
  try {
    const parsed = parseEnvoyFile(yaml);
    if ("issues" in parsed) throw new Error(JSON.stringify(parsed.issues));
    await new Repository(database).envoyDomains.import(parsed.docs, "test");
  } finally {
    await database.close();
  }
  return dir;
}

/** A `sluice serve` process of the built CLI (it starts faster than the sources through tsx). */
interface Node {
  stop(): Promise<void>;
}

async function startNode(args: string[]): Promise<Node> {
  if (!existsSync(CLI)) throw new Error(`missing ${CLI}: run npm run build (npm test does)`);
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, "serve", "--port", String(port), ...args], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, SLUICE_LOG_LEVEL: "warn" },
  });
  let err = "";
  child.stderr?.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`sluice serve exited: ${err}`);
    return (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok === true;
  }, 30_000);
  return {
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

/** Two `sluice serve` nodes on one data directory and one Redis; their gRPC addresses. */
async function startNodes(
  dir: string,
  redisUrl: string,
): Promise<{ nodes: Node[]; addresses: string[] }> {
  const ports = [await freePort(), await freePort()];
  const nodes = await Promise.all(
    ports.map((p) =>
      startNode(["--data-dir", dir, "--redis-url", redisUrl, "--grpc-port", String(p)]),
    ),
  );
  const addresses = ports.map((p) => `127.0.0.1:${p}`);
  // Until each node's counter store answers (a decision whose numbers are known carries the
  // RateLimit header): a node that cannot reach Redis yet answers by onStoreError instead.
  for (const address of addresses) {
    const client = rlsClient(address);
    try {
      await waitFor(async () => {
        const r = await client.shouldRateLimit({
          domain: "edge",
          descriptors: [{ entries: [{ key: "warm", value: address }] }],
        });
        return r.responseHeadersToAdd.some((h) => h.key === "RateLimit");
      }, 30_000);
    } finally {
      client.close();
    }
  }
  return { nodes, addresses };
}

describe("exactly the limit passes, across processes and nodes", () => {
  let workers: ChildProcess[] = [];
  let redis: RedisServer | undefined;
  let cluster: RedisCluster | undefined;
  const nodes: Node[] = [];
  const dirs: string[] = [];

  beforeAll(async () => {
    [workers, redis, cluster] = await Promise.all([startWorkers(4), startRedis(), startCluster()]);
  });
  afterAll(async () => {
    for (const w of workers) w.kill();
    await Promise.all(nodes.map((n) => n.stop()));
    await Promise.all([redis?.stop(), cluster?.stop()]);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const hot: TestRequest = {
    domain: "edge",
    descriptors: [{ entries: [{ key: "remote_address", value: "10.1.1.1" }] }],
  };

  it("on standalone Redis: 4 processes × 250 concurrent requests, limit 5 → exactly 5", async () => {
    const dir = await dataDirWith(HOT);
    dirs.push(dir);
    const started = await startNodes(dir, redis!.url);
    nodes.push(...started.nodes);
    const codes = await fire(workers, started.addresses, hot, 250);
    expect(codes).toEqual({ OK: 5, OVER_LIMIT: 995 });
  });

  it("on a Redis Cluster: 4 processes × 250 concurrent requests, limit 5 → exactly 5", async () => {
    const dir = await dataDirWith(HOT);
    dirs.push(dir);
    const list = cluster!.startupNodes.map((n) => `${n.host}:${n.port}`).join(",");
    const started = await startNodes(dir, list);
    nodes.push(...started.nodes);
    const codes = await fire(workers, started.addresses, hot, 250);
    expect(codes).toEqual({ OK: 5, OVER_LIMIT: 995 });
  });
});

describe("Redis down: each limit's onStoreError answers", () => {
  let redis: RedisServer;
  let s: TestService;

  beforeAll(async () => {
    redis = await startRedis();
    s = await startService({ redisUrl: redis.url, values: { grpcPort: 0 } });
    const r = await s.call("PUT", "/v1/admin/envoy/domains/edge", {
      raw: `
domain: edge
descriptors:
  - key: open
    rate_limit: { unit: year, requests_per_unit: 5 }
  - key: closed
    rate_limit: { unit: year, requests_per_unit: 5, on_store_error: deny }
  - key: local
    rate_limit: { unit: year, requests_per_unit: 5, on_store_error: insurance }
`,
      contentType: "application/yaml",
    });
    expect(r.status).toBe(201);
  });
  afterAll(async () => {
    await s?.close();
    await redis?.stop();
  });

  it("allow: OK; deny: OVER_LIMIT with a 503 problem body (and 503 from /json); insurance: this node's share", async () => {
    const rls = rlsClient(`127.0.0.1:${s.service.grpcPort()}`);
    const req = (key: string): TestRequest => ({
      domain: "edge",
      descriptors: [{ entries: [{ key, value: "x" }] }],
    });
    try {
      expect((await rls.shouldRateLimit(req("closed"))).overallCode).toBe("OK");
      await redis.stop();

      const started = Date.now();
      const open = await rls.shouldRateLimit(req("open"));
      expect(open.overallCode).toBe("OK");
      expect(open.statuses[0]!.currentLimit?.requestsPerUnit).toBe(5);
      // Failing open: what the limit admits at most (5 less this hit), never "exhausted".
      expect(open.statuses[0]!.limitRemaining).toBe(4);
      // The counters are unknown: the policy is sent, no numbers.
      expect(open.responseHeadersToAdd.map((h) => h.key)).toEqual(["RateLimit-Policy"]);

      const closed = await rls.shouldRateLimit(req("closed"));
      expect(closed.overallCode).toBe("OVER_LIMIT");
      const body = JSON.parse(closed.rawBody.toString("utf8"));
      expect(body).toMatchObject({
        type: "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",
        status: 503,
        "violated-policies": ["edge.closed"],
      });
      const json = await call(s.url, "POST", "/json", { body: req("closed") });
      expect(json.status).toBe(503);
      expect(json.body.overallCode).toBe("OVER_LIMIT");

      // Insurance: an in-memory limiter enforcing this node's share (here, all 5).
      const local = [];
      for (let i = 0; i < 6; i++) local.push((await rls.shouldRateLimit(req("local"))).overallCode);
      expect(local).toEqual(["OK", "OK", "OK", "OK", "OK", "OVER_LIMIT"]);
      // Every answer came without waiting on the dead Redis for long.
      expect(Date.now() - started).toBeLessThan(10_000);

      const metrics = (await call(s.url, "GET", "/metrics")).body as string;
      expect(metrics).toMatch(
        /sluice_envoy_descriptor_decisions_total\{domain="edge",descriptor="edge.closed",outcome="store_error"\} [1-9]/,
      );
    } finally {
      rls.close();
    }
  });
});
