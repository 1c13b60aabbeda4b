import type { RuleDecision } from "../decision.js";
import { type Clock, systemClock } from "../clock.js";
import { randomId, unrefTimer } from "../platform.js";
import { SluiceError, StoreError, ValidationError, type ValidationIssue } from "../errors.js";
import type { Policy } from "../policy.js";
import type { Store, StoreDecision, StoreRequest } from "../store.js";
import { INSTANCES_LUA, type LuaScript, SLUICE_LUA } from "./lua-scripts.js";
import {
  OP_ADJUST,
  OP_DECIDE,
  OP_GIVE_BACK,
  OP_LEASE,
  OP_PEEK,
  OP_RELEASE,
  OP_RESET,
  OP_SET,
  identifierTag,
  keyCode,
  scriptCode,
  slotOfTag,
  tagForSlot,
} from "./redis-keys.js";
import { type Logger, resolveLogger } from "../logger.js";
import {
  Breakers,
  ClockOffsets,
  Outage,
  SlotCalls,
  causeOf,
  isUnreachable,
  monoNow,
} from "./redis-health.js";
import {
  type ClientEvent,
  type ClientPort,
  type ClientStatus,
  type RedisClient,
  clientPort,
} from "./redis-client.js";
import type { SentinelWatch } from "./sentinel-watch.js";

export type {
  NodeRedisClientLike,
  NodeRedisClusterLike,
  NodeRedisSentinelLike,
  RedisClient,
  RedisClientLike,
} from "./redis-client.js";
import { type LeaseCounters, LeaseBook, type LeaseReply } from "./redis-leases.js";

/** Options of {@link redisStore}. */
export interface RedisStoreOptions {
  /**
   * A Redis client, as you made it: ioredis 5 or 6 (`new Redis(url)`, `new Redis({ sentinels,
   * name })`, `new Cluster(nodes)`), iovalkey, or node-redis 4–6 (`createClient`,
   * `createCluster`, `createSentinel`; connect it yourself: `await client.connect()`). sluice
   * never closes it. docs/redis.md lists what each supports.
   */
  client: RedisClient;
  /**
   * Time source in epoch ms, for tests and simulations: passed to the script instead of the
   * Redis server clock (TIME). Leave unset in production so that skewed app clocks agree.
   */
  now?: Clock;
  /** Prefix of every key. Default `"sl:"`. Must not contain `{` or `}`. */
  prefix?: string;
  /**
   * Per-call budget (ms), counted from the call: a call not answered within it rejects with
   * `SLUICE_ERR_STORE_TIMEOUT` (the policy's `onStoreError` decides), and Redis will not run it
   * afterwards. Default 500.
   */
  timeoutMs?: number;
  /**
   * The budget of the first connection (ms): calls made before the client has ever been ready
   * wait for it (then each has its `timeoutMs`), up to this long from the first of them; after
   * it, or at once when nothing listens at the address, they reject and `onStoreError`
   * decides. The first call once connected (it loads the script; in a Cluster, the first of
   * each slot, which connects to its node) has this budget too. Default 5000.
   */
  connectTimeoutMs?: number;
  /**
   * With a Sentinel client: watch the sentinels and stop writing to the master at the first
   * sign of a failover, until the client reaches the new master. Default true.
   */
  watchSentinels?: boolean;
  /** Most decisions carried by one script call. Default 128. */
  maxBatch?: number;
  /**
   * Most script calls in flight at once (per slot in a Cluster); calls made meanwhile wait and
   * go together (a queue that fills a whole `maxBatch` goes at once all the same). More lets Redis run one call while Node sends or reads another, which lowers
   * latency when the process has CPU to spare; fewer makes fewer, larger calls, which costs
   * less CPU per decision on both sides when the process is busy (a decision service under
   * load: `sluice serve` uses 2). Default 4.
   */
  maxInFlight?: number;
  /** Answer keys known to be denied locally until their retry time. Default true. */
  denyCache?: boolean;
  /** Most entries in the deny cache (oldest dropped first). Default 10,000. */
  denyCacheSize?: number;
  /** Consecutive failures after which the breaker opens (calls fail fast). Default 5. */
  breakerFailures?: number;
  /**
   * While a breaker is open, how long until one call is let through to try Redis again (ms);
   * when the client reconnects, the next call tries at once. Default 1000.
   */
  probeIntervalMs?: number;
  /** How many app instances share the limits (for the insurance limiter); default: counted through Redis. */
  instances?: number;
  /** How often this store records itself as live in Redis (ms); 0 turns counting off. Default 5000. */
  heartbeatMs?: number;
  /**
   * Added to every key's TTL (ms). Default 0; 10,000 when `now` is injected, so that real-time
   * expiry cannot drop state that the injected clock still considers live.
   */
  ttlPadMs?: number;
  /**
   * Where the store says, once, that it cannot reach Redis (naming the cause, e.g.
   * `ECONNREFUSED 127.0.0.1:6379`) and, once, that it can again. Default: the console; `false`:
   * silent. Any object with `warn(message)` (pino, winston, …).
   */
  logger?: Logger | false;
}

const OPTION_KEYS: { readonly [K in keyof Required<RedisStoreOptions>]: true } = {
  client: true,
  now: true,
  prefix: true,
  timeoutMs: true,
  connectTimeoutMs: true,
  watchSentinels: true,
  maxBatch: true,
  maxInFlight: true,
  denyCache: true,
  denyCacheSize: true,
  breakerFailures: true,
  probeIntervalMs: true,
  instances: true,
  heartbeatMs: true,
  ttlPadMs: true,
  logger: true,
};

interface ResolvedOptions {
  readonly client: RedisClient;
  /** The client's adapter. */
  readonly port: ClientPort;
  readonly now: Clock | undefined;
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly watchSentinels: boolean;
  readonly maxBatch: number;
  readonly maxInFlight: number;
  readonly denyCache: boolean;
  readonly denyCacheSize: number;
  readonly breakerFailures: number;
  readonly probeIntervalMs: number;
  readonly instances: number | undefined;
  readonly heartbeatMs: number;
  readonly ttlPadMs: number;
  readonly logger: Logger | undefined;
}

/** One queued operation, waiting for its batch. */
interface Pending {
  readonly op: number;
  readonly policy: Policy;
  readonly info: PolicyInfo;
  readonly tag: string;
  readonly cost: number;
  readonly lease: string;
  /** A lease or give back's numbers after the cost (lua/sluice.lua's header). */
  readonly args: readonly number[] | undefined;
  /** For a set count: the window's length (ms). */
  readonly windowMs: number;
  /** A decide whose denial the deny cache may remember (and the forget count when asked). */
  readonly cacheable: boolean;
  readonly forgets: number;
  readonly key: string;
  /** When the caller stops waiting (monoNow): the call's budget ends. */
  due: number;
  readonly resolve: (value: StoreDecision | boolean | LeaseReply) => void;
  readonly reject: (err: unknown) => void;
}

