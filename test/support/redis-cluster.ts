import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { freePort, waitFor } from "./ports.js";
import { type RedisServer, startRedis } from "./redis.js";

const run = promisify(execFile);

/** A local Redis Cluster started for a test: 3 masters and 3 replicas on 127.0.0.1. */
export interface RedisCluster {
  /** Every node, masters first as created. */
  readonly nodes: readonly RedisServer[];
  /** `{ host, port }` of every node, for `new Cluster(startupNodes)`. */
  readonly startupNodes: ReadonlyArray<{ host: string; port: number }>;
  /** Stop every node and delete their directories. */
  stop(): Promise<void>;
}

/** `redis-cli` against one node; returns stdout. */
export async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...args], {
    timeout: 30_000,
  });
  return stdout;
}

/**
 * Starts 6 cluster-enabled redis-servers (each with its own temp dir and an explicit bus port)
 * and joins them with `redis-cli --cluster create … --cluster-replicas 1`; resolves once every
 * node reports `cluster_state:ok`.
 */
export async function startCluster(): Promise<RedisCluster> {
  const nodes: RedisServer[] = [];
  try {
    for (let i = 0; i < 6; i++) {
      const bus = await freePort();
      nodes.push(
        await startRedis([
          "--cluster-enabled",
          "yes",
          "--cluster-config-file",
          "nodes.conf",
          "--cluster-node-timeout",
          "2000",
          "--cluster-port",
          String(bus),
          "--cluster-announce-ip",
          "127.0.0.1",
        ]),
      );
    }
    await run(
      "redis-cli",
      [
        "--cluster",
        "create",
        ...nodes.map((n) => `127.0.0.1:${n.port}`),
        "--cluster-replicas",
        "1",
        "--cluster-yes",
      ],
      { timeout: 60_000 },
    );
    for (const n of nodes) {
      await waitFor(
        async () => (await redisCli(n.port, "cluster", "info")).includes("cluster_state:ok"),
        30_000,
        100,
      );
    }
    // Every node must know the owner of every slot (3 ranges) before clients connect.
    await waitFor(
      async () => {
        for (const n of nodes) {
          const slots = await redisCli(n.port, "cluster", "slots");
          if ((slots.match(/\n?127\.0\.0\.1\n/g) ?? []).length < 6) return false;
        }
        return true;
      },
      30_000,
      100,
    );
  } catch (err) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw err;
  }
  return {
    nodes,
    startupNodes: nodes.map((n) => ({ host: "127.0.0.1", port: n.port })),
    async stop() {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}
