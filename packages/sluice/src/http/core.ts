/**
 * The framework-free core of every middleware: identify the client, pick the limiter, decide,
 * apply the strategy, and say what to send. Adapters only translate requests and responses.
 */
import { performance } from "node:perf_hooks";
import { systemClock } from "../clock.js";
import type { Decision } from "../decision.js";
import { ValidationError, type ValidationIssue } from "../errors.js";
import type { Limiter } from "../limiter.js";
import {
  HEADER_FORMATS,
  type HeaderFormat,
  type HeaderList,
  rateLimitHeaders,
  retryAfterSeconds,
} from "./headers.js";
import {
  type Cidr,
  type TrustFn,
  cidrContains,
  compileTrust,
  formatIp,
  ipIdentity,
  parseCidrList,
  parseIp,
  resolveClientIp,
} from "./ip.js";
import type { KeyFn } from "./keys.js";
import { PROBLEM_CONTENT_TYPE, quotaExceededProblem, storeUnavailableProblem } from "./problem.js";
import type {
  DecisionEvent,
  HttpRequest,
  LimiterSelector,
  RateLimitAction,
  RateLimitOptions,
  Strategy,
  Tier,
} from "./types.js";

/** A request as an adapter hands it to the core. */
export interface RequestInput<Raw> {
  /** `GET`, `POST`, … */
  readonly method: string;
  /** The path without the query string. */
  readonly path: string;
  /** The route pattern when the framework knows it. */
  readonly route: string | undefined;
  /** Reads a request header, case-insensitively. */
  header(name: string): string | undefined;
  /** The socket's peer address. */
  readonly peer: string | undefined;
  /** The framework's request object, passed through to user functions. */
  readonly raw: Raw;
  /** Aborted when the client goes away (ends a `wait`). */
  readonly signal?: AbortSignal;
}

/** Called by the adapter exactly once when the response is done: its status, or `undefined` if the connection closed first. */
export type Finish = (status: number | undefined) => void;

/** What the adapter must do with a request. */
export type Outcome<Fallback> =
  /** Not limited: continue without headers. */
  | { readonly kind: "skip" }
  /** Continue to the handler with these headers set; call `finish` when the response is done. */
  | {
      readonly kind: "pass";
      readonly headers: HeaderList;
      readonly decision: Decision;
      readonly finish: Finish;
    }
  /** Respond now with this status, headers and body. */
  | {
      readonly kind: "reject";
      readonly status: number;
      readonly headers: HeaderList;
      readonly body: string;
      readonly decision: Decision;
    }
  /** Call the fallback with these headers set. */
  | {
      readonly kind: "degrade";
      readonly headers: HeaderList;
      readonly decision: Decision;
      readonly fallback: Fallback;
    }
  /** The client went away while waiting: send nothing. */
  | { readonly kind: "aborted" };

const OPTION_KEYS = [
  "limiter",
  "key",
  "headers",
  "trustProxy",
  "proxyHeader",
  "strategy",
  "skip",
  "allowList",
  "countOnly",
  "onDecision",
  "cost",
  "clock",
  "ipv4Prefix",
  "ipv6Prefix",
] as const;

type ResolvedStrategy<Raw, Fallback> =
  | { type: "reject"; body: ((d: Decision, req: HttpRequest<Raw>) => unknown) | undefined }
  | { type: "wait"; maxWaitMs: number; maxQueue: number }
  | { type: "degrade"; fallback: Fallback }
  | { type: "shadow"; onDeny: (event: DecisionEvent<Raw>) => void };

function defaultShadowLog(e: DecisionEvent): void {
  console.warn(
    JSON.stringify({
      msg: "sluice: request would have been rate limited (shadow)",
      policy: e.decision.policy,
      key: e.key,
      retryAfterMs: e.decision.retryAfterMs,
      method: e.request.method,
      path: e.request.path,
    }),
  );
}