/** Per-policy data computed once: key suffixes and the script's spec arguments. */
interface PolicyInfo {
  readonly head: string;
  readonly ruleSuffixes: readonly string[];
  readonly blockSuffix: string;
  readonly spec: ReadonlyArray<string | number>;
  /** One rule, no penalty: the script answers decide/peek in its compact form. */
  readonly compact: boolean;
}

interface DenyEntry {
  readonly policy: Policy;
  readonly cost: number;
  readonly at: number;
  readonly until: number;
  readonly rules: readonly RuleDecision[];
}

/**
 * A Cluster's answers that refuse a call before it runs, because its slot is moving — as Redis
 * says it, or as ioredis reports it after retrying (`Too many Cluster redirections. Last error:
 * ReplyError: TRYAGAIN …`).
 */
const REFUSED =
  /^(?:Too many Cluster redirections\. Last error: (?:ReplyError: )?)?(?:TRYAGAIN|ASK |MOVED )/;

/** How long an operation refused alone waits before it goes again (ms). */
const RETRY_REFUSED_MS = 20;

/** Fewest operations a batch is split into when it is spread over several calls. */
const MIN_CHUNK = 4;

/** How often leases are looked over: idle or expired ones give their units back (ms). */
const LEASE_SWEEP_MS = 100;

/** ioredis's message for a connection closed under a command or a connect. */
const CONNECTION_CLOSED = "Connection is closed.";

/** Longest a Sentinel failover holds calls back when the sentinels never say it ended (ms). */
const MAX_FAILOVER_HOLD_MS = 10_000;

/**
 * The Redis store: counters in Redis (standalone, Sentinel or Cluster), every decision one
 * atomic Lua evaluation (`lua/sluice.lua`, a port of `evaluate.ts` and the algorithms).
 *
 * Calls travel in batches: a call is queued and the queue is sent as one EVALSHA (per Cluster
 * slot, at most `maxBatch` operations) at the end of the current microtask checkpoint. At most
 * `maxInFlight` (default four) script calls are in flight: while they are, new calls wait for
 * one of them to come back and then go together. With fewer in flight a queue is spread over the free calls (at least 4
 * operations each), so that Redis runs one while Node reads another's answer. A lone call goes
 * at once (one round trip).
 * The script decides a batch's operations one after another, each atomically. Failures reject
 * with a {@link StoreError}, which the limiter maps to the policy's `onStoreError`.
 */
export class RedisStore implements Store {
  readonly kind = "redis";
  /**
   * This store's random id (instance counting, lease ids). Made on first use: Workers refuse
   * random values outside a request, and a store is often made at a module's top level.
   */
  get instanceId(): string {
    return (this.randomId ??= randomId(9));
  }
  private randomId: string | undefined;
  private readonly o: ResolvedOptions;
  private readonly cluster: boolean;
  private readonly policies = new WeakMap<Policy, PolicyInfo>();
  private queue: Pending[] = [];
  private scheduled = false;
  /** Script calls sent and not yet answered (standalone and Sentinel). */
  private inFlight = 0;
  /** In a Cluster, the same per slot (a slot whose calls are slow — a migration, a failing node
   * — holds back its own calls only), and which slots are moving (see `SlotCalls`). */
  private readonly slots = new SlotCalls();
  private lastPolicy: Policy | undefined;
  private lastInfo: PolicyInfo | undefined;
  private leaseSeq = 0;
  /** Added to absolute expiries when time is injected (see lua/sluice.lua, ARGV[3]). */
  private shift: number | undefined;
  private readonly breakers: Breakers;
  private readonly offsets: ClockOffsets;
  /** Says once that Redis is down, and once that it is back (the `logger` option). */
  private readonly outage: Outage;
  /** The client's last error, in words (what an outage is said to be caused by). */
  private lastCause = "no answer";
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private lastInstances: number | undefined;
  private readonly denied = new Map<string, DenyEntry>();
  /** Counts resets and adjustments made through this store (see `decide`). */
  private forgets = 0;
  private closed = false;
  /** The time calls enqueued in this turn are stamped with (monoNow, read once per turn). */
  private turnStart = 0;
  /** The client has been ready at least once. */
  private connected: boolean;
  /**
   * Until when (monoNow) the first call of a slot (one slot, 0, outside a Cluster) still counts
   * as part of the first connection, and the slots that have answered since. 0 once over.
   */
  private warmUntil = 0;
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
  /** Fires when the first held call is due (see `hold`). */
  private holdTimer: Deadline | undefined;
  private readyWaiters: Array<{ resolve: () => void; reject: (err: StoreError) => void }> = [];
  private readonly unfollow: () => void;
  private readonly sentinels: SentinelWatch | undefined;
  /** Leases of hot keys (made with the first leased policy). */
  private leases: LeaseBook | undefined;
  private leaseTimer: NodeJS.Timeout | undefined;

  constructor(options: RedisStoreOptions) {
    this.o = resolveOptions(options);
    const port = this.o.port;
    this.cluster = port.cluster;
    this.breakers = new Breakers(this.cluster, this.o.breakerFailures, this.o.probeIntervalMs);
    this.offsets = new ClockOffsets(this.cluster);
    this.outage = new Outage(this.o.logger, `Redis (${port.describe})`);
    this.connected = port.status() === "ready";
    this.warmUntil = monoNow() + this.o.connectTimeoutMs;
    this.unfollow = port.follow(this);
    this.sentinels =
      this.o.watchSentinels && !this.cluster
        ? port.watchSentinels(
            {
              failoverStarted: () => this.failoverStarted(),
              masterSwitched: (host, port) => this.masterSwitched(host, port),
              failoverAborted: () => this.failoverEnded(),
            },
            this.o.logger,
          )
        : undefined;
    if (this.o.instances === undefined && this.o.heartbeatMs > 0) {
      this.heartbeat();
      this.heartbeatTimer = setInterval(() => this.heartbeat(), this.o.heartbeatMs);
      unrefTimer(this.heartbeatTimer);
    }
  }

