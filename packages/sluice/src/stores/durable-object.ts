/**
 * `sluice/durable-object`: a store on Cloudflare Durable Objects, so that a Worker limits
 * exactly with no Redis at all.
 *
 * ```ts
 * import { createLimiter } from "sluice";
 * import { durableObjectStore } from "sluice/durable-object";
 * export { SluiceDurableObject } from "sluice/durable-object"; // bound as SLUICE in wrangler.toml
 *
 * export default {
 *   async fetch(request: Request, env: { SLUICE: DurableObjectNamespace }) {
 *     const store = durableObjectStore({ namespace: env.SLUICE });
 *     const limiter = createLimiter({ store, policy });
 *     …
 *   },
 * };
 * ```
 *
 * Keys are spread over `shards` objects by key range (the CRC16 slot of the identifier's hash
 * tag, as Redis Cluster spreads them; every key of one identifier lives in one object). Each
 * object decides with `evaluate()` — the function the memory store and the Redis script
 * implement — over state kept in its transactional storage, one batch at a time: a Durable
 * Object runs one request at a time and its storage is consistent, so a decision is atomic, and
 * exact across every Worker in the world. State survives the object's eviction and restarts; an
 * alarm deletes what expired.
 *
 * Decisions made in one tick travel together, one request per object. A store may be made per
 * request (cheap: no timers, no connection) or shared: it never sends one request's decisions
 * from another request's context (which Workers refuse).
 */
import type { RuleOutcome } from "../algorithms/index.js";
import { type Clock, monoNow } from "../clock.js";
import { ruleDecisions } from "../decision.js";
import { SluiceError, StoreError } from "../errors.js";
import { type Logger, loggerOption } from "../logger.js";
import { type Resolved, option, resolveOptions } from "../options.js";
import { type KeyState, adjustState, evaluate, releaseState, setCountState } from "../evaluate.js";
import { type Policy, type PolicyInput, definePolicy, policyToInput } from "../policy.js";
import type { Store, StoreDecision, StoreRequest } from "../store.js";
import { type Queued, RemoteCalls, errorMessage } from "./remote-calls.js";
import {
  OP_ADJUST,
  OP_DECIDE,
  OP_PEEK,
  OP_RELEASE,
  OP_RESET,
  OP_SET,
  identifierTag,
  keyCode,
  slotOfTag,
} from "./redis-keys.js";

// ─── the wire between the store and its objects ───

/** One operation: [op, policy index, key, cost (delta, count), permit id or window (ms)]. */
type WireOp = [op: number, policy: number, key: string, cost: number, extra: number];

/** A batch, as the store POSTs it to one object. */
interface WireBatch {
  /** Injected time (tests, simulations), else absent: the object's clock. */
  readonly now?: number;
  /** Epoch ms after which the object must not run the batch (the caller stopped waiting). */
  readonly deadline: number;
  /** The batch's policies, as `policyToInput` gives them (decision fields only), as JSON. */
  readonly policies: readonly string[];
  readonly ops: readonly WireOp[];
}

/**
 * One operation's answer: a decision `{ a: allowed, b: blockedForMs, r: [allowed, remaining,
 * resetAfterMs, retryAfterMs] per rule, l: permit id }`, a boolean (release), null (adjust,
 * reset, set), or `{ e: message }` when the key's stored state is unreadable.
 */
type WireResult =
  null | boolean | { a: boolean; b: number; r: number[]; l?: number } | { e: string };

/** The object's answer: every result, or `expired` when it got the batch after its deadline. */
interface WireReply {
  readonly results?: WireResult[];
  readonly expired?: boolean;
  readonly error?: string;
}

// ─── the Durable Object ───

/** The part of a Durable Object's storage (`state.storage`) the object uses. */
export interface DurableObjectStorageLike {
  get(keys: string[]): Promise<Map<string, unknown>>;
  put(entries: Record<string, unknown>): Promise<void>;
  delete(keys: string[]): Promise<number>;
  list(options: { startAfter?: string; limit: number }): Promise<Map<string, unknown>>;
  getAlarm(): Promise<number | null>;
  setAlarm(scheduledTime: number): Promise<void>;
}

/** The part of a Durable Object's state (its constructor's first argument) the object uses. */
export interface DurableObjectStateLike {
  readonly storage: DurableObjectStorageLike;
}

