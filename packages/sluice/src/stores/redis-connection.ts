/**
 * The Redis store's connection, as the store sees it through the client port: the gate that
 * holds calls back while they cannot go — the first connection (within `connectTimeoutMs`), a
 * Sentinel failover (from the sentinels' first word of it until the client reaches the new
 * master) — and what the client's events mean for the calls (redis-client.ts follows them).
 */
import { monoNow } from "../clock.js";
import { StoreError } from "../errors.js";
import type { Logger } from "../logger.js";
import { unrefTimer } from "../platform.js";
import type { ClientEvent, ClientPort, ClientStatus } from "./redis-client.js";
import { causeOf, isUnreachable } from "./redis-health.js";
import type { Gate, Queued, RemoteCalls } from "./remote-calls.js";
import type { SentinelWatch } from "./sentinel-watch.js";

/** ioredis's message for a connection closed under a command or a connect. */
const CONNECTION_CLOSED = "Connection is closed.";

/** Longest a Sentinel failover holds calls back when the sentinels never say it ended (ms). */
const MAX_FAILOVER_HOLD_MS = 10_000;

/** A client status in a message. */
const STATUS_WORDS: Readonly<Record<ClientStatus, string>> = {
  ready: "ready",
  wait: "not connected yet",
  connecting: "connecting",
  reconnecting: "reconnecting",
  end: "closed",
};

/** What the connection needs to know of the store's options. */
export interface ConnectionOptions {
  readonly timeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly watchSentinels: boolean;
  readonly logger: Logger | undefined;
}

/** The connection gate of one Redis store; see the file's comment. */
export class RedisConnection<Q extends Queued> implements Gate<Q> {
  /** The client has been ready at least once. */
  private connected: boolean;
  /**
   * Until when (monoNow) the first call of a slot (one slot, 0, outside a Cluster) still counts
   * as part of the first connection, and the slots that have answered since. 0 once over.
   */
  private warmUntil: number;
  private readonly slotsAnswered = new Set<number>();
  /** Why the first connection failed (calls then fail fast until the client is ready). */
  private connectError: StoreError | undefined;
  /** When the first connection's budget ends (monoNow), once a call has waited for it. */
  private connectDeadline = 0;
  /** Set while a Sentinel failover is under way: calls wait for the new master. */
  private failover: { readonly since: number; to?: { host: string; port: number } } | undefined;
  /** When (monotonic ms) the sentinels last announced a failover step; -Infinity before. */
  private lastFailoverEvent = -Infinity;
  /** The client's last error was a connect cut short ("Connection is closed."), not by its user. */
  private connectCut = false;
  private readyWaiters: Array<{ resolve: () => void; reject: (err: StoreError) => void }> = [];
  private readonly unfollow: () => void;
  private readonly sentinels: SentinelWatch | undefined;
  private calls!: RemoteCalls<Q>;
  private closed = false;

  constructor(
    private readonly port: ClientPort,
    private readonly o: ConnectionOptions,
  ) {
    this.connected = port.status() === "ready";
    this.warmUntil = monoNow() + o.connectTimeoutMs;
    this.unfollow = port.follow(this);
    this.sentinels =
      o.watchSentinels && !port.cluster
        ? port.watchSentinels(
            {
              failoverStarted: () => this.failoverStarted(),
              masterSwitched: (host, p) => this.masterSwitched(host, p),
              failoverAborted: () => this.failoverEnded(),
            },
            o.logger,
          )
        : undefined;
  }

  /** The engine whose calls this gate holds (set once, right after both are made). */
  attach(calls: RemoteCalls<Q>): void {
    this.calls = calls;
  }

  /** Calls go to Redis now. */
  get open(): boolean {
    return this.port.status() === "ready" && this.failover === undefined;
  }

  /** Why no call can go now (the client not ready), in words; undefined when one can. */
  unavailable(): string | undefined {
    const status = this.port.status();
    return status === "ready" ? undefined : `${this.port.describe}: ${STATUS_WORDS[status]}`;
  }

