/**
 * The decision API for apps: `POST /v1/limit`, `/v1/limit/batch`, `/v1/peek`, `/v1/release`.
 * Apps authenticate with `Authorization: Bearer <api key>` and may use only the policies
 * granted to them. A policy's draft, when there is one, is evaluated in shadow beside it.
 *
 * `POST /v1/limit`, which apps call once per request they limit, is also served straight from
 * node:http ({@link FastRoute}): the same validation, grant and cost checks, decision, headers,
 * error bodies, metrics and log lines, without Fastify's routing, hooks and reply objects.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { type Decision, type Policy, policyCapacity } from "sluice";
import type { HeaderList } from "sluice/http";
import { type DecideLiveHooks, decideLive, disabledDecision } from "sluice/service";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
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
 * Registers the decision routes, and returns `POST /v1/limit`'s {@link FastRoute}. `closing`
 * tells whether the service is shutting down (the fast route then leaves every request to
 * Fastify, which answers 503).
 */
export function decisionRoutes(
  app: FastifyInstance,
  ctx: ServiceContext,
  closing: () => boolean,
): FastRoute {
  const { registry, metrics, traffic } = ctx;
  const authApp = (req: FastifyRequest): string => appOfRequest(req, registry);

  /** The live policy, if it exists (404) and is granted to the app (403). `at` prefixes field paths. */
  const granted = (appName: string, policy: string, at: string): LivePolicy => {
    const live = registry.get(policy);
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
  };

  const checkCost = (live: LivePolicy, cost: number, at: string): void => {
    const capacity = policyCapacity(live.policy);
    if (cost > capacity)
      throw invalid("Invalid cost", [
        {
          path: at,
          message: `${cost} can never fit policy "${live.policy.name}", whose capacity is ${capacity}`,
        },
      ]);
  };

  /** `sluice_decisions_total`'s child for (policy, outcome, reason), labelled once. */
  const counted = new Map<string, { inc(): void }>();
  const count = (policy: string, outcome: string, reason: string): void => {
    const id = `${policy}\u0000${outcome}\u0000${reason}`;
    let child = counted.get(id);
    if (child === undefined) {
      child = counterChild(metrics.decisions, { policy, outcome, reason });
      counted.set(id, child);
    }
    child.inc();
  };

  /** Counts a decision: the metric, and the traffic history (memory only; see traffic/recorder.ts). */
  const record = (live: LivePolicy, appName: string, key: string, d: Decision): void => {
    count(live.policy.name, d.allowed ? "allowed" : "denied", d.reason ?? "");
    traffic.record(live.policy.name, appName, trafficOutcome(d), key);
  };

  /** What a draft's evaluation tells the metrics and the log, per policy (made once). */
  const hooks = new Map<string, DecideLiveHooks>();
  const draftHooks = (policy: string): DecideLiveHooks => {
    let h = hooks.get(policy);
    if (h === undefined) {
      const allowed = counterChild(metrics.draftDecisions, { policy, outcome: "allowed" });
      const denied = counterChild(metrics.draftDecisions, { policy, outcome: "denied" });
      h = {
        onDraft: (ok) => (ok ? allowed : denied).inc(),
        onDraftError: (err) => ctx.logger.warn({ err, policy }, "draft evaluation failed"),
      };
      hooks.set(policy, h);
    }
    return h;
  };

  const decide = async (
    live: LivePolicy,
    key: string,
    cost: number,
    appName: string,
  ): Promise<Answer> => {
    const d = await decideLive(
      live,
      key,
      cost,
      live.draft ? draftHooks(live.policy.name) : undefined,
    );
    record(live, appName, key, d);
    return d.reason === "disabled" ? { ...d, disabled: true } : d;
  };

  /** The rate-limit headers of an answer (none for a disabled policy's). */
  const headersOf = (live: LivePolicy, d: Answer): HeaderList =>
    d.disabled ? [] : decisionHeaders(d, live.policy.algorithm, ctx.now());

  const send = (reply: FastifyReply, live: LivePolicy, d: Answer): Answer => {
    for (const [name, value] of headersOf(live, d)) void reply.header(name, value);
    return d;
  };

  /** `POST /v1/limit` once the caller is known and its body parsed (both routes). */
  const limit = async (appName: string, value: unknown): Promise<[LivePolicy, Answer]> => {
    const body =
      plainLimitRequest(value) ?? parseOr400(limitRequestSchema, value, "Invalid limit request");
    const live = granted(appName, body.policy, "policy");
    const cost = body.cost ?? 1;
    checkCost(live, cost, "cost");
    return [live, await decide(live, body.key, cost, appName)];
  };

  app.post("/v1/limit", async (req, reply) => {
    const [live, d] = await limit(authApp(req), req.body);
    return send(reply, live, d);
  });

  app.post("/v1/limit/batch", async (req) => {
    const appName = authApp(req);
    const body = parseOr400(batchRequestSchema, req.body, "Invalid batch request");
    if (body.requests.length > ctx.config.maxBatch) {
      throw invalid("Invalid batch request", [
        {
          path: "requests",
          message: `must hold at most ${ctx.config.maxBatch} requests (got ${body.requests.length})`,
        },
      ]);
    }
    // Check every item before charging any, so a bad item charges nothing.
    const lives = body.requests.map((r, i) => {
      const live = granted(appName, r.policy, `requests.${i}.policy`);
      checkCost(live, r.cost ?? 1, `requests.${i}.cost`);
      return live;
    });
    const results = await Promise.all(
      body.requests.map((r, i) => decide(lives[i]!, r.key, r.cost ?? 1, appName)),
    );
    return { results };
  });

  app.post("/v1/peek", async (req, reply) => {
    const appName = authApp(req);
    const body = parseOr400(peekRequestSchema, req.body, "Invalid peek request");
    const live = granted(appName, body.policy, "policy");
    // A peek decides nothing, so it counts in no metric (a disabled policy's neither).
    if (!live.enabled) return disabledAnswer(live.policy, 1);
    return send(reply, live, await live.limiter.peek(body.key));
  });

  app.post("/v1/release", async (req) => {
    const appName = authApp(req);
    const body = parseOr400(releaseRequestSchema, req.body, "Invalid release request");
    const live = granted(appName, body.policy, "policy");
    if (live.policy.algorithm !== "concurrency") {
      throw invalid("Invalid release request", [
        {
          path: "policy",
          message: `"${body.policy}" uses ${live.policy.algorithm}; only concurrency policies hold leases`,
        },
      ]);
    }
    // `released: false`: the lease was unknown, already released or expired (nothing freed).
    return { released: await live.limiter.release(body.key, body.leaseId) };
  });

  /** Answers a request the fast route took, whose body is `bytes`. */
  const answer = async (
    req: IncomingMessage,
    res: ServerResponse,
    appName: string,
    bytes: Buffer,
    started: number,
  ): Promise<void> => {
    let status = 200;
    let json: string;
    const headers: string[] = [];
    try {
      const [live, d] = await limit(appName, parseJsonBytes(bytes));
      json = JSON.stringify(d);
      // Lower-cased, as Fastify writes header names.
      for (const [name, value] of headersOf(live, d)) headers.push(name.toLowerCase(), value);
    } catch (err) {
      const e = toApiError(err, req.headers["content-type"]);
      logRequestError(ctx.logger, e, err, "/v1/limit");
      status = e.status;
      json = JSON.stringify(e.toBody());
      for (const [name, value] of Object.entries(e.headers))
        headers.push(name.toLowerCase(), value);
    }
    headers.push("content-type", JSON_TYPE, "content-length", String(Buffer.byteLength(json)));
    res.writeHead(status, headers);
    res.end(json);
    logRequest(ctx.logger, "POST", "/v1/limit", status, performance.now() - started);
  };

  return (req, res) => {
    if (req.method !== "POST" || req.url !== "/v1/limit" || closing()) return false;
    const h = req.headers;
    const type = h["content-type"];
    const length = Number(h["content-length"]);
    // Only a whole JSON body of a known length within the limit, sent without `Expect`, from a
    // known app: any other request — and so every refusal before the body (401, 413, 415) —
    // is Fastify's, answered as before.
    if (
      type === undefined ||
      !FAST_BODY_TYPE.test(type) ||
      !(length > 0 && length <= ctx.config.bodyLimit) ||
      h["transfer-encoding"] !== undefined ||
      h.expect !== undefined
    )
      return false;
    const token = bearer(req);
    const appName = token === undefined ? undefined : registry.appForKey(token);
    if (appName === undefined) return false;
    const started = performance.now();
    metrics.inFlight.inc();
    // "close" fires once, when the response is finished or the connection dropped.
    res.once("close", () => metrics.inFlight.dec());
    // Bytes, not text: a body that is not UTF-8 is refused as Fastify's parser refuses it.
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    // A request cut off before its body ends gets no answer: its connection is gone.
    req.on("error", () => {});
    req.once("end", () => {
      const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      answer(req, res, appName, bytes, started).catch((err: unknown) => {
        ctx.logger.error({ err, url: req.url }, "request failed");
        res.destroy();
      });
    });
    return true;
  };
}
