/**
 * The Envoy rate limit service's HTTP routes: `POST /json` (the reference service's door for
 * callers without gRPC, on when `grpcPort` is set), and a descriptor's counters under
 * `/v1/admin/envoy/domains/{domain}/counters/` (peek; reset, by admins). The domains are
 * versioned documents with the routes of every kind (./documents.ts, ./kinds/envoy-domains.ts).
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { envoyCounterRequestSchema } from "@sluice/api";
import { descriptorIdentifier, matchDescriptor } from "../envoy/compile.js";
import { requestFromJson, responseToJson } from "../envoy/json.js";
import { CODE, RlsInputError } from "../envoy/rls.js";
import { ApiError, invalid, parseOr400 } from "../errors.js";
import { parseJsonBytes } from "../json-body.js";
import type { ServiceContext } from "../context.js";
import type { AuthHelpers } from "./auth.js";
import { limitView } from "./kinds/envoy-domains.js";

/** Registers `POST /json` when the Envoy service runs (`grpcPort` set). */
export function envoyJsonRoute(app: FastifyInstance, ctx: ServiceContext): void {
  const service = ctx.envoy;
  if (!service) return;
  void app.register(async (scope) => {
    // Like the reference service, any content type: its documented call is `curl --data`.
    scope.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));
    scope.post("/json", async (req, reply) => {
      const body = Buffer.isBuffer(req.body) ? parseJsonBytes(req.body) : req.body;
      const parsed = requestFromJson(body);
      if ("issues" in parsed) throw invalid("Invalid rate limit request", parsed.issues);
      let res;
      try {
        res = await service.shouldRateLimit(parsed.request);
      } catch (err) {
        if (err instanceof RlsInputError)
          throw invalid("Invalid rate limit request", [...err.issues]);
        throw err;
      }
      // 503 when only a failed counter store (and limits that fail closed) says no.
      const status = res.overallCode === CODE.OVER_LIMIT ? (res.failedClosed ? 503 : 429) : 200;
      return reply.status(status).send(responseToJson(res));
    });
  });
}

const domainParam = z.object({ domain: z.string().min(1).max(128) });

/**
 * Registers the counter routes of Envoy domains (inside the admin scope): what a descriptor's
 * counter holds, and its reset. The domains themselves are versioned documents
 * (./kinds/envoy-domains.ts).
 */
export function envoyCounterRoutes(
  app: FastifyInstance,
  ctx: ServiceContext,
  auth: AuthHelpers,
): void {
  const { repo, registry } = ctx;
  const { session, role } = auth;
  const params = (req: FastifyRequest) =>
    parseOr400(domainParam, req.params, "Invalid path").domain;

  /** The limit and identifier of a descriptor in a domain the node runs. */
  const counterTarget = (req: FastifyRequest) => {
    const domain = params(req);
    const body = parseOr400(envoyCounterRequestSchema, req.body, "Invalid descriptor");
    const live = registry.envoyDomain(domain);
    if (!live) throw new ApiError("not_found", `domain "${domain}" does not exist`);
    const match = matchDescriptor(live.compiled, body.entries);
    const limit = match.limit;
    return {
      domain,
      limit,
      identifier: limit ? descriptorIdentifier(body.entries, match.shared) : null,
    };
  };

  app.post("/v1/admin/envoy/domains/:domain/counters/peek", async (req) => {
    await session(req);
    const { limit, identifier } = counterTarget(req);
    const decision =
      limit?.limiter && identifier !== null ? await limit.limiter.peek(identifier) : null;
    return { limit: limit ? limitView(limit) : null, identifier, decision };
  });

  app.post("/v1/admin/envoy/domains/:domain/counters/reset", async (req) => {
    const s = await role(req, "admin");
    const { domain, limit, identifier } = counterTarget(req);
    if (!limit?.limiter || identifier === null)
      throw new ApiError(
        "not_found",
        limit
          ? `the descriptor's limit ${limit.path} keeps no counter (${limit.unlimited ? "unlimited" : "a limit of 0"})`
          : `no limit of domain "${domain}" matches this descriptor`,
      );
    await limit.limiter.reset(identifier);
    await repo.recordAudit(s.user.username, "envoy.counters.reset", "envoy_domain", domain, {
      path: limit.path,
      identifier,
    });
    return { limit: limitView(limit), identifier, decision: null, reset: true };
  });
}
