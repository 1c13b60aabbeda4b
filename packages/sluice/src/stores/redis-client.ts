/**
 * The client port: the one narrow interface through which the Redis store speaks to Redis,
 * and one adapter per client family — ioredis (5, 6; and iovalkey, its Valkey fork, which has
 * the same shape; and `upstashClient`'s HTTP client), and node-redis (the `redis` package, 4 to
 * 6: `createClient`, `createCluster`, `createSentinel`). The store never looks at a client
 * itself: it runs scripts, reads a status, follows a few events and, for Sentinel, asks to
 * reconnect. sluice imports no client library; each adapter reads the client it is given.
 *
 * No figure the store reads back depends on how a client parses numbers: every integer the
 * script answers stays within ±2^49 (docs/redis.md, "What crosses the wire"), where every
 * client's RESP parser is exact (ioredis 6 and node-redis read `:9007199254740991` as …992).
 */

import type { Logger } from "../logger.js";
import { unrefTimer } from "../platform.js";
import {
  type FailoverListener,
  type NodeRedisSentinelNodes,
  type SentinelWatch,
  watchNodeRedisSentinel,
  watchSentinels,
} from "./sentinel-watch.js";

/** A connection's state, in ioredis's words (node-redis's flags are mapped onto them). */
export type ClientStatus = "ready" | "wait" | "connecting" | "reconnecting" | "end";

/** The client events the store follows. */
export type ClientEvent = "ready" | "error" | "close" | "end" | "refresh";

/**
 * What a client that is not one of the families' own calls itself in messages
 * (`upstashClient`'s: "Upstash REST client").
 */
export const CLIENT_NAME: unique symbol = Symbol.for("sluice.clientName");

/** The client families sluice has an adapter for. */
export type ClientFamily = "ioredis" | "node-redis";

/**
 * The part of an ioredis client the store uses. An ioredis (5 or 6) `Redis` (standalone or
 * Sentinel) or `Cluster`, or an iovalkey one, satisfies it; so does `upstashClient(…)`.
 */
export interface RedisClientLike {
  /** Send one command (ioredis `call(command, args)`). */
  call(command: string, args: Array<string | number | Uint8Array>): Promise<unknown>;
  /** ioredis connection status (`wait`, `connecting`, `connect`, `ready`, `reconnecting`, `end`, …). */
  readonly status: string;
  /** True for an ioredis `Cluster`: batches are then grouped by slot. */
  readonly isCluster?: boolean;
  /** Start connecting a client made with `lazyConnect` (ioredis `connect()`). */
  connect?(): Promise<void>;
  /** Close the connection; with `true`, reconnect at once (ioredis `disconnect(reconnect)`). */
  disconnect?(reconnect?: boolean): void;
  /** The connection's socket, for the address of the server it is connected to. */
  readonly stream?: { readonly remoteAddress?: string; readonly remotePort?: number };
  /** ioredis options (a Sentinel client's `sentinels` and `name`: see `watchSentinels`). */
  readonly options?: object;
  /** ioredis `duplicate(override)` (the Sentinel watch's connections). */
  readonly duplicate?: unknown;
  on(event: "error", listener: (err: Error) => void): unknown;
  on(event: "ready" | "close" | "end" | "refresh", listener: () => void): unknown;
  off(event: "error", listener: (err: Error) => void): unknown;
  off(event: "ready" | "close" | "end" | "refresh", listener: () => void): unknown;
}

/** What node-redis clients of every kind have: their flags and their events. */
interface NodeRedisBase {
  /** Whether `connect()` was called and the client was not closed since. */
  readonly isOpen: boolean;
  /** Whether the client can take commands now (node-redis 5 and later; a 4 `createClient` too). */
  readonly isReady?: boolean;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  off(event: string, listener: (...args: unknown[]) => void): unknown;
}

/**
 * A node-redis client (the `redis` package, 4 to 6, or `@redis/client`): `createClient(…)`,
 * connected by its owner (`await client.connect()`). sluice never connects or closes it.
 */
export interface NodeRedisClientLike extends NodeRedisBase {
  /** `sendCommand(["EVALSHA", …])`. */
  sendCommand(args: string[]): Promise<unknown>;
}

/** A node-redis Cluster client: `createCluster({ rootNodes })`, connected by its owner. */
export interface NodeRedisClusterLike extends NodeRedisBase {
  /** `sendCommand(firstKey, isReadonly, args)`: routed by the first key's slot. */
  sendCommand(
    firstKey: string | undefined,
    isReadonly: boolean | undefined,
    args: string[],
  ): Promise<unknown>;
  /** The slot's master (what tells a cluster from a plain client). */
  getSlotMaster(slot: number): unknown;
}

