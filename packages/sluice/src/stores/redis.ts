import { type Clock, monoNow, systemClock } from "../clock.js";
import { StoreError } from "../errors.js";
import { type Logger, loggerOption } from "../logger.js";
import { option, resolveOptions } from "../options.js";
import { randomId, unrefTimer } from "../platform.js";
import type { Policy } from "../policy.js";
import type { LocalAnswer, Store, StoreDecision, StoreRequest } from "../store.js";
import { DenyCache, denyCacheable } from "./deny-cache.js";
import { INSTANCES_LUA, type LuaScript, SLUICE_LUA } from "./lua-scripts.js";
import { type ClientPort, type RedisClient, clientPort } from "./redis-client.js";
import {
  type Operation,
  type PolicyInfo,
  decodeReply,
  encodeCall,
  policyInfo,
  serverTimeOf,
} from "./redis-codec.js";
import { RedisConnection } from "./redis-connection.js";
import { ClockOffsets, causeOf } from "./redis-health.js";
import {
  OP_ADJUST,
  OP_ALLOT,
  OP_DECIDE,
  OP_GIVE_BACK,
  OP_PEEK,
  OP_RELEASE,
  OP_RESET,
  OP_SET,
  identifierTag,
  slotOfTag,
  tagForSlot,
} from "./redis-keys.js";
import {
  AllotmentBook,
  type AllotmentCounters,
  type AllotmentReply,
  localAnswer,
} from "./redis-allotments.js";
import { type CallFailure, RemoteCalls, type Transport, errorMessage } from "./remote-calls.js";

export type {
  NodeRedisClientLike,
  NodeRedisClusterLike,
  NodeRedisSentinelLike,
  RedisClient,
  RedisClientLike,
} from "./redis-client.js";

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

/** The options, checked once (options.ts): every problem named, unknown options caught. */
const OPTIONS = {
  client: option.required<ClientPort>((v) => {
    const port = clientPort(v);
    return typeof port === "string" ? { problem: port } : port;
  }),
  now: option.fn<Clock>("must be a function returning epoch ms"),
  prefix: option.custom<string>(
    (v) =>
      typeof v === "string" && !/[{}]/.test(v)
        ? v
        : { problem: "must be a string without '{' or '}'" },
    "sl:",
  ),
  timeoutMs: option.int(1, 500),
  connectTimeoutMs: option.int(1, 5000),
  watchSentinels: option.bool(true),
  maxBatch: option.int(1, 128),
  maxInFlight: option.int(1, 4),
  denyCache: option.bool(true),
  denyCacheSize: option.int(1, 10_000),
  breakerFailures: option.int(1, 5),
  probeIntervalMs: option.int(1, 1000),
  instances: option.optionalInt(1),
  heartbeatMs: option.int(0, 5000),
  ttlPadMs: option.optionalInt(0),
  logger: loggerOption,
} satisfies { readonly [K in keyof Required<RedisStoreOptions>]: unknown };

/** One queued operation (the codec's, and what the store answers it with). */
interface Pending extends Operation {
  readonly key: string;
  /** A decide whose denial the deny cache may remember. */
  readonly cacheable: boolean;
  /** The deny cache's generation when it was queued (see `DenyCache.remember`). */
  readonly generation: number;
  /** When time is injected: the injected time it was asked at (else 0). */
  readonly askedAt: number;
  readonly resolve: (value: StoreDecision | boolean | AllotmentReply) => void;
}

/**
 * A Cluster's answers that refuse a call before it runs, because its slot is moving — as Redis
 * says it, or as ioredis reports it after retrying (`Too many Cluster redirections. Last error:
 * ReplyError: TRYAGAIN …`).
 */
const REFUSED =
  /^(?:Too many Cluster redirections\. Last error: (?:ReplyError: )?)?(?:TRYAGAIN|ASK |MOVED )/;

/**
 * The Redis store: counters in Redis (standalone, Sentinel or Cluster), every decision one
 * atomic Lua evaluation (`lua/sluice.lua`, a port of `evaluate.ts` and the algorithms).
 *
 * Operations travel through the remote-call engine (remote-calls.ts): queued, and sent together
 * at the end of the microtask checkpoint as script calls of at most `maxBatch` (per Cluster
 * slot), at most `maxInFlight` in flight; each within its budget, behind circuit breakers. What
 * a call carries is the codec's (redis-codec.ts); the connection's gate holds calls back before
 * the first connection and during a Sentinel failover (redis-connection.ts). Failures reject
 * with a {@link StoreError}, which the limiter maps to the policy's `onStoreError`.
 */
