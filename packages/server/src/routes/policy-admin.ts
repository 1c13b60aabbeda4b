/**
 * The policies of the admin API: policies with their versions (restore), drafts evaluated in
 * shadow (promote, discard) and import and export of policy files.
 *
 * Roles: `viewer` reads; `owner` changes the policies granted to the apps it owns (and may not
 * grant or revoke apps it does not own); `admin` changes every policy.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { importRequestSchema, promoteRequestSchema, versionParamSchema } from "@sluice/api";
import type { ServiceContext } from "../context.js";
import { ApiError, invalid, parseOr400 } from "../errors.js";
import { type PolicyDocument, validatePolicyDocument } from "../model.js";
import { exportPolicyFile, parsePolicyFile, validatePolicyList } from "../policy-file.js";
import type { PolicyRecord, UserRecord } from "../repository.js";
import { type AuthHelpers, type Session, forbidden } from "./auth.js";

/** Refuses unless the user may change a policy from `before` to `after` (either may be absent). */
export function assertCanEditPolicy(
  user: Pick<UserRecord, "role" | "apps">,
  before: PolicyDocument | undefined,
  after: PolicyDocument | undefined,
): void {
  if (user.role === "admin") return;
  if (user.role !== "owner") throw forbidden(`role ${user.role} may not change policies`);
  const owned = new Set(user.apps);
  const name = (before ?? after)?.name ?? "";
  if (before && !before.apps.some((a) => owned.has(a)))
    throw forbidden(`policy "${name}" is not granted to an app you own`);
  if (after && !after.apps.some((a) => owned.has(a))) {
    throw forbidden(
      `policy "${name}" must stay granted to at least one app you own (${[...owned].join(", ") || "none"})`,
    );
  }
  const b = new Set(before?.apps ?? []);
  const a = new Set(after?.apps ?? []);
  const changed = [...[...b].filter((x) => !a.has(x)), ...[...a].filter((x) => !b.has(x))].filter(
    (x) => !owned.has(x),
  );
  if (changed.length > 0)
    throw forbidden(`only an admin may grant or revoke apps you do not own: ${changed.join(", ")}`);
}
function recordView(r: PolicyRecord) {
  return {
    ...r.doc,
    version: r.version,
    createdBy: r.createdBy,
    updatedBy: r.updatedBy,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

const nameParam = z.object({ name: z.string().min(1).max(128) });

/** Absent, or a positive integer (a version or an id). */
const isPositiveInt = (v: unknown): boolean =>
  v === undefined || (typeof v === "number" && Number.isInteger(v) && v >= 1);

/** Registers the policy routes (inside the admin scope). */
export function policyAdminRoutes(
  app: FastifyInstance,
  ctx: ServiceContext,
  auth: AuthHelpers,
): void {
  const { repo, registry } = ctx;
  const { session, role } = auth;
  const actor = (s: Session) => s.user.username;
  const params = (req: FastifyRequest) => parseOr400(nameParam, req.params, "Invalid path");
  const versionParam = (req: FastifyRequest) =>
    parseOr400(
      versionParamSchema,
      (req.params as { version?: unknown }).version,
      "Invalid path",
      "version",
    );

  /**
   * A validated document from a write body, named by the URL, with the optimistic-concurrency
   * fields: `expectVersion` and, for drafts, `draftId` (the draft being replaced).
   */
  const documentFrom = (
    body: unknown,
    name: string,
    options: { draft?: boolean } = {},
  ): { doc: PolicyDocument; expectVersion: number | undefined; draftId: number | undefined } => {
    if (typeof body !== "object" || body === null || Array.isArray(body))
      throw invalid("Invalid policy", [
        { path: "", message: "body must be a JSON object (a policy document)" },
      ]);
    const { expectVersion, ...withDraftId } = body as Record<string, unknown>;
    // `draftId` belongs to drafts only; elsewhere it is an unknown field of the document.
    let rest = withDraftId;
    let draftId: unknown;
    if (options.draft) ({ draftId, ...rest } = withDraftId);
    const issues = [];
    if (!isPositiveInt(expectVersion)) {
      issues.push({
        path: "expectVersion",
        message: "must be a positive integer (the version you edited)",
      });
    }
    if (!isPositiveInt(draftId)) {
      issues.push({
        path: "draftId",
        message: "must be a positive integer (the id of the draft you are replacing)",
      });
    }
    if (rest.name !== undefined && rest.name !== name)
      issues.push({ path: "name", message: `must match the URL ("${name}") or be left out` });
    const r = validatePolicyDocument({ ...rest, name });
    if ("issues" in r) issues.push(...r.issues);
    if (issues.length > 0 || "issues" in r) throw invalid(`Invalid policy "${name}"`, issues);
    return {
      doc: r.doc,
      expectVersion: expectVersion as number | undefined,
      draftId: draftId as number | undefined,
    };
  };

  app.get("/v1/admin/policies", async (req) => {
    await session(req);
    const list = await repo.listPolicies();
    return {
      revision: registry.currentRevision,
      policies: list.map((r) => ({
        ...recordView(r),
        hasDraft: registry.get(r.doc.name)?.draft !== undefined,
      })),
    };
  });

  app.get("/v1/admin/policies/export", async (req, reply) => {
    await session(req);
    const q = parseOr400(
      z.strictObject({
        format: z.enum(["yaml", "json"], { error: "must be yaml or json" }).default("yaml"),
      }),
      req.query,
      "Invalid query",
    );
    const list = await repo.listPolicies();
    if (q.format === "json") return { version: 1, policies: list.map((r) => r.doc) };
    return reply.type("application/yaml; charset=utf-8").send(exportPolicyFile(list));
  });

  app.post("/v1/admin/policies/import", async (req) => {
    const s = await role(req, "admin");
    let docs: PolicyDocument[];
    let prune = false;
    let dryRun = false;
    if (typeof req.body === "string") {
      const r = parsePolicyFile(req.body);
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
      const b = parseOr400(importRequestSchema, req.body, "Invalid import");
      const r = validatePolicyList(b.policies);
      if ("issues" in r) throw invalid("Import refused, nothing was changed", r.issues);
      docs = r.docs;
      prune = b.prune ?? false;
      dryRun = b.dryRun ?? false;
    }
    if (dryRun) return { dryRun: true, plan: await repo.planImport(docs, prune) };
    const plan = await repo.importPolicies(docs, actor(s), { prune });
    return { dryRun: false, plan };
  });

  app.get("/v1/admin/policies/:name", async (req) => {
    await session(req);
    const { name } = params(req);
    const [r, draft] = await Promise.all([repo.getPolicy(name), repo.getDraft(name)]);
    if (!r) throw new ApiError("policy_not_found", `policy "${name}" does not exist`);
    return { ...recordView(r), hasDraft: draft !== undefined };
  });

  app.post("/v1/admin/policies", async (req, reply) => {
    const s = await role(req, "admin", "owner");
    const name =
      typeof (req.body as { name?: unknown } | null)?.name === "string"
        ? (req.body as { name: string }).name
        : "";
    if (!name) throw invalid("Invalid policy", [{ path: "name", message: "is required" }]);
    const { doc } = documentFrom(req.body, name);
    const rec = await repo.putPolicy(doc, actor(s), {
      mustNotExist: true,
      check: () => assertCanEditPolicy(s.user, undefined, doc),
    });
    return reply.status(201).send(recordView(rec));
  });

  app.put("/v1/admin/policies/:name", async (req) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    const { doc, expectVersion } = documentFrom(req.body, name);
    const rec = await repo.putPolicy(doc, actor(s), {
      expectVersion,
      check: (before) => assertCanEditPolicy(s.user, before?.doc, doc),
    });
    return recordView(rec);
  });

  app.delete("/v1/admin/policies/:name", async (req, reply) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    await repo.deletePolicy(name, actor(s), (before) =>
      assertCanEditPolicy(s.user, before.doc, undefined),
    );
    return reply.status(204).send();
  });

  app.get("/v1/admin/policies/:name/versions", async (req) => {
    await session(req);
    const { name } = params(req);
    const versions = await repo.listVersions(name);
    if (versions.length === 0)
      throw new ApiError("policy_not_found", `policy "${name}" has no versions`);
    return { versions };
  });

  app.get("/v1/admin/policies/:name/versions/:version", async (req) => {
    await session(req);
    const { name } = params(req);
    const version = versionParam(req);
    const v = await repo.getVersion(name, version);
    if (!v) throw new ApiError("not_found", `policy "${name}" has no version ${version}`);
    return v;
  });

  app.post("/v1/admin/policies/:name/versions/:version/restore", async (req) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    const version = versionParam(req);
    const rec = await repo.restoreVersion(name, version, actor(s), (before, restored) =>
      assertCanEditPolicy(s.user, before?.doc, restored),
    );
    return recordView(rec);
  });

  app.get("/v1/admin/policies/:name/draft", async (req) => {
    await session(req);
    const { name } = params(req);
    const d = await repo.getDraft(name);
    if (!d) throw new ApiError("not_found", `policy "${name}" has no draft`);
    // Totals over every node; this node's latest counts are added first.
    await registry.flushDraftStats();
    const stats = await repo.getDraftStats(d.id);
    return { ...d, stats };
  });

  app.put("/v1/admin/policies/:name/draft", async (req) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    const { doc, expectVersion, draftId } = documentFrom(req.body, name, { draft: true });
    return repo.putDraft(doc, actor(s), {
      expectVersion,
      draftId,
      check: (before) => assertCanEditPolicy(s.user, before.doc, doc),
    });
  });

  app.delete("/v1/admin/policies/:name/draft", async (req, reply) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    await repo.deleteDraft(name, actor(s), (before) =>
      assertCanEditPolicy(s.user, before.doc, before.doc),
    );
    return reply.status(204).send();
  });

  app.post("/v1/admin/policies/:name/draft/promote", async (req) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    const body = parseOr400(promoteRequestSchema, req.body ?? {}, "Invalid promote request");
    const rec = await repo.promoteDraft(name, actor(s), {
      expectVersion: body.expectVersion,
      draftId: body.draftId,
      check: (before, draft) => assertCanEditPolicy(s.user, before.doc, draft),
    });
    return recordView(rec);
  });
}