function isLimiter(v: unknown): v is Limiter {
  return (
    typeof v === "object" &&
    v !== null &&
    typeof (v as Limiter).limit === "function" &&
    typeof (v as Limiter).policy === "object"
  );
}

/** One FIFO queue of waiting requests per (limiter, key), shared by every middleware using that limiter. */
interface Waiter {
  readonly cost: number;
  readonly deadline: number;
  nextTryAt: number;
  last: Decision | undefined;
  /** The client went away; the drain loop settles it when it is the head. */
  aborted: boolean;
  done: boolean;
  settle(r: WaitResult): void;
}
type WaitResult =
  | { kind: "allowed" | "timeout" | "aborted"; decision: Decision | undefined }
  | { kind: "error"; error: unknown };

class KeyQueue {
  readonly waiters: Waiter[] = [];
  running = false;
  interrupt: (() => void) | undefined;
  /** Makes the head retry now (a lease was released or units refunded). */
  wake(): void {
    const head = this.waiters[0];
    if (head) head.nextTryAt = 0;
    this.interrupt?.();
  }
}

const queues = new WeakMap<Limiter, Map<string, KeyQueue>>();

function queuesOf(limiter: Limiter): Map<string, KeyQueue> {
  let m = queues.get(limiter);
  if (!m) queues.set(limiter, (m = new Map()));
  return m;
}

/**
 * The shared middleware core. Construct once per middleware; options are validated here and
 * frozen. `extraKeys` lists adapter-specific option names that validation must accept.
 */
export class RateLimitCore<Raw, Fallback = never> {
  private readonly selector: LimiterSelector<Raw>;
  private readonly key: KeyFn<Raw> | undefined;
  private readonly headers: HeaderFormat | false;
  private readonly trust: TrustFn;
  private readonly proxyHeader: "x-forwarded-for" | "forwarded";
  private readonly strategy: ResolvedStrategy<Raw, Fallback>;
  private readonly skip: ((req: HttpRequest<Raw>) => boolean | Promise<boolean>) | undefined;
  private readonly allow: Cidr[];
  private readonly countOnly: "failed" | "successful" | undefined;
  private readonly onDecision: ((e: DecisionEvent<Raw>) => void) | undefined;
  private readonly cost: ((req: HttpRequest<Raw>) => number | Promise<number>) | undefined;
  private readonly clock: () => number;
  private readonly grouping: { ipv4Prefix: number; ipv6Prefix: number };