/** A node-redis Sentinel client (node-redis 5 and later): `createSentinel({ name, sentinelRootNodes })`. */
export interface NodeRedisSentinelLike extends NodeRedisBase {
  /** `sendCommand(isReadonly, args)`: sent to the master. */
  sendCommand(isReadonly: boolean | undefined, args: string[]): Promise<unknown>;
  /** The sentinel the client follows (what tells it from a plain client). */
  getSentinelNode(): unknown;
}

/**
 * Any Redis client `redisStore` takes, as its owner made it: ioredis 5 or 6 (`new Redis(…)`,
 * Sentinel, `new Cluster(…)`), iovalkey, or node-redis 4 to 6 (`createClient`, `createCluster`,
 * `createSentinel`). See docs/redis.md for what each supports.
 */
export type RedisClient =
  RedisClientLike | NodeRedisClientLike | NodeRedisClusterLike | NodeRedisSentinelLike;

/** One argument of a script call: keys and arguments are sent as text. */
export type ScriptArg = string | number;

/** The store's view of its client: the client port. */
export interface ClientPort {
  /** Which adapter, for messages and docs. */
  readonly family: ClientFamily;
  /** What the client is, in a message ("ioredis Cluster", "node-redis createClient", …). */
  readonly describe: string;
  /** Batches are grouped by slot, each call routed by its first key. */
  readonly cluster: boolean;
  /** The connection's state now. */
  status(): ClientStatus;
  /** `EVALSHA` (or `EVAL` with `text`): `keys` then `args`, routed by `keys[0]` in a Cluster. */
  script(
    command: "EVALSHA" | "EVAL",
    target: string,
    keys: readonly string[],
    args: readonly ScriptArg[],
  ): Promise<unknown>;
  /** Starts connecting a client made to connect later (ioredis `lazyConnect`); else nothing. */
  connect(): void;
  /**
   * Drops the connection and connects again (Sentinel: to the master the sentinels name), when
   * the client can; false when it cannot.
   */
  reconnect(): boolean;
  /** The address the connection goes to, when the client tells it. */
  remote(): { readonly address?: string; readonly port?: number } | undefined;
  /**
   * Follows the client's events (one listener per event on the client, however many stores
   * share it). Returns the function that stops following.
   */
  follow(listener: ClientListener): () => void;
  /**
   * Watches the sentinels of a Sentinel client for the first sign of a failover
   * (sentinel-watch.ts); undefined for any other client.
   */
  watchSentinels(listener: FailoverListener, logger: Logger | undefined): SentinelWatch | undefined;
  /** The ioredis client (ioredis and iovalkey only), for what only ioredis needs. */
  readonly ioredis: RedisClientLike | undefined;
}

/** Something that follows a client's events (a store). */
export interface ClientListener {
  onClientEvent(event: ClientEvent, err?: Error): void;
}

/**
 * The adapter for `client`, or a message saying what is wrong with it (the caller names the
 * field). Tells the families apart by shape: ioredis has `call` and a `status` string;
 * node-redis has `sendCommand` and `isOpen`, its Cluster `getSlotMaster`, its Sentinel
 * `getSentinelNode`.
 */
export function clientPort(client: unknown): ClientPort | string {
  if (typeof client !== "object" || client === null) return NOT_A_CLIENT;
  const c = client as Partial<RedisClientLike & NodeRedisBase & { sendCommand: unknown }>;
  if (typeof c.on !== "function" && typeof c.call !== "function") return NOT_A_CLIENT;
  if (typeof c.call === "function" && typeof c.status === "string")
    return new IoredisPort(client as RedisClientLike);
  if (typeof c.sendCommand === "function" && typeof c.isOpen === "boolean") {
    const n = client as NodeRedisBase & Partial<NodeRedisClusterLike & NodeRedisSentinelLike>;
    if (typeof n.getSlotMaster === "function") return new NodeRedisPort(n, "cluster");
    if (typeof n.getSentinelNode === "function") return new NodeRedisPort(n, "sentinel");
    return new NodeRedisPort(n, "client");
  }
  if (typeof c.sendCommand === "function")
    return "is a node-redis multi or isolated client; pass the client made by createClient, createCluster or createSentinel";
  return NOT_A_CLIENT;
}

const NOT_A_CLIENT =
  "must be a Redis client: ioredis 5 or 6 (new Redis(…), new Cluster(…)), iovalkey, or node-redis 4–6 (createClient, createCluster, createSentinel)";

// ─── the events, shared by every store on one client ───

interface Hub {
  readonly listeners: Set<ClientListener>;
  readonly handlers: Array<[string, (err?: Error) => void]>;
}

interface Emitter {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  off(event: string, listener: (...args: unknown[]) => void): unknown;
}

const hubs = new WeakMap<object, Hub>();

