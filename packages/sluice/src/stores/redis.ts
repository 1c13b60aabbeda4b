import { randomBytes } from "node:crypto";
import type { RuleDecision } from "../decision.js";
import { type Clock, systemClock } from "../clock.js";
import { SluiceError, StoreError, ValidationError, type ValidationIssue } from "../errors.js";
import type { Policy } from "../policy.js";
import type { Store, StoreDecision, StoreRequest } from "../store.js";
import { INSTANCES_LUA, type LuaScript, SLUICE_LUA } from "./lua-scripts.js";
import { ALGORITHM_CODES, identifierTag, slotOfTag } from "./redis-keys.js";

/**
 * The part of a Redis client the store uses. An ioredis `Redis` (standalone or Sentinel) or
 * `Cluster` satisfies it; sluice never imports ioredis at runtime.
 */
export interface RedisClientLike {
  /** Send one command (ioredis `call(command, args)`). */
  call(command: string, args: Array<string | number | Uint8Array>): Promise<unknown>;
  /** ioredis connection status (`ready`, `connecting`, `reconnecting`, `end`, …). */
  readonly status: string;
  /** True for an ioredis `Cluster`: batches are then grouped by slot. */
  readonly isCluster?: boolean;
  on(event: "error", listener: (err: Error) => void): unknown;
  off(event: "error", listener: (err: Error) => void): unknown;
}

/** Options of {@link redisStore}. */
export interface RedisStoreOptions {
  /** An ioredis client: `new Redis(url)`, `new Redis({ sentinels, name })` or `new Cluster(nodes)`. */
  client: RedisClientLike;
  /**
   * Time source in epoch ms, for tests and simulations: passed to the script instead of the
   * Redis server clock (TIME). Leave unset in production so that skewed app clocks agree.
   */
  now?: Clock;
  /** Prefix of every key. Default `"sl:"`. Must not contain `{` or `}`. */
  prefix?: string;
  /** Per-call timeout (ms): a slower answer rejects with `SLUICE_ERR_STORE_TIMEOUT`. Default 500. */
  timeoutMs?: number;
  /** Most decisions carried by one script call. Default 128. */
  maxBatch?: number;
  /** Answer keys known to be denied locally until their retry time. Default true. */
  denyCache?: boolean;
  /** Most entries in the deny cache (oldest dropped first). Default 10,000. */
  denyCacheSize?: number;
  /** Consecutive failures after which the breaker opens (calls fail fast). Default 5. */
  breakerFailures?: number;
  /** While the breaker is open, how often to PING Redis to close it again (ms). Default 1000. */
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
}

const OPTION_KEYS: { readonly [K in keyof Required<RedisStoreOptions>]: true } = {
  client: true,
  now: true,
  prefix: true,
  timeoutMs: true,
  maxBatch: true,
  denyCache: true,
  denyCacheSize: true,
  breakerFailures: true,
  probeIntervalMs: true,
  instances: true,
  heartbeatMs: true,
  ttlPadMs: true,
};

interface ResolvedOptions {
  readonly client: RedisClientLike;
  readonly now: Clock | undefined;
  readonly prefix: string;
  readonly timeoutMs: number;
  readonly maxBatch: number;
  readonly denyCache: boolean;
  readonly denyCacheSize: number;
  readonly breakerFailures: number;
  readonly probeIntervalMs: number;
  readonly instances: number | undefined;
  readonly heartbeatMs: number;
  readonly ttlPadMs: number;
}

/** The script's operation codes (see lua/sluice.lua). */
const OP_DECIDE = 0;
const OP_PEEK = 1;
const OP_ADJUST = 2;
const OP_RELEASE = 3;
const OP_RESET = 4;
const OP_SET = 5;