  constructor(options: RateLimitOptions<Raw, Fallback>, extraKeys: readonly string[] = []) {
    const issues: ValidationIssue[] = [];
    const fail = (path: string, message: string) => issues.push({ path, message });
    if (typeof options !== "object" || options === null) {
      throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid rateLimit options", [
        { path: "", message: "must be an object with at least `limiter`" },
      ]);
    }
    const known = new Set<string>([...OPTION_KEYS, ...extraKeys]);
    const unknown = Object.keys(options).filter((k) => !known.has(k));
    if (unknown.length > 0) fail("", `unknown option(s): ${unknown.join(", ")}`);
    const o = options;
    if (isLimiter(o.limiter)) {
      const l = o.limiter;
      this.selector = () => l;
    } else if (typeof o.limiter === "function") {
      this.selector = o.limiter;
    } else {
      this.selector = () => undefined;
      fail(
        "limiter",
        "is required: a limiter from createLimiter(), or a function of the request returning one",
      );
    }
    for (const f of ["key", "skip", "onDecision", "cost", "clock"] as const) {
      if (o[f] !== undefined && typeof o[f] !== "function") fail(f, "must be a function");
    }
    this.key = o.key;
    this.skip = o.skip;
    this.onDecision = o.onDecision;
    this.cost = o.cost;
    this.clock = o.clock ?? systemClock;
    const h = o.headers ?? "both";
    if (h !== false && !(HEADER_FORMATS as readonly unknown[]).includes(h))
      fail("headers", `must be one of ${HEADER_FORMATS.join(", ")} or false`);
    this.headers = h;
    if (
      o.proxyHeader !== undefined &&
      o.proxyHeader !== "x-forwarded-for" &&
      o.proxyHeader !== "forwarded"
    ) {
      fail("proxyHeader", 'must be "x-forwarded-for" or "forwarded"');
    }
    this.proxyHeader = o.proxyHeader ?? "x-forwarded-for";
    if (o.countOnly !== undefined && o.countOnly !== "failed" && o.countOnly !== "successful")
      fail("countOnly", 'must be "failed" or "successful"');
    this.countOnly = o.countOnly;
    const v4 = o.ipv4Prefix ?? 32;
    const v6 = o.ipv6Prefix ?? 64;
    if (!Number.isInteger(v4) || v4 < 0 || v4 > 32)
      fail("ipv4Prefix", `must be a whole number 0–32 (got ${String(v4)})`);
    if (!Number.isInteger(v6) || v6 < 0 || v6 > 128)
      fail("ipv6Prefix", `must be a whole number 0–128 (got ${String(v6)})`);
    this.grouping = { ipv4Prefix: v4, ipv6Prefix: v6 };
    this.strategy = resolveStrategy(o.strategy, fail);
    if (
      isLimiter(o.limiter) &&
      o.limiter.policy.algorithm === "concurrency" &&
      o.countOnly !== undefined
    ) {
      fail(
        "countOnly",
        "does not apply to a concurrency policy (its slots are released when the response ends)",
      );
    }
    let trust: TrustFn = () => false;
    let allow: Cidr[] = [];
    try {
      trust = compileTrust(o.trustProxy);
      allow = o.allowList === undefined ? [] : parseCidrList(o.allowList, "allowList");
    } catch (err) {
      if (err instanceof ValidationError) issues.push(...err.issues);
      else throw err;
    }
    this.trust = trust;
    this.allow = allow;
    if (issues.length > 0)
      throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid rateLimit options", issues);
  }

  /** True when the strategy is `wait`: only then do adapters need a disconnect signal. */
  get waits(): boolean {
    return this.strategy.type === "wait";
  }

  /** Builds the {@link HttpRequest} view: resolves the client IP through the trusted proxies. */
  private request(
    input: RequestInput<Raw>,
  ): HttpRequest<Raw> & { readonly parsed: ReturnType<typeof parseIp> } {
    const parsed = resolveClientIp(
      input.peer,
      input.header(this.proxyHeader),
      this.trust,
      this.proxyHeader,
    );
    return {
      method: input.method,
      path: input.path,
      route: input.route,
      header: (name) => input.header(name),
      ip: parsed ? ipIdentity(parsed, this.grouping) : "unknown",
      address: parsed ? formatIp(parsed) : undefined,
      peer: input.peer,
      raw: input.raw,
      parsed,
    };
  }

  /** Decides a request. Rejects only when a user function (key, cost, skip, limiter selector) throws or a cost is invalid. */
  async handle(input: RequestInput<Raw>): Promise<Outcome<Fallback>> {
    const full = this.request(input);
    const { parsed, ...req } = full;
    if (parsed && this.allow.some((n) => cidrContains(n, parsed))) return { kind: "skip" };
    if (this.skip && (await this.skip(req))) return { kind: "skip" };
    const chosen = await this.selector(req);
    if (chosen === undefined) return { kind: "skip" };
    const tier: Tier<Raw> = isLimiter(chosen) ? { limiter: chosen } : chosen;
    const limiter = tier.limiter;
    const keyFn = tier.key ?? this.key;
    const key = (keyFn ? await keyFn(req) : undefined) || `ip:${req.ip}`;
    const costFn = tier.cost ?? this.cost;
    const cost = costFn ? await costFn(req) : 1;
    const s = this.strategy;
    const started = performance.now();

    let decision: Decision | undefined;
    let waited = false;
    const q = s.type === "wait" ? queuesOf(limiter).get(key) : undefined;
    if (s.type === "wait" && q !== undefined && q.waiters.length > 0) {
      // Others are already waiting for this key: join the line instead of overtaking them.
      const r = await this.enqueue(limiter, key, cost, undefined, s, input.signal);
      if (r.kind === "aborted")
        return this.aborted(req, key, r.decision ?? (await limiter.peek(key)), started);
      waited = r.kind === "allowed";
      if (r.decision !== undefined) decision = r.decision;
      else {
        // Timed out (or the queue was full) before its first try: nothing was charged. Report
        // the key as it is now, but as the denial it is, even if the bucket shows room that the
        // requests ahead in the queue will take.
        const now = await limiter.peek(key);
        decision = now.allowed
          ? { ...now, allowed: false, retryAfterMs: Math.max(now.retryAfterMs, 1) }
          : now;
      }
    } else {
      decision = await limiter.limit(key, { cost });
      if (
        !decision.allowed &&
        s.type === "wait" &&
        decision.reason !== "store-error" &&
        // A concurrency slot may free up long before its lease would expire: always queue.
        (limiter.policy.algorithm === "concurrency" ||
          (decision.retryAfterMs <= s.maxWaitMs && decision.retryAfterMs > 0))
      ) {
        const r = await this.enqueue(limiter, key, cost, decision, s, input.signal);
        if (r.kind === "aborted") return this.aborted(req, key, r.decision ?? decision, started);
        decision = r.decision ?? decision;
        waited = r.kind === "allowed";
      }
    }
    const d = decision;
    const ctx = { nowMs: this.clock(), algorithm: limiter.policy.algorithm };
    const headers = rateLimitHeaders(this.headers, d, ctx);
    const event = (action: RateLimitAction): DecisionEvent<Raw> => ({
      action,
      decision: d,
      key,
      waitedMs: waited ? Math.round(performance.now() - started) : 0,
      request: req,
    });

    if (d.allowed) {
      this.emit(event(d.reason === "shadow" ? "shadowed" : waited ? "waited" : "allowed"));
      if (d.reason === "shadow" && s.type === "shadow") safe(() => s.onDeny(event("shadowed")));
      return { kind: "pass", headers, decision: d, finish: this.finisher(limiter, key, cost, d) };
    }
    if (s.type === "shadow") {
      const e = event("shadowed");
      this.emit(e);
      safe(() => s.onDeny(e));
      return { kind: "pass", headers, decision: d, finish: () => undefined };
    }
    if (s.type === "degrade") {
      this.emit(event("degraded"));
      return { kind: "degrade", headers, decision: d, fallback: s.fallback };
    }
    this.emit(event("rejected"));
    if (d.reason === "store-error") {
      return {
        kind: "reject",
        status: 503,
        headers: [...headers, ["Content-Type", PROBLEM_CONTENT_TYPE]],
        body: JSON.stringify(storeUnavailableProblem(d)),
        decision: d,
      };
    }
    const custom = s.type === "reject" && s.body ? s.body(d, req) : undefined;
    const body =
      custom === undefined
        ? JSON.stringify(quotaExceededProblem(d))
        : typeof custom === "string"
          ? custom
          : JSON.stringify(custom);
    const type =
      custom === undefined
        ? PROBLEM_CONTENT_TYPE
        : typeof custom === "string"
          ? "text/plain; charset=utf-8"
          : "application/json";
    return {
      kind: "reject",
      status: 429,
      headers: [...headers, ["Retry-After", String(retryAfterSeconds(d))], ["Content-Type", type]],
      body,
      decision: d,
    };
  }

  private aborted(
    req: HttpRequest<Raw>,
    key: string,
    decision: Decision,
    started: number,
  ): Outcome<Fallback> {
    this.emit({
      action: "aborted",
      decision,
      key,
      waitedMs: Math.round(performance.now() - started),
      request: req,
    });
    return { kind: "aborted" };
  }

  private emit(e: DecisionEvent<Raw>): void {
    if (this.onDecision) safe(() => this.onDecision!(e));
  }

  /** What happens when the response is done: release a concurrency lease; refund under `countOnly`. */
  private finisher(limiter: Limiter, key: string, cost: number, d: Decision): Finish {
    let done = false;
    return (status) => {
      if (done) return;
      done = true;
      const wake = () => queuesOf(limiter).get(key)?.wake();
      if (d.leaseId !== undefined) {
        limiter.release(key, d.leaseId).then(wake, () => undefined);
        return;
      }
      // Only charges the store really made can be refunded (not shadow, store-error or insurance answers).
      if (this.countOnly === undefined || d.reason !== undefined) return;
      const failed = status === undefined || status >= 400;
      if ((this.countOnly === "failed" && !failed) || (this.countOnly === "successful" && failed)) {
        limiter.refund(key, cost).then(wake, () => undefined);
      }
    };
  }

  /** Waits in the key's FIFO queue until the request may pass, its deadline passes, or the client leaves. */
  private enqueue(
    limiter: Limiter,
    key: string,
    cost: number,
    first: Decision | undefined,
    s: { maxWaitMs: number; maxQueue: number },
    signal: AbortSignal | undefined,
  ): Promise<WaitResult & { kind: "allowed" | "timeout" | "aborted" }> {
    const map = queuesOf(limiter);
    let q = map.get(key);
    if (!q) map.set(key, (q = new KeyQueue()));
    const queue = q;
    if (queue.waiters.length >= s.maxQueue)
      return Promise.resolve({ kind: "timeout", decision: first });
    const now = performance.now();
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        cost,
        deadline: now + s.maxWaitMs,
        nextTryAt: first ? now + retryDelay(limiter, first) : now,
        last: first,
        aborted: false,
        done: false,
        settle: (r) => {
          if (w.done) return;
          w.done = true;
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          if (r.kind === "error") reject(r.error);
          else resolve(r as WaitResult & { kind: "allowed" | "timeout" | "aborted" });
        },
      };
      const leave = (kind: "timeout" | "aborted") => {
        const i = queue.waiters.indexOf(w);
        if (kind === "aborted") w.aborted = true;
        if (i === 0) {
          queue.interrupt?.(); // the drain loop sees the deadline or the abort and settles it
          return;
        }
        if (i > 0) queue.waiters.splice(i, 1);
        w.settle({ kind, decision: w.last });
      };
      const onAbort = () => leave("aborted");
      const timer = setTimeout(() => leave("timeout"), s.maxWaitMs + 1);
      timer.unref?.();
      if (signal?.aborted) {
        if (queue.waiters.length === 0 && !queue.running && map.get(key) === queue) map.delete(key);
        w.settle({ kind: "aborted", decision: first });
        return;
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      queue.waiters.push(w);
      if (!queue.running) void this.drain(limiter, key, queue);
    });
  }

  private async drain(limiter: Limiter, key: string, q: KeyQueue): Promise<void> {
    q.running = true;
    try {
      while (q.waiters.length > 0) {
        const w = q.waiters[0]!;
        if (w.done) {
          q.waiters.shift();
          continue;
        }
        if (w.aborted) {
          q.waiters.shift();
          w.settle({ kind: "aborted", decision: w.last });
          continue;
        }
        const now = performance.now();
        if (now >= w.deadline) {
          q.waiters.shift();
          w.settle({ kind: "timeout", decision: w.last });
          continue;
        }
        if (w.nextTryAt > now) {
          await sleep(Math.min(w.nextTryAt, w.deadline) - now, q);
          continue;
        }
        let d: Decision;
        try {
          d = await limiter.limit(key, { cost: w.cost });
        } catch (error) {
          q.waiters.shift();
          w.settle({ kind: "error", error });
          continue;
        }
        if (w.done) {
          // The client left while the decision was in flight: give back what it took.
          q.waiters.shift();
          if (d.allowed && d.reason === undefined) {
            if (d.leaseId !== undefined)
              await limiter.release(key, d.leaseId).catch(() => undefined);
            else await limiter.refund(key, w.cost).catch(() => undefined);
          }
          continue;
        }
        w.last = d;
        if (d.allowed) {
          q.waiters.shift();
          w.settle({ kind: "allowed", decision: d });
          continue;
        }
        const after = performance.now();
        const concurrency = limiter.policy.algorithm === "concurrency";
        if (d.reason === "store-error" || (!concurrency && after + d.retryAfterMs > w.deadline)) {
          q.waiters.shift();
          w.settle({ kind: "timeout", decision: d });
          continue;
        }
        w.nextTryAt = after + retryDelay(limiter, d);
      }
    } finally {
      q.running = false;
      const map = queuesOf(limiter);
      if (q.waiters.length === 0 && map.get(key) === q) map.delete(key);
    }
  }
}

