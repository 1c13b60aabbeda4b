/**
 * Watches the sentinels of a Sentinel-managed Redis for the first sign of a failover.
 *
 * Between the moment a sentinel promotes the replica (`REPLICAOF NO ONE`) and the moment clients
 * reach the new master, the old master still accepts writes, and every one of them is lost when
 * it is turned into a replica of the new one: in a `SENTINEL FAILOVER` about half a second, in
 * which a busy store acknowledges thousands of charges that then vanish. The sentinel doing the
 * failover announces each step on its pub/sub channels; the store stops writing at the first of
 * them (`+try-failover`, the promotion comes ~50 ms later) and goes on once the client is
 * connected to the new master (`+switch-master`).
 */

import type { Logger } from "../logger.js";
import { unrefTimer } from "../platform.js";
import {
  type SentinelAddress,
  type SentinelConnectionLike,
  SentinelSocket,
} from "./sentinel-socket.js";

/**
 * What the watcher reads of a Sentinel client: ioredis `Redis` options (`sentinels`, `name`,
 * `sentinelUsername`, `sentinelPassword`, `sentinelTLS`) and `duplicate`.
 */
export interface SentinelClientLike {
  readonly options?: object;
  /** ioredis `duplicate(override)` (a Cluster's differs: it is not used then). */
  readonly duplicate?: unknown;
}

type Duplicate = (override: Record<string, unknown>) => SentinelConnectionLike;

/** The options of an ioredis Sentinel client that the watcher uses. */
interface SentinelOptions {
  readonly sentinels?: ReadonlyArray<{ readonly host?: string; readonly port?: number }> | null;
  readonly name?: string | null;
  readonly sentinelUsername?: string | null;
  readonly sentinelPassword?: string | null;
  readonly sentinelTLS?: object | null;
}

/** What the watcher tells its store. */
export interface FailoverListener {
  /** A sentinel started a failover of the watched master: stop writing to it. */
  failoverStarted(): void;
  /** The sentinels switched the master to `host:port`. */
  masterSwitched(host: string, port: number): void;
  /** The failover was given up: the old master stays. */
  failoverAborted(): void;
}

/** Events that announce a failover of a master (published by the sentinel doing it). */
const STARTED = new Set([
  "+try-failover",
  "+elected-leader",
  "+failover-state-select-slave",
  "+selected-slave",
  "+failover-state-send-slaveof-noone",
  "+failover-state-wait-promotion",
  "+promoted-slave",
]);
/** Events that end a failover without a switch. (`-failover-abort-not-elected` is left out: it
 * tells that another sentinel does the failover.) */
const ABORTED = new Set([
  "-failover-abort-no-good-slave",
  "-failover-abort-slave-timeout",
  "-failover-abort-master-is-not-odown",
  "+failover-end-for-timeout",
]);
const SWITCHED = "+switch-master";
const CHANNELS = [...STARTED, ...ABORTED, SWITCHED];

/**
 * The master named in a sentinel event's text: `master <name> <ip> <port>` for the master
 * itself, `<type> <name> <ip> <port> @ <master> <ip> <port>` for its replicas and sentinels.
 */
export function masterOfEvent(message: string): string | undefined {
  const parts = message.split(" ");
  const at = parts.indexOf("@");
  if (at >= 0) return parts[at + 1];
  return parts[0] === "master" ? parts[1] : undefined;
}

/** A running watch; `stop` closes its connections. */
export interface SentinelWatch {
  /** Resolves once every sentinel has been subscribed to, or has failed to answer once. */
  readonly started: Promise<void>;
  stop(): void;
}

/**
 * Subscribes to every sentinel the client knows (the failover's events come from the one doing
 * it) on connections made with the client's own `duplicate`, pointed at each sentinel. Returns
 * undefined when the client is not a Sentinel client.
 */
export function watchSentinels(
  client: SentinelClientLike,
  listener: FailoverListener,
): SentinelWatch | undefined {
  const o = client.options as SentinelOptions | undefined;
  const sentinels = o?.sentinels;
  const name = o?.name;
  if (
    o === undefined ||
    !Array.isArray(sentinels) ||
    sentinels.length === 0 ||
    typeof name !== "string" ||
    typeof client.duplicate !== "function"
  )
    return undefined;
  const connections = sentinels.map((sentinel) =>
    (client.duplicate as Duplicate).call(client, {
      sentinels: null,
      name: null,
      role: "master",
      host: sentinel.host ?? "127.0.0.1",
      port: sentinel.port ?? 26379,
      username: o.sentinelUsername ?? null,
      password: o.sentinelPassword ?? null,
      tls: o.sentinelTLS ?? undefined,
      db: 0,
      keyPrefix: "",
      lazyConnect: false,
      enableReadyCheck: false,
      failoverDetector: false,
      connectionName: "sluice-sentinel-watch",
      // Keep trying a sentinel that is down; resubscribe when it is back.
      retryStrategy: () => 1000,
      maxRetriesPerRequest: null,
      autoResubscribe: true,
    }),
  );
  return follow(connections, name, listener);
}