/** One key's stored state: the rules' states, the block, and when it expires. */
interface Entry {
  /** Per-rule states (evaluate's `KeyState.states`). */
  readonly s: Array<number[] | undefined>;
  /** Blocked until (epoch ms on the decision clock), 0 when not. */
  readonly b: number;
  /** Expires at, on the decision clock. */
  readonly e: number;
  /** Expires at on the object's own clock, when time was injected (for the sweep). */
  readonly x?: number;
}

/**
 * Storage key of the object's permit counter (no policy name holds a NUL). Its value keeps the
 * first word: it is in every object's storage.
 */
const PERMIT_SEQ_KEY = "\u0000lease";
/** Most keys one storage call takes (Durable Objects' limit for get/put/delete). */
const STORAGE_BATCH = 128;
/** Keys read per page while sweeping. */
const SWEEP_PAGE = 1000;
/** Default least time between two sweeps (ms); the `SLUICE_SWEEP_MS` binding overrides it. */
const DEFAULT_SWEEP_MS = 60_000;
/** Policies kept parsed per object. */
const POLICY_CACHE = 256;

/**
 * The Durable Object behind {@link durableObjectStore}. Export it from the Worker's main module
 * and bind it (wrangler.toml: `[[durable_objects.bindings]] name = "SLUICE"`, `class_name =
 * "SluiceDurableObject"`, and a migration that creates the class). An optional text binding
 * `SLUICE_SWEEP_MS` sets how often at most an object deletes expired keys (default 60000).
 *
 * It answers POSTs from the store only (a batch of operations as JSON); never route
 * user requests to it.
 */
export class SluiceDurableObject {
  private readonly storage: DurableObjectStorageLike;
  private readonly sweepMs: number;
  private readonly policies = new Map<string, Policy>();
  /** Batches and sweep pages run one after another, each to its end. */
  private turn: Promise<unknown> = Promise.resolve();
  /** The alarm set (epoch ms), null when none, undefined before it is read. */
  private alarmAt: number | null | undefined;

  constructor(state: DurableObjectStateLike, env?: unknown) {
    this.storage = state.storage;
    const sweep = Number((env as { SLUICE_SWEEP_MS?: unknown } | undefined)?.SLUICE_SWEEP_MS);
    this.sweepMs = Number.isSafeInteger(sweep) && sweep > 0 ? sweep : DEFAULT_SWEEP_MS;
  }

  /** Runs one batch of the store's operations. */
  async fetch(request: Request): Promise<Response> {
    if (request.method !== "POST")
      return Response.json({ error: "POST a batch from durableObjectStore" }, { status: 405 });
    let batch: WireBatch;
    try {
      batch = readBatch(await request.json());
    } catch (err) {
      return Response.json({ error: `bad batch: ${errorMessage(err)}` }, { status: 400 });
    }
    try {
      return Response.json(await this.exclusive(() => this.run(batch)));
    } catch (err) {
      return Response.json({ error: errorMessage(err) }, { status: 500 });
    }
  }