/**
 * How long the head of a queue sleeps before asking again: the decision's retry time; for a
 * concurrency policy at most {@link CONCURRENCY_POLL_MS}, since a slot freed by another process
 * wakes nobody here (one released by this process wakes the queue at once).
 */
function retryDelay(limiter: Limiter, d: Decision): number {
  const ms = Math.max(1, d.retryAfterMs);
  return limiter.policy.algorithm === "concurrency" ? Math.min(ms, CONCURRENCY_POLL_MS) : ms;
}

/** Poll interval of a queue waiting for a concurrency slot. */
const CONCURRENCY_POLL_MS = 100;

function sleep(ms: number, q: KeyQueue): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, Math.max(0, ms));
    function done() {
      clearTimeout(t);
      q.interrupt = undefined;
      resolve();
    }
    q.interrupt = done;
  });
}

function safe(fn: () => void): void {
  try {
    fn();
  } catch {
    // Hooks are for observation; they never change or break a response.
  }
}

function resolveStrategy<Raw, Fallback>(
  input: Strategy<Raw, Fallback> | undefined,
  fail: (path: string, message: string) => void,
): ResolvedStrategy<Raw, Fallback> {
  const s = input ?? "reject";
  if (s === "reject") return { type: "reject", body: undefined };
  if (s === "shadow") return { type: "shadow", onDeny: defaultShadowLog };
  if (typeof s !== "object" || s === null) {
    fail(
      "strategy",
      'must be "reject", "shadow", or an object with type reject | wait | degrade | shadow',
    );
    return { type: "reject", body: undefined };
  }
  switch (s.type) {
    case "reject":
      if (s.body !== undefined && typeof s.body !== "function")
        fail("strategy.body", "must be a function");
      return { type: "reject", body: s.body };
    case "shadow":
      if (s.onDeny !== undefined && typeof s.onDeny !== "function")
        fail("strategy.onDeny", "must be a function");
      return { type: "shadow", onDeny: s.onDeny ?? defaultShadowLog };
    case "degrade":
      if (typeof s.fallback !== "function")
        fail("strategy.fallback", "must be a function (the fallback handler)");
      return { type: "degrade", fallback: s.fallback };
    case "wait": {
      const maxQueue = s.maxQueue ?? 1000;
      if (typeof s.maxWaitMs !== "number" || !Number.isFinite(s.maxWaitMs) || s.maxWaitMs <= 0)
        fail("strategy.maxWaitMs", `must be a positive number of ms (got ${String(s.maxWaitMs)})`);
      if (!Number.isInteger(maxQueue) || maxQueue < 1)
        fail("strategy.maxQueue", `must be a positive integer (got ${String(maxQueue)})`);
      return { type: "wait", maxWaitMs: s.maxWaitMs, maxQueue };
    }
    default:
      fail("strategy.type", "must be reject, wait, degrade or shadow");
      return { type: "reject", body: undefined };
  }
}
