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

/** Node id and port of every master, and the slot ranges each serves. */
export async function clusterMasters(
  port: number,
): Promise<Array<{ id: string; port: number; slots: Array<[number, number]> }>> {
  const out = await redisCli(port, "cluster", "nodes");
  const masters: Array<{ id: string; port: number; slots: Array<[number, number]> }> = [];
  for (const line of out.trim().split("\n")) {
    const f = line.split(" ");
    if (!f[2]!.includes("master") || f[2]!.includes("fail")) continue;
    const slots: Array<[number, number]> = [];
    for (const s of f.slice(8)) {
      if (s.startsWith("[")) continue; // a slot being migrated or imported
      const [a, b] = s.split("-");
      slots.push([Number(a), Number(b ?? a)]);
    }
    masters.push({ id: f[0]!, port: Number(f[1]!.split(":")[1]!.split("@")[0]), slots });
  }
  return masters;
}

/** The master serving `slot`. */
export async function ownerOfSlot(
  port: number,
  slot: number,
): Promise<{ id: string; port: number }> {
  const owner = (await clusterMasters(port)).find((m) =>
    m.slots.some(([a, b]) => slot >= a && slot <= b),
  );
  if (!owner) throw new Error(`no master serves slot ${slot}`);
  return owner;
}

/** `MIGRATE` of `keys` from the node on `fromPort` to the one on `toPort` (a 5 s timeout). */
export async function migrateKeys(fromPort: number, toPort: number, keys: string[]): Promise<void> {
  await redisCli(
    fromPort,
    "migrate",
    "127.0.0.1",
    String(toPort),
    "",
    "0",
    "5000",
    "keys",
    ...keys,
  );
}

/**
 * Moves one slot to another master the way `redis-cli --cluster reshard` does: IMPORTING on
 * the target, MIGRATING on the source, MIGRATE of its keys in batches, then SETSLOT NODE on
 * both and every other master. `beforeMigrate` runs just before each MIGRATE (e.g. to keep the
 * target busy, so that it restores the keys later than the source dumped them).
 */
export async function migrateSlot(
  cluster: RedisCluster,
  slot: number,
  toPort: number,
  beforeMigrate?: () => void,
): Promise<void> {
  const masters = await clusterMasters(cluster.nodes[0]!.port);
  const from = masters.find((m) => m.slots.some(([a, b]) => slot >= a && slot <= b))!;
  const to = masters.find((m) => m.port === toPort)!;
  if (from.id === to.id) throw new Error(`slot ${slot} is already on ${toPort}`);
  await redisCli(to.port, "cluster", "setslot", String(slot), "importing", from.id);
  await redisCli(from.port, "cluster", "setslot", String(slot), "migrating", to.id);
  for (;;) {
    const keys = (await redisCli(from.port, "cluster", "getkeysinslot", String(slot), "100"))
      .split("\n")
      .filter((k) => k !== "");
    if (keys.length === 0) break;
    beforeMigrate?.();
    await migrateKeys(from.port, to.port, keys);
  }
  await redisCli(to.port, "cluster", "setslot", String(slot), "node", to.id);
  await redisCli(from.port, "cluster", "setslot", String(slot), "node", to.id);
  for (const m of masters)
    if (m.id !== from.id && m.id !== to.id)
      await redisCli(m.port, "cluster", "setslot", String(slot), "node", to.id);
}