  decide(req: StoreRequest): Promise<StoreDecision> {
    const { policy, key, cost } = req;
    if (policy.lease !== undefined && !this.closed) {
      const book = this.leaseBook();
      const d = book.decide(policy, key, cost);
      if (d !== undefined) return d instanceof Promise ? d : Promise.resolve(d);
      book.counters.remote++;
    }
    const cached = this.o.denyCache && policy.algorithm !== "concurrency" && policy.blockMs === 0;
    if (cached && this.denied.size > 0) {
      const hit = this.fromDenyCache(policy, key, cost);
      if (hit) return Promise.resolve(hit);
    }
    // A lease id unique to this store: its random id and a sequence number.
    const lease =
      policy.algorithm === "concurrency"
        ? `${this.instanceId}${(++this.leaseSeq).toString(36)}`
        : "";
    return this.enqueue(OP_DECIDE, policy, key, cost, lease, cached) as Promise<StoreDecision>;
  }

  /**
   * A decision from a lease this store holds for the key, when one can answer at once (no call
   * to Redis); undefined otherwise. The limiter's `tryLimitSync`.
   */
  decideLocal(policy: Policy, key: string, cost: number): StoreDecision | undefined {
    if (policy.lease === undefined || this.leases === undefined) return undefined;
    return this.leases.trySpend(policy, key, cost);
  }

  peek(req: StoreRequest): Promise<StoreDecision> {
    const p = this.enqueue(
      OP_PEEK,
      req.policy,
      req.key,
      req.cost,
      "",
      false,
    ) as Promise<StoreDecision>;
    if (req.policy.lease === undefined || this.leases === undefined) return p;
    // What this node holds unspent is not used: it is still there to spend.
    const leases = this.leases;
    return p.then((d) => {
      const extra = leases.unspent(req.policy, req.key);
      if (extra === 0) return d;
      const rules = d.rules.map((r) => ({ ...r, remaining: r.remaining + extra }));
      return { ...d, rules };
    });
  }

  async adjust(policy: Policy, key: string, delta: number): Promise<void> {
    this.forget(policy, key);
    this.leases?.changed(policy, key);
    await this.enqueue(OP_ADJUST, policy, key, delta, "", false);
  }

  async release(policy: Policy, key: string, leaseId: string): Promise<boolean> {
    if (policy.algorithm !== "concurrency") return false;
    const local = this.leases?.releaseLocal(policy, key, leaseId);
    if (local !== undefined) return local;
    return (await this.enqueue(OP_RELEASE, policy, key, 0, leaseId, false)) as boolean;
  }

  async reset(policy: Policy, key: string): Promise<void> {
    this.forget(policy, key);
    this.leases?.forget(policy, key);
    await this.enqueue(OP_RESET, policy, key, 0, "", false);
  }

  async setCount(policy: Policy, key: string, count: number, windowMs: number): Promise<void> {
    this.forget(policy, key);
    await this.enqueue(OP_SET, policy, key, count, "", false, windowMs);
  }

  /** Live instances counted through Redis (the last count is kept through an outage), or the `instances` option. */
  liveInstances(): number | undefined {
    return this.o.instances ?? this.lastInstances;
  }

  /** True while a circuit breaker is open (Redis, or in a Cluster a slot, considered down; calls fail fast). */
  get breakerOpen(): boolean {
    return this.breakers.anyOpen;
  }

  /**
   * Resolves once the store can decide from Redis: the client is connected (and, during a
   * Sentinel failover, connected to the new master). Rejects with a `StoreError` when the first
   * connection failed (`SLUICE_ERR_STORE_UNAVAILABLE`) or did not come within
   * `connectTimeoutMs` (`SLUICE_ERR_STORE_TIMEOUT`). Decisions do not need it — they wait for
   * the first connection by themselves — but a server can await it before taking traffic.
   */
  ready(): Promise<void> {
    const connected = this.connectedReady();
    // With a Sentinel client, also the watch of the sentinels (a failover it would miss loses
    // charges).
    const watch = this.sentinels?.started;
    return watch ? Promise.all([connected, watch]).then(() => undefined) : connected;
  }

  private connectedReady(): Promise<void> {
    if (this.closed)
      return Promise.reject(new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "redisStore is closed"));
    if (this.gateOpen()) return Promise.resolve();
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

  /** Sends what is queued, stops the timers and leaves the instance count. Does not close the client. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    this.leaseTimer = undefined;
    // What leases hold unspent goes back (before the queue is flushed one last time).
    const givingBack = this.leases?.close();
    this.flush();
    await givingBack;
    this.closed = true;
    const closedErr = new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "redisStore is closed");
    this.rejectQueued(closedErr);
    for (const w of this.readyWaiters.splice(0)) w.reject(closedErr);
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.holdTimer?.cancel();
    this.heartbeatTimer = undefined;
    this.holdTimer = undefined;
    this.sentinels?.stop();
    if (
      this.o.instances === undefined &&
      this.o.heartbeatMs > 0 &&
      !this.breakers.anyOpen &&
      this.o.port.status() === "ready"
    ) {
      await this.callOnce(
        INSTANCES_LUA,
        [this.instancesKey()],
        [this.instanceId, this.o.heartbeatMs * 3, "1"],
      ).catch(() => undefined);
    }
    this.unfollow();
    this.denied.clear();
  }

  /** Counts of this store's leases (for metrics): taken, returned, expired, decisions local and remote. */
  get leaseCounters(): Readonly<LeaseCounters> | undefined {
    return this.leases?.counters;
  }

  /** The key of the lease epoch (lua/sluice.lua, leases): one per Redis, or per Cluster slot. */
  private epochKey(slot: number): string {
    return this.cluster
      ? `${this.o.prefix}lease-epoch:{${tagForSlot(slot)}}`
      : `${this.o.prefix}lease-epoch`;
  }

  private leaseBook(): LeaseBook {
    if (this.leases === undefined) {
      this.leases = new LeaseBook(
        {
          now: this.o.now ?? monoNow,
          lease: (policy, key, cost, asked, ret, retAt, epoch, member) =>
            this.enqueue(OP_LEASE, policy, key, cost, member, false, 0, [
              asked,
              ret,
              retAt,
              epoch,
              policy.lease!.ttlMs,
            ]) as Promise<LeaseReply>,
          giveBack: (policy, key, ret, retAt, epoch, member) =>
            this.enqueue(OP_GIVE_BACK, policy, key, ret, member, false, 0, [
              retAt,
              epoch,
              policy.lease!.ttlMs,
            ]),
        },
        this.instanceId,
      );
    }
    if (this.leaseTimer === undefined) {
      // Gives back what idle or expired leases hold; stops when nothing is held.
      this.leaseTimer = setInterval(() => {
        const book = this.leases!;
        book.sweep();
        if (book.empty && this.leaseTimer) {
          clearInterval(this.leaseTimer);
          this.leaseTimer = undefined;
        }
      }, LEASE_SWEEP_MS);
      unrefTimer(this.leaseTimer);
    }
    return this.leases;
  }