  /**
   * The deadline of a call of `slot` due at `due`: the first call of a slot made soon after the
   * client was ready is part of the first connection and has its budget (it loads the script —
   * NOSCRIPT, then EVAL — and a Cluster connects to each node on its first call).
   */
  dueOf(slot: number, due: number, now: number): number {
    return this.warmUntil > now && !this.slotsAnswered.has(slot)
      ? Math.max(due, this.warmUntil)
      : due;
  }

  /** A call of `slot` was answered now (the first connection's budget ends for it). */
  answered(slot: number): void {
    if (this.warmUntil === 0) return;
    if (monoNow() < this.warmUntil) this.slotsAnswered.add(slot);
    else {
      this.warmUntil = 0;
      this.slotsAnswered.clear();
    }
  }

  /**
   * Resolves once calls can go to Redis: the client is connected (and, during a Sentinel
   * failover, connected to the new master; with a Sentinel client, the sentinels are watched).
   * See `RedisStore.ready`.
   */
  ready(): Promise<void> {
    const connected = this.connectedReady();
    const watch = this.sentinels?.started;
    return watch ? Promise.all([connected, watch]).then(() => undefined) : connected;
  }

  private connectedReady(): Promise<void> {
    if (this.closed)
      return Promise.reject(new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "redisStore is closed"));
    if (this.open) return Promise.resolve();
    if (!this.connected && this.connectError) return Promise.reject(this.connectError);
    this.startConnecting();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.readyWaiters = this.readyWaiters.filter((w) => w !== waiter);
        reject(
          new StoreError(
            "SLUICE_ERR_STORE_TIMEOUT",
            `Redis did not become ready within ${this.o.connectTimeoutMs} ms (connectTimeoutMs)`,
          ),
        );
      }, this.o.connectTimeoutMs);
      const waiter = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (err: StoreError) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.readyWaiters.push(waiter);
    });
  }

  // ─── the gate ───

  /**
   * Whether queued calls wait instead of going: during a Sentinel failover, and before the
   * first connection (unless it failed, or the client was closed for good).
   */
  mustHold(): boolean {
    if (this.failover !== undefined) return true;
    if (this.connected || this.connectError !== undefined) return false;
    const status = this.port.status();
    return status !== "ready" && status !== "end";
  }

  /** Held calls are looked at: for a failover when the first is due, else at the connect budget's end. */
  holdUntil(queue: readonly Q[]): number {
    this.startConnecting();
    return this.failover ? queue[0]!.due : this.connectDeadline;
  }

  holdEnded(): void {
    if (this.failover) {
      // Each held call answered by its own deadline meanwhile.
      const now = monoNow();
      this.calls.rejectQueued(
        new StoreError(
          "SLUICE_ERR_STORE_TIMEOUT",
          `Redis did not answer within ${this.o.timeoutMs} ms (a Sentinel failover is under way)`,
        ),
        (p) => p.due <= now,
      );
      this.calls.holdAgain();
    } else if (!this.connected) {
      this.connectFailed(
        new StoreError(
          "SLUICE_ERR_STORE_TIMEOUT",
          `Redis did not connect within ${this.o.connectTimeoutMs} ms (connectTimeoutMs)`,
        ),
      );
    }
  }

  /** Makes a lazy client connect, and starts the first connection's budget. */
  private startConnecting(): void {
    if (this.connected || this.connectError) return;
    if (this.connectDeadline === 0) this.connectDeadline = monoNow() + this.o.connectTimeoutMs;
    this.port.connect();
  }

  /** The first connection failed: what waits for it fails, and calls fail fast until it is up. */
  private connectFailed(err: StoreError): void {
    this.connectError = err;
    this.calls.stopHolding();
    this.calls.outage.began(err.cause === undefined ? err.message : causeOf(err.cause), monoNow());
    if (this.failover === undefined) this.calls.rejectQueued(err);
    for (const w of this.readyWaiters.splice(0)) w.reject(err);
  }

  /** Calls may go again: readiness resolves, and what waited goes (or waits again). */
  private reopen(): void {
    if (this.open) for (const w of this.readyWaiters.splice(0)) w.resolve();
    this.calls.reopen();
  }

  // ─── the client's events ───

  /** @internal The client's events (see redis-client.ts `ClientPort.follow`). */
  onClientEvent(event: ClientEvent, err?: Error): void {
    if (this.closed) return;
    if (event === "error" || event === "ready")
      this.connectCut = err?.message === CONNECTION_CLOSED;
    if (event === "error" && err !== undefined) this.calls.lastCause = causeOf(err);
    if (event === "ready") {
      if (!this.connected) {
        this.connected = true;
        this.warmUntil = monoNow() + this.o.connectTimeoutMs;
        this.connectError = undefined;
        // Calls that waited for the first connection get their whole budget from now.
        const due = monoNow() + this.o.timeoutMs;
        for (const p of this.calls.queued) p.due = due;
      }
      if (this.failover?.to !== undefined && this.connectedTo(this.failover.to) !== false)
        this.failover = undefined;
      // Connected again: an outage is over (a call that still fails begins another).
      this.calls.outage.ended(monoNow());
      this.reopen();
    } else if (event === "refresh") {
      this.calls.retryNow();
    } else if (
      event === "end" &&
      this.connectCut &&
      this.connected &&
      monoNow() - this.lastFailoverEvent < MAX_FAILOVER_HOLD_MS
    ) {
      // ioredis's own failover detector (`failoverDetector: true`) disconnects the client on
      // `+switch-master`; when that lands while the client is reconnecting through the
      // sentinels (its master crashed), the connect in flight fails with "Connection is
      // closed." and the client ends for good (ioredis 5). Neither the store nor the client's
      // user closed it (a user's `disconnect()` emits no such error): connect again.
      this.connectCut = false;
      this.port.ioredis?.connect?.().catch(() => undefined);
    } else if (!this.connected && this.connectError === undefined) {
      // Before the first connection: an address where nothing listens fails at once; a server
      // that is slow to answer is waited for (connectTimeoutMs).
      if (event === "end" || (event === "error" && isUnreachable(err)))
        this.connectFailed(
          new StoreError(
            "SLUICE_ERR_STORE_UNAVAILABLE",
            `Redis is unreachable: ${err ? err.message : "the client was closed"}`,
            { cause: err },
          ),
        );
    }
  }

  /** Whether the client is connected to `host:port` (undefined when it cannot tell). */
  private connectedTo(addr: { host: string; port: number }): boolean | undefined {
    const s = this.port.remote();
    if (this.port.status() !== "ready" || s?.port === undefined) return undefined;
    return s.port === addr.port && (s.address ?? addr.host).endsWith(addr.host);
  }

  // ─── Sentinel failovers ───

  private failoverStarted(): void {
    this.lastFailoverEvent = monoNow();
    if (this.closed || this.failover !== undefined) return;
    this.failover = { since: monoNow() };
    // A failover that never ends (the sentinels gave up without saying so) stops holding
    // calls after this long; each held call is answered by its own deadline meanwhile.
    const f = this.failover;
    unrefTimer(
      setTimeout(() => {
        if (this.failover === f) this.failoverEnded();
      }, MAX_FAILOVER_HOLD_MS),
    );
  }

  private masterSwitched(host: string, port: number): void {
    this.lastFailoverEvent = monoNow();
    if (this.closed) return;
    const f = this.failover ?? { since: monoNow() };
    f.to = { host, port };
    this.failover = f;
    const on = this.connectedTo(f.to);
    if (on === true) {
      this.failoverEnded();
      return;
    }
    // Still on the old master (the client has no failover detector of its own): reconnect,
    // through the sentinels, to the new one. The next `ready` ends the failover.
    if (this.port.status() === "ready" && on === false) this.port.reconnect();
  }

  private failoverEnded(): void {
    if (this.failover === undefined) return;
    this.failover = undefined;
    this.reopen();
  }

  /** Stops following the client and the sentinels; what waits for readiness fails with `err`. */
  close(err: StoreError): void {
    this.closed = true;
    for (const w of this.readyWaiters.splice(0)) w.reject(err);
    this.sentinels?.stop();
    this.unfollow();
  }
}
