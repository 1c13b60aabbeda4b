/**
 * The Redis clients sluice supports, each at the majors users install today, side by side
 * under npm aliases (package.json): ioredis 6 (`ioredis`) and 5 (`ioredis5`), iovalkey, and
 * node-redis 6 (`redis`), 5 (`redis5`) and 4 (`redis4`). Suites that talk to Redis run once per
 * client with `describe.each(CLIENTS)`; `SLUICE_TEST_CLIENTS=ioredis-6,node-redis-6` narrows the
 * matrix for a local run (CI runs all of it).
 */
import { Cluster as Cluster6, Redis as Redis6 } from "ioredis";
import { Cluster as Cluster5, Redis as Redis5 } from "ioredis5";
import { Cluster as ValkeyCluster, Redis as Valkey } from "iovalkey";
import {
  createClient as createClient6,
  createCluster as createCluster6,
  createSentinel as createSentinel6,
} from "redis";
import { createClient as createClient4, createCluster as createCluster4 } from "redis4";
import {
  createClient as createClient5,
  createCluster as createCluster5,
  createSentinel as createSentinel5,
} from "redis5";
import type { RedisClient } from "../../packages/sluice/src/stores/redis-client.js";

/** Where a Redis is, for a client of any family. */
export interface Address {
  readonly host: string;
  readonly port: number;
}

/** Options a test may ask of every client (each family spells them its own way). */
export interface ClientOptions {
  /** Give up on a command after this long (ms); default: the client's own. */
  readonly commandTimeoutMs?: number;
  /** Do not connect yet (ioredis `lazyConnect`; node-redis: `connect()` is not called). */
  readonly lazy?: boolean;
  /**
   * Start connecting but do not wait for the connection (a server not started yet): ioredis
   * connects and retries by itself; node-redis's `connect()` is called and not awaited.
   */
  readonly noWait?: boolean;
  /**
   * Reconnect this often (ms) after a lost connection, and fail commands at once meanwhile
   * (ioredis `retryStrategy` and `maxRetriesPerRequest: 1`; node-redis `reconnectStrategy`).
   */
  readonly reconnectMs?: number;
}

/** One client family at one major. */
export interface ClientKind {
  /** `ioredis-6`, `node-redis-5`, … */
  readonly name: string;
  readonly family: "ioredis" | "node-redis";
  /** A client of one server (connected unless `lazy`). */
  standalone(url: string, options?: ClientOptions): Promise<RedisClient>;
  /** A Cluster client (connected). */
  cluster(nodes: readonly Address[], options?: ClientOptions): Promise<RedisClient>;
  /** A Sentinel client of the master set `name` (connected); undefined when the client has none. */
  readonly sentinel:
    | ((
        sentinels: readonly Address[],
        name: string,
        options?: ClientOptions,
      ) => Promise<RedisClient>)
    | undefined;
  /** Runs one command on the client (for tests that look at Redis through it). */
  command(client: RedisClient, args: readonly string[]): Promise<unknown>;
  /** Closes the client, whatever its state. */
  close(client: RedisClient): Promise<void>;
}

type IoredisCtor = new (url: string | object, options?: object) => Redis6;
type IoredisClusterCtor = new (nodes: Address[], options?: object) => Cluster6;

function ioredisKind(name: string, Redis: IoredisCtor, Cluster: IoredisClusterCtor): ClientKind {
  const ready = async (
    c: Redis6 | Cluster6,
    o: ClientOptions | undefined,
  ): Promise<RedisClient> => {
    c.on("error", () => undefined);
    if (!o?.lazy && !o?.noWait && c.status !== "ready")
      await new Promise<void>((resolve, reject) => {
        c.once("ready", () => resolve());
        c.once("end", () => reject(new Error(`${name}: the client ended before it was ready`)));
      });
    return c as unknown as RedisClient;
  };
  const common = (o: ClientOptions | undefined): object => ({
    lazyConnect: o?.lazy ?? false,
    ...(o?.commandTimeoutMs !== undefined ? { commandTimeout: o.commandTimeoutMs } : {}),
    ...(o?.reconnectMs !== undefined
      ? { retryStrategy: () => o.reconnectMs, maxRetriesPerRequest: 1 }
      : {}),
  });
  return {
    name,
    family: "ioredis",
    standalone: (url, o) => ready(new Redis(url, common(o)), o),
    cluster: (nodes, o) => ready(new Cluster([...nodes], { redisOptions: common(o) }), o),
    sentinel: (sentinels, masterName, o) =>
      ready(new Redis({ sentinels: [...sentinels], name: masterName, ...common(o) }), o),
    command: (c, args) => (c as unknown as Redis6).call(args[0]!, args.slice(1)),
    close: async (c) => {
      (c as unknown as Redis6).disconnect();
    },
  };
}

