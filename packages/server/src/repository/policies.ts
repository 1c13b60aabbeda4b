/**
 * Policies as data with history: the enforced version of each policy, every published
 * version (kept after a delete, so any can be restored), the draft evaluated in shadow beside
 * it with its shadow counts, and the all-or-nothing import of a policy file.
 */
import type { VersionAction } from "@sluice/api";
import type { ExpressionBuilder, Selectable } from "kysely";
import { z } from "zod";
import { ApiError, invalid } from "../errors.js";
import type { DialectName } from "../db/migrations.js";
import type { Tables } from "../db/schema.js";
import { type PolicyDocument, sameDocument } from "../model.js";
import { type Db, type Tx, appendAudit, json, now, writeTransaction } from "./common.js";
import { checkAppsExist, missingApps } from "./grants.js";
import {
  type CorruptRecordError,
  algorithmColumn,
  appListShape,
  flagColumn,
  intColumn,
  jsonColumn,
  policyDocumentShape,
  policyOptionsShape,
  readEach,
  readRow,
  ruleShape,
  text,
} from "./rows.js";

/** A policy as stored, with its bookkeeping. */
export interface PolicyRecord {
  readonly doc: PolicyDocument;
  readonly version: number;
  readonly createdBy: string;
  readonly updatedBy: string;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** One kept version of a policy. */
export interface PolicyVersionRecord {
  readonly name: string;
  readonly version: number;
  readonly doc: PolicyDocument;
  readonly action: string;
  readonly createdBy: string;
  readonly createdAt: string;
}

/** A draft, evaluated in shadow beside the enforced version until promoted or discarded. */
export interface DraftRecord {
  readonly id: number;
  readonly name: string;
  readonly doc: PolicyDocument;
  readonly baseVersion: number;
  readonly createdBy: string;
  readonly createdAt: string;
}

/** What a draft would have done on live traffic. */
export interface DraftStats {
  /** Requests evaluated against the draft. */
  evaluated: number;
  /** Requests the draft would have denied. */
  wouldDeny: number;
  /** Of those, how many the enforced version allowed (the change in behaviour). */
  wouldDenyNewly: number;
  /** Requests the draft would have allowed but the enforced version denied. */
  wouldAllowNewly: number;
}

/** One change of an import: what happens to each policy. */
export interface ImportPlan {
  readonly create: string[];
  readonly update: string[];
  readonly unchanged: string[];
  readonly delete: string[];
}

/**
 * Every enforced policy and every draft, or those of the policies `only` names (read inside the
 * snapshot's transaction); corrupt rows are set aside in `corrupt` rather than thrown.
 */
export async function livePolicies(
  trx: Db | Tx,
  only?: readonly string[],
): Promise<{
  policies: PolicyRecord[];
  drafts: DraftRecord[];
  corrupt: CorruptRecordError[];
}> {
  if (only?.length === 0) return { policies: [], drafts: [], corrupt: [] };
  let policyRows = trx.selectFrom("policies").selectAll().orderBy("name");
  let draftRows = trx.selectFrom("policy_drafts").selectAll();
  if (only) {
    policyRows = policyRows.where("name", "in", only);
    draftRows = draftRows.where("policy_name", "in", only);
  }
  const policies = readEach(await policyRows.execute(), toPolicyRecord);
  const drafts = readEach(await draftRows.execute(), toDraftRecord);
  return {
    policies: policies.records,
    drafts: drafts.records,
    corrupt: [...policies.corrupt, ...drafts.corrupt],
  };
}

/** Policies, their versions, drafts and imports. */
export class PolicyRepository {
  constructor(
    private readonly db: Db,
    private readonly dialect: DialectName,
  ) {}

  /** Every policy, by name. */
  async listPolicies(): Promise<PolicyRecord[]> {
    const rows = await this.db.selectFrom("policies").selectAll().orderBy("name").execute();
    return rows.map(toPolicyRecord);
  }