  /** Deletes expired keys, a page at a time (decisions go on between pages). */
  async alarm(): Promise<void> {
    this.alarmAt = null;
    let startAfter: string | undefined;
    let next = Infinity;
    for (;;) {
      const page = await this.exclusive(async () => {
        const now = Date.now();
        const entries = await this.storage.list(
          startAfter === undefined ? { limit: SWEEP_PAGE } : { startAfter, limit: SWEEP_PAGE },
        );
        const dead: string[] = [];
        let last: string | undefined;
        for (const [k, v] of entries) {
          last = k;
          if (k === PERMIT_SEQ_KEY) continue;
          const at = isEntry(v) ? (v.x ?? v.e) : 0;
          if (at <= now) dead.push(k);
          else if (at < next) next = at;
        }
        for (let i = 0; i < dead.length; i += STORAGE_BATCH)
          await this.storage.delete(dead.slice(i, i + STORAGE_BATCH));
        return { size: entries.size, last };
      });
      if (page.size < SWEEP_PAGE || page.last === undefined) break;
      startAfter = page.last;
    }
    if (next < Infinity) await this.exclusive(() => this.schedule(next));
  }

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.turn.then(fn);
    this.turn = run.catch(() => undefined);
    return run;
  }

  private async run(batch: WireBatch): Promise<WireReply> {
    const realNow = Date.now();
    if (realNow > batch.deadline) return { expired: true };
    const now = batch.now ?? realNow;
    const policies = batch.policies.map((text) => this.policy(text));
    const keyOf = (op: WireOp): string => storageKey(policies[op[1]]!, op[2]);
    const names = [...new Set(batch.ops.map(keyOf))];
    const permits = batch.ops.some(
      (op) => op[0] === OP_DECIDE && policies[op[1]]!.algorithm === "concurrency",
    );
    if (permits) names.push(PERMIT_SEQ_KEY);
    const stored = new Map<string, unknown>();
    for (let i = 0; i < names.length; i += STORAGE_BATCH)
      for (const [k, v] of await this.storage.get(names.slice(i, i + STORAGE_BATCH)))
        stored.set(k, v);
    let permitSeq = permits ? Number(stored.get(PERMIT_SEQ_KEY) ?? 0) : 0;

    const writes = new Map<string, Entry | null>();
    let earliest = Infinity;
    const write = (key: string, next: KeyState, ttlMs: number): void => {
      if (ttlMs <= 0) {
        writes.set(key, null);
        stored.delete(key);
        return;
      }
      const entry: Entry =
        batch.now === undefined
          ? { s: next.states, b: next.blockUntil, e: now + ttlMs }
          : { s: next.states, b: next.blockUntil, e: now + ttlMs, x: realNow + ttlMs };
      writes.set(key, entry);
      stored.set(key, entry);
      earliest = Math.min(earliest, entry.x ?? entry.e);
    };

    const results = batch.ops.map(([op, p, , cost, extra], i): WireResult => {
      const policy = policies[p]!;
      const key = keyOf(batch.ops[i]!);
      const raw = stored.get(key);
      if (raw !== undefined && !isEntry(raw))
        return { e: `the state stored at ${JSON.stringify(key)} is not sluice's` };
      const current: KeyState | undefined =
        raw !== undefined && raw.e > now ? { states: raw.s, blockUntil: raw.b } : undefined;
      switch (op) {
        case OP_DECIDE:
        case OP_PEEK: {
          const commit = op === OP_DECIDE;
          const permitId = commit && policy.algorithm === "concurrency" ? ++permitSeq : 0;
          const ev = evaluate(policy, current, now, cost, commit, permitId);
          if (commit && ev.changed) write(key, ev.next, ev.ttlMs);
          const out: WireResult = { a: ev.allowed, b: ev.blockedForMs, r: flatten(ev.rules) };
          return permitId > 0 && ev.allowed && cost > 0 ? { ...out, l: permitId } : out;
        }
        case OP_ADJUST: {
          const a = adjustState(policy, current, now, cost);
          write(key, a.next, a.ttlMs);
          return null;
        }
        case OP_RELEASE: {
          if (policy.algorithm !== "concurrency" || current === undefined) return false;
          const r = releaseState(current, now, extra);
          if (r.released) write(key, r.next, r.ttlMs);
          return r.released;
        }
        case OP_RESET:
          writes.set(key, null);
          stored.delete(key);
          return null;
        default: {
          const c = setCountState(policy, current, now, cost, extra);
          write(key, c.next, c.ttlMs);
          return null;
        }
      }
    });

    const puts: Array<[string, unknown]> = [];
    const dels: string[] = [];
    for (const [k, v] of writes) {
      if (v === null) dels.push(k);
      else puts.push([k, v]);
    }
    if (permits) puts.push([PERMIT_SEQ_KEY, permitSeq]);
    for (let i = 0; i < puts.length; i += STORAGE_BATCH)
      await this.storage.put(Object.fromEntries(puts.slice(i, i + STORAGE_BATCH)));
    for (let i = 0; i < dels.length; i += STORAGE_BATCH)
      await this.storage.delete(dels.slice(i, i + STORAGE_BATCH));
    if (earliest < Infinity) await this.schedule(earliest);
    return { results };
  }

  /** Makes sure a sweep will come, no earlier than `sweepMs` from now. */
  private async schedule(expiry: number): Promise<void> {
    this.alarmAt ??= await this.storage.getAlarm();
    if (this.alarmAt !== null) return;
    const at = Math.max(expiry, Date.now() + this.sweepMs);
    await this.storage.setAlarm(at);
    this.alarmAt = at;
  }

  private policy(text: string): Policy {
    let p = this.policies.get(text);
    if (p === undefined) {
      p = definePolicy(JSON.parse(text) as PolicyInput);
      if (this.policies.size >= POLICY_CACHE) this.policies.clear();
      this.policies.set(text, p);
    }
    return p;
  }
}