/** What the three node-redis majors' clients have in common, for these helpers. */
interface NodeRedisAny {
  connect(): Promise<unknown>;
  destroy?(): void;
  disconnect(): Promise<void> | void;
  on(event: "error", listener: (err: Error) => void): unknown;
  readonly isOpen: boolean;
}

function nodeRedisKind(
  name: string,
  createClient: (o: object) => unknown,
  createCluster: (o: object) => unknown,
  createSentinel: ((o: object) => unknown) | undefined,
): ClientKind {
  const socket = (o: ClientOptions | undefined): object => ({
    // Reconnect quickly (the default backs off to seconds; tests restart servers).
    reconnectStrategy: (retries: number) => o?.reconnectMs ?? Math.min(50 * (retries + 1), 500),
  });
  const timeout = (o: ClientOptions | undefined): object =>
    o?.commandTimeoutMs !== undefined ? { commandOptions: { timeout: o.commandTimeoutMs } } : {};
  const open = async (c: unknown, o: ClientOptions | undefined): Promise<RedisClient> => {
    const n = c as NodeRedisAny;
    n.on("error", () => undefined);
    if (o?.noWait) void n.connect().catch(() => undefined);
    else if (!o?.lazy) await n.connect();
    return c as RedisClient;
  };
  return {
    name,
    family: "node-redis",
    standalone: (url, o) => open(createClient({ url, socket: socket(o), ...timeout(o) }), o),
    cluster: (nodes, o) =>
      open(
        createCluster({
          rootNodes: nodes.map((n) => ({ socket: { host: n.host, port: n.port } })),
          defaults: { socket: socket(o), ...timeout(o) },
        }),
        o,
      ),
    sentinel:
      createSentinel &&
      ((sentinels, masterName, o) =>
        open(
          createSentinel({
            name: masterName,
            sentinelRootNodes: sentinels.map((s) => ({ host: s.host, port: s.port })),
            nodeClientOptions: { socket: socket(o), ...timeout(o) },
          }),
          o,
        )),
    command: (c, args) => {
      const x = c as unknown as {
        sendCommand(...a: unknown[]): Promise<unknown>;
        getSlotMaster?: unknown;
        getSentinelNode?: unknown;
      };
      if (typeof x.getSlotMaster === "function") return x.sendCommand(args[1], false, [...args]);
      if (typeof x.getSentinelNode === "function") return x.sendCommand(false, [...args]);
      return x.sendCommand([...args]);
    },
    close: async (c) => {
      const n = c as unknown as NodeRedisAny;
      if (!n.isOpen) return;
      if (typeof n.destroy === "function") n.destroy();
      else await n.disconnect();
    },
  };
}

/** Every supported client, newest first. */
export const ALL_CLIENTS: readonly ClientKind[] = [
  ioredisKind(
    "ioredis-6",
    Redis6 as unknown as IoredisCtor,
    Cluster6 as unknown as IoredisClusterCtor,
  ),
  ioredisKind(
    "ioredis-5",
    Redis5 as unknown as IoredisCtor,
    Cluster5 as unknown as IoredisClusterCtor,
  ),
  ioredisKind(
    "iovalkey",
    Valkey as unknown as IoredisCtor,
    ValkeyCluster as unknown as IoredisClusterCtor,
  ),
  nodeRedisKind(
    "node-redis-6",
    createClient6 as (o: object) => unknown,
    createCluster6 as (o: object) => unknown,
    createSentinel6 as (o: object) => unknown,
  ),
  nodeRedisKind(
    "node-redis-5",
    createClient5 as (o: object) => unknown,
    createCluster5 as (o: object) => unknown,
    createSentinel5 as (o: object) => unknown,
  ),
  nodeRedisKind(
    "node-redis-4",
    createClient4 as (o: object) => unknown,
    createCluster4 as (o: object) => unknown,
    undefined,
  ),
];

/** The clients this run covers: all, or those named in `SLUICE_TEST_CLIENTS` (comma-separated). */
export const CLIENTS: readonly ClientKind[] = (() => {
  const only = process.env.SLUICE_TEST_CLIENTS?.split(",").map((s) => s.trim());
  if (!only || only.length === 0 || only[0] === "") return ALL_CLIENTS;
  const chosen = ALL_CLIENTS.filter((c) => only.includes(c.name));
  if (chosen.length !== only.length)
    throw new Error(
      `SLUICE_TEST_CLIENTS names an unknown client (known: ${ALL_CLIENTS.map((c) => c.name).join(", ")})`,
    );
  return chosen;
})();

/** The client named `name` (for worker processes, which get it in their environment). */
export function clientKind(name: string): ClientKind {
  const k = ALL_CLIENTS.find((c) => c.name === name);
  if (!k) throw new Error(`unknown client ${name}`);
  return k;
}
