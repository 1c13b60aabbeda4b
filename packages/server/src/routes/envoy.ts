/**
 * The Envoy rate limit service's HTTP routes: `POST /json` (the reference service's door for
 * callers without gRPC, on when `grpcPort` is set) and the admin routes of the descriptor
 * configuration under `/v1/admin/envoy/` — domains (versions, restore, drafts evaluated in
 * shadow), import and export in the reference format, and a descriptor's counters (peek, reset).
 *
 * Roles: every signed-in user reads; only an admin changes a domain or resets counters (a
 * domain belongs to the gateway, not to an app, so owners have none of their own).
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { versionParamSchema } from "@sluice/api";
import {
  envoyCounterRequestSchema,
  envoyImportRequestSchema,
  envoyDomainWriteSchema,
} from "@sluice/api";
import {
  type CompiledDomain,
  type CompiledLimit,
  compileDomain,
  descriptorIdentifier,
  ENVOY_POLICY_PREFIX,
  matchDescriptor,
} from "../envoy/compile.js";
import {
  type EnvoyDomainDocument,
  exportEnvoyYaml,
  parseEnvoyFile,
  validateEnvoyDocument,
} from "../envoy/config.js";
import { requestFromJson, responseToJson } from "../envoy/json.js";
import { CODE, RlsInputError } from "../envoy/rls.js";
import { ApiError, invalid, parseOr400, prefixIssues } from "../errors.js";
import { parseJsonBody } from "../json-body.js";
import type { EnvoyDomainRecord } from "../repository.js";
import type { ServiceContext } from "../context.js";
import type { AuthHelpers } from "./auth.js";

/** Registers `POST /json` when the Envoy service runs (`grpcPort` set). */
export function envoyJsonRoute(app: FastifyInstance, ctx: ServiceContext): void {
  const service = ctx.envoy;
  if (!service) return;
  void app.register(async (scope) => {
    // Like the reference service, any content type: its documented call is `curl --data`.
    scope.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => done(null, body));
    scope.post("/json", async (req, reply) => {
      const body = typeof req.body === "string" ? parseJsonBody(req.body) : req.body;
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

/** What the admin routes show of a limit. */
function limitView(l: CompiledLimit) {
  return {
    path: l.path,
    policy: l.policy?.name ?? null,
    name: l.name ?? null,
    replaces: [...l.replaces],
    unlimited: l.unlimited,
    shadow: l.shadow,
    quota: l.quota,
    algorithm: l.algorithm,
    onStoreError: l.onStoreError,
    rules: l.rules.map((r) => ({
      requestsPerUnit: r.requestsPerUnit,
      periodMs: r.periodMs,
      unit: r.unit ?? null,
      burst: r.burst ?? null,
    })),
  };
}

const domainParam = z.object({ domain: z.string().min(1).max(128) });

/** Registers the admin routes of Envoy domains (inside the admin routes' context). */
export function envoyAdminRoutes(
  app: FastifyInstance,
  ctx: ServiceContext,
  auth: AuthHelpers,
): void {
  const { repo, registry } = ctx;
  const { session, role } = auth;
  const params = (req: FastifyRequest) =>
    parseOr400(domainParam, req.params, "Invalid path").domain;
  const versionParam = (req: FastifyRequest) =>
    parseOr400(
      versionParamSchema,
      (req.params as { version?: unknown }).version,
      "Invalid path",
      "version",
    );

  /** The compiled form of a record: the node's own when it runs that version. */
  const compiledOf = (doc: EnvoyDomainDocument, version?: number): CompiledDomain => {
    const live = registry.envoyDomain(doc.domain);
    if (live && version !== undefined && live.version === version) return live.compiled;
    return compileDomain(doc, { prefix: ENVOY_POLICY_PREFIX });
  };
  const recordView = (r: EnvoyDomainRecord, hasDraft: boolean) => ({
    domain: r.doc.domain,
    doc: r.doc,
    version: r.version,
    createdBy: r.createdBy,
    updatedBy: r.updatedBy,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    hasDraft,
    limits: compiledOf(r.doc, r.version).limits.map(limitView),
  });

  /**
   * A validated document from a write: YAML text (the reference file; `expectVersion` and
   * `draftId` in the query) or JSON (`{ descriptors, domain?, expectVersion?, draftId? }`).
   */
  const documentFrom = (
    req: FastifyRequest,
    domain: string,
  ): { doc: EnvoyDomainDocument; expectVersion?: number; draftId?: number } => {
    let input: unknown;
    let expectVersion: number | undefined;
    let draftId: number | undefined;
    if (typeof req.body === "string") {
      const r = parseEnvoyFile(req.body);
      if ("issues" in r) throw invalid(`Invalid domain "${domain}"`, r.issues);
      if (r.docs.length !== 1)
        throw invalid(`Invalid domain "${domain}"`, [
          { path: "", message: `must hold one domain (got ${r.docs.length})` },
        ]);
      input = r.docs[0];
      const q = parseOr400(
        z.strictObject({
          expectVersion: z.coerce.number().int().positive().optional(),
          draftId: z.coerce.number().int().positive().optional(),
        }),
        req.query ?? {},
        "Invalid query",
      );
      ({ expectVersion, draftId } = q);
    } else {
      const b = parseOr400(envoyDomainWriteSchema, req.body, `Invalid domain "${domain}"`);
      ({ expectVersion, draftId } = b);
      const { expectVersion: _e, draftId: _d, ...rest } = b;
      input = { ...rest, domain: rest.domain ?? domain };
    }
    const r = validateEnvoyDocument(input);
    const issues = "issues" in r ? [...r.issues] : [];
    if (!("issues" in r) && r.doc.domain !== domain)
      issues.push({ path: "domain", message: `must match the URL ("${domain}") or be left out` });
    if ("issues" in r || issues.length > 0) throw invalid(`Invalid domain "${domain}"`, issues);
    return {
      doc: r.doc,
      ...(expectVersion !== undefined ? { expectVersion } : {}),
      ...(draftId !== undefined ? { draftId } : {}),
    };
  };

  app.get("/v1/admin/envoy/domains", async (req) => {
    await session(req);
    const list = await repo.listEnvoyDomains();
    return {
      revision: registry.currentRevision,
      service: { grpc: ctx.envoy !== undefined },
      domains: list.map((r) => ({
        domain: r.doc.domain,
        version: r.version,
        updatedBy: r.updatedBy,
        updatedAt: r.updatedAt,
        limits: compiledOf(r.doc, r.version).limits.length,
        hasDraft: registry.envoyDomain(r.doc.domain)?.draft !== undefined,
      })),
    };
  });

  app.get("/v1/admin/envoy/export", async (req, reply) => {
    await session(req);
    const q = parseOr400(
      z.strictObject({
        domain: z.string().min(1).optional(),
        format: z.enum(["yaml", "json"], { error: "must be yaml or json" }).default("yaml"),
      }),
      req.query,
      "Invalid query",
    );
    let list = (await repo.listEnvoyDomains()).map((r) => r.doc);
    if (q.domain !== undefined) {
      list = list.filter((d) => d.domain === q.domain);
      if (list.length === 0) throw new ApiError("not_found", `domain "${q.domain}" does not exist`);
    }
    if (q.format === "json") return { domains: list };
    return reply
      .type("application/yaml; charset=utf-8")
      .send(list.map((d) => exportEnvoyYaml(d)).join("---\n"));
  });

  app.post("/v1/admin/envoy/import", async (req) => {
    const s = await role(req, "admin");
    let docs: EnvoyDomainDocument[];
    let prune = false;
    let dryRun = false;
    if (typeof req.body === "string") {
      const r = parseEnvoyFile(req.body);
      if ("issues" in r) throw invalid("Import refused, nothing was changed", r.issues);
      docs = r.docs;
      const q = parseOr400(
        z.strictObject({
          prune: z.enum(["true", "false"]).optional(),
          dryRun: z.enum(["true", "false"]).optional(),
        }),
        req.query,
        "Invalid query",
      );
      prune = q.prune === "true";
      dryRun = q.dryRun === "true";
    } else {
      const b = parseOr400(envoyImportRequestSchema, req.body, "Invalid import");
      const issues = [];
      docs = [];
      for (const [i, d] of b.domains.entries()) {
        const r = validateEnvoyDocument(d);
        if ("issues" in r) issues.push(...prefixIssues(r.issues, `domains.${i}`));
        else docs.push(r.doc);
      }
      if (issues.length > 0) throw invalid("Import refused, nothing was changed", issues);
      prune = b.prune ?? false;
      dryRun = b.dryRun ?? false;
    }
    const seen = new Set<string>();
    for (const d of docs) {
      if (seen.has(d.domain))
        throw invalid("Import refused, nothing was changed", [
          { path: "domain", message: `duplicate domain '${d.domain}' in the import` },
        ]);
      seen.add(d.domain);
    }
    if (dryRun) return { dryRun: true, plan: await repo.planEnvoyImport(docs, prune) };
    return { dryRun: false, plan: await repo.importEnvoyDomains(docs, s.user.username, { prune }) };
  });

  app.get("/v1/admin/envoy/domains/:domain", async (req) => {
    await session(req);
    const domain = params(req);
    const r = await repo.getEnvoyDomain(domain);
    if (!r) throw new ApiError("not_found", `domain "${domain}" does not exist`);
    return recordView(r, (await repo.getEnvoyDraft(domain)) !== undefined);
  });

  app.put("/v1/admin/envoy/domains/:domain", async (req, reply) => {
    const s = await role(req, "admin");
    const domain = params(req);
    const { doc, expectVersion } = documentFrom(req, domain);
    const existed = (await repo.getEnvoyDomain(domain)) !== undefined;
    const rec = await repo.putEnvoyDomain(doc, s.user.username, { expectVersion });
    const view = recordView(rec, (await repo.getEnvoyDraft(domain)) !== undefined);
    return reply.status(existed ? 200 : 201).send(view);
  });

  app.delete("/v1/admin/envoy/domains/:domain", async (req, reply) => {
    const s = await role(req, "admin");
    await repo.deleteEnvoyDomain(params(req), s.user.username);
    return reply.status(204).send();
  });

  app.get("/v1/admin/envoy/domains/:domain/versions", async (req) => {
    await session(req);
    const domain = params(req);
    const versions = await repo.listEnvoyVersions(domain);
    if (versions.length === 0)
      throw new ApiError("not_found", `domain "${domain}" has no versions`);
    return { versions };
  });

  app.get("/v1/admin/envoy/domains/:domain/versions/:version", async (req) => {
    await session(req);
    const domain = params(req);
    const version = versionParam(req);
    const v = await repo.getEnvoyVersion(domain, version);
    if (!v) throw new ApiError("not_found", `domain "${domain}" has no version ${version}`);
    return v;
  });

  app.post("/v1/admin/envoy/domains/:domain/versions/:version/restore", async (req) => {
    const s = await role(req, "admin");
    const domain = params(req);
    const rec = await repo.restoreEnvoyVersion(domain, versionParam(req), s.user.username);
    return recordView(rec, (await repo.getEnvoyDraft(domain)) !== undefined);
  });

  app.get("/v1/admin/envoy/domains/:domain/draft", async (req) => {
    await session(req);
    const domain = params(req);
    const d = await repo.getEnvoyDraft(domain);
    if (!d) throw new ApiError("not_found", `domain "${domain}" has no draft`);
    await registry.flushDraftStats();
    return { ...d, stats: await repo.getEnvoyDraftStats(d.id) };
  });

  app.put("/v1/admin/envoy/domains/:domain/draft", async (req) => {
    const s = await role(req, "admin");
    const domain = params(req);
    const { doc, expectVersion, draftId } = documentFrom(req, domain);
    return repo.putEnvoyDraft(doc, s.user.username, { expectVersion, draftId });
  });

  app.delete("/v1/admin/envoy/domains/:domain/draft", async (req, reply) => {
    const s = await role(req, "admin");
    await repo.deleteEnvoyDraft(params(req), s.user.username);
    return reply.status(204).send();
  });

  app.post("/v1/admin/envoy/domains/:domain/draft/promote", async (req) => {
    const s = await role(req, "admin");
    const domain = params(req);
    const body = parseOr400(
      z.strictObject({
        expectVersion: z.number().int().positive().optional(),
        draftId: z.number().int().positive().optional(),
      }),
      req.body ?? {},
      "Invalid promote request",
    );
    const rec = await repo.promoteEnvoyDraft(domain, s.user.username, body);
    return recordView(rec, false);
  });

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