  // ─── batching ───

  private enqueue(
    op: number,
    policy: Policy,
    key: string,
    cost: number,
    lease: string,
    cacheable: boolean,
    windowMs = 0,
    args?: readonly number[],
  ): Promise<StoreDecision | boolean | LeaseReply> {
    if (this.closed)
      return Promise.reject(new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "redisStore is closed"));
    const info = this.info(policy);
    const tag = identifierTag(key);
    if (!this.scheduled) {
      // The first call of this turn: every call of the turn is stamped with this time.
      this.scheduled = true;
      this.turnStart = monoNow();
      queueMicrotask(this.flushLater);
    }
    return new Promise((resolve, reject) => {
      this.queue.push({
        op,
        policy,
        info,
        tag,
        cost,
        lease,
        windowMs,
        args,
        cacheable,
        forgets: this.forgets,
        key,
        due: this.turnStart + this.o.timeoutMs,
        resolve,
        reject,
      });
      // A full batch goes at once (in a Cluster, batches are per slot: at the end of the turn).
      if (this.queue.length >= this.o.maxBatch && !this.cluster) this.flush();
    });
  }

  private readonly flushLater = (): void => {
    this.scheduled = false;
    // Every call busy: what is queued goes when one of them comes back (see `sent`). In a
    // Cluster, `flush` decides per slot.
    if (this.cluster || this.inFlight < this.o.maxInFlight || this.queue.length >= this.o.maxBatch)
      this.flush();
  };

  /** Sends everything queued, unless calls must wait (first connection, failover: see `hold`). */
  private flush(): void {
    const queue = this.queue;
    if (queue.length === 0) return;
    if (this.mustHold()) {
      this.hold();
      return;
    }
    this.queue = [];
    if (this.cluster) {
      const bySlot = new Map<number, Pending[]>();
      for (const p of queue) {
        const slot = slotOfTag(p.tag);
        const group = bySlot.get(slot);
        if (group === undefined) bySlot.set(slot, [p]);
        else group.push(p);
      }
      const now = monoNow();
      for (const [slot, group] of bySlot) {
        // A call unanswered for long: the slot is likely moving (see `SlotCalls`).
        if (this.slots.stuck(slot, now)) this.slots.moved(slot, now);
        const busy = this.slots.count(slot) >= this.o.maxInFlight;
        if (this.slots.isMoving(slot, now)) {
          // One operation per call while the slot moves: each is refused only if its own keys
          // are, for the moment, on two nodes.
          for (const p of group) this.send([p], slot);
        } else if (!busy || group.length >= this.o.maxBatch) this.sendChunks(group, slot);
        // A slot with every call busy keeps its operations until one comes back.
        else for (const p of group) this.queue.push(p);
      }
    } else this.sendChunks(queue, 0);
  }

  /**
   * Sends a batch (one slot) as calls of at most `maxBatch`, spread over the calls still free
   * (at most `maxInFlight` in flight) in chunks of at least {@link MIN_CHUNK}: with
   * little in flight, several calls run at once, so Redis works on one while Node encodes the
   * next or reads the previous one's answer.
   */
  private sendChunks(batch: Pending[], slot: number): void {
    const n = batch.length;
    const free = this.o.maxInFlight - (this.cluster ? this.slots.count(slot) : this.inFlight);
    const parts = Math.max(
      1,
      Math.min(free, Math.floor(n / MIN_CHUNK)),
      Math.ceil(n / this.o.maxBatch),
    );
    if (parts === 1) {
      this.send(batch, slot);
      return;
    }
    const size = Math.ceil(n / parts);
    for (let i = 0; i < n; i += size) this.send(batch.slice(i, i + size), slot);
  }

  /**
   * Sends one batch (all in one slot) and settles each operation with its own result. The call
   * is due when its oldest operation is (each operation's budget counts from its own call); it
   * carries that deadline on the server's clock, so that Redis never runs it after the caller
   * stopped waiting (see lua/sluice.lua, ARGV[4]).
   */
  private send(batch: Pending[], slot: number): void {
    const now = monoNow();
    if (!this.breakers.allow(slot, now)) {
      this.rejectAll(
        batch,
        new StoreError(
          "SLUICE_ERR_STORE_UNAVAILABLE",
          "Redis is unavailable (circuit open); waiting for a trial call to succeed",
        ),
      );
      return;
    }
    const status = this.o.port.status();
    if (status !== "ready") {
      this.failed(slot, now, `the client is ${STATUS_WORDS[status]}`);
      this.rejectAll(
        batch,
        new StoreError(
          "SLUICE_ERR_STORE_UNAVAILABLE",
          `Redis is unavailable (${this.o.port.describe}: ${STATUS_WORDS[status]})`,
        ),
      );
      return;
    }
    const keys: string[] = [];
    let specCount = 0;
    const specArgs: Array<string | number> = [];
    const opArgs: Array<string | number> = [];
    // Spec numbers of this call, by policy (a batch usually holds one or two policies).
    let lastPolicy: Policy | undefined;
    let lastIndex = 0;
    let specIndex: Map<Policy, number> | undefined;
    let due = Infinity;
    for (const p of batch) {
      if (p.due < due) due = p.due;
      const info = p.info;
      let idx: number | undefined;
      if (p.policy === lastPolicy) idx = lastIndex;
      else {
        idx = specIndex?.get(p.policy);
        if (idx === undefined) {
          idx = ++specCount;
          (specIndex ??= new Map()).set(p.policy, idx);
          for (const a of info.spec) specArgs.push(a);
        }
        lastPolicy = p.policy;
        lastIndex = idx;
      }
      const base = info.head + p.tag;
      const suffixes = info.ruleSuffixes;
      for (let i = 0; i < suffixes.length; i++) keys.push(base + suffixes[i]!);
      if (p.policy.blockMs > 0 || p.op === OP_RESET) keys.push(base + info.blockSuffix);
      const code = idx * 8 + p.op;
      if (p.args !== undefined) {
        // A lease or give back: the epoch key (of this Redis, or of this slot in a Cluster),
        // its numbers, and a concurrency node's member.
        keys.push(this.epochKey(slot));
        opArgs.push(-code, p.cost);
        for (const x of p.args) opArgs.push(x);
        if (p.lease !== "") opArgs.push(p.lease);
      } else if (p.op === OP_SET) opArgs.push(-code, p.cost, p.windowMs);
      else if (p.cost === 1 && p.lease === "") opArgs.push(code);
      else {
        opArgs.push(-code, p.cost);
        if (p.op === OP_RELEASE || (p.op === OP_DECIDE && p.lease !== "")) opArgs.push(p.lease);
      }
    }
    // The first call of a slot made soon after the client was ready is part of the first
    // connection and has its budget: it loads the script (NOSCRIPT, then EVAL), and a Cluster
    // connects to each node on its first call.
    if (this.warmUntil > now && !this.slotsAnswered.has(slot)) due = Math.max(due, this.warmUntil);
    const argv: Array<string | number> = [
      this.o.now ? String(this.o.now()) : "",
      this.o.ttlPadMs,
      this.shiftMs(),
      this.offsets.deadline(slot, due),
      specCount,
    ];
    for (const a of specArgs) argv.push(a);
    for (const a of opArgs) argv.push(a);
    // Taken before the script runs, so that a denial it remembers never outlasts the real one.
    const sentAt = this.o.denyCache ? this.localNow() : 0;
    if (this.cluster) this.slots.started(slot, now);
    else this.inFlight++;
    const call = { due, answered: false };
    const timer = deadlineTimer(due, () => {
      if (call.answered) return;
      call.answered = true;
      this.sent(slot, now);
      const at = monoNow();
      // In a Cluster a call that times out may have met a moving slot (see `SlotCalls`).
      if (this.cluster) this.slots.moved(slot, at);
      this.failed(slot, at, `no answer within ${this.o.timeoutMs} ms`);
      this.rejectAll(
        batch,
        new StoreError(
          "SLUICE_ERR_STORE_TIMEOUT",
          `Redis did not answer within ${this.o.timeoutMs} ms`,
        ),
      );
    });
    this.script(SLUICE_LUA, keys, argv, call).then(
      (reply) => {
        const at = monoNow();
        if (Array.isArray(reply) && typeof reply[reply.length - 1] === "number")
          this.offsets.sample(slot, reply[reply.length - 1] as number, at);
        if (call.answered) {
          this.late(batch, reply);
          return;
        }
        call.answered = true;
        timer.cancel();
        this.sent(slot, now);
        this.breakers.success(slot);
        // Over once no breaker is open (in a Cluster, every slot's).
        if (this.outage.down && !this.breakers.anyOpen) this.outage.ended(at);
        if (this.warmUntil !== 0) {
          if (at < this.warmUntil) this.slotsAnswered.add(slot);
          else {
            this.warmUntil = 0;
            this.slotsAnswered.clear();
          }
        }
        this.settle(batch, reply, sentAt);
      },
      (err: unknown) => {
        const expired = /^SLUICE_EXPIRED (\d+)/.exec(errorMessage(err));
        if (expired) this.offsets.sample(slot, Number(expired[1]), monoNow());
        if (call.answered) return;
        call.answered = true;
        timer.cancel();
        this.sent(slot, now);
        if (this.cluster && !expired && REFUSED.test(errorMessage(err))) {
          // Refused before it ran: the slot is moving (see `SlotCalls`).
          this.refused(batch, slot);
          return;
        }
        this.failed(slot, monoNow(), expired ? "the server ran the call late" : causeOf(err));
        this.rejectAll(
          batch,
          expired
            ? new StoreError(
                "SLUICE_ERR_STORE_TIMEOUT",
                `Redis ran the call after its deadline (${this.o.timeoutMs} ms); it changed nothing`,
                { cause: err },
              )
            : new StoreError("SLUICE_ERR_STORE", `Redis call failed: ${errorMessage(err)}`, {
                cause: err,
              }),
        );
      },
    );
  }

  private rejectAll(batch: readonly Pending[], err: unknown): void {
    this.outage.count(batch.length);
    for (const p of batch) p.reject(err);
  }

  /**
   * A call for `slot` failed (`cause`, in words): the breaker counts it, and an opened breaker
   * begins an outage (said once to the logger).
   */
  private failed(slot: number, now: number, cause: string): void {
    this.breakers.failure(slot, now);
    if (this.breakers.anyOpen && !this.outage.down)
      this.outage.began(this.lastCause === "no answer" ? cause : this.lastCause, now);
  }

  /**
   * A call Redis refused before running it, because its slot is moving (`TRYAGAIN`; an `ASK` or
   * `MOVED` the client did not follow): nothing was charged, so its operations go again, each
   * alone — at once when it carried several, else after {@link RETRY_REFUSED_MS} (its keys are on
   * two nodes for the moment) — each within its own budget.
   */
  private refused(batch: Pending[], slot: number): void {
    const now = monoNow();
    this.slots.moved(slot, now);
    const late = batch.filter((p) => p.due <= now + 1);
    if (late.length > 0)
      this.rejectAll(
        late,
        new StoreError(
          "SLUICE_ERR_STORE_TIMEOUT",
          `Redis did not answer within ${this.o.timeoutMs} ms (its Cluster slot ${slot} was moving)`,
        ),
      );
    const live = late.length === 0 ? batch : batch.filter((p) => p.due > now + 1);
    if (live.length > 1) for (const p of live) this.send([p], slot);
    else if (live.length === 1)
      unrefTimer(
        setTimeout(() => {
          if (this.closed)
            this.rejectAll(
              live,
              new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "redisStore is closed"),
            );
          else this.send(live, slot);
        }, RETRY_REFUSED_MS),
      );
  }

  /** A call came back: what waited for it goes now (after this microtask checkpoint's own calls). */
  private sent(slot: number, sentAt: number): void {
    if (this.cluster) this.slots.ended(slot, sentAt);
    else this.inFlight--;
    if (this.queue.length > 0 && !this.scheduled) {
      this.scheduled = true;
      this.turnStart = monoNow();
      queueMicrotask(this.flushLater);
    }
  }

  /**
   * When time is injected, the distance from it to the real clock (taken once) plus the TTL
   * pad: keys whose expiry is absolute (gcra, fixed-window) then expire on Redis's real clock
   * no earlier than the injected one says. 0 in production.
   */
  private shiftMs(): number {
    if (this.o.now === undefined) return 0;
    this.shift ??= Math.round(systemClock() - this.o.now()) + this.o.ttlPadMs;
    return this.shift;
  }

  private info(policy: Policy): PolicyInfo {
    if (policy === this.lastPolicy) return this.lastInfo!;
    let info = this.policies.get(policy);
    if (info === undefined) {
      const code = keyCode(policy);
      const spec: Array<string | number> = [
        scriptCode(policy),
        policy.rules.length,
        // Negative: a block that forgets the key's counts (see lua/sluice.lua).
        policy.resetOnBlock ? -policy.blockMs : policy.blockMs,
      ];
      for (const r of policy.rules) spec.push(r.limit, r.periodMs, r.burst);
      info = {
        head: `${this.o.prefix}${policy.name}:{`,
        ruleSuffixes: policy.rules.map((_, i) => `}:${code}${i}`),
        blockSuffix: `}:${code}b`,
        spec,
        compact: policy.rules.length === 1 && policy.blockMs === 0,
      };
      this.policies.set(policy, info);
    }
    this.lastPolicy = policy;
    this.lastInfo = info;
    return info;
  }

  /**
   * Splits a batch reply into each operation's result (format: lua/sluice.lua's header; the
   * last value is the server's time), or a `StoreError` when the reply does not match the batch.
   */
  private parse(
    batch: readonly Pending[],
    reply: unknown,
  ): Array<StoreDecision | boolean | LeaseReply | SluiceError> | StoreError {
    if (!Array.isArray(reply) || reply.length === 0)
      return new StoreError("SLUICE_ERR_STORE", "Unexpected reply from the sluice script");
    const n = reply.length - 1;
    // Read every result first: a reply that does not match the batch settles nobody with a
    // guess (an earlier operation's answer could belong to another).
    const results = new Array<StoreDecision | boolean | LeaseReply | SluiceError>(batch.length);
    let i = 0;
    let b = 0;
    for (; b < batch.length; b++) {
      const p = batch[b]!;
      if (i >= n) break;
      const first = reply[i] as unknown;
      if (typeof first === "string") {
        results[b] = new SluiceError("SLUICE_ERR_CORRUPT_STATE", first);
        i++;
        continue;
      }
      if (typeof first !== "number") break;
      if (p.op === OP_DECIDE || p.op === OP_PEEK || p.op === OP_LEASE) {
        const rules = p.policy.rules;
        let d: StoreDecision;
        if (p.info.compact) {
          const rule = rules[0]!;
          const allowed = first >= 0;
          if (i + (allowed ? 2 : 3) > n) break;
          const rd: RuleDecision = {
            limit: rule.limit,
            periodMs: rule.periodMs,
            burst: rule.burst,
            allowed,
            remaining: allowed ? first : -first - 1,
            resetAfterMs: reply[i + 1] as number,
            retryAfterMs: allowed ? 0 : (reply[i + 2] as number),
          };
          i += allowed ? 2 : 3;
          d = { allowed, rules: [rd], blockedForMs: 0 };
        } else {
          const count = rules.length;
          if (i + 2 + count * 4 > n) break;
          const rds = new Array<RuleDecision>(count);
          for (let r = 0; r < count; r++) {
            const at = i + 2 + r * 4;
            const rule = rules[r]!;
            rds[r] = {
              limit: rule.limit,
              periodMs: rule.periodMs,
              burst: rule.burst,
              allowed: reply[at] === 1,
              remaining: reply[at + 1] as number,
              resetAfterMs: reply[at + 2] as number,
              retryAfterMs: reply[at + 3] as number,
            };
          }
          d = { allowed: first === 1, rules: rds, blockedForMs: reply[i + 1] as number };
          i += 2 + count * 4;
        }
        if (p.op === OP_LEASE) {
          // Then: granted units, the decision time, the epoch.
          if (i + 3 > n) break;
          results[b] = {
            decision: d,
            granted: reply[i] as number,
            at: reply[i + 1] as number,
            epoch: reply[i + 2] as number,
          };
          i += 3;
          continue;
        }
        results[b] = d;
      } else {
        results[b] = first === 1;
        i++;
      }
    }
    if (b < batch.length || i !== n) {
      return new StoreError(
        "SLUICE_ERR_STORE",
        `Unreadable reply from the sluice script: ${n} values for ${batch.length} operation(s)`,
      );
    }
    return results;
  }

  /** Settles each operation of an answered batch with its own result. */
  private settle(batch: Pending[], reply: unknown, sentAt: number): void {
    const results = this.parse(batch, reply);
    if (results instanceof StoreError) {
      this.rejectAll(batch, results);
      return;
    }
    for (let b = 0; b < batch.length; b++) {
      const p = batch[b]!;
      const r = results[b]!;
      if (r instanceof SluiceError) {
        p.reject(r);
        continue;
      }
      if (p.op === OP_DECIDE && typeof r !== "boolean" && "allowed" in r) {
        if (r.allowed) {
          if (p.lease !== "" && p.cost > 0) {
            p.resolve({ ...r, leaseId: p.lease });
            continue;
          }
        } else if (p.cacheable && r.blockedForMs === 0 && p.forgets === this.forgets) {
          // A reset or refund made while this call was in flight keeps its denial out.
          this.rememberDenial(p.policy, p.key, p.cost, r.rules, sentAt);
        }
      }
      p.resolve(r);
    }
  }
  /**
   * A reply that came after its call was answered (by `onStoreError`): Redis ran the call just
   * before its deadline, but the answer arrived too late. A concurrency lease it took is given
   * back (nobody holds its id); charges of the other algorithms stay (docs/redis.md: the bound).
   */
  private late(batch: readonly Pending[], reply: unknown): void {
    const results = this.parse(batch, reply);
    if (results instanceof StoreError) return;
    batch.forEach((p, b) => {
      const r = results[b];
      if (p.op === OP_LEASE && typeof r === "object" && "granted" in r) {
        // Units granted to a lease call nobody waited for go back (for concurrency also the
        // request's own slot: its caller holds no lease id).
        const back = r.granted + (p.lease !== "" && r.decision.allowed ? p.cost : 0);
        if (back > 0)
          this.enqueue(OP_GIVE_BACK, p.policy, p.key, back, p.lease, false, 0, [
            r.at,
            r.epoch,
            p.policy.lease!.ttlMs,
          ]).catch(() => undefined);
        return;
      }
      if (
        p.op === OP_DECIDE &&
        p.lease !== "" &&
        typeof r === "object" &&
        "allowed" in r &&
        r.allowed
      )
        this.enqueue(OP_RELEASE, p.policy, p.key, 0, p.lease, false).catch(() => undefined);
    });
  }

  // ─── calling Redis: NOSCRIPT, deadlines ───

  /**
   * EVALSHA; on NOSCRIPT only (after a restart, failover or SCRIPT FLUSH), EVAL, which also
   * loads it — unless the call was answered meanwhile (a re-sent command meeting a restarted
   * server must not run).
   */
  private async script(
    script: LuaScript,
    keys: string[],
    argv: Array<string | number>,
    call?: { readonly answered: boolean },
  ): Promise<unknown> {
    const port = this.o.port;
    try {
      return await port.script("EVALSHA", script.sha, keys, argv);
    } catch (err) {
      if (!errorMessage(err).startsWith("NOSCRIPT") || call?.answered) throw err;
      return await port.script("EVAL", script.text, keys, argv);
    }
  }

  /** One script call outside the batches (instance counting), with the per-call timeout. */
  private callOnce(
    script: LuaScript,
    keys: string[],
    argv: Array<string | number>,
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const call = { answered: false };
      const timer = setTimeout(() => {
        call.answered = true;
        reject(
          new StoreError(
            "SLUICE_ERR_STORE_TIMEOUT",
            `Redis did not answer within ${this.o.timeoutMs} ms`,
          ),
        );
      }, this.o.timeoutMs);
      this.script(script, keys, argv, call).then(
        (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }

  // ─── the connection: the first one, failovers ───

  /** Calls go to Redis now (else they wait in the queue: see `mustHold`). */
  private gateOpen(): boolean {
    return this.o.port.status() === "ready" && this.failover === undefined;
  }

  /**
   * Whether queued calls wait instead of going: during a Sentinel failover, and before the
   * first connection (unless it failed, or the client was closed for good).
   */
  private mustHold(): boolean {
    if (this.failover !== undefined) return true;
    if (this.connected || this.connectError !== undefined) return false;
    const status = this.o.port.status();
    return status !== "ready" && status !== "end";
  }

  /** Makes a lazy client connect, and starts the first connection's budget. */
  private startConnecting(): void {
    if (this.connected || this.connectError) return;
    if (this.connectDeadline === 0) this.connectDeadline = monoNow() + this.o.connectTimeoutMs;
    this.o.port.connect();
  }

  /**
   * Queued calls wait: for the first connection until its budget ends, during a failover each
   * until its own deadline. One timer, for the earliest.
   */
  private hold(): void {
    this.startConnecting();
    if (this.holdTimer !== undefined) return;
    const at = this.failover ? this.queue[0]!.due : this.connectDeadline;
    this.holdTimer = deadlineTimer(at, () => {
      this.holdTimer = undefined;
      if (this.failover) {
        const now = monoNow();
        const late = this.queue.filter((p) => p.due <= now);
        if (late.length > 0) {
          this.queue = this.queue.filter((p) => p.due > now);
          this.rejectAll(
            late,
            new StoreError(
              "SLUICE_ERR_STORE_TIMEOUT",
              `Redis did not answer within ${this.o.timeoutMs} ms (a Sentinel failover is under way)`,
            ),
          );
        }
        if (this.queue.length > 0) this.hold();
      } else if (!this.connected) {
        this.connectFailed(
          new StoreError(
            "SLUICE_ERR_STORE_TIMEOUT",
            `Redis did not connect within ${this.o.connectTimeoutMs} ms (connectTimeoutMs)`,
          ),
        );
      }
    });
  }

  /** The first connection failed: what waits for it fails, and calls fail fast until it is up. */
  private connectFailed(err: StoreError): void {
    this.connectError = err;
    this.outage.began(err.cause === undefined ? err.message : causeOf(err.cause), monoNow());
    this.holdTimer?.cancel();
    this.holdTimer = undefined;
    if (this.failover === undefined) this.rejectQueued(err);
    for (const w of this.readyWaiters.splice(0)) w.reject(err);
  }

  private rejectQueued(err: StoreError): void {
    const queue = this.queue;
    this.queue = [];
    this.rejectAll(queue, err);
  }

  /**
   * Calls may go again (connected, or a failover is over): readiness resolves, and what waited
   * goes — or, if calls must still wait (a failover not over yet), waits again with its hold
   * timer; a client that is not ready yet fails them fast (`send`).
   */
  private reopen(): void {
    this.holdTimer?.cancel();
    this.holdTimer = undefined;
    this.breakers.retryNow();
    if (this.gateOpen()) for (const w of this.readyWaiters.splice(0)) w.resolve();
    this.flush();
  }

  /** @internal The client's events (see redis-client.ts `ClientPort.follow`). */
  onClientEvent(event: ClientEvent, err?: Error): void {
    if (this.closed) return;
    if (event === "error" || event === "ready")
      this.connectCut = err?.message === CONNECTION_CLOSED;
    if (event === "error" && err !== undefined) this.lastCause = causeOf(err);
    if (event === "ready") {
      if (!this.connected) {
        this.connected = true;
        this.warmUntil = monoNow() + this.o.connectTimeoutMs;
        this.connectError = undefined;
        // Calls that waited for the first connection get their whole budget from now.
        const due = monoNow() + this.o.timeoutMs;
        for (const p of this.queue) p.due = due;
      }
      if (this.failover?.to !== undefined && this.connectedTo(this.failover.to) !== false)
        this.failover = undefined;
      // Connected again: an outage is over (a call that still fails begins another).
      this.outage.ended(monoNow());
      this.reopen();
    } else if (event === "refresh") {
      this.breakers.retryNow();
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
      this.o.port.ioredis?.connect?.().catch(() => undefined);
    } else if (!this.connected && this.connectError === undefined) {
      // Before the first connection: an address where nothing listens fails at once; a server
      // that is slow to answer is waited for (connectTimeoutMs).
      if (event === "end" || (event === "error" && isUnreachable(err)))
        this.connectFailed(
          new StoreError(
            "SLUICE_ERR_STORE_UNAVAILABLE",
            `Redis is unreachable: ${err ? errorMessage(err) : "the client was closed"}`,
            { cause: err },
          ),
        );
    }
  }

  /** Whether the client is connected to `host:port` (undefined when it cannot tell). */
  private connectedTo(addr: { host: string; port: number }): boolean | undefined {
    const s = this.o.port.remote();
    if (this.o.port.status() !== "ready" || s?.port === undefined) return undefined;
    return s.port === addr.port && (s.address ?? addr.host).endsWith(addr.host);
  }

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
    if (this.o.port.status() === "ready" && on === false) this.o.port.reconnect();
  }

  private failoverEnded(): void {
    if (this.failover === undefined) return;
    this.failover = undefined;
    this.reopen();
  }

  // ─── instances ───

  private instancesKey(): string {
    return `${this.o.prefix}instances`;
  }

  private heartbeat(): void {
    if (this.breakers.anyOpen || this.closed || !this.gateOpen()) return;
    this.callOnce(
      INSTANCES_LUA,
      [this.instancesKey()],
      [this.instanceId, this.o.heartbeatMs * 3, "0"],
    ).then(
      (n) => {
        if (typeof n === "number" && n > 0) this.lastInstances = n;
      },
      () => undefined,
    );
  }

  // ─── deny cache ───

  private localNow(): number {
    return (this.o.now ?? systemClock)();
  }

  private fromDenyCache(policy: Policy, key: string, cost: number): StoreDecision | undefined {
    const id = `${policy.name}\u0000${key}`;
    const e = this.denied.get(id);
    if (e === undefined) return undefined;
    const now = this.localNow();
    if (e.policy !== policy || now >= e.until || now < e.at) {
      if (e.policy !== policy || now >= e.until) this.denied.delete(id);
      return undefined;
    }
    // Only the same cost: a larger one is denied too, but its wait would be longer.
    if (cost !== e.cost) return undefined;
    const elapsed = now - e.at;
    const rules = e.rules.map((r): RuleDecision => {
      const retry = Math.max(0, r.retryAfterMs - elapsed);
      return {
        limit: r.limit,
        periodMs: r.periodMs,
        burst: r.burst,
        allowed: r.allowed || retry === 0,
        remaining: r.remaining,
        resetAfterMs: Math.max(0, r.resetAfterMs - elapsed),
        retryAfterMs: retry,
      };
    });
    return { allowed: false, rules, blockedForMs: 0, reason: "deny-cache" };
  }

  private rememberDenial(
    policy: Policy,
    key: string,
    cost: number,
    rules: readonly RuleDecision[],
    at: number,
  ): void {
    let retry = 0;
    for (const r of rules) if (!r.allowed && r.retryAfterMs > retry) retry = r.retryAfterMs;
    if (retry <= 0) return;
    const id = `${policy.name}\u0000${key}`;
    this.denied.delete(id);
    if (this.denied.size >= this.o.denyCacheSize) {
      const oldest = this.denied.keys().next();
      if (!oldest.done) this.denied.delete(oldest.value);
    }
    this.denied.set(id, { policy, cost, at, until: at + retry, rules });
  }

  private forget(policy: Policy, key: string): void {
    this.forgets++;
    if (this.denied.size > 0) this.denied.delete(`${policy.name}\u0000${key}`);
  }
}

