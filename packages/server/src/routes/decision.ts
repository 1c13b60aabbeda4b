/**
 * The decision API for apps: `POST /v1/limit`, `/v1/limit/batch`, `/v1/peek`, `/v1/release`.
 * Apps authenticate with `Authorization: Bearer <api key>` and may use only the policies
 * granted to them. A policy's draft, when there is one, is evaluated in shadow beside it.
 *
 * `POST /v1/limit`, which apps call once per request they limit, is also served straight from
 * node:http ({@link FastRoute}): the same validation, grant and cost checks, decision, headers,
 * error bodies, metrics and log lines, without Fastify's routing, hooks and reply objects.
 *
 * With a tracer (`ServiceContext.tracer`), each request of these routes — through either door —
 * is a server span carrying its decision (../tracing.ts); without one, no span work is done.
 */
import type { Span, Tracer } from "@opentelemetry/api";
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { type Decision, type Policy, policyCapacity } from "sluice";
import type { HeaderList } from "sluice/http";
import { type DraftHooks, decideLive, disabledDecision, overridesOf } from "sluice/service";
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from "fastify";
import {
  batchRequestSchema,
  limitRequestSchema,
  peekRequestSchema,
  releaseRequestSchema,
} from "@sluice/api";
import {
  ApiError,
  invalid,
  logRequest,
  logRequestError,
  parseOr400,
  toApiError,
} from "../errors.js";
import { parseJsonBytes } from "../json-body.js";
import { plainLimitRequest } from "../limit-request.js";
import { decisionHeaders } from "../headers.js";
import type { LivePolicy } from "../registry.js";
import type { ServiceContext } from "../context.js";
import { counterChild } from "../metrics.js";
import {
  annotateDecision,
  annotateDecisions,
  annotatePolicy,
  decidingOf,
  httpServerSpan,
} from "../tracing.js";
import { trafficOutcome } from "../traffic/recorder.js";
import { appOfRequest, bearer } from "./auth.js";

/** A decision as answered: the library's, or an "everything allowed" one for a disabled policy. */
type Answer = Decision & { disabled?: true };

/**
 * A route served on node:http before Fastify sees the request. It answers true when it took
 * the request (and will answer it), false — having read and written nothing — when Fastify
 * should serve it as any other.
 */
export type FastRoute = (req: IncomingMessage, res: ServerResponse) => boolean;

/** The content type of every JSON answer, as Fastify writes it. */
const JSON_TYPE = "application/json; charset=utf-8";

/** The request content types the fast route takes (anything else goes to Fastify's parsers). */
const FAST_BODY_TYPE = /^application\/json(\s*;\s*charset=utf-8)?$/i;

/** The answer for a disabled policy: sluice's (allowed, nothing counted), flagged `disabled`. */
export function disabledAnswer(policy: Policy, cost: number): Answer {
  return { ...disabledDecision(policy, cost), disabled: true };
}

/**
 * Refuses (400) a cost the policy could never allow, whatever its counts — unless the key's
 * override could (the limiter then checks the cost against the override itself).
 */
function checkCost(live: LivePolicy, key: string, cost: number, at: string): void {
  const capacity = policyCapacity(live.policy);
  if (cost <= capacity) return;
  const own = overridesOf(live.limiter)?.get(key);
  if (own === undefined || cost > policyCapacity(own))
    throw invalid("Invalid cost", [
      {
        path: at,
        message: `${cost} can never fit policy "${live.policy.name}", whose capacity is ${capacity}`,
      },
    ]);
}

/** An item of `POST /v1/limit/batch`, as its schema reads it. */
interface LimitItem {
  readonly policy: string;
  readonly key: string;
  readonly cost?: number | undefined;
}

/**
 * What every decision of the routes goes through, whichever route or door it came by: the grant
 * and cost checks, `decideLive`, the count of the decision (the metric, the traffic history) and
 * its headers. One per service: the metric children and draft hooks it makes are kept.
 */
class Decisions {
  /** `sluice_decisions_total`'s child for (policy, outcome, reason), labelled once. */
  private readonly counted = new Map<string, { inc(): void }>();
  /** What a draft's evaluation tells the metrics and the log, per policy (made once). */
  private readonly hooks = new Map<string, DraftHooks>();

  constructor(private readonly ctx: ServiceContext) {}