export class RedisStore implements Store {
  readonly kind = "redis";
  /**
   * This store's random id (instance counting, permit ids). Made on first use: Workers refuse
   * random values outside a request, and a store is often made at a module's top level.
   */
  get instanceId(): string {
    return (this.randomId ??= randomId(9));
  }
  private randomId: string | undefined;
  private readonly o: ReturnType<typeof resolveRedisOptions>;
  private readonly port: ClientPort;
  private readonly cluster: boolean;
  private readonly calls: RemoteCalls<Pending>;
  private readonly conn: RedisConnection<Pending>;
  private readonly offsets: ClockOffsets;
  private readonly deny: DenyCache | undefined;
  private readonly policies = new WeakMap<Policy, PolicyInfo>();
  private lastPolicy: Policy | undefined;
  private lastInfo: PolicyInfo | undefined;
  private permitSeq = 0;
  /** Added to absolute expiries when time is injected (see lua/sluice.lua, ARGV[3]). */
  private shift: number | undefined;
  private heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  private lastInstances: number | undefined;
  private closed = false;
  /** Allotments of hot keys (made with the first policy that takes them). */
  private allotments: AllotmentBook | undefined;

  constructor(options: RedisStoreOptions) {
    this.o = resolveRedisOptions(options);
    this.port = this.o.client;
    this.cluster = this.port.cluster;
    this.offsets = new ClockOffsets(this.cluster);
    this.deny = this.o.denyCache
      ? new DenyCache(this.o.now ?? monoNow, this.o.denyCacheSize)
      : undefined;
    this.conn = new RedisConnection(this.port, this.o);
    this.calls = new RemoteCalls<Pending>(
      {
        ...this.o,
        grouped: this.cluster,
        slotsMove: this.cluster,
        what: "Redis",
        describe: `Redis (${this.port.describe})`,
      },
      this.transport(),
      this.conn,
    );
    this.conn.attach(this.calls);
    if (this.o.instances === undefined && this.o.heartbeatMs > 0) {
      this.heartbeat();
      this.heartbeatTimer = setInterval(() => this.heartbeat(), this.o.heartbeatMs);
      unrefTimer(this.heartbeatTimer);
    }
  }

  decide(req: StoreRequest): Promise<StoreDecision> {
    const { policy, key, cost } = req;
    if (policy.lease !== undefined && !this.closed) {
      const book = this.allotmentBook();
      const d = book.decide(policy, key, cost);
      if (d !== undefined) return d instanceof Promise ? d : Promise.resolve(d);
      book.counters.remote++;
    }
    const cached = this.deny !== undefined && denyCacheable(policy);
    if (cached) {
      const hit = this.deny!.answer(policy, key, cost);
      if (hit) return Promise.resolve(hit);
    }
    // A permit id unique to this store: its random id and a sequence number.
    const permitId =
      policy.algorithm === "concurrency"
        ? `${this.instanceId}${(++this.permitSeq).toString(36)}`
        : "";
    return this.enqueue(OP_DECIDE, policy, key, cost, permitId, cached) as Promise<StoreDecision>;
  }

  /**
   * A decision from an allotment this store holds for the key, when one can answer at once (no call
   * to Redis); undefined otherwise. The limiter's `tryLimitSync`.
   */
  decideLocal(policy: Policy, key: string, cost: number): StoreDecision | undefined {
    if (policy.lease === undefined || this.allotments === undefined) return undefined;
    return this.allotments.trySpend(policy, key, cost);
  }

  /** Which local structure would answer a `decide` now (`localAnswer`); changes nothing. */
  explainLocal(policy: Policy, key: string, cost: number): LocalAnswer | undefined {
    return this.closed ? undefined : localAnswer(this.allotments, this.deny, policy, key, cost);
  }

  peek(req: StoreRequest): Promise<StoreDecision> {
    const p = this.enqueue(OP_PEEK, req.policy, req.key, req.cost) as Promise<StoreDecision>;
    if (req.policy.lease === undefined || this.allotments === undefined) return p;
    // What this node holds unspent is not used: it is still there to spend.
    const allotments = this.allotments;
    return p.then((d) => allotments.withUnspent(req.policy, req.key, d));
  }