/** One queued operation, waiting for its batch. */
interface Pending {
  readonly op: number;
  readonly policy: Policy;
  readonly info: PolicyInfo;
  readonly tag: string;
  readonly cost: number;
  readonly lease: string;
  /** For a set count: the window's length (ms). */
  readonly windowMs: number;
  /** A decide whose denial the deny cache may remember (and the forget count when asked). */
  readonly cacheable: boolean;
  readonly forgets: number;
  readonly key: string;
  readonly resolve: (value: StoreDecision | boolean) => void;
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

const CONNECTING_STATUS = new Set(["connect", "connecting", "wait"]);

/** Most script calls in flight at once (see {@link RedisStore}). */
const MAX_IN_FLIGHT = 4;

/** Fewest operations a batch is split into when it is spread over several calls. */
const MIN_CHUNK = 4;

/**
 * The Redis store: counters in Redis (standalone, Sentinel or Cluster), every decision one
 * atomic Lua evaluation (`lua/sluice.lua`, a port of `evaluate.ts` and the algorithms).
 *
 * Calls travel in batches: a call is queued and the queue is sent as one EVALSHA (per Cluster
 * slot, at most `maxBatch` operations) at the end of the current microtask checkpoint. At most
 * four script calls are in flight: while they are, new calls wait for one of them to come back
 * and then go together. With fewer in flight a queue is spread over the free calls (at least 4
 * operations each), so that Redis runs one while Node reads another's answer. A lone call goes
 * at once (one round trip).
 * The script decides a batch's operations one after another, each atomically. Failures reject
 * with a {@link StoreError}, which the limiter maps to the policy's `onStoreError`.
 */
export class RedisStore implements Store {
  readonly kind = "redis";
  /** This store's random id (used for instance counting). */
  readonly instanceId: string;
  private readonly o: ResolvedOptions;
  private readonly cluster: boolean;
  private readonly policies = new WeakMap<Policy, PolicyInfo>();
  private queue: Pending[] = [];
  private scheduled = false;
  /** Script calls sent and not yet answered. */
  private inFlight = 0;
  private lastPolicy: Policy | undefined;
  private lastInfo: PolicyInfo | undefined;
  private leaseSeq = 0;
  /** Added to absolute expiries when time is injected (see lua/sluice.lua, ARGV[3]). */
  private shift: number | undefined;
  private failures = 0;
  private open = false;
  private probeTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private lastInstances: number | undefined;
  private readonly denied = new Map<string, DenyEntry>();
  /** Counts resets and adjustments made through this store (see `decide`). */
  private forgets = 0;
  private closed = false;

  constructor(options: RedisStoreOptions) {
    this.o = resolveOptions(options);
    this.cluster = this.o.client.isCluster === true;
    this.instanceId = randomBytes(9).toString("base64url");
    guardClient(this.o.client);
    if (this.o.instances === undefined && this.o.heartbeatMs > 0) {
      this.heartbeat();
      this.heartbeatTimer = setInterval(() => this.heartbeat(), this.o.heartbeatMs);
      this.heartbeatTimer.unref();
    }
  }