  /** One policy, or undefined. */
  async getPolicy(name: string, db: Db | Tx = this.db): Promise<PolicyRecord | undefined> {
    const row = await db
      .selectFrom("policies")
      .selectAll()
      .where("name", "=", name)
      .executeTakeFirst();
    return row && toPolicyRecord(row);
  }

  /** Every kept version of a policy, newest first. */
  async listVersions(name: string): Promise<PolicyVersionRecord[]> {
    const rows = await this.db
      .selectFrom("policy_versions")
      .selectAll()
      .where("policy_name", "=", name)
      .orderBy("version", "desc")
      .execute();
    return rows.map(toVersionRecord);
  }

  /** One kept version, or undefined. */
  async getVersion(
    name: string,
    version: number,
    db: Db | Tx = this.db,
  ): Promise<PolicyVersionRecord | undefined> {
    const row = await db
      .selectFrom("policy_versions")
      .selectAll()
      .where("policy_name", "=", name)
      .where("version", "=", version)
      .executeTakeFirst();
    return row && toVersionRecord(row);
  }

  /** The policy's draft, or undefined. */
  async getDraft(name: string, db: Db | Tx = this.db): Promise<DraftRecord | undefined> {
    const row = await db
      .selectFrom("policy_drafts")
      .selectAll()
      .where("policy_name", "=", name)
      .executeTakeFirst();
    return row && toDraftRecord(row);
  }

  /** A draft's shadow counts, summed over every node (zeros before any node reported). */
  async getDraftStats(draftId: number): Promise<DraftStats> {
    const r = await this.db
      .selectFrom("draft_stats")
      .selectAll()
      .where("draft_id", "=", draftId)
      .executeTakeFirst();
    return {
      evaluated: Number(r?.evaluated ?? 0),
      wouldDeny: Number(r?.would_deny ?? 0),
      wouldDenyNewly: Number(r?.would_deny_newly ?? 0),
      wouldAllowNewly: Number(r?.would_allow_newly ?? 0),
    };
  }

  /**
   * Adds one node's counts to a draft's totals (an upsert; it does not bump the revision, so
   * it makes no node reload).
   */
  async addDraftStats(draftId: number, d: DraftStats, db: Db | Tx = this.db): Promise<void> {
    const insert = db.insertInto("draft_stats").values({
      draft_id: draftId,
      evaluated: d.evaluated,
      would_deny: d.wouldDeny,
      would_deny_newly: d.wouldDenyNewly,
      would_allow_newly: d.wouldAllowNewly,
    });
    const sums = (eb: ExpressionBuilder<Tables, "draft_stats">) => ({
      evaluated: eb("draft_stats.evaluated", "+", d.evaluated),
      would_deny: eb("draft_stats.would_deny", "+", d.wouldDeny),
      would_deny_newly: eb("draft_stats.would_deny_newly", "+", d.wouldDenyNewly),
      would_allow_newly: eb("draft_stats.would_allow_newly", "+", d.wouldAllowNewly),
    });
    // The same upsert in each dialect's words: MySQL has no ON CONFLICT.
    if (this.dialect === "mysql") await insert.onDuplicateKeyUpdate(sums).execute();
    else await insert.onConflict((oc) => oc.column("draft_id").doUpdateSet(sums)).execute();
  }

