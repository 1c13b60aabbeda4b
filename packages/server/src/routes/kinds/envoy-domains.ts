/**
 * Envoy domains as a kind of versioned document of the admin API (`/v1/admin/envoy/domains/…`,
 * export and import at `/v1/admin/envoy/…`, see ../documents.ts): one document per domain, the
 * reference rate limit service's file, written as its YAML or as JSON; answered with the
 * domain's limits as this node runs them.
 *
 * Roles: every signed-in user reads; only an admin changes a domain (a domain belongs to the
 * gateway, not to an app, so owners have none of their own).
 */
import { envoyDomainWriteSchema, envoyImportRequestSchema } from "@sluice/api";
import type { FastifyRequest } from "fastify";
import type { ValidationIssue } from "sluice";
import { z } from "zod";
import type { ServiceContext } from "../../context.js";
import {
  type CompiledDomain,
  type CompiledLimit,
  ENVOY_POLICY_PREFIX,
  compileDomain,
} from "../../envoy/compile.js";
import {
  type EnvoyDomainDocument,
  exportEnvoyYaml,
  parseEnvoyFile,
  validateEnvoyDocument,
} from "../../envoy/config.js";
import { ApiError, invalid, parseOr400, prefixIssues } from "../../errors.js";
import type { DocumentRecord } from "../../repository/documents.js";
import { type AdminKind, type Written, exportQuery, sendYaml } from "../documents.js";

/** What the admin routes show of a limit. */
export function limitView(l: CompiledLimit) {
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

/** The compiled form of a domain's document: the node's own when it runs that version. */
function compiledOf(
  ctx: ServiceContext,
  doc: EnvoyDomainDocument,
  version?: number,
): CompiledDomain {
  const live = ctx.registry.envoyDomain(doc.domain);
  if (live && version !== undefined && live.version === version) return live.compiled;
  return compileDomain(doc, { prefix: ENVOY_POLICY_PREFIX });
}

/** Refuses a list that names a domain twice. */
function unique(docs: readonly EnvoyDomainDocument[]): EnvoyDomainDocument[] {
  const seen = new Set<string>();
  for (const d of docs) {
    if (seen.has(d.domain))
      throw invalid("Import refused, nothing was changed", [
        { path: "domain", message: `duplicate domain '${d.domain}' in the import` },
      ]);
    seen.add(d.domain);
  }
  return [...docs];
}

const writeQuery = z.strictObject({
  expectVersion: z.coerce.number().int().positive().optional(),
  draftId: z.coerce.number().int().positive().optional(),
});

/**
 * A validated document from a write: YAML text (the reference file; `expectVersion` and
 * `draftId` in the query) or JSON (`{ descriptors, domain?, expectVersion?, draftId? }`).
 */
function documentFrom(req: FastifyRequest, domain: string): Written<EnvoyDomainDocument> {
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
    ({ expectVersion, draftId } = parseOr400(writeQuery, req.query ?? {}, "Invalid query"));
  } else {
    const b = parseOr400(envoyDomainWriteSchema, req.body, `Invalid domain "${domain}"`);
    ({ expectVersion, draftId } = b);
    const { expectVersion: _e, draftId: _d, ...rest } = b;
    input = { ...rest, domain: rest.domain ?? domain };
  }
  const r = validateEnvoyDocument(input);
  const issues: ValidationIssue[] = "issues" in r ? [...r.issues] : [];
  if (!("issues" in r) && r.doc.domain !== domain)
    issues.push({ path: "domain", message: `must match the URL ("${domain}") or be left out` });
  if ("issues" in r || issues.length > 0) throw invalid(`Invalid domain "${domain}"`, issues);
  return { doc: r.doc, expectVersion, draftId };
}

/** The export's query: one domain alone, when `domain` names it. */
const domainExportQuery = exportQuery.extend({ domain: z.string().min(1).optional() });

/** The Envoy domains' strategy for the admin routes. */
export const envoyDomainAdmin: AdminKind<EnvoyDomainDocument> = {
  repository: (ctx) => ctx.repo.envoyDomains,
  collection: "/v1/admin/envoy/domains",
  files: "/v1/admin/envoy",
  putCreated: 201,
  nameField: "domain",
  writers: ["admin"],
  authorize: () => {},
  view: (ctx, r: DocumentRecord<EnvoyDomainDocument>, hasDraft) => ({
    domain: r.doc.domain,
    doc: r.doc,
    version: r.version,
    createdBy: r.createdBy,
    updatedBy: r.updatedBy,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
    hasDraft,
    limits: compiledOf(ctx, r.doc, r.version).limits.map(limitView),
  }),
  listView: (ctx, list) => ({
    revision: ctx.registry.currentRevision,
    service: { grpc: ctx.envoy !== undefined },
    domains: list.map((r) => ({
      domain: r.doc.domain,
      version: r.version,
      updatedBy: r.updatedBy,
      updatedAt: r.updatedAt,
      limits: compiledOf(ctx, r.doc, r.version).limits.length,
      hasDraft: ctx.registry.envoyDomain(r.doc.domain)?.draft !== undefined,
    })),
  }),
  written: (req, name) => documentFrom(req, name),
  importField: "domains",
  imported(body) {
    const b = parseOr400(envoyImportRequestSchema, body, "Invalid import");
    const issues: ValidationIssue[] = [];
    const docs: EnvoyDomainDocument[] = [];
    for (const [i, d] of b.domains.entries()) {
      const r = validateEnvoyDocument(d);
      if ("issues" in r) issues.push(...prefixIssues(r.issues, `domains.${i}`));
      else docs.push(r.doc);
    }
    if (issues.length > 0) throw invalid("Import refused, nothing was changed", issues);
    return { docs: unique(docs), prune: b.prune ?? false, dryRun: b.dryRun ?? false };
  },
  parseFile(text) {
    const r = parseEnvoyFile(text);
    return "issues" in r ? r : { docs: unique(r.docs) };
  },
  exported(req, reply, all) {
    const q = parseOr400(domainExportQuery, req.query, "Invalid query");
    let list = all;
    if (q.domain !== undefined) {
      list = list.filter((d) => d.domain === q.domain);
      if (list.length === 0) throw new ApiError("not_found", `domain "${q.domain}" does not exist`);
    }
    if (q.format === "json") return { domains: list };
    return sendYaml(reply, list.map((d) => exportEnvoyYaml(d)).join("---\n"));
  },
};
