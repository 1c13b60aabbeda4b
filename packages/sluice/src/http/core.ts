/**
 * The framework-free core of every middleware: identify the client, pick the limiter, decide,
 * apply the strategy, and say what to send. Adapters only translate requests and responses.
 */
import type { Decision } from "../decision.js";
import { MiddlewareError, type MiddlewareStage } from "../errors.js";
import { type Limiter, tallyOf } from "../limiter.js";
import { annotateActiveSpan } from "../telemetry.js";
import { type HeaderList, rateLimitHeaders, retryAfterSeconds } from "./headers.js";
import { cidrContains, formatIp, ipIdentity, parseIp, resolveClientIp } from "./ip.js";
import { type ResolvedOptions, isLimiter, resolveRateLimitOptions } from "./options.js";
import {
  PROBLEM_CONTENT_TYPE,
  invalidKeyProblem,
  middlewareErrorProblem,
  quotaExceededProblem,
  overloadedProblem,
  storeUnavailableProblem,
} from "./problem.js";
import type {
  AbortSignalLike,
  DecisionEvent,
  HttpRequest,
  RateLimitAction,
  RateLimitOptions,
  Tier,
} from "./types.js";
import { type WaitQueues, waitQueuesFor } from "./wait-queue.js";

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
  /** The framework's request object: the first argument of the options' request functions. */
  readonly raw: Raw;
  /** Aborted when the client goes away (ends a `wait`). */
  readonly signal?: AbortSignalLike | undefined;
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
  | { readonly kind: "aborted" }
  /**
   * A function of the options failed (see {@link MiddlewareError}): respond now with this
   * status and `application/problem+json` body — 400 naming what the key function returned when
   * that was not a string (the client's input decides it), else 500 naming the function.
   * `onError` has heard `error` (a key function's result at most once a minute per route).
   */
  | {
      readonly kind: "error";
      readonly status: number;
      readonly headers: HeaderList;
      readonly body: string;
      readonly error: MiddlewareError;
    };

/**
 * The shared middleware core. Construct once per middleware; options are validated here (see
 * `options.ts`) and frozen; the `wait` strategy's lines live in `wait-queue.ts`.
 */
export class RateLimitCore<Raw, Fallback = never> {
  private readonly o: ResolvedOptions<Raw, Fallback>;
  private readonly queues: WaitQueues;
  /** Per route: when a key function's bad result was last reported, and how many since. */
  private readonly badKeys = new Map<string, { reportedAt: number; since: number }>();

  /** Validates `options`; throws a `ValidationError` (`SLUICE_ERR_OPTIONS`) naming every bad field. */
  constructor(options: RateLimitOptions<Raw, Fallback>) {
    this.o = resolveRateLimitOptions(options);
    this.queues = waitQueuesFor(this.o.timers);
  }

  /** True when the strategy is `wait`: only then do adapters need a disconnect signal. */
  get waits(): boolean {
    return this.o.strategy.type === "wait";
  }

  /** Builds the {@link HttpRequest} view: resolves the client IP through the trusted proxies. */
  private request(
    input: RequestInput<Raw>,
  ): HttpRequest<Raw> & { readonly parsed: ReturnType<typeof parseIp> } {
    const { proxyHeader } = this.o;
    const parsed = resolveClientIp(
      input.peer,
      input.header(proxyHeader),
      this.o.trust,
      proxyHeader,
    );
    return {
      method: input.method,
      path: input.path,
      route: input.route,
      header: (name) => input.header(name),
      ip: parsed ? ipIdentity(parsed, this.o.grouping) : "unknown",
      address: parsed ? formatIp(parsed) : undefined,
      peer: input.peer,
      raw: input.raw,
      parsed,
    };
  }