/** The storage key of a key's state: the Redis store's layout, one key for every rule. */
function storageKey(policy: Policy, key: string): string {
  return `${policy.name}:{${identifierTag(key)}}:${keyCode(policy)}`;
}

function flatten(rules: readonly RuleOutcome[]): number[] {
  const out: number[] = [];
  for (const r of rules) out.push(r.allowed ? 1 : 0, r.remaining, r.resetAfterMs, r.retryAfterMs);
  return out;
}

function isEntry(v: unknown): v is Entry {
  if (typeof v !== "object" || v === null) return false;
  const e = v as Partial<Entry>;
  return (
    Array.isArray(e.s) &&
    e.s.every((x) => x === undefined || x === null || Array.isArray(x)) &&
    typeof e.b === "number" &&
    typeof e.e === "number"
  );
}

/** Checks a batch's shape (it comes over the wire). */
function readBatch(body: unknown): WireBatch {
  const b = body as Partial<WireBatch> | null;
  if (typeof b !== "object" || b === null) throw new Error("not an object");
  if (typeof b.deadline !== "number") throw new Error("deadline must be a number");
  if (b.now !== undefined && typeof b.now !== "number") throw new Error("now must be a number");
  if (!Array.isArray(b.policies) || !b.policies.every((p) => typeof p === "string"))
    throw new Error("policies must be an array of strings");
  const n = b.policies.length;
  if (
    !Array.isArray(b.ops) ||
    !b.ops.every(
      (op) =>
        Array.isArray(op) &&
        op.length === 5 &&
        Number.isInteger(op[0]) &&
        op[0] >= OP_DECIDE &&
        op[0] <= OP_SET &&
        Number.isInteger(op[1]) &&
        op[1] >= 0 &&
        op[1] < n &&
        typeof op[2] === "string" &&
        typeof op[3] === "number" &&
        typeof op[4] === "number",
    )
  )
    throw new Error("ops must be [op, policy, key, cost, extra] arrays");
  return b as WireBatch;
}

// ─── the store ───

/** The part of a Durable Object stub (`namespace.get(id)`) the store uses. */
export interface DurableObjectStubLike {
  fetch(
    url: string,
    init: { method: "POST"; body: string; headers: Record<string, string> },
  ): Promise<{ readonly status: number; json(): Promise<unknown>; text(): Promise<string> }>;
}

/** The part of a Durable Object namespace binding (`env.SLUICE`) the store uses. */
export interface DurableObjectNamespaceLike {
  idFromName(name: string): unknown;
  get(id: unknown): DurableObjectStubLike;
}

/** Options of {@link durableObjectStore}. */
export interface DurableObjectStoreOptions {
  /** The binding of {@link SluiceDurableObject}'s namespace (`env.SLUICE`). */
  namespace: DurableObjectNamespaceLike;
  /**
   * How many objects the keys are spread over (by key range), 1–16384. Default 16. Every key of
   * one identifier lives in one object; more objects decide more in parallel. Changing it moves
   * keys to other objects, which start them afresh: choose it once.
   */
  shards?: number;
  /** Names the objects (`<name>:<shards>:<shard>`). Default `"sluice"`. */
  name?: string;
  /**
   * Per-call budget (ms): a call not answered within it rejects with `SLUICE_ERR_STORE_TIMEOUT`
   * (the policy's `onStoreError` decides), and the object will not run it afterwards.
   * Default 1000.
   */
  timeoutMs?: number;
  /** Time source in epoch ms, for tests and simulations: sent to the objects. Leave unset. */
  now?: Clock;
  /**
   * Where the store says, once, that its objects cannot be reached (a shard's breaker opened)
   * and, once, that they can again. Default: the console; `false`: silent.
   */
  logger?: Logger | false;
}

/** The slots of the Redis Cluster specification, cut into `shards` ranges. */
const SLOTS_COUNT = 16384;