/**
 * Subscribes `connections` (one per sentinel) to the failover channels and tells `listener`
 * what they announce of the master set `name`.
 */
function follow(
  connections: SentinelConnectionLike[],
  name: string,
  listener: FailoverListener,
): SentinelWatch {
  const subscribed: Array<Promise<void>> = [];
  for (const c of connections) {
    let failedOnce: () => void = () => undefined;
    subscribed.push(
      new Promise<void>((resolve) => {
        failedOnce = resolve;
        c.subscribe(...CHANNELS).then(
          () => resolve(),
          () => resolve(),
        );
      }),
    );
    c.on("error", () => {
      // Reconnection errors: the connection retries by itself (and subscribes again).
      failedOnce();
    });
    c.on("message", (channel, message) => {
      if (channel === SWITCHED) {
        // <name> <old ip> <old port> <new ip> <new port>
        const p = message.split(" ");
        if (p[0] === name && p.length >= 5) listener.masterSwitched(p[3]!, Number(p[4]));
        return;
      }
      if (masterOfEvent(message) !== name) return;
      if (STARTED.has(channel)) listener.failoverStarted();
      else if (ABORTED.has(channel)) listener.failoverAborted();
    });
  }
  return {
    started: Promise.all(subscribed).then(() => undefined),
    stop() {
      for (const c of connections) c.disconnect();
    },
  };
}

/** What the watch reads of a node-redis Sentinel client: the nodes it is connected to. */
export interface NodeRedisSentinelNodes {
  /** The sentinel the client follows (`{ host, port }`), once connected. */
  getSentinelNode(): unknown;
  /** The master it writes to (`{ host, port }`), once connected. */
  getMasterNode(): unknown;
}

/** How often the client is looked at until it knows its sentinel and master (ms). */
const DISCOVER_POLL_MS = 50;

function addressOf(x: unknown): SentinelAddress | undefined {
  const a = x as { host?: unknown; port?: unknown } | undefined;
  return typeof a?.host === "string" && typeof a.port === "number"
    ? { host: a.host, port: a.port }
    : undefined;
}

/** A flat `[field, value, field, value, …]` reply as a map. */
function fields(reply: unknown): Map<string, string> {
  const m = new Map<string, string>();
  if (Array.isArray(reply))
    for (let i = 0; i + 1 < reply.length; i += 2) m.set(String(reply[i]), String(reply[i + 1]));
  return m;
}

/**
 * The watch for a node-redis Sentinel client (`createSentinel`), which keeps its sentinel
 * connection private: once the client is connected, the sentinel it follows is asked which
 * master set it serves (`SENTINEL MASTERS`, matched by the master's address) and which other
 * sentinels watch it (`SENTINEL SENTINELS`), and each is followed over its own
 * {@link SentinelSocket}. A watch that cannot start (a sentinel that needs a password:
 * node-redis does not hand it over) says so once to `logger`, and `started` resolves anyway.
 */
export function watchNodeRedisSentinel(
  client: NodeRedisSentinelNodes,
  listener: FailoverListener,
  logger: Logger | undefined,
): SentinelWatch {
  let watch: SentinelWatch | undefined;
  let stopped = false;
  const started = (async () => {
    let sentinel: SentinelAddress | undefined;
    let master: SentinelAddress | undefined;
    // The client learns its nodes as it connects (its owner connects it).
    while (!stopped && (sentinel === undefined || master === undefined)) {
      sentinel = addressOf(client.getSentinelNode());
      master = addressOf(client.getMasterNode());
      if (sentinel === undefined || master === undefined)
        await new Promise<void>((resolve) => unrefTimer(setTimeout(resolve, DISCOVER_POLL_MS)));
    }
    if (stopped || sentinel === undefined || master === undefined) return;
    const ask = new SentinelSocket(sentinel);
    try {
      const masters = (await ask.command(["SENTINEL", "MASTERS"])) as unknown[];
      const set = masters
        .map(fields)
        .find((m) => Number(m.get("port")) === master.port && m.get("ip") === master.host);
      const name = set?.get("name");
      if (name === undefined)
        throw new Error(`no master set at ${master.host}:${master.port} on the sentinel`);
      const others = ((await ask.command(["SENTINEL", "SENTINELS", name])) as unknown[]).map(
        fields,
      );
      if (stopped) return;
      const all = [
        sentinel,
        ...others.map((m) => ({ host: m.get("ip") ?? "", port: Number(m.get("port")) })),
      ];
      watch = follow(
        all.map((a) => new SentinelSocket(a)),
        name,
        listener,
      );
      await watch.started;
    } catch (err) {
      logger?.warn(
        `sluice: the Sentinel watch could not start (${err instanceof Error ? err.message : String(err)}): a failover may lose the charges written to the old master after the promotion`,
      );
    } finally {
      ask.disconnect();
    }
  })();
  return {
    started,
    stop() {
      stopped = true;
      watch?.stop();
    },
  };
}
