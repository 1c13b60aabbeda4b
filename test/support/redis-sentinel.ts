import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis, type RedisOptions } from "ioredis";
import { freePort, waitFor } from "./ports.js";
import { type RedisServer, redisServerBin, startRedis } from "./redis.js";
import { redisCli } from "./redis-cluster.js";

/** A Sentinel setup started for a test: 1 master, 1 replica, 3 sentinels on 127.0.0.1. */
export interface RedisSentinel {
  /** The master set's name, for `new Redis({ sentinels, name })`. */
  readonly name: string;
  readonly master: RedisServer;
  readonly replica: RedisServer;
  /** `{ host, port }` of every sentinel. */
  readonly sentinels: ReadonlyArray<{ host: string; port: number }>;
  /** Port of the current master, as the sentinels see it. */
  masterPort(): Promise<number>;
  /**
   * `SENTINEL FAILOVER`; resolves once the sentinels report the other node as master, it
   * accepts writes, and the old master replicates from it.
   */
  failover(): Promise<number>;
  /** Resolves once the replica has every write of the master (their offsets are equal). */
  synced(): Promise<void>;
  /**
   * A new ioredis client of the master through the sentinels: what docs/redis.md recommends
   * for failovers (`failoverDetector`, reconnect on READONLY), retries every 50 ms, and
   * `options` over them. Its `error` events are ignored. Disconnect it when done.
   */
  ioredis(options?: RedisOptions): Redis;
  /** Stop everything and delete the directories. */
  stop(): Promise<void>;
}

/** Starts the servers and waits until all three sentinels see the master and its replica. */
export async function startSentinel(name = "sluice"): Promise<RedisSentinel> {
  const master = await startRedis();
  const replica = await startRedis(["--replicaof", "127.0.0.1", String(master.port)]);
  // Replicating: the replica has synced and its link is up.
  await waitFor(
    async () =>
      (await redisCli(replica.port, "info", "replication")).includes("master_link_status:up"),
    15_000,
    50,
  );
  const sentinels: Array<{ port: number; dir: string; child: ChildProcess }> = [];
  const stopAll = async () => {
    for (const s of sentinels) {
      if (s.child.exitCode === null) s.child.kill("SIGKILL");
      rmSync(s.dir, { recursive: true, force: true });
    }
    await Promise.all([master.stop(), replica.stop()]);
  };
  try {
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const dir = mkdtempSync(join(tmpdir(), "sluice-sentinel-"));
      const conf = join(dir, "sentinel.conf");
      writeFileSync(
        conf,
        [
          `port ${port}`,
          "bind 127.0.0.1",
          `dir ${dir}`,
          `sentinel monitor ${name} 127.0.0.1 ${master.port} 2`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 5000`,
          `sentinel parallel-syncs ${name} 1`,
          "",
        ].join("\n"),
      );
      const child = spawn(redisServerBin(), [conf, "--sentinel"], { stdio: "ignore" });
      sentinels.push({ port, dir, child });
    }
    for (const s of sentinels) {
      await waitFor(
        async () => {
          const info = await redisCli(s.port, "sentinel", "replicas", name);
          const others = await redisCli(s.port, "sentinel", "sentinels", name);
          return (
            info.includes(String(replica.port)) && (others.match(/\bname\b/g) ?? []).length >= 2
          );
        },
        30_000,
        100,
      );
    }
  } catch (err) {
    await stopAll();
    throw err;
  }
  const masterPort = async () => {
    const out = await redisCli(sentinels[0]!.port, "sentinel", "get-master-addr-by-name", name);
    return Number(out.trim().split("\n")[1]);
  };
  return {
    name,
    master,
    replica,
    sentinels: sentinels.map((s) => ({ host: "127.0.0.1", port: s.port })),
    masterPort,
    async failover() {
      const before = await masterPort();
      await redisCli(sentinels[0]!.port, "sentinel", "failover", name);
      await waitFor(async () => (await masterPort()) !== before, 30_000, 100);
      const after = await masterPort();
      // Wait until the new master accepts writes, and the old one has become its replica and
      // synced (a second failover right after would otherwise promote a replica with no data).
      await waitFor(
        async () => (await redisCli(after, "info", "replication")).includes("role:master"),
        30_000,
        100,
      );
      await waitFor(
        async () => {
          const info = await redisCli(before, "info", "replication");
          return info.includes(`master_port:${after}`) && info.includes("master_link_status:up");
        },
        30_000,
        50,
      );
      return after;
    },
    async synced() {
      const m = await masterPort();
      const r = m === master.port ? replica.port : master.port;
      const offset = (port: number, field: string) =>
        redisCli(port, "info", "replication").then((info) =>
          Number(new RegExp(`${field}:(\\d+)`).exec(info)?.[1] ?? -1),
        );
      await waitFor(
        async () =>
          (await offset(m, "master_repl_offset")) === (await offset(r, "slave_repl_offset")),
        30_000,
        20,
      );
    },
    ioredis(options = {}) {
      const client = new Redis({
        sentinels: sentinels.map((s) => ({ host: "127.0.0.1", port: s.port })),
        name,
        failoverDetector: true,
        retryStrategy: () => 50,
        sentinelRetryStrategy: () => 50,
        // A demoted master answers writes with READONLY: reconnect (through the sentinels).
        reconnectOnError: (err) => err.message.startsWith("READONLY"),
        ...options,
      });
      client.on("error", () => {});
      return client;
    },
    stop: stopAll,
  };
}