/** The options, checked once (options.ts). */
const STORE_OPTIONS = {
  namespace: option.required<DurableObjectNamespaceLike>((v) => {
    const ns = v as Partial<DurableObjectNamespaceLike> | undefined;
    return typeof ns?.idFromName === "function" && typeof ns.get === "function"
      ? (v as DurableObjectNamespaceLike)
      : {
          problem: "must be a Durable Object namespace binding (env.SLUICE) of SluiceDurableObject",
        };
  }),
  shards: option.int(1, 16, SLOTS_COUNT),
  name: option.custom<string>(
    (v) => (typeof v === "string" && v !== "" ? v : { problem: "must be a non-empty string" }),
    "sluice",
  ),
  timeoutMs: option.int(1, 1000, 600_000),
  now: option.fn<Clock>("must be a function returning epoch ms"),
  logger: loggerOption,
} satisfies { readonly [K in keyof Required<DurableObjectStoreOptions>]: unknown };

/** Consecutive failures of one object after which its calls fail fast, and the probe's interval. */
const BREAKER_FAILURES = 5;
const PROBE_INTERVAL_MS = 1000;

interface Pending extends Queued {
  readonly op: number;
  readonly policy: Policy;
  readonly key: string;
  readonly cost: number;
  readonly extra: number;
  readonly resolve: (value: WireResult) => void;
}

/** An answer of the object that says it got the batch after its deadline. */
class ExpiredError extends Error {}

/**
 * The store on Durable Objects (see the module's description and docs/runtimes.md). Calls go
 * through the remote-call engine (remote-calls.ts): each tick's operations in one request per
 * object, each within its budget, behind a breaker per object. Failures reject with a
 * `StoreError`, which the limiter maps to the policy's `onStoreError`.
 */
export class DurableObjectStore implements Store {
  readonly kind = "durable-object";
  private readonly o: Resolved<typeof STORE_OPTIONS>;
  private readonly inputs = new WeakMap<Policy, string>();
  private readonly calls: RemoteCalls<Pending>;
  private closed = false;

  constructor(options: DurableObjectStoreOptions) {
    this.o = resolveOptions("Invalid durableObjectStore options", STORE_OPTIONS, options);
    this.calls = new RemoteCalls<Pending>(
      {
        timeoutMs: this.o.timeoutMs,
        // Every operation of a tick goes in its tick, in one request per object: Workers refuse
        // I/O made for one request from another's (a call that waited for another's answer).
        maxBatch: Number.MAX_SAFE_INTEGER,
        maxInFlight: Number.MAX_SAFE_INTEGER,
        spread: false,
        breakerFailures: BREAKER_FAILURES,
        probeIntervalMs: PROBE_INTERVAL_MS,
        grouped: true,
        slotsMove: false,
        logger: this.o.logger,
        what: "the Durable Object",
        describe: `the Durable Objects (${this.o.name})`,
      },
      {
        groupOf: (p) => Math.floor((slotOfTag(identifierTag(p.key)) * this.o.shards) / SLOTS_COUNT),
        unavailable: () => undefined,
        dueOf: (_shard, due) => due,
        call: (ops, shard, due) => this.call(ops, shard, due),
        settle: (ops, reply) => this.settle(ops, reply as WireReply),
        late: () => undefined,
        failure: (err) =>
          err instanceof ExpiredError
            ? { kind: "expired", cause: "the object got the call after its deadline" }
            : { kind: "failed", cause: errorMessage(err) },
      },
    );
  }

  async decide(req: StoreRequest): Promise<StoreDecision> {
    return this.decision(req.policy, await this.enqueue(OP_DECIDE, req.policy, req.key, req.cost));
  }

  async peek(req: StoreRequest): Promise<StoreDecision> {
    return this.decision(req.policy, await this.enqueue(OP_PEEK, req.policy, req.key, req.cost));
  }

  async adjust(policy: Policy, key: string, delta: number): Promise<void> {
    await this.enqueue(OP_ADJUST, policy, key, delta);
  }

  async release(policy: Policy, key: string, leaseId: string): Promise<boolean> {
    const id = Number(leaseId);
    if (policy.algorithm !== "concurrency" || !Number.isSafeInteger(id) || id <= 0) return false;
    return (await this.enqueue(OP_RELEASE, policy, key, 0, id)) === true;
  }

  async reset(policy: Policy, key: string): Promise<void> {
    await this.enqueue(OP_RESET, policy, key, 0);
  }

  async setCount(policy: Policy, key: string, count: number, windowMs: number): Promise<void> {
    await this.enqueue(OP_SET, policy, key, count, windowMs);
  }