  /** The app whose API key the request carries (401 without a known one). */
  appOf(req: FastifyRequest): string {
    return appOfRequest(req, this.ctx.registry);
  }

  /** The live policy, if it exists (404) and is granted to the app (403). `at` prefixes field paths. */
  granted(appName: string, policy: string, at: string): LivePolicy {
    const live = this.ctx.registry.get(policy);
    if (!live)
      throw new ApiError("policy_not_found", `${at}: unknown policy "${policy}"`, {
        issues: [{ path: at, message: `unknown policy "${policy}"` }],
      });
    if (!live.apps.has(appName)) {
      throw new ApiError(
        "forbidden",
        `${at}: policy "${policy}" is not granted to app "${appName}"`,
        { issues: [{ path: at, message: "not granted to this app" }] },
      );
    }
    return live;
  }

  /** `POST /v1/limit` once the caller is known and its body parsed (both doors). */
  async limit(appName: string, value: unknown): Promise<[LivePolicy, Answer]> {
    const body =
      plainLimitRequest(value) ?? parseOr400(limitRequestSchema, value, "Invalid limit request");
    const live = this.granted(appName, body.policy, "policy");
    const cost = body.cost ?? 1;
    checkCost(live, body.key, cost, "cost");
    return [live, await this.decide(live, body.key, cost, appName)];
  }

  /** Checks every item of a batch before charging any (a bad item charges nothing), then decides. */
  batch(appName: string, items: readonly LimitItem[]): Promise<Answer[]> {
    const lives = items.map((r, i) => {
      const live = this.granted(appName, r.policy, `requests.${i}.policy`);
      checkCost(live, r.key, r.cost ?? 1, `requests.${i}.cost`);
      return live;
    });
    return Promise.all(items.map((r, i) => this.decide(lives[i]!, r.key, r.cost ?? 1, appName)));
  }

  /** The rate-limit headers of an answer (none for a disabled policy's). */
  headersOf(live: LivePolicy, d: Answer): HeaderList {
    return d.disabled ? [] : decisionHeaders(d, live.policy.algorithm, this.ctx.now());
  }

  /** Decides `cost` for `key` under the live policy (its draft beside it), and counts it. */
  private async decide(
    live: LivePolicy,
    key: string,
    cost: number,
    appName: string,
  ): Promise<Answer> {
    const d = await decideLive(
      live,
      key,
      cost,
      live.draft ? this.draftHooks(live.policy.name) : undefined,
    );
    this.record(live, appName, key, d);
    return d.reason === "disabled" ? { ...d, disabled: true } : d;
  }

  /** Counts a decision: the metric, and the traffic history (memory only; see traffic/recorder.ts). */
  private record(live: LivePolicy, appName: string, key: string, d: Decision): void {
    this.count(live.policy.name, d.allowed ? "allowed" : "denied", d.reason ?? "");
    this.ctx.traffic.record(live.policy.name, appName, trafficOutcome(d), key);
  }

  /** Adds one to `sluice_decisions_total` for (policy, outcome, reason). */
  private count(policy: string, outcome: string, reason: string): void {
    const id = `${policy}\u0000${outcome}\u0000${reason}`;
    let child = this.counted.get(id);
    if (child === undefined) {
      child = counterChild(this.ctx.metrics.decisions, { policy, outcome, reason });
      this.counted.set(id, child);
    }
    child.inc();
  }

  /** The hooks that count a policy's draft decisions and log its failures. */
  private draftHooks(policy: string): DraftHooks {
    let h = this.hooks.get(policy);
    if (h === undefined) {
      const { metrics, logger } = this.ctx;
      const allowed = counterChild(metrics.draftDecisions, { policy, outcome: "allowed" });
      const denied = counterChild(metrics.draftDecisions, { policy, outcome: "denied" });
      h = {
        onDraft: (ok) => (ok ? allowed : denied).inc(),
        onDraftError: (err) => logger.warn({ err, policy }, "draft evaluation failed"),
      };
      this.hooks.set(policy, h);
    }
    return h;
  }
}

/** Sets an answer's headers on Fastify's reply, and gives back the answer (the body). */
function withHeaders(reply: FastifyReply, headers: HeaderList, d: Answer): Answer {
  for (const [name, value] of headers) void reply.header(name, value);
  return d;
}

/**
 * `POST /v1/limit` through Fastify (the {@link FastRoute} takes most of them first). Each route
 * below puts what it answered on the request's `span`, when it has one.
 */