  /**
   * Decides a request. Never rejects for what the options' functions do: one that throws or
   * gives an invalid value makes an `error` outcome (500, problem+json) and reaches `onError`.
   */
  async handle(input: RequestInput<Raw>): Promise<Outcome<Fallback>> {
    let stage: MiddlewareStage = "skip";
    try {
      const o = this.o;
      const full = this.request(input);
      const { parsed, ...req } = full;
      const raw = input.raw;
      if (parsed && o.allow.some((n) => cidrContains(n, parsed))) return { kind: "skip" };
      if (o.skip && (await o.skip(raw, req))) return { kind: "skip" };
      stage = "limiter";
      const chosen = await o.selector(raw, req);
      if (chosen === undefined) return { kind: "skip" };
      const tier: Tier<Raw> = isLimiter(chosen) ? { limiter: chosen } : chosen;
      const limiter = tier.limiter;
      stage = "key";
      const keyFn = tier.key ?? o.key;
      const found = keyFn ? await keyFn(raw, req) : undefined;
      if (found !== undefined && found !== null && typeof found !== "string")
        return this.badKey(found, input);
      const key = found || `ip:${req.ip}`;
      stage = "cost";
      const costFn = tier.cost ?? o.cost;
      const cost = costFn ? await costFn(raw, req) : 1;
      stage = "priority";
      const priority =
        o.priority && limiter.policy.adaptive !== undefined
          ? await o.priority(raw, req)
          : undefined;
      if (priority !== undefined && !(Number.isInteger(priority) && priority >= 0 && priority <= 3))
        throw new MiddlewareError(
          "priority",
          `the priority function returned ${describe(priority)}, not a tier 0–3`,
        );
      stage = "decision";
      return await this.decide(input, req, limiter, key, cost, priority);
    } catch (err) {
      return this.failed(err, stage, input.raw);
    }
  }