  async adjust(policy: Policy, key: string, delta: number): Promise<void> {
    this.deny?.forget(policy, key);
    this.allotments?.changed(policy, key);
    await this.enqueue(OP_ADJUST, policy, key, delta);
  }

  async release(policy: Policy, key: string, leaseId: string): Promise<boolean> {
    if (policy.algorithm !== "concurrency") return false;
    const local = this.allotments?.releaseLocal(policy, key, leaseId);
    if (local !== undefined) return local;
    return (await this.enqueue(OP_RELEASE, policy, key, 0, leaseId)) as boolean;
  }

  async reset(policy: Policy, key: string): Promise<void> {
    this.deny?.forget(policy, key);
    this.allotments?.forget(policy, key);
    await this.enqueue(OP_RESET, policy, key, 0);
  }

  async setCount(policy: Policy, key: string, count: number, windowMs: number): Promise<void> {
    this.deny?.forget(policy, key);
    await this.enqueue(OP_SET, policy, key, count, "", false, windowMs);
  }

  /** Live instances counted through Redis (the last count is kept through an outage), or the `instances` option. */
  liveInstances(): number | undefined {
    return this.o.instances ?? this.lastInstances;
  }

  /** True while a circuit breaker is open (Redis, or in a Cluster a slot, considered down; calls fail fast). */
  get breakerOpen(): boolean {
    return this.calls.breakerOpen;
  }

  /**
   * Resolves once the store can decide from Redis: the client is connected (and, during a
   * Sentinel failover, connected to the new master). Rejects with a `StoreError` when the first
   * connection failed (`SLUICE_ERR_STORE_UNAVAILABLE`) or did not come within
   * `connectTimeoutMs` (`SLUICE_ERR_STORE_TIMEOUT`). Decisions do not need it — they wait for
   * the first connection by themselves — but a server can await it before taking traffic.
   */
  ready(): Promise<void> {
    return this.conn.ready();
  }