/** A timer that can be cancelled. */
interface Deadline {
  cancel(): void;
}

/**
 * Calls `fn` once `monoNow()` has reached `at`. Node may fire a timer a little before its time
 * by the clock of the moment (its loop time lags); a call must never be answered by its timeout
 * before its deadline, so the timer is set again for what is left.
 */
function deadlineTimer(at: number, fn: () => void): Deadline {
  let t: NodeJS.Timeout;
  const arm = (): void => {
    t = setTimeout(
      () => {
        if (at - monoNow() > 0) arm();
        else fn();
      },
      Math.max(0, Math.ceil(at - monoNow())),
    );
  };
  arm();
  return { cancel: () => clearTimeout(t) };
}

/** A client status in a message. */
const STATUS_WORDS: Readonly<Record<ClientStatus, string>> = {
  ready: "ready",
  wait: "not connected yet",
  connecting: "connecting",
  reconnecting: "reconnecting",
  end: "closed",
};

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function resolveOptions(options: RedisStoreOptions): ResolvedOptions {
  const issues: ValidationIssue[] = [];
  if (typeof options !== "object" || options === null) {
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid redisStore options", [
      { path: "", message: "must be an object" },
    ]);
  }
  for (const k of Object.keys(options)) {
    if (!(k in OPTION_KEYS)) issues.push({ path: k, message: "unknown option" });
  }
  const logger = resolveLogger(options.logger);
  if (typeof logger === "string") issues.push({ path: "logger", message: logger });
  const client = options.client;
  const port = clientPort(client);
  if (typeof port === "string") issues.push({ path: "client", message: port });
  if (options.now !== undefined && typeof options.now !== "function")
    issues.push({ path: "now", message: "must be a function returning epoch ms" });
  const prefix = options.prefix ?? "sl:";
  if (typeof prefix !== "string" || /[{}]/.test(prefix))
    issues.push({ path: "prefix", message: "must be a string without '{' or '}'" });
  const int = (
    name: keyof RedisStoreOptions,
    value: unknown,
    min: number,
    dflt: number,
  ): number => {
    if (value === undefined) return dflt;
    if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) {
      issues.push({ path: name, message: `must be an integer ≥ ${min} (got ${String(value)})` });
      return dflt;
    }
    return value;
  };
  const resolved: ResolvedOptions = {
    client,
    port: port as ClientPort,
    now: options.now,
    prefix,
    timeoutMs: int("timeoutMs", options.timeoutMs, 1, 500),
    connectTimeoutMs: int("connectTimeoutMs", options.connectTimeoutMs, 1, 5000),
    watchSentinels: options.watchSentinels ?? true,
    maxBatch: int("maxBatch", options.maxBatch, 1, 128),
    maxInFlight: int("maxInFlight", options.maxInFlight, 1, 4),
    denyCache: options.denyCache ?? true,
    denyCacheSize: int("denyCacheSize", options.denyCacheSize, 1, 10_000),
    breakerFailures: int("breakerFailures", options.breakerFailures, 1, 5),
    probeIntervalMs: int("probeIntervalMs", options.probeIntervalMs, 1, 1000),
    instances:
      options.instances === undefined ? undefined : int("instances", options.instances, 1, 1),
    heartbeatMs: int("heartbeatMs", options.heartbeatMs, 0, 5000),
    ttlPadMs: int("ttlPadMs", options.ttlPadMs, 0, options.now ? 10_000 : 0),
    logger: typeof logger === "string" ? undefined : logger,
  };
  if (typeof resolved.denyCache !== "boolean")
    issues.push({ path: "denyCache", message: "must be true or false" });
  if (typeof resolved.watchSentinels !== "boolean")
    issues.push({ path: "watchSentinels", message: "must be true or false" });
  if (issues.length > 0)
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid redisStore options", issues);
  return Object.freeze(resolved);
}

/**
 * Creates a Redis store. See {@link RedisStoreOptions} and docs/redis.md.
 *
 * ```ts
 * import { Redis } from "ioredis";
 * const store = redisStore({ client: new Redis(process.env.REDIS_URL!) });
 * const limiter = createLimiter({ store, policy: { name: "api", rules: [{ limit: 100, period: "1m" }] } });
 * ```
 */
export function redisStore(options: RedisStoreOptions): RedisStore {
  return new RedisStore(options);
}