  /**
   * Creates or replaces a policy with a validated document: a new version, unless the document
   * is the stored one (then nothing is written and the stored record is returned).
   * `expectVersion` (optimistic concurrency) fails with 409 when the stored version differs;
   * `mustNotExist` gives 409 when the policy exists. `check` runs inside the transaction with
   * the stored record, to refuse (throw) before anything is written.
   */
  async putPolicy(
    doc: PolicyDocument,
    actor: string,
    options: {
      expectVersion?: number | undefined;
      mustNotExist?: boolean;
      check?: (before: PolicyRecord | undefined) => void;
    } = {},
  ): Promise<PolicyRecord> {
    return writeTransaction(this.db, async (trx) => {
      await checkAppsExist(trx, doc.apps, "apps");
      const before = await this.getPolicy(doc.name, trx);
      options.check?.(before);
      if (options.mustNotExist && before) {
        throw new ApiError("conflict", `policy "${doc.name}" already exists`);
      }
      if (options.expectVersion !== undefined && before?.version !== options.expectVersion) {
        throw new ApiError(
          "conflict",
          `policy "${doc.name}" is at version ${before?.version ?? "none"}, not ${options.expectVersion}: reload and retry`,
        );
      }
      if (before && sameDocument(before.doc, doc)) return before;
      return writePolicy(trx, doc, before, actor, before ? "update" : "create");
    });
  }

  /** Deletes a policy (its versions are kept, so it can be restored). */
  async deletePolicy(
    name: string,
    actor: string,
    check?: (before: PolicyRecord) => void,
  ): Promise<void> {
    await writeTransaction(this.db, async (trx) => {
      const before = await this.getPolicy(name, trx);
      if (!before) throw new ApiError("policy_not_found", `policy "${name}" does not exist`);
      check?.(before);
      await trx.deleteFrom("policies").where("name", "=", name).execute();
      await dropDraft(trx, name);
      await appendAudit(trx, actor, "policy.delete", "policy", name, {
        version: before.version,
        before: before.doc,
      });
    });
  }

  /** Makes an earlier version the enforced one again (as a new version). Works for deleted policies too. */
  async restoreVersion(
    name: string,
    version: number,
    actor: string,
    check?: (before: PolicyRecord | undefined, restored: PolicyDocument) => void,
  ): Promise<PolicyRecord> {
    return writeTransaction(this.db, async (trx) => {
      const kept = await this.getVersion(name, version, trx);
      if (!kept) throw new ApiError("not_found", `policy "${name}" has no version ${version}`);
      const doc = kept.doc;
      const before = await this.getPolicy(name, trx);
      check?.(before, doc);
      const missing = await missingApps(trx, doc.apps);
      if (missing.length > 0) {
        throw invalid(`Cannot restore version ${version}`, [
          { path: "apps", message: `unknown app(s): ${missing.join(", ")}` },
        ]);
      }
      return writePolicy(trx, doc, before, actor, "restore", { restoredFrom: version });
    });
  }

  /**
   * Writes the policy's draft, based on the enforced version. Refused (409) when `expectVersion`
   * is given and the policy is at another version, and when a draft exists unless `draftId`
   * names it (so a second author never silently replaces the first one's draft); `draftId`
   * with no draft stored is refused too (the draft was promoted or discarded meanwhile).
   */
  async putDraft(
    doc: PolicyDocument,
    actor: string,
    options: {
      expectVersion?: number | undefined;
      draftId?: number | undefined;
      check?: (before: PolicyRecord) => void;
    } = {},
  ): Promise<DraftRecord> {
    return writeTransaction(this.db, async (trx) => {
      const live = await this.getPolicy(doc.name, trx);
      if (!live)
        throw new ApiError(
          "policy_not_found",
          `policy "${doc.name}" does not exist; create it before drafting a change`,
        );
      options.check?.(live);
      if (options.expectVersion !== undefined && live.version !== options.expectVersion) {
        throw new ApiError(
          "conflict",
          `policy "${doc.name}" is at version ${live.version}, not ${options.expectVersion}: reload it and draft from the current version`,
        );
      }
      const existing = await this.getDraft(doc.name, trx);
      if (existing && options.draftId !== existing.id) {
        throw new ApiError(
          "conflict",
          `policy "${doc.name}" already has a draft (id ${existing.id}, by ${existing.createdBy}, based on version ${existing.baseVersion})${options.draftId !== undefined ? `, not draft ${options.draftId}` : ""}: send "draftId": ${existing.id} to replace it, or discard it first`,
        );
      }
      if (!existing && options.draftId !== undefined) {
        throw new ApiError(
          "conflict",
          `policy "${doc.name}" has no draft ${options.draftId} any more (promoted or discarded): leave draftId out to write a new draft`,
        );
      }
      await checkAppsExist(trx, doc.apps, "apps");
      await dropDraft(trx, doc.name);
      await trx
        .insertInto("policy_drafts")
        .values({
          policy_name: doc.name,
          spec: json(doc),
          base_version: live.version,
          created_by: actor,
          created_at: now(),
        })
        .execute();
      // Before → after: the draft it replaces, or else the enforced version it is based on.
      await appendAudit(trx, actor, "policy.draft", "policy", doc.name, {
        baseVersion: live.version,
        ...(existing ? { replacedDraftId: existing.id } : {}),
        before: existing ? existing.doc : live.doc,
        after: doc,
      });
      const draft = await this.getDraft(doc.name, trx);
      return draft!;
    });
  }

