/**
 * Policies as a kind of versioned document of the admin API (`/v1/admin/policies/…`, see
 * ../documents.ts): written as JSON documents, imported and exported as policy files, answered
 * as the document's fields flattened beside its bookkeeping.
 *
 * Roles: `viewer` reads; `owner` changes the policies granted to the apps it owns (and may not
 * grant or revoke apps it does not own); `admin` changes every policy.
 */
import { importRequestSchema } from "@sluice/api";
import { invalid, parseOr400 } from "../../errors.js";
import { type PolicyDocument, policyWarnings, validatePolicyDocument } from "../../model.js";
import { exportPolicyFile, parsePolicyFile, validatePolicyList } from "../../policy-file.js";
import type { DocumentRecord } from "../../repository/documents.js";
import type { UserRecord } from "../../repository.js";
import { forbidden } from "../auth.js";
import { type AdminKind, type Written, exportQuery, sendYaml } from "../documents.js";

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

/** A policy as answered: its document's fields flattened beside its bookkeeping. */
function recordView(r: DocumentRecord<PolicyDocument>) {
  return {
    ...r.doc,
    version: r.version,
    createdBy: r.createdBy,
    updatedBy: r.updatedBy,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

/** Absent, or a positive integer (a version or an id). */
const isPositiveInt = (v: unknown): boolean =>
  v === undefined || (typeof v === "number" && Number.isInteger(v) && v >= 1);

/**
 * A validated document from a write body, named by the URL (`urlName`) or, for a create, by its
 * own `name` (undefined), with the optimistic-concurrency fields: `expectVersion` and, for
 * drafts, `draftId` (the draft being replaced). A 400 names every problem at once.
 */
function documentFrom(
  body: unknown,
  urlName: string | undefined,
  options: { draft: boolean },
): Written<PolicyDocument> {
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
  if (urlName !== undefined && rest.name !== undefined && rest.name !== urlName)
    issues.push({ path: "name", message: `must match the URL ("${urlName}") or be left out` });
  const r = validatePolicyDocument(urlName === undefined ? rest : { ...rest, name: urlName });
  if ("issues" in r) issues.push(...r.issues);
  const name = urlName ?? rest.name;
  if (issues.length > 0 || "issues" in r)
    throw invalid(
      typeof name === "string" && name !== "" ? `Invalid policy "${name}"` : "Invalid policy",
      issues,
    );
  return {
    doc: r.doc,
    expectVersion: expectVersion as number | undefined,
    draftId: draftId as number | undefined,
  };
}

/** The policies' strategy for the admin routes. */
export const policyAdmin: AdminKind<PolicyDocument> = {
  repository: (ctx) => ctx.repo.policies,
  collection: "/v1/admin/policies",
  files: "/v1/admin/policies",
  putCreated: 200,
  nameField: "name",
  writers: ["admin", "owner"],
  authorize: assertCanEditPolicy,
  view: (_ctx, r, hasDraft) => ({ ...recordView(r), hasDraft }),
  warnings: (ctx, doc) => policyWarnings(doc, ctx.counters.kind),
  importField: "policies",
  listView: (ctx, list) => ({
    revision: ctx.registry.currentRevision,
    policies: list.map((r) => ({
      ...recordView(r),
      hasDraft: ctx.registry.get(r.doc.name)?.draft !== undefined,
    })),
  }),
  written: (req, name, options) => documentFrom(req.body, name, options),
  // Named in its body: a missing or bad name is one problem among the others.
  created: (req) => documentFrom(req.body, undefined, { draft: false }).doc,
  imported(body) {
    const b = parseOr400(importRequestSchema, body, "Invalid import");
    const r = validatePolicyList(b.policies);
    if ("issues" in r) throw invalid("Import refused, nothing was changed", r.issues);
    return { docs: r.docs, prune: b.prune ?? false, dryRun: b.dryRun ?? false };
  },
  parseFile: parsePolicyFile,
  exported(req, reply, list) {
    const q = parseOr400(exportQuery, req.query, "Invalid query");
    if (q.format === "json") return { version: 1, policies: list };
    return sendYaml(reply, exportPolicyFile(list));
  },
};