/**
 * Follows `client`'s events, each native event mapped to the store's: one listener per event
 * on the client, however many stores use it (its `error` listener also keeps the client's
 * reconnection errors from being reported as unhandled).
 */
function followEvents(
  client: Emitter,
  events: ReadonlyArray<readonly [native: string, event: ClientEvent]>,
  listener: ClientListener,
): () => void {
  let hub = hubs.get(client);
  if (hub === undefined) {
    const listeners = new Set<ClientListener>();
    const handlers = events.map(([native, event]): [string, (err?: Error) => void] => [
      native,
      (err?: Error) => {
        for (const l of listeners) l.onClientEvent(event, err instanceof Error ? err : undefined);
      },
    ]);
    for (const [native, h] of handlers) client.on(native, h as (...args: unknown[]) => void);
    hub = { listeners, handlers };
    hubs.set(client, hub);
  }
  hub.listeners.add(listener);
  const h = hub;
  return () => {
    if (!h.listeners.delete(listener) || h.listeners.size > 0) return;
    for (const [native, fn] of h.handlers) client.off(native, fn as (...args: unknown[]) => void);
    hubs.delete(client);
  };
}

/** `head`, the keys, then the arguments — numbers as decimal text when `asText`. */
function scriptArgs(
  head: Array<string | number>,
  keys: readonly string[],
  args: readonly ScriptArg[],
  asText: boolean,
): Array<string | number> {
  for (const k of keys) head.push(k);
  for (const x of args) head.push(asText && typeof x !== "string" ? String(x) : x);
  return head;
}

// ─── ioredis, iovalkey ───

const IOREDIS_EVENTS: ReadonlyArray<readonly [string, ClientEvent]> = [
  ["ready", "ready"],
  ["error", "error"],
  ["close", "close"],
  ["end", "end"],
  ["refresh", "refresh"],
];

/** ioredis 5 and 6, iovalkey, and `upstashClient`: `call`, `status`, events as the store's. */
class IoredisPort implements ClientPort {
  readonly family = "ioredis";
  readonly cluster: boolean;
  readonly describe: string;
  readonly ioredis: RedisClientLike;

  constructor(private readonly client: RedisClientLike) {
    this.cluster = client.isCluster === true;
    this.describe =
      (client as { [CLIENT_NAME]?: string })[CLIENT_NAME] ??
      (this.cluster ? "ioredis Cluster" : "ioredis client");
    this.ioredis = client;
  }

  status(): ClientStatus {
    const s = this.client.status;
    // ioredis: wait (lazyConnect), connecting, connect (before the ready check), ready, close,
    // reconnecting, end.
    if (s === "ready" || s === "wait" || s === "end" || s === "reconnecting") return s;
    return "connecting";
  }

  script(
    command: "EVALSHA" | "EVAL",
    target: string,
    keys: readonly string[],
    args: readonly ScriptArg[],
  ): Promise<unknown> {
    return this.client.call(command, scriptArgs([target, keys.length], keys, args, false));
  }

  connect(): void {
    if (this.client.status === "wait") this.client.connect?.().catch(() => undefined);
    else if (this.client.status === "end") this.client.connect?.().catch(() => undefined);
  }

  reconnect(): boolean {
    if (typeof this.client.disconnect !== "function") return false;
    this.client.disconnect(true);
    return true;
  }

  remote(): { address?: string; port?: number } | undefined {
    const s = this.client.stream;
    return s === undefined ? undefined : { address: s.remoteAddress, port: s.remotePort };
  }

  watchSentinels(listener: FailoverListener): SentinelWatch | undefined {
    return watchSentinels(this.client, listener);
  }

  follow(listener: ClientListener): () => void {
    if (typeof this.client.on !== "function") return () => undefined;
    return followEvents(this.client as unknown as Emitter, IOREDIS_EVENTS, listener);
  }
}

// ─── node-redis ───

/** node-redis's events, as the store's. */
const NODE_REDIS_EVENTS: Readonly<
  Record<"client" | "cluster" | "sentinel", ReadonlyArray<readonly [string, ClientEvent]>>
> = {
  // `reconnecting`: the connection was lost and is being made again.
  client: [
    ["ready", "ready"],
    ["error", "error"],
    ["reconnecting", "close"],
    ["end", "end"],
  ],
  // A Cluster says `connect` once its slots are known and its nodes connected (5 and later; a
  // 4 Cluster says nothing: its readiness is polled, see `status`), `node-*` per node.
  cluster: [
    ["connect", "ready"],
    ["error", "error"],
    ["node-error", "error"],
    ["node-ready", "refresh"],
    ["disconnect", "end"],
  ],
  // A Sentinel client follows the sentinels itself: a new master is a `topology-change`, after
  // which it connects to the new master (told as `ready` once it is: a failover the watch saw
  // ends when the client's master is the new one, see `remote`).
  sentinel: [
    ["error", "error"],
    ["client-error", "error"],
    ["topology-change", "refresh"],
  ],
};