  /** Discards the policy's draft. */
  async deleteDraft(
    name: string,
    actor: string,
    check?: (before: PolicyRecord) => void,
  ): Promise<void> {
    await writeTransaction(this.db, async (trx) => {
      const live = await this.getPolicy(name, trx);
      const draft = await this.getDraft(name, trx);
      if (!live || !draft) throw new ApiError("not_found", `policy "${name}" has no draft`);
      check?.(live);
      await dropDraft(trx, name);
      await appendAudit(trx, actor, "policy.draft.discard", "policy", name, {
        draftId: draft.id,
        baseVersion: draft.baseVersion,
        before: draft.doc,
      });
    });
  }

  /**
   * Makes the draft the enforced version (a new version) and removes it. Refused (409) when the
   * draft is stale — made from a version that is no longer the enforced one, so promoting it
   * would silently undo the changes since — and when `expectVersion` or `draftId` (what the
   * caller looked at) no longer match.
   */
  async promoteDraft(
    name: string,
    actor: string,
    options: {
      expectVersion?: number | undefined;
      draftId?: number | undefined;
      check?: (before: PolicyRecord, draft: PolicyDocument) => void;
    } = {},
  ): Promise<PolicyRecord> {
    return writeTransaction(this.db, async (trx) => {
      const live = await this.getPolicy(name, trx);
      const draft = await this.getDraft(name, trx);
      if (!live || !draft) throw new ApiError("not_found", `policy "${name}" has no draft`);
      options.check?.(live, draft.doc);
      if (options.draftId !== undefined && draft.id !== options.draftId) {
        throw new ApiError(
          "conflict",
          `the draft of policy "${name}" is now draft ${draft.id} (by ${draft.createdBy}), not ${options.draftId}: review it before promoting`,
        );
      }
      if (options.expectVersion !== undefined && live.version !== options.expectVersion) {
        throw new ApiError(
          "conflict",
          `policy "${name}" is at version ${live.version}, not ${options.expectVersion}: reload and retry`,
        );
      }
      if (draft.baseVersion !== live.version) {
        throw new ApiError(
          "conflict",
          `the draft of policy "${name}" was made from version ${draft.baseVersion}, but version ${live.version} is enforced now: promoting it would undo the changes since. Write the draft again from version ${live.version} (PUT …/draft with "draftId": ${draft.id}), or discard it`,
        );
      }
      await checkAppsExist(trx, draft.doc.apps, "apps");
      await dropDraft(trx, name);
      return writePolicy(trx, draft.doc, live, actor, "promote", {
        draftId: draft.id,
        baseVersion: draft.baseVersion,
      });
    });
  }

  /**
   * What importing `docs` would do (with `prune`, policies absent from `docs` are deleted);
   * refused as the import would be when an app is unknown.
   */
  async planImport(docs: readonly PolicyDocument[], prune: boolean): Promise<ImportPlan> {
    await checkImportApps(this.db, docs);
    const current = new Map((await this.listPolicies()).map((p) => [p.doc.name, p]));
    return planFor(current, docs, prune);
  }