  /** True while an object's breaker is open (its calls fail fast). */
  get breakerOpen(): boolean {
    return this.calls.breakerOpen;
  }

  /** Refuses further calls (calls already sent are answered). Nothing else to release. */
  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  private decision(policy: Policy, r: WireResult): StoreDecision {
    if (
      r === null ||
      typeof r !== "object" ||
      !("a" in r) ||
      r.r.length !== policy.rules.length * 4
    )
      throw new StoreError("SLUICE_ERR_STORE", "Unreadable answer from the Durable Object");
    const outcomes: RuleOutcome[] = [];
    for (let i = 0; i < r.r.length; i += 4)
      outcomes.push({
        allowed: r.r[i] === 1,
        remaining: r.r[i + 1]!,
        resetAfterMs: r.r[i + 2]!,
        retryAfterMs: r.r[i + 3]!,
      });
    const d: StoreDecision = {
      allowed: r.a,
      rules: ruleDecisions(policy, outcomes),
      blockedForMs: r.b,
    };
    return r.l !== undefined ? { ...d, leaseId: String(r.l) } : d;
  }

  private enqueue(
    op: number,
    policy: Policy,
    key: string,
    cost: number,
    extra = 0,
  ): Promise<WireResult> {
    if (this.closed)
      return Promise.reject(
        new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "durableObjectStore is closed"),
      );
    return new Promise((resolve, reject) => {
      this.calls.enqueue({ op, policy, key, cost, extra, due: 0, resolve, reject });
    });
  }

  /** One request to a shard's object carrying `ops`; its deadline on the object's clock. */
  private async call(ops: Pending[], shard: number, due: number): Promise<WireReply> {
    const policies: string[] = [];
    const index = new Map<Policy, number>();
    const wire = ops.map((p): WireOp => {
      let i = index.get(p.policy);
      if (i === undefined) {
        i = policies.push(this.input(p.policy)) - 1;
        index.set(p.policy, i);
      }
      return [p.op, i, p.key, p.cost, p.extra];
    });
    const batch: WireBatch = {
      ...(this.o.now ? { now: this.o.now() } : {}),
      deadline: Date.now() + Math.max(0, Math.floor(due - monoNow())),
      policies,
      ops: wire,
    };
    const res = await this.stub(shard).fetch("https://sluice.durable-object/batch", {
      method: "POST",
      body: JSON.stringify(batch),
      headers: { "content-type": "application/json" },
    });
    if (res.status !== 200)
      throw new Error(`status ${res.status}: ${(await res.text()).slice(0, 500)}`);
    const reply = (await res.json()) as WireReply;
    if (reply.expired === true)
      throw new ExpiredError("the object got the call after its deadline");
    return reply;
  }

  /** Answers each operation with its own result. */
  private settle(ops: Pending[], reply: WireReply): void {
    const results = reply.results;
    if (!Array.isArray(results) || results.length !== ops.length) {
      this.calls.rejectAll(
        ops,
        new StoreError("SLUICE_ERR_STORE", "Unreadable answer from the Durable Object"),
      );
      return;
    }
    ops.forEach((p, i) => {
      const r = results[i]!;
      if (r !== null && typeof r === "object" && "e" in r)
        p.reject(new SluiceError("SLUICE_ERR_CORRUPT_STATE", r.e));
      else p.resolve(r);
    });
  }

  /** The object of a shard (a stub per call: a stub is not carried from one request to another). */
  private stub(shard: number): DurableObjectStubLike {
    return this.o.namespace.get(
      this.o.namespace.idFromName(`${this.o.name}:${this.o.shards}:${shard}`),
    );
  }

  /** The policy's decision fields as JSON, made once per policy. */
  private input(policy: Policy): string {
    let text = this.inputs.get(policy);
    if (text === undefined) {
      const { name, algorithm, rules, blockDuration, resetOnBlock, windowStart, refill } =
        policyToInput(policy);
      text = JSON.stringify({
        name,
        algorithm,
        rules,
        blockDuration,
        resetOnBlock,
        windowStart,
        refill,
      });
      this.inputs.set(policy, text);
    }
    return text;
  }
}

/**
 * Creates a store on Durable Objects of {@link SluiceDurableObject}. See
 * {@link DurableObjectStoreOptions} and docs/runtimes.md.
 */
export function durableObjectStore(options: DurableObjectStoreOptions): DurableObjectStore {
  return new DurableObjectStore(options);
}