async function limitRoute(
  decisions: Decisions,
  req: FastifyRequest,
  reply: FastifyReply,
  span?: Span,
): Promise<Answer> {
  const [live, d] = await decisions.limit(decisions.appOf(req), req.body);
  if (span !== undefined) annotateDecision(span, d);
  return withHeaders(reply, decisions.headersOf(live, d), d);
}

/** `POST /v1/limit/batch`: at most `maxBatch` decisions, none charged unless all can be. */
async function batchRoute(
  decisions: Decisions,
  maxBatch: number,
  req: FastifyRequest,
  span?: Span,
): Promise<{ results: Answer[] }> {
  const appName = decisions.appOf(req);
  const body = parseOr400(batchRequestSchema, req.body, "Invalid batch request");
  if (body.requests.length > maxBatch) {
    throw invalid("Invalid batch request", [
      {
        path: "requests",
        message: `must hold at most ${maxBatch} requests (got ${body.requests.length})`,
      },
    ]);
  }
  const results = await decisions.batch(appName, body.requests);
  if (span !== undefined) annotateDecisions(span, results, decidingOf(results));
  return { results };
}

/** `POST /v1/peek`: the answer a request would get now, counting nothing. */
async function peekRoute(
  decisions: Decisions,
  req: FastifyRequest,
  reply: FastifyReply,
  span?: Span,
): Promise<Answer> {
  const appName = decisions.appOf(req);
  const body = parseOr400(peekRequestSchema, req.body, "Invalid peek request");
  const live = decisions.granted(appName, body.policy, "policy");
  // A peek decides nothing, so it counts in no metric (a disabled policy's neither).
  const d = live.enabled ? await live.limiter.peek(body.key) : disabledAnswer(live.policy, 1);
  if (span !== undefined) annotateDecision(span, d);
  if (!live.enabled) return d;
  return withHeaders(reply, decisions.headersOf(live, d), d);
}

/** `POST /v1/release`: gives a concurrency policy's permit back (`leaseId` is the permit's id). */
async function releaseRoute(
  decisions: Decisions,
  req: FastifyRequest,
  span?: Span,
): Promise<{ released: boolean }> {
  const appName = decisions.appOf(req);
  const body = parseOr400(releaseRequestSchema, req.body, "Invalid release request");
  const live = decisions.granted(appName, body.policy, "policy");
  if (span !== undefined) annotatePolicy(span, live.policy.name);
  if (live.policy.algorithm !== "concurrency") {
    throw invalid("Invalid release request", [
      {
        path: "policy",
        message: `"${body.policy}" uses ${live.policy.algorithm}; only concurrency policies hold permits`,
      },
    ]);
  }
  // `released: false`: the permit was unknown, already released or expired (nothing freed).
  return { released: await live.limiter.release(body.key, body.leaseId) };
}

/**
 * Whether the fast route takes a request of these headers: only a whole JSON body of a known
 * length within the limit, sent without `Expect`. Any other request — and so every refusal
 * before the body (413, 415) — is Fastify's, answered as before.
 */
function fastRouteTakes(h: IncomingHttpHeaders, bodyLimit: number): boolean {
  const type = h["content-type"];
  const length = Number(h["content-length"]);
  return (
    type !== undefined &&
    FAST_BODY_TYPE.test(type) &&
    length > 0 &&
    length <= bodyLimit &&
    h["transfer-encoding"] === undefined &&
    h.expect === undefined
  );
}

function ignore(): void {}

/**
 * The fast route's door: the requests it takes (a known app's, see {@link fastRouteTakes}; none while
 * the service closes), their bodies read as bytes, answered by {@link answerFast}.
 */
function fastLimitRoute(
  ctx: ServiceContext,
  decisions: Decisions,
  closing: () => boolean,
): FastRoute {
  const { registry, metrics, config, tracer } = ctx;
  // "close" fires once, when the response is finished or the connection dropped.
  const leave = () => metrics.inFlight.dec();
  return (req, res) => {
    if (req.method !== "POST" || req.url !== "/v1/limit" || closing()) return false;
    if (!fastRouteTakes(req.headers, config.bodyLimit)) return false;
    // An unknown app's request (401) is Fastify's too.
    const token = bearer(req);
    const appName = token === undefined ? undefined : registry.appForKey(token);
    if (appName === undefined) return false;
    const started = performance.now();
    metrics.inFlight.inc();
    res.once("close", leave);
    // Checked once per request: no span work at all without a tracer.
    const span =
      tracer === undefined ? undefined : httpServerSpan(tracer, "/v1/limit", req.headers, res);
    // Bytes, not text: a body that is not UTF-8 is refused as Fastify's parser refuses it.
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    // A request cut off before its body ends gets no answer: its connection is gone.
    req.on("error", ignore);
    req.once("end", () => {
      const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      answerFast(ctx, decisions, req, res, appName, bytes, started, span).catch((err: unknown) => {
        ctx.logger.error({ err, url: req.url }, "request failed");
        res.destroy();
      });
    });
    return true;
  };
}