  /**
   * Imports validated documents in one transaction: creates, updates (only what changed) and,
   * with `prune`, deletes the rest. Any failure (an unknown app, say) writes nothing.
   */
  importPolicies(
    docs: readonly PolicyDocument[],
    actor: string,
    options: { prune?: boolean } = {},
  ): Promise<ImportPlan> {
    return writeTransaction(this.db, (trx) => importPoliciesIn(trx, docs, actor, options));
  }
}

/**
 * Imports validated documents inside a write transaction (see
 * {@link PolicyRepository.importPolicies}); throws, writing nothing, when an app is unknown.
 */
export async function importPoliciesIn(
  trx: Tx,
  docs: readonly PolicyDocument[],
  actor: string,
  options: { prune?: boolean } = {},
): Promise<ImportPlan> {
  await checkImportApps(trx, docs);
  const rows = await trx.selectFrom("policies").selectAll().execute();
  const current = new Map(rows.map((r) => [r.name, toPolicyRecord(r)]));
  const plan = planFor(current, docs, options.prune ?? false);
  for (const d of docs) {
    const before = current.get(d.name);
    if (before && sameDocument(before.doc, d)) continue;
    await writePolicy(trx, d, before, actor, "import");
  }
  for (const name of plan.delete) {
    await trx.deleteFrom("policies").where("name", "=", name).execute();
    await dropDraft(trx, name);
    const before = current.get(name);
    await appendAudit(trx, actor, "policy.delete", "policy", name, {
      via: "import",
      version: before?.version,
      before: before?.doc,
    });
  }
  return plan;
}

/** Refuses an import (or its dry run) that grants a policy to an app that does not exist. */
async function checkImportApps(db: Db | Tx, docs: readonly PolicyDocument[]): Promise<void> {
  const issues = [];
  for (const [i, d] of docs.entries()) {
    const missing = await missingApps(db, d.apps);
    if (missing.length > 0)
      issues.push({
        path: `policies.${i}.apps`,
        message: `unknown app(s): ${missing.join(", ")}`,
      });
  }
  if (issues.length > 0) throw invalid("Import refused, nothing was changed", issues);
}

/** Writes the enforced row and a new version, and audits the change. */
async function writePolicy(
  trx: Tx,
  doc: PolicyDocument,
  before: PolicyRecord | undefined,
  actor: string,
  action: VersionAction,
  extra: Record<string, unknown> = {},
): Promise<PolicyRecord> {
  const at = now();
  const last = await trx
    .selectFrom("policy_versions")
    .select((eb) => eb.fn.max("version").as("v"))
    .where("policy_name", "=", doc.name)
    .executeTakeFirst();
  const version = Number(last?.v ?? 0) + 1;
  const row = {
    name: doc.name,
    description: doc.description ?? "",
    algorithm: doc.algorithm ?? "gcra",
    rules: json(doc.rules),
    options: json({
      ...(doc.blockDuration !== undefined ? { blockDuration: doc.blockDuration } : {}),
      ...(doc.onStoreError !== undefined ? { onStoreError: doc.onStoreError } : {}),
      ...(doc.insuranceInstances !== undefined
        ? { insuranceInstances: doc.insuranceInstances }
        : {}),
    }),
    apps: json(doc.apps),
    enabled: doc.enabled ? 1 : 0,
    shadow: doc.shadow ? 1 : 0,
    updated_by: actor,
    updated_at: at,
    version,
  };
  if (before) {
    await trx.updateTable("policies").set(row).where("name", "=", doc.name).execute();
  } else {
    await trx
      .insertInto("policies")
      .values({ ...row, created_by: actor, created_at: at })
      .execute();
  }
  await trx
    .insertInto("policy_versions")
    .values({
      policy_name: doc.name,
      version,
      spec: json(doc),
      action,
      created_by: actor,
      created_at: at,
    })
    .execute();
  await appendAudit(trx, actor, `policy.${action}`, "policy", doc.name, {
    version,
    ...extra,
    ...(before ? { before: before.doc } : {}),
    after: doc,
  });
  return {
    doc,
    version,
    createdBy: before?.createdBy ?? actor,
    createdAt: before?.createdAt ?? at,
    updatedBy: actor,
    updatedAt: at,
  };
}

/** Removes a policy's draft and its shadow counts. */
async function dropDraft(trx: Tx, name: string): Promise<void> {
  const ids = trx.selectFrom("policy_drafts").select("id").where("policy_name", "=", name);
  await trx.deleteFrom("draft_stats").where("draft_id", "in", ids).execute();
  await trx.deleteFrom("policy_drafts").where("policy_name", "=", name).execute();
}

function planFor(
  current: Map<string, PolicyRecord>,
  docs: readonly PolicyDocument[],
  prune: boolean,
): ImportPlan {
  const plan: ImportPlan = { create: [], update: [], unchanged: [], delete: [] };
  const names = new Set(docs.map((d) => d.name));
  for (const d of docs) {
    const before = current.get(d.name);
    if (!before) plan.create.push(d.name);
    else if (sameDocument(before.doc, d)) plan.unchanged.push(d.name);
    else plan.update.push(d.name);
  }
  if (prune) for (const name of current.keys()) if (!names.has(name)) plan.delete.push(name);
  return plan;
}

const policyRow = z.object({
  name: text,
  description: text,
  algorithm: algorithmColumn,
  rules: jsonColumn(z.array(ruleShape).min(1, { error: "must hold at least one rule" })),
  options: jsonColumn(policyOptionsShape),
  apps: jsonColumn(appListShape),
  enabled: flagColumn,
  shadow: flagColumn,
  created_by: text,
  updated_by: text,
  created_at: text,
  updated_at: text,
  version: intColumn,
});

function toPolicyRecord(row: Tables["policies"]): PolicyRecord {
  const r = readRow("policies", { name: row.name }, policyRow, row);
  const o = r.options;
  // Built field by field: nothing stored in `options` can stand in for the name or the rules.
  const doc: PolicyDocument = {
    name: r.name,
    description: r.description,
    algorithm: r.algorithm,
    rules: r.rules,
    ...(o.blockDuration !== undefined ? { blockDuration: o.blockDuration } : {}),
    ...(o.onStoreError !== undefined ? { onStoreError: o.onStoreError } : {}),
    ...(o.insuranceInstances !== undefined ? { insuranceInstances: o.insuranceInstances } : {}),
    shadow: r.shadow,
    apps: r.apps,
    enabled: r.enabled,
  };
  return {
    doc,
    version: r.version,
    createdBy: r.created_by,
    updatedBy: r.updated_by,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

const versionRow = z.object({
  policy_name: text,
  version: intColumn,
  spec: jsonColumn(policyDocumentShape),
  action: text,
  created_by: text,
  created_at: text,
});

function toVersionRecord(row: Tables["policy_versions"]): PolicyVersionRecord {
  const key = { policy_name: row.policy_name, version: row.version };
  const r = readRow("policy_versions", key, versionRow, row);
  return {
    name: r.policy_name,
    version: r.version,
    doc: r.spec,
    action: r.action,
    createdBy: r.created_by,
    createdAt: r.created_at,
  };
}

const draftRow = z.object({
  id: intColumn,
  policy_name: text,
  spec: jsonColumn(policyDocumentShape),
  base_version: intColumn,
  created_by: text,
  created_at: text,
});

function toDraftRecord(row: Selectable<Tables["policy_drafts"]>): DraftRecord {
  const r = readRow("policy_drafts", { policy_name: row.policy_name }, draftRow, row);
  return {
    id: r.id,
    name: r.policy_name,
    doc: r.spec,
    baseVersion: r.base_version,
    createdBy: r.created_by,
    createdAt: r.created_at,
  };
}