  /** The decision and what the strategy makes of it. */
  private async decide(
    input: RequestInput<Raw>,
    req: HttpRequest<Raw>,
    limiter: Limiter,
    key: string,
    cost: number,
    priority: number | undefined,
  ): Promise<Outcome<Fallback>> {
    const o = this.o;
    const s = o.strategy;
    const started = o.clock();
    const adaptive = limiter.policy.adaptive !== undefined;

    let d: Decision;
    let queued = false;
    if (adaptive) {
      // An adaptive limit waits in the limiter's own priority line (higher tiers first, woken
      // by each release), not in the FIFO line below; the wait strategy's maxWaitMs bounds it.
      const maxWaitMs = s.type === "wait" ? Math.ceil(s.maxWaitMs) : 0;
      d = (await limiter.acquire(key, { cost, priority, maxWaitMs })).decision;
      queued = maxWaitMs > 0 && o.clock() > started;
    } else if (s.type === "wait") {
      const r = await this.queues.decide({
        limiter,
        key,
        cost,
        maxWaitMs: s.maxWaitMs,
        maxQueue: s.maxQueue,
        signal: input.signal,
        clock: o.clock,
      });
      if (r.kind === "aborted") {
        this.emit({
          action: "aborted",
          decision: r.decision,
          key,
          waitedMs: Math.max(0, o.clock() - started),
          request: req,
        });
        return { kind: "aborted" };
      }
      d = r.decision;
      queued = r.queued;
    } else {
      d = await limiter.limit(key, { cost });
    }
    const ctx = { nowMs: o.clock(), algorithm: limiter.policy.algorithm };
    const headers = rateLimitHeaders(o.headers, d, ctx);
    const event = (action: RateLimitAction): DecisionEvent<Raw> => ({
      action,
      decision: d,
      key,
      waitedMs: queued ? Math.max(0, o.clock() - started) : 0,
      request: req,
    });

    // The limiter marks its denials on the active span; the door marks what passes.
    if (d.allowed && d.reason !== "shadow") annotateActiveSpan(d);
    if (d.allowed) {
      this.emit(event(d.reason === "shadow" ? "shadowed" : queued ? "waited" : "allowed"));
      if (d.reason === "shadow" && s.type === "shadow") safe(() => s.onDeny(event("shadowed")));
      return { kind: "pass", headers, decision: d, finish: this.finisher(limiter, key, cost, d) };
    }
    if (s.type === "shadow") {
      // Counted as a shadow denial: "would have denied" is one query (docs/observability.md).
      tallyOf(limiter).shadowed(d);
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
    if (adaptive && d.reason === undefined) {
      // The backend is at the capacity the limit found: the client exceeded nothing.
      return {
        kind: "reject",
        status: 503,
        headers: [
          ...headers,
          ["Retry-After", String(retryAfterSeconds(d))],
          ["Content-Type", PROBLEM_CONTENT_TYPE],
        ],
        body: JSON.stringify(overloadedProblem(d)),
        decision: d,
      };
    }
    return this.tooMany(d, headers, input, req);
  }

  /** The 429 of a denial: the problem document, or what the reject strategy's `body` makes. */
  private tooMany(
    d: Decision,
    headers: HeaderList,
    input: RequestInput<Raw>,
    req: HttpRequest<Raw>,
  ): Outcome<Fallback> {
    const s = this.o.strategy;
    let custom: unknown;
    if (s.type === "reject" && s.body) {
      try {
        custom = s.body(d, input.raw, req);
      } catch (err) {
        throw new MiddlewareError(
          "strategy.body",
          `the strategy.body function threw: ${messageOf(err)}`,
          { cause: err },
        );
      }
    }
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

  /**
   * The answer to a key function's result that is not a string: 400, as what the client sent
   * decides it (`?k=a&k=b`), so a client could otherwise fill the log at will. `onError` hears
   * it at most once a minute per route (by the middleware's clock; where the framework does not
   * know the route, once a minute for the middleware), told how many it did not hear.
   */
  private badKey(found: unknown, input: RequestInput<Raw>): Outcome<Fallback> {
    const now = this.o.clock();
    const route = input.route ?? "";
    const last = this.badKeys.get(route);
    const held = last !== undefined && now - last.reportedAt < BAD_KEY_REPORT_MS;
    const since = held || last === undefined ? 0 : last.since;
    const error = new MiddlewareError(
      "key",
      `the key function returned ${describe(found)}, not a string (or undefined for the client IP): answered 400` +
        (input.route !== undefined ? ` on ${input.route}` : "") +
        (since > 0
          ? `, as ${since} more request${since === 1 ? "" : "s"} since the last report`
          : ""),
      { status: 400 },
    );
    if (held) last.since++;
    else {
      // Routes are the app's patterns, a bounded set; the bound guards against a router that
      // hands over the path instead.
      if (last === undefined && this.badKeys.size >= 1000) this.badKeys.clear();
      this.badKeys.set(route, { reportedAt: now, since: 0 });
      const hook = this.o.onError;
      safe(() => hook(error, input.raw));
    }
    return {
      kind: "error",
      status: 400,
      headers: [["Content-Type", PROBLEM_CONTENT_TYPE]],
      body: JSON.stringify(invalidKeyProblem(found)),
      error,
    };
  }

  /** The answer to a request the options' functions failed on; `onError` hears why. */
  private failed(err: unknown, stage: MiddlewareStage, raw: Raw): Outcome<Fallback> {
    const error =
      err instanceof MiddlewareError
        ? err
        : new MiddlewareError(
            stage,
            stage === "decision"
              ? `the limiter failed: ${messageOf(err)}`
              : `the ${stage} function threw: ${messageOf(err)}`,
            { cause: err },
          );
    const hook = this.o.onError;
    safe(() => hook(error, raw));
    return {
      kind: "error",
      status: 500,
      headers: [["Content-Type", PROBLEM_CONTENT_TYPE]],
      body: JSON.stringify(middlewareErrorProblem(error.stage)),
      error,
    };
  }

  private emit(e: DecisionEvent<Raw>): void {
    const hook = this.o.onDecision;
    if (hook) safe(() => hook(e));
  }

  /** What happens when the response is done: release a concurrency permit; refund under `countOnly`. */
  private finisher(limiter: Limiter, key: string, cost: number, d: Decision): Finish {
    let done = false;
    const countOnly = this.o.countOnly;
    return (status) => {
      if (done) return;
      done = true;
      const wake = () => this.queues.wake(limiter, key);
      if (d.leaseId !== undefined) {
        // An adaptive limit learns from the outcome: a 503 or 504 is the backend overloaded
        // or timing out.
        const dropped = status === 503 || status === 504;
        limiter
          .release(key, d.leaseId, dropped ? { dropped } : undefined)
          .then(wake, () => undefined);
        return;
      }
      // Only charges the store really made can be refunded (not shadow, store-error or insurance answers).
      if (countOnly === undefined || d.reason !== undefined) return;
      const failed = status === undefined || status >= 400;
      if ((countOnly === "failed" && !failed) || (countOnly === "successful" && failed)) {
        limiter.refund(key, cost).then(wake, () => undefined);
      }
    };
  }
}

/** A key function's bad result is reported to `onError` at most once per this many ms per route. */
const BAD_KEY_REPORT_MS = 60_000;

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** What a value is, in a few words, for an error message. */
function describe(v: unknown): string {
  if (Array.isArray(v)) return `an array (${v.length} items)`;
  if (typeof v === "object") return "an object";
  return `a ${typeof v} (${String(v)})`;
}

function safe(fn: () => void): void {
  try {
    fn();
  } catch {
    // Hooks are for observation; they never change or break a response.
  }
}