  /** Sends what is queued, stops the timers and leaves the instance count. Does not close the client. */
  async close(): Promise<void> {
    if (this.closed) return;
    // What allotments hold unspent goes back (before the queue is flushed one last time).
    const givingBack = this.allotments?.close();
    this.calls.flush();
    await givingBack;
    this.closed = true;
    const closedErr = new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "redisStore is closed");
    this.calls.close(closedErr);
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = undefined;
    if (
      this.o.instances === undefined &&
      this.o.heartbeatMs > 0 &&
      !this.calls.breakerOpen &&
      this.port.status() === "ready"
    ) {
      await this.callOnce(
        INSTANCES_LUA,
        [this.instancesKey()],
        [this.instanceId, this.o.heartbeatMs * 3, "1"],
      ).catch(() => undefined);
    }
    this.conn.close(closedErr);
    this.deny?.clear();
  }

  /** Allotments held for the policy now (the `ratelimit.allotments` gauge). */
  allotmentsHeld(policy: string): number {
    return this.allotments?.heldCount(policy) ?? 0;
  }

  /** Counts of this store's allotments (for metrics): taken, returned, expired, decisions local and remote. */
  get allotmentCounters(): Readonly<AllotmentCounters> | undefined {
    return this.allotments?.counters;
  }

  /**
   * The first name of {@link RedisStore.allotmentCounters} (the same object).
   * @deprecated Use {@link RedisStore.allotmentCounters}.
   */
  get leaseCounters(): Readonly<AllotmentCounters> | undefined {
    return this.allotmentCounters;
  }

  /** The allotment epoch's key (lua/sluice.lua; stored as `lease-epoch`): per Redis, or per Cluster slot. */
  private epochKey(slot: number): string {
    return this.cluster
      ? `${this.o.prefix}lease-epoch:{${tagForSlot(slot)}}`
      : `${this.o.prefix}lease-epoch`;
  }

  private allotmentBook(): AllotmentBook {
    if (this.allotments === undefined) {
      this.allotments = new AllotmentBook(
        {
          now: this.o.now ?? monoNow,
          allot: (policy, key, cost, asked, ret, retAt, epoch, member) =>
            this.enqueue(OP_ALLOT, policy, key, cost, member, false, 0, [
              asked,
              ret,
              retAt,
              epoch,
              policy.lease!.ttlMs,
            ]) as Promise<AllotmentReply>,
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
    this.allotments.keepSwept();
    return this.allotments;
  }

  /** Queues one operation for the engine; resolves with its result. */
  private enqueue(
    op: number,
    policy: Policy,
    key: string,
    cost: number,
    member = "",
    cacheable = false,
    windowMs = 0,
    args?: readonly number[],
  ): Promise<StoreDecision | boolean | AllotmentReply> {
    if (this.closed)
      return Promise.reject(new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "redisStore is closed"));
    const info = this.info(policy);
    return new Promise((resolve, reject) => {
      this.calls.enqueue({
        op,
        policy,
        info,
        tag: identifierTag(key),
        cost,
        member,
        windowMs,
        args,
        cacheable,
        generation: this.deny?.generation ?? 0,
        askedAt: this.o.now ? this.o.now() : 0,
        key,
        due: 0,
        resolve,
        reject,
      });
    });
  }

  // ─── how calls travel: the engine's transport ───

  private transport(): Transport<Pending> {
    return {
      groupOf: (p) => slotOfTag(p.tag),
      unavailable: () => this.conn.unavailable(),
      dueOf: (slot, due, now) => this.conn.dueOf(slot, due, now),
      call: (batch, slot, due, waiting) => this.call(batch, slot, due, waiting),
      settle: (batch, reply, slot, sentAt) => this.settle(batch, reply, slot, sentAt),
      late: (batch, reply, slot) => this.late(batch, reply, slot),
      failure: (err, slot) => this.failure(err, slot),
    };
  }

  /**
   * One script call carrying `batch` (all in `slot`). It carries its deadline on the server's
   * clock, so that Redis never runs it after the caller stopped waiting (lua/sluice.lua,
   * ARGV[4]); every reply carries the server's time, which the clock offsets learn from.
   */
  private call(
    batch: Pending[],
    slot: number,
    due: number,
    waiting: () => boolean,
  ): Promise<unknown> {
    // Injected time: the batch is decided at the latest time one of its operations was asked at
    // — not the time it is sent, which a clock moved meanwhile (a call waiting for a free
    // connection) would put in a later window than the caller's.
    let asked = 0;
    if (this.o.now) for (const p of batch) if (p.askedAt > asked) asked = p.askedAt;
    const { keys, argv } = encodeCall(batch, {
      now: this.o.now ? String(asked) : "",
      ttlPadMs: this.o.ttlPadMs,
      shiftMs: this.shiftMs(),
      deadline: this.offsets.deadline(slot, due),
      nowMs: this.o.now ? asked : (this.offsets.serverNow(slot, monoNow()) ?? Date.now()),
      // Only allotment operations carry it (and in a Cluster, finding a slot's tag takes a search).
      epochKey: this.allotments === undefined ? "" : this.epochKey(slot),
    });
    return this.script(SLUICE_LUA, keys, argv, waiting);
  }

  /** What a failed call means (and the clock offset an expired one tells). */
  private failure(err: unknown, slot: number): { kind: CallFailure; cause: string } {
    const message = errorMessage(err);
    const expired = /^SLUICE_EXPIRED (\d+)/.exec(message);
    if (expired) {
      this.offsets.sample(slot, Number(expired[1]), monoNow());
      return { kind: "expired", cause: "the server ran the call late" };
    }
    if (this.cluster && REFUSED.test(message)) return { kind: "refused", cause: message };
    return { kind: "failed", cause: causeOf(err) };
  }

  /**
   * Settles each operation of an answered call with its own result (`sentAt`: monoNow when it
   * went). Every reply carries the server's time, which the clock offsets learn from.
   */
  private settle(batch: Pending[], reply: unknown, slot: number, sentAt: number): void {
    this.sampleOffset(reply, slot);
    this.conn.answered(slot);
    const results = decodeReply(batch, reply);
    if (results instanceof StoreError) {
      this.calls.rejectAll(batch, results);
      return;
    }
    for (let b = 0; b < batch.length; b++) {
      const p = batch[b]!;
      const r = results[b]!;
      if (r instanceof Error) {
        p.reject(r);
        continue;
      }
      if (p.op === OP_DECIDE && typeof r !== "boolean" && "allowed" in r) {
        if (r.allowed) {
          if (p.member !== "" && p.cost > 0) {
            p.resolve({ ...r, leaseId: p.member });
            continue;
          }
        } else if (p.cacheable && r.blockedForMs === 0) {
          // A reset or refund made while this call was in flight keeps its denial out. Remembered
          // from before the script ran (injected time: when it was asked), so that it never
          // outlasts the real one.
          const at = this.o.now ? p.askedAt : sentAt;
          this.deny?.remember(p.policy, p.key, p.cost, r.rules, at, p.generation);
        }
      }
      p.resolve(r);
    }
  }

  /**
   * A reply that came after its call was answered (by `onStoreError`): Redis ran the call just
   * before its deadline, but the answer arrived too late. A concurrency permit it took is given
   * back (nobody holds its id); charges of the other algorithms stay (docs/redis.md: the bound).
   */
  private late(batch: readonly Pending[], reply: unknown, slot: number): void {
    this.sampleOffset(reply, slot);
    const results = decodeReply(batch, reply);
    if (results instanceof StoreError) return;
    batch.forEach((p, b) => {
      const r = results[b];
      if (p.op === OP_ALLOT && typeof r === "object" && "granted" in r) {
        // Units granted to an allotment call nobody waited for go back (for concurrency also the
        // request's own slot: its caller holds no permit id).
        const back = r.granted + (p.member !== "" && r.decision.allowed ? p.cost : 0);
        if (back > 0)
          this.enqueue(OP_GIVE_BACK, p.policy, p.key, back, p.member, false, 0, [
            r.at,
            r.epoch,
            p.policy.lease!.ttlMs,
          ]).catch(() => undefined);
        return;
      }
      if (
        p.op === OP_DECIDE &&
        p.member !== "" &&
        typeof r === "object" &&
        "allowed" in r &&
        r.allowed
      )
        this.enqueue(OP_RELEASE, p.policy, p.key, 0, p.member).catch(() => undefined);
    });
  }

  /**
   * EVALSHA; on NOSCRIPT only (after a restart, failover or SCRIPT FLUSH), EVAL, which also
   * loads it — unless the call was answered meanwhile (a re-sent command meeting a restarted
   * server must not run).
   */
  private async script(
    script: LuaScript,
    keys: string[],
    argv: Array<string | number>,
    waiting: () => boolean,
  ): Promise<unknown> {
    try {
      return await this.port.script("EVALSHA", script.sha, keys, argv);
    } catch (err) {
      if (!errorMessage(err).startsWith("NOSCRIPT") || !waiting()) throw err;
      return await this.port.script("EVAL", script.text, keys, argv);
    }
  }

  /** One script call outside the batches (instance counting), with the per-call timeout. */
  private callOnce(
    script: LuaScript,
    keys: string[],
    argv: Array<string | number>,
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      let answered = false;
      const timer = setTimeout(() => {
        answered = true;
        reject(
          new StoreError(
            "SLUICE_ERR_STORE_TIMEOUT",
            `Redis did not answer within ${this.o.timeoutMs} ms`,
          ),
        );
      }, this.o.timeoutMs);
      this.script(script, keys, argv, () => !answered).then(
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

  // ─── instances ───

  private instancesKey(): string {
    return `${this.o.prefix}instances`;
  }

  private heartbeat(): void {
    if (this.calls.breakerOpen || this.closed || !this.conn.open) return;
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

  // ─── time and policies ───

  /** The server's time a reply carries, for the clock offsets. */
  private sampleOffset(reply: unknown, slot: number): void {
    const serverMs = serverTimeOf(reply);
    if (serverMs !== undefined) this.offsets.sample(slot, serverMs, monoNow());
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
      info = policyInfo(policy, this.o.prefix);
      this.policies.set(policy, info);
    }
    this.lastPolicy = policy;
    this.lastInfo = info;
    return info;
  }
}

/** The store's options, checked and resolved. */
function resolveRedisOptions(options: RedisStoreOptions) {
  const o = resolveOptions("Invalid redisStore options", OPTIONS, options);
  return {
    ...o,
    // 10,000 by default when time is injected (see RedisStoreOptions.ttlPadMs).
    ttlPadMs: o.ttlPadMs ?? (o.now ? 10_000 : 0),
  };
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