  decide(req: StoreRequest): Promise<StoreDecision> {
    const { policy, key, cost } = req;
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

  peek(req: StoreRequest): Promise<StoreDecision> {
    return this.enqueue(
      OP_PEEK,
      req.policy,
      req.key,
      req.cost,
      "",
      false,
    ) as Promise<StoreDecision>;
  }

  async adjust(policy: Policy, key: string, delta: number): Promise<void> {
    this.forget(policy, key);
    await this.enqueue(OP_ADJUST, policy, key, delta, "", false);
  }

  async release(policy: Policy, key: string, leaseId: string): Promise<boolean> {
    if (policy.algorithm !== "concurrency") return false;
    return (await this.enqueue(OP_RELEASE, policy, key, 0, leaseId, false)) as boolean;
  }

  async reset(policy: Policy, key: string): Promise<void> {
    this.forget(policy, key);
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

  /** True while the breaker is open (Redis considered down; calls fail fast). */
  get breakerOpen(): boolean {
    return this.open;
  }

  /** Sends what is queued, stops the timers and leaves the instance count. Does not close the client. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (this.probeTimer) clearInterval(this.probeTimer);
    this.heartbeatTimer = this.probeTimer = undefined;
    if (this.o.instances === undefined && this.o.heartbeatMs > 0 && !this.open && this.usable()) {
      await this.withTimeout(
        this.script(
          INSTANCES_LUA,
          [this.instancesKey()],
          [this.instanceId, this.o.heartbeatMs * 3, "1"],
        ),
      ).catch(() => undefined);
    }
    unguardClient(this.o.client);
    this.denied.clear();
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
  ): Promise<StoreDecision | boolean> {
    if (this.closed)
      return Promise.reject(new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "redisStore is closed"));
    const info = this.info(policy);
    const tag = identifierTag(key);
    return new Promise((resolve, reject) => {
      this.queue.push({
        op,
        policy,
        info,
        tag,
        cost,
        lease,
        windowMs,
        cacheable,
        forgets: this.forgets,
        key,
        resolve,
        reject,
      });
      if (this.queue.length >= this.o.maxBatch) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        queueMicrotask(this.flushLater);
      }
    });
  }

  private readonly flushLater = (): void => {
    this.scheduled = false;
    // Both calls busy: what is queued goes when one of them comes back (see `sent`).
    if (this.inFlight < MAX_IN_FLIGHT || this.queue.length >= this.o.maxBatch) this.flush();
  };

  /** Sends everything queued. */
  private flush(): void {
    const queue = this.queue;
    if (queue.length === 0) return;
    this.queue = [];
    if (this.cluster) {
      const bySlot = new Map<number, Pending[]>();
      for (const p of queue) {
        const slot = slotOfTag(p.tag);
        const group = bySlot.get(slot);
        if (group === undefined) bySlot.set(slot, [p]);
        else group.push(p);
      }
      for (const group of bySlot.values()) this.sendChunks(group);
    } else this.sendChunks(queue);
  }

  /**
   * Sends a batch (one slot) as calls of at most `maxBatch`, spread over the calls still free
   * (at most {@link MAX_IN_FLIGHT} in flight) in chunks of at least {@link MIN_CHUNK}: with
   * little in flight, several calls run at once, so Redis works on one while Node encodes the
   * next or reads the previous one's answer.
   */
  private sendChunks(batch: Pending[]): void {
    const n = batch.length;
    const free = MAX_IN_FLIGHT - this.inFlight;
    const parts = Math.max(
      1,
      Math.min(free, Math.floor(n / MIN_CHUNK)),
      Math.ceil(n / this.o.maxBatch),
    );
    if (parts === 1) {
      this.send(batch);
      return;
    }
    const size = Math.ceil(n / parts);
    for (let i = 0; i < n; i += size) this.send(batch.slice(i, i + size));
  }

  /** Sends one batch (all in one slot) and settles each operation with its own result. */
  private send(batch: Pending[]): void {
    const keys: string[] = [];
    let specCount = 0;
    const specArgs: Array<string | number> = [];
    const opArgs: Array<string | number> = [];
    // Spec numbers of this call, by policy (a batch usually holds one or two policies).
    let lastPolicy: Policy | undefined;
    let lastIndex = 0;
    let specIndex: Map<Policy, number> | undefined;
    for (const p of batch) {
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
      if (p.op === OP_SET) opArgs.push(-code, p.cost, p.windowMs);
      else if (p.cost === 1 && p.lease === "") opArgs.push(code);
      else {
        opArgs.push(-code, p.cost);
        if (p.op === OP_RELEASE || (p.op === OP_DECIDE && p.lease !== "")) opArgs.push(p.lease);
      }
    }
    const argv: Array<string | number> = [
      this.o.now ? String(this.o.now()) : "",
      this.o.ttlPadMs,
      this.shiftMs(),
      specCount,
    ];
    for (const a of specArgs) argv.push(a);
    for (const a of opArgs) argv.push(a);
    // Taken before the script runs, so that a denial it remembers never outlasts the real one.
    const sentAt = this.o.denyCache ? this.localNow() : 0;
    this.inFlight++;
    this.run(SLUICE_LUA, keys, argv).then(
      (reply) => {
        this.sent();
        this.settle(batch, reply, sentAt);
      },
      (err: unknown) => {
        this.sent();
        for (const p of batch) p.reject(err);
      },
    );
  }

  /** A call came back: what waited for it goes now (after this microtask checkpoint's own calls). */
  private sent(): void {
    this.inFlight--;
    if (this.queue.length > 0 && !this.scheduled) {
      this.scheduled = true;
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
      const code = ALGORITHM_CODES[policy.algorithm];
      // A first-request fixed window decides by its own code (F) over f's keys and layout.
      const spec: Array<string | number> = [
        policy.windowStart === "first-request" ? "F" : code,
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

  /** Splits a batch reply into each operation's result (format: lua/sluice.lua's header). */
  private settle(batch: Pending[], reply: unknown, sentAt: number): void {
    if (!Array.isArray(reply)) {
      const err = new StoreError("SLUICE_ERR_STORE", "Unexpected reply from the sluice script");
      for (const p of batch) p.reject(err);
      return;
    }
    const n = reply.length;
    // Read every result first: a reply that does not match the batch settles nobody with a
    // guess (an earlier operation's answer could belong to another).
    const results = new Array<StoreDecision | boolean | SluiceError>(batch.length);
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
      if (p.op === OP_DECIDE || p.op === OP_PEEK) {
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
        results[b] = d;
      } else {
        results[b] = first === 1;
        i++;
      }
    }
    if (b < batch.length || i !== n) {
      const err = new StoreError(
        "SLUICE_ERR_STORE",
        `Unreadable reply from the sluice script: ${n} values for ${batch.length} operation(s)`,
      );
      for (const p of batch) p.reject(err);
      return;
    }
    for (b = 0; b < batch.length; b++) {
      const p = batch[b]!;
      const r = results[b]!;
      if (r instanceof SluiceError) {
        p.reject(r);
        continue;
      }
      if (p.op === OP_DECIDE && typeof r !== "boolean") {
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

  // ─── calling Redis: breaker, timeout, NOSCRIPT ───

  /**
   * Whether to send a command now. `ready` always; while connecting only before any failure:
   * once Redis has failed, nothing is left waiting in the client's offline queue (it would
   * charge decisions that were already answered by `onStoreError`).
   */
  private usable(): boolean {
    const status = this.o.client.status;
    return (
      status === "ready" || (this.failures === 0 && !this.open && CONNECTING_STATUS.has(status))
    );
  }

  private async run(
    script: LuaScript,
    keys: string[],
    argv: Array<string | number>,
  ): Promise<unknown> {
    if (this.open)
      throw new StoreError(
        "SLUICE_ERR_STORE_UNAVAILABLE",
        "Redis is unavailable (circuit open); waiting for a probe to succeed",
      );
    if (!this.usable()) {
      this.failed();
      throw new StoreError(
        "SLUICE_ERR_STORE_UNAVAILABLE",
        `Redis is unavailable (client status "${this.o.client.status}")`,
      );
    }
    try {
      const reply = await this.withTimeout(this.script(script, keys, argv));
      this.failures = 0;
      return reply;
    } catch (err) {
      this.failed();
      throw err instanceof StoreError
        ? err
        : new StoreError("SLUICE_ERR_STORE", `Redis call failed: ${errorMessage(err)}`, {
            cause: err,
          });
    }
  }

  /** EVALSHA; on NOSCRIPT only (after a restart, failover or SCRIPT FLUSH), EVAL, which also loads it. */
  private async script(
    script: LuaScript,
    keys: string[],
    argv: Array<string | number>,
  ): Promise<unknown> {
    const args: Array<string | number> = [script.sha, keys.length, ...keys, ...argv];
    try {
      return await this.o.client.call("EVALSHA", args);
    } catch (err) {
      if (!errorMessage(err).startsWith("NOSCRIPT")) throw err;
      args[0] = script.text;
      return await this.o.client.call("EVAL", args);
    }
  }

  private withTimeout<T>(p: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(
          new StoreError(
            "SLUICE_ERR_STORE_TIMEOUT",
            `Redis did not answer within ${this.o.timeoutMs} ms`,
          ),
        );
      }, this.o.timeoutMs);
      p.then(
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

  private failed(): void {
    if (this.open || ++this.failures < this.o.breakerFailures || this.closed) return;
    this.open = true;
    this.probeTimer = setInterval(() => this.probe(), this.o.probeIntervalMs);
    this.probeTimer.unref();
  }

  private probing = false;
  private probe(): void {
    if (this.probing || !this.usable()) return;
    this.probing = true;
    this.withTimeout(this.o.client.call("PING", [])).then(
      () => {
        this.probing = false;
        this.open = false;
        this.failures = 0;
        if (this.probeTimer) clearInterval(this.probeTimer);
        this.probeTimer = undefined;
        if (this.o.instances === undefined && this.o.heartbeatMs > 0) this.heartbeat();
      },
      () => {
        this.probing = false;
      },
    );
  }

  // ─── instances ───

  private instancesKey(): string {
    return `${this.o.prefix}instances`;
  }

  private heartbeat(): void {
    if (this.open || this.closed || !this.usable()) return;
    this.withTimeout(
      this.script(
        INSTANCES_LUA,
        [this.instancesKey()],
        [this.instanceId, this.o.heartbeatMs * 3, "0"],
      ),
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

/** Stores per client: the client gets one no-op `error` listener while any store uses it. */
const guarded = new WeakMap<RedisClientLike, number>();
const ignoreClientError = (): void => {
  // ioredis reconnects by itself; calls meanwhile fail (and count) through the breaker. The
  // listener only keeps an unhandled 'error' event from being reported as a crash.
};

function guardClient(client: RedisClientLike): void {
  const n = guarded.get(client) ?? 0;
  if (n === 0) client.on("error", ignoreClientError);
  guarded.set(client, n + 1);
}

function unguardClient(client: RedisClientLike): void {
  const n = guarded.get(client) ?? 0;
  if (n <= 1) {
    client.off("error", ignoreClientError);
    guarded.delete(client);
  } else guarded.set(client, n - 1);
}

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
  const client = options.client;
  if (
    typeof client !== "object" ||
    client === null ||
    typeof client.call !== "function" ||
    typeof client.on !== "function"
  ) {
    issues.push({ path: "client", message: "must be an ioredis client (Redis or Cluster)" });
  }
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
    now: options.now,
    prefix,
    timeoutMs: int("timeoutMs", options.timeoutMs, 1, 500),
    maxBatch: int("maxBatch", options.maxBatch, 1, 128),
    denyCache: options.denyCache ?? true,
    denyCacheSize: int("denyCacheSize", options.denyCacheSize, 1, 10_000),
    breakerFailures: int("breakerFailures", options.breakerFailures, 1, 5),
    probeIntervalMs: int("probeIntervalMs", options.probeIntervalMs, 1, 1000),
    instances:
      options.instances === undefined ? undefined : int("instances", options.instances, 1, 1),
    heartbeatMs: int("heartbeatMs", options.heartbeatMs, 0, 5000),
    ttlPadMs: int("ttlPadMs", options.ttlPadMs, 0, options.now ? 10_000 : 0),
  };
  if (typeof resolved.denyCache !== "boolean")
    issues.push({ path: "denyCache", message: "must be true or false" });
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