/**
 * Answers a request the fast route took, whose body is `bytes`: the decision, or the error as
 * Fastify's error handler answers it, with the same headers, body and log lines.
 */
async function answerFast(
  ctx: ServiceContext,
  decisions: Decisions,
  req: IncomingMessage,
  res: ServerResponse,
  appName: string,
  bytes: Buffer,
  started: number,
  span: Span | undefined,
): Promise<void> {
  let status = 200;
  let json: string;
  const headers: string[] = [];
  try {
    const [live, d] = await decisions.limit(appName, parseJsonBytes(bytes));
    if (span !== undefined) annotateDecision(span, d);
    json = JSON.stringify(d);
    // Lower-cased, as Fastify writes header names.
    for (const [name, value] of decisions.headersOf(live, d))
      headers.push(name.toLowerCase(), value);
  } catch (err) {
    const e = toApiError(err, req.headers["content-type"]);
    logRequestError(ctx.logger, e, err, "/v1/limit");
    status = e.status;
    json = JSON.stringify(e.toBody());
    for (const [name, value] of Object.entries(e.headers)) headers.push(name.toLowerCase(), value);
  }
  headers.push("content-type", JSON_TYPE, "content-length", String(Buffer.byteLength(json)));
  res.writeHead(status, headers);
  res.end(json);
  logRequest(ctx.logger, "POST", "/v1/limit", status, performance.now() - started);
}

/**
 * Registers the decision routes, and returns `POST /v1/limit`'s {@link FastRoute}. `closing`
 * tells whether the service is shutting down (the fast route then leaves every request to
 * Fastify, which answers 503).
 */
export function decisionRoutes(
  app: FastifyInstance,
  ctx: ServiceContext,
  closing: () => boolean,
): FastRoute {
  const decisions = new Decisions(ctx);
  const maxBatch = ctx.config.maxBatch;
  if (ctx.tracer !== undefined) {
    tracedRoutes(app, decisions, maxBatch, ctx.tracer);
  } else {
    app.post("/v1/limit", (req, reply) => limitRoute(decisions, req, reply));
    app.post("/v1/limit/batch", (req) => batchRoute(decisions, maxBatch, req));
    app.post("/v1/peek", (req, reply) => peekRoute(decisions, req, reply));
    app.post("/v1/release", (req) => releaseRoute(decisions, req));
  }
  return fastLimitRoute(ctx, decisions, closing);
}

/**
 * The routes of {@link decisionRoutes} when there is a tracer: each request's span opened by a
 * hook of its route (so that a body refused before the handler has one too), and handed to the
 * handler through its raw request.
 */
function tracedRoutes(
  app: FastifyInstance,
  decisions: Decisions,
  maxBatch: number,
  tracer: Tracer,
): void {
  const spans = new WeakMap<IncomingMessage, Span>();
  const opens = (route: string): { onRequest: onRequestHookHandler } => ({
    onRequest: (req, reply, done) => {
      spans.set(req.raw, httpServerSpan(tracer, route, req.headers, reply.raw));
      done();
    },
  });
  const spanOf = (req: FastifyRequest) => spans.get(req.raw);
  app.post("/v1/limit", opens("/v1/limit"), (req, reply) =>
    limitRoute(decisions, req, reply, spanOf(req)),
  );
  app.post("/v1/limit/batch", opens("/v1/limit/batch"), (req) =>
    batchRoute(decisions, maxBatch, req, spanOf(req)),
  );
  app.post("/v1/peek", opens("/v1/peek"), (req, reply) =>
    peekRoute(decisions, req, reply, spanOf(req)),
  );
  app.post("/v1/release", opens("/v1/release"), (req) => releaseRoute(decisions, req, spanOf(req)));
}