/** How often a node-redis client without a `ready` event is looked at while one is awaited (ms). */
const READY_POLL_MS = 50;
/** How often, and how long, a node-redis Sentinel client is looked at after a new master (ms). */
const SWITCH_POLL_MS = 5;
const SWITCH_WAIT_MS = 10_000;

/** node-redis 4 to 6: `createClient`, `createCluster`, `createSentinel`. */
class NodeRedisPort implements ClientPort {
  readonly family = "node-redis";
  readonly cluster: boolean;
  readonly describe: string;
  readonly ioredis = undefined;
  /** The client ended (closed by its owner) since sluice first saw it. */
  private ended = false;
  private poll: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly client: NodeRedisBase,
    private readonly kind: "client" | "cluster" | "sentinel",
  ) {
    this.cluster = kind === "cluster";
    this.describe = `node-redis ${kind === "client" ? "createClient" : kind === "cluster" ? "createCluster" : "createSentinel"} client`;
  }

  status(): ClientStatus {
    const c = this.client;
    // A node-redis 4 Cluster has no isReady: it is ready once open (its connect() resolved).
    const ready = c.isReady ?? c.isOpen;
    if (ready) {
      this.ended = false;
      return "ready";
    }
    if (c.isOpen) return "connecting";
    // Not open: never connected by its owner yet (sluice waits for it: it never connects a
    // node-redis client itself), or closed.
    return this.ended ? "end" : "wait";
  }

  script(
    command: "EVALSHA" | "EVAL",
    target: string,
    keys: readonly string[],
    args: readonly ScriptArg[],
  ): Promise<unknown> {
    // node-redis sends only strings (and buffers).
    const a = scriptArgs([command, target, String(keys.length)], keys, args, true) as string[];
    if (this.kind === "cluster")
      return (this.client as unknown as NodeRedisClusterLike).sendCommand(keys[0], false, a);
    if (this.kind === "sentinel")
      return (this.client as unknown as NodeRedisSentinelLike).sendCommand(false, a);
    return (this.client as unknown as NodeRedisClientLike).sendCommand(a);
  }

  /** node-redis clients are connected by their owner (`await client.connect()`), never by sluice. */
  connect(): void {
    this.watchReady();
  }

  reconnect(): boolean {
    return false;
  }

  /** A Sentinel client's master, once connected (the others do not tell). */
  remote(): { address?: string; port?: number } | undefined {
    if (this.kind !== "sentinel") return undefined;
    const m = (this.client as unknown as NodeRedisSentinelNodes).getMasterNode() as
      { host?: string; port?: number } | undefined;
    return m === undefined ? undefined : { address: m.host, port: m.port };
  }

  watchSentinels(
    listener: FailoverListener,
    logger: Logger | undefined,
  ): SentinelWatch | undefined {
    if (this.kind !== "sentinel") return undefined;
    return watchNodeRedisSentinel(
      this.client as unknown as NodeRedisSentinelNodes,
      listener,
      logger,
    );
  }

  follow(listener: ClientListener): () => void {
    const stop = followEvents(this.client, NODE_REDIS_EVENTS[this.kind], {
      onClientEvent: (event, err) => {
        if (event === "end") this.ended = true;
        listener.onClientEvent(event, err);
        // A Sentinel client's new master: `ready` once the client is (it says nothing then).
        if (this.kind === "sentinel" && event === "refresh")
          this.whenReady(() => listener.onClientEvent("ready"));
      },
    });
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      stop();
    };
  }

  private readonly listeners = new Set<ClientListener>();

  /** Calls `fn` once the client is ready: now, or when a look every few ms finds it so. */
  private whenReady(fn: () => void): void {
    if (this.status() === "ready") {
      fn();
      return;
    }
    const since = Date.now();
    const t = setInterval(() => {
      const ready = this.status() === "ready";
      if (!ready && Date.now() - since < SWITCH_WAIT_MS) return;
      clearInterval(t);
      if (ready) fn();
    }, SWITCH_POLL_MS);
    unrefTimer(t);
  }

  /**
   * Clients that do not say when they become ready (a node-redis 4 Cluster; a Sentinel client)
   * are looked at every {@link READY_POLL_MS} while they are not, and their readiness told as a
   * `ready` event.
   */
  private watchReady(): void {
    if (this.kind === "client" || this.poll !== undefined) return;
    if (this.kind === "cluster" && this.client.isReady !== undefined) return;
    this.poll = setInterval(() => {
      if (this.status() !== "ready") return;
      clearInterval(this.poll);
      this.poll = undefined;
      for (const l of this.listeners) l.onClientEvent("ready");
    }, READY_POLL_MS);
    unrefTimer(this.poll);
  }
}
