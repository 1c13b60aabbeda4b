/**
 * Envoy descriptor limits as data with history, beside the policies: one document per domain
 * (the reference rate limit service's file, checked by envoy/config.ts), every published version
 * (kept after a delete, so any can be restored), the draft evaluated in shadow beside it with its
 * shadow counts, and the all-or-nothing import of reference-format files. Every write is one
 * transaction that bumps the revision and appends to the audit log (target type `envoy_domain`).
 */
import type { VersionAction } from "@sluice/api";
import type { ExpressionBuilder, Selectable } from "kysely";
import { z } from "zod";
import type { DialectName } from "../db/migrations.js";
import type { Tables } from "../db/schema.js";
import {
  type EnvoyDomainDocument,
  sameEnvoyDocument,
  validateEnvoyDocument,
} from "../envoy/config.js";
import { ApiError } from "../errors.js";
import {
  type Db,
  type LoadedKind,
  type Tx,
  appendAudit,
  json,
  now,
  writeTransaction,
} from "./common.js";
import type { DraftStats } from "./policies.js";
import { CorruptRecordError, intColumn, jsonColumn, readEach, readRow, text } from "./rows.js";

/** A domain as stored, with its bookkeeping. */
export interface EnvoyDomainRecord {
  readonly doc: EnvoyDomainDocument;
  readonly version: number;
  readonly createdBy: string;
  readonly updatedBy: string;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** One kept version of a domain. */
export interface EnvoyDomainVersionRecord {
  readonly domain: string;
  readonly version: number;
  readonly doc: EnvoyDomainDocument;
  readonly action: string;
  readonly createdBy: string;
  readonly createdAt: string;
}

/** A domain's draft, evaluated in shadow beside the enforced version until promoted or discarded. */
export interface EnvoyDraftRecord {
  readonly id: number;
  readonly domain: string;
  readonly doc: EnvoyDomainDocument;
  readonly baseVersion: number;
  readonly createdBy: string;
  readonly createdAt: string;
}

/** What an import does to each domain. */
export interface EnvoyImportPlan {
  readonly create: string[];
  readonly update: string[];
  readonly unchanged: string[];
  readonly delete: string[];
}

const AUDIT_TARGET: LoadedKind = "envoy_domain";

/**
 * Every enforced domain and every draft, or those of the domains `only` names (inside the
 * snapshot's transaction); corrupt rows set aside.
 */
export async function liveEnvoyDomains(
  trx: Db | Tx,
  only?: readonly string[],
): Promise<{
  domains: EnvoyDomainRecord[];
  drafts: EnvoyDraftRecord[];
  corrupt: CorruptRecordError[];
}> {
  if (only?.length === 0) return { domains: [], drafts: [], corrupt: [] };
  let domainRows = trx.selectFrom("envoy_domains").selectAll().orderBy("domain");
  let draftRows = trx.selectFrom("envoy_domain_drafts").selectAll();
  if (only) {
    domainRows = domainRows.where("domain", "in", only);
    draftRows = draftRows.where("domain", "in", only);
  }
  const domains = readEach(await domainRows.execute(), toDomainRecord);
  const drafts = readEach(await draftRows.execute(), toDraftRecord);
  return {
    domains: domains.records,
    drafts: drafts.records,
    corrupt: [...domains.corrupt, ...drafts.corrupt],
  };
}

/** Envoy domains, their versions, drafts and imports. */
export class EnvoyRepository {
  constructor(
    private readonly db: Db,
    private readonly dialect: DialectName,
  ) {}

  /** Every domain, by name. */
  async listDomains(): Promise<EnvoyDomainRecord[]> {
    const rows = await this.db.selectFrom("envoy_domains").selectAll().orderBy("domain").execute();
    return rows.map(toDomainRecord);
  }

  /** One domain, or undefined. */
  async getDomain(domain: string, db: Db | Tx = this.db): Promise<EnvoyDomainRecord | undefined> {
    const row = await db
      .selectFrom("envoy_domains")
      .selectAll()
      .where("domain", "=", domain)
      .executeTakeFirst();
    return row && toDomainRecord(row);
  }

  /** Every kept version of a domain, newest first. */
  async listVersions(domain: string): Promise<EnvoyDomainVersionRecord[]> {
    const rows = await this.db
      .selectFrom("envoy_domain_versions")
      .selectAll()
      .where("domain", "=", domain)
      .orderBy("version", "desc")
      .execute();
    return rows.map(toVersionRecord);
  }

  /** One kept version, or undefined. */
  async getVersion(
    domain: string,
    version: number,
    db: Db | Tx = this.db,
  ): Promise<EnvoyDomainVersionRecord | undefined> {
    const row = await db
      .selectFrom("envoy_domain_versions")
      .selectAll()
      .where("domain", "=", domain)
      .where("version", "=", version)
      .executeTakeFirst();
    return row && toVersionRecord(row);
  }

  /** The domain's draft, or undefined. */
  async getDraft(domain: string, db: Db | Tx = this.db): Promise<EnvoyDraftRecord | undefined> {
    const row = await db
      .selectFrom("envoy_domain_drafts")
      .selectAll()
      .where("domain", "=", domain)
      .executeTakeFirst();
    return row && toDraftRecord(row);
  }

  /** A draft's shadow counts, summed over every node. */
  async getDraftStats(draftId: number): Promise<DraftStats> {
    const r = await this.db
      .selectFrom("envoy_draft_stats")
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

  /** Adds one node's counts to a draft's totals (an upsert that bumps no revision). */
  async addDraftStats(draftId: number, d: DraftStats): Promise<void> {
    const insert = this.db.insertInto("envoy_draft_stats").values({
      draft_id: draftId,
      evaluated: d.evaluated,
      would_deny: d.wouldDeny,
      would_deny_newly: d.wouldDenyNewly,
      would_allow_newly: d.wouldAllowNewly,
    });
    const sums = (eb: ExpressionBuilder<Tables, "envoy_draft_stats">) => ({
      evaluated: eb("envoy_draft_stats.evaluated", "+", d.evaluated),
      would_deny: eb("envoy_draft_stats.would_deny", "+", d.wouldDeny),
      would_deny_newly: eb("envoy_draft_stats.would_deny_newly", "+", d.wouldDenyNewly),
      would_allow_newly: eb("envoy_draft_stats.would_allow_newly", "+", d.wouldAllowNewly),
    });
    if (this.dialect === "mysql") await insert.onDuplicateKeyUpdate(sums).execute();
    else await insert.onConflict((oc) => oc.column("draft_id").doUpdateSet(sums)).execute();
  }

  /**
   * Creates or replaces a domain with a validated document: a new version, unless the document
   * is the stored one. `expectVersion` gives 409 when the stored version differs, `mustNotExist`
   * 409 when the domain exists.
   */
  async putDomain(
    doc: EnvoyDomainDocument,
    actor: string,
    options: { expectVersion?: number | undefined; mustNotExist?: boolean } = {},
  ): Promise<EnvoyDomainRecord> {
    return writeTransaction(this.db, async (trx) => {
      const before = await this.getDomain(doc.domain, trx);
      if (options.mustNotExist && before)
        throw new ApiError("conflict", `domain "${doc.domain}" already exists`);
      if (options.expectVersion !== undefined && before?.version !== options.expectVersion) {
        throw new ApiError(
          "conflict",
          `domain "${doc.domain}" is at version ${before?.version ?? "none"}, not ${options.expectVersion}: reload and retry`,
        );
      }
      if (before && sameEnvoyDocument(before.doc, doc)) return before;
      return writeDomain(trx, doc, before, actor, before ? "update" : "create");
    });
  }

  /** Deletes a domain (its versions are kept, so it can be restored) and its draft. */
  async deleteDomain(domain: string, actor: string): Promise<void> {
    await writeTransaction(this.db, async (trx) => {
      const before = await this.getDomain(domain, trx);
      if (!before) throw new ApiError("not_found", `domain "${domain}" does not exist`);
      await trx.deleteFrom("envoy_domains").where("domain", "=", domain).execute();
      await dropDraft(trx, domain);
      await appendAudit(trx, actor, "envoy.delete", AUDIT_TARGET, domain, {
        version: before.version,
        before: before.doc,
      });
    });
  }

  /** Makes an earlier version the enforced one again (as a new version); works after a delete too. */
  async restoreVersion(domain: string, version: number, actor: string): Promise<EnvoyDomainRecord> {
    return writeTransaction(this.db, async (trx) => {
      const kept = await this.getVersion(domain, version, trx);
      if (!kept) throw new ApiError("not_found", `domain "${domain}" has no version ${version}`);
      const before = await this.getDomain(domain, trx);
      return writeDomain(trx, kept.doc, before, actor, "restore", { restoredFrom: version });
    });
  }

  /**
   * Writes the domain's draft, based on the enforced version. Refused (409) when `expectVersion`
   * differs, and when a draft exists unless `draftId` names it (or `draftId` names one that is gone).
   */
  async putDraft(
    doc: EnvoyDomainDocument,
    actor: string,
    options: { expectVersion?: number | undefined; draftId?: number | undefined } = {},
  ): Promise<EnvoyDraftRecord> {
    return writeTransaction(this.db, async (trx) => {
      const live = await this.getDomain(doc.domain, trx);
      if (!live)
        throw new ApiError(
          "not_found",
          `domain "${doc.domain}" does not exist; create it before drafting a change`,
        );
      if (options.expectVersion !== undefined && live.version !== options.expectVersion) {
        throw new ApiError(
          "conflict",
          `domain "${doc.domain}" is at version ${live.version}, not ${options.expectVersion}: reload it and draft from the current version`,
        );
      }
      const existing = await this.getDraft(doc.domain, trx);
      if (existing && options.draftId !== existing.id) {
        throw new ApiError(
          "conflict",
          `domain "${doc.domain}" already has a draft (id ${existing.id}, by ${existing.createdBy}, based on version ${existing.baseVersion}): send "draftId": ${existing.id} to replace it, or discard it first`,
        );
      }
      if (!existing && options.draftId !== undefined) {
        throw new ApiError(
          "conflict",
          `domain "${doc.domain}" has no draft ${options.draftId} any more (promoted or discarded): leave draftId out to write a new draft`,
        );
      }
      await dropDraft(trx, doc.domain);
      await trx
        .insertInto("envoy_domain_drafts")
        .values({
          domain: doc.domain,
          spec: json(doc),
          base_version: live.version,
          created_by: actor,
          created_at: now(),
        })
        .execute();
      await appendAudit(trx, actor, "envoy.draft", AUDIT_TARGET, doc.domain, {
        baseVersion: live.version,
        ...(existing ? { replacedDraftId: existing.id } : {}),
        draft: doc,
      });
      return (await this.getDraft(doc.domain, trx))!;
    });
  }

  /** Discards the domain's draft. */
  async deleteDraft(domain: string, actor: string): Promise<void> {
    await writeTransaction(this.db, async (trx) => {
      const draft = await this.getDraft(domain, trx);
      if (!draft) throw new ApiError("not_found", `domain "${domain}" has no draft`);
      await dropDraft(trx, domain);
      await appendAudit(trx, actor, "envoy.draft.discard", AUDIT_TARGET, domain, {
        draftId: draft.id,
      });
    });
  }

  /**
   * Makes the draft the enforced version and removes it. Refused (409) when the draft was made
   * from a version that is no longer enforced, or when `expectVersion`/`draftId` no longer match.
   */
  async promoteDraft(
    domain: string,
    actor: string,
    options: { expectVersion?: number | undefined; draftId?: number | undefined } = {},
  ): Promise<EnvoyDomainRecord> {
    return writeTransaction(this.db, async (trx) => {
      const live = await this.getDomain(domain, trx);
      const draft = await this.getDraft(domain, trx);
      if (!live || !draft) throw new ApiError("not_found", `domain "${domain}" has no draft`);
      if (options.draftId !== undefined && draft.id !== options.draftId) {
        throw new ApiError(
          "conflict",
          `the draft of domain "${domain}" is now draft ${draft.id} (by ${draft.createdBy}), not ${options.draftId}: review it before promoting`,
        );
      }
      if (options.expectVersion !== undefined && live.version !== options.expectVersion) {
        throw new ApiError(
          "conflict",
          `domain "${domain}" is at version ${live.version}, not ${options.expectVersion}: reload and retry`,
        );
      }
      if (draft.baseVersion !== live.version) {
        throw new ApiError(
          "conflict",
          `the draft of domain "${domain}" was made from version ${draft.baseVersion}, but version ${live.version} is enforced now: promoting it would undo the changes since. Write the draft again from version ${live.version}, or discard it`,
        );
      }
      await dropDraft(trx, domain);
      return writeDomain(trx, draft.doc, live, actor, "promote", {
        draftId: draft.id,
        baseVersion: draft.baseVersion,
      });
    });
  }

  /** What importing `docs` would do (with `prune`, domains absent from `docs` are deleted). */
  async planImport(docs: readonly EnvoyDomainDocument[], prune: boolean): Promise<EnvoyImportPlan> {
    const current = new Map((await this.listDomains()).map((d) => [d.doc.domain, d]));
    return planFor(current, docs, prune);
  }

  /** Imports validated documents in one transaction (see {@link importEnvoyDomainsIn}). */
  importDomains(
    docs: readonly EnvoyDomainDocument[],
    actor: string,
    options: { prune?: boolean } = {},
  ): Promise<EnvoyImportPlan> {
    return writeTransaction(this.db, (trx) => importEnvoyDomainsIn(trx, docs, actor, options));
  }
}

/**
 * Imports validated documents inside a write transaction: creates, updates (only what changed)
 * and, with `prune`, deletes the domains absent from `docs`.
 */
export async function importEnvoyDomainsIn(
  trx: Tx,
  docs: readonly EnvoyDomainDocument[],
  actor: string,
  options: { prune?: boolean } = {},
): Promise<EnvoyImportPlan> {
  const rows = await trx.selectFrom("envoy_domains").selectAll().execute();
  const current = new Map(rows.map((r) => [r.domain, toDomainRecord(r)]));
  const plan = planFor(current, docs, options.prune ?? false);
  for (const d of docs) {
    const before = current.get(d.domain);
    if (before && sameEnvoyDocument(before.doc, d)) continue;
    await writeDomain(trx, d, before, actor, "import");
  }
  for (const domain of plan.delete) {
    const before = current.get(domain);
    await trx.deleteFrom("envoy_domains").where("domain", "=", domain).execute();
    await dropDraft(trx, domain);
    await appendAudit(trx, actor, "envoy.delete", AUDIT_TARGET, domain, {
      via: "import",
      version: before?.version,
      before: before?.doc,
    });
  }
  return plan;
}

/** Writes the enforced row and a new version, and audits the change. */
async function writeDomain(
  trx: Tx,
  doc: EnvoyDomainDocument,
  before: EnvoyDomainRecord | undefined,
  actor: string,
  action: VersionAction,
  extra: Record<string, unknown> = {},
): Promise<EnvoyDomainRecord> {
  const at = now();
  const last = await trx
    .selectFrom("envoy_domain_versions")
    .select((eb) => eb.fn.max("version").as("v"))
    .where("domain", "=", doc.domain)
    .executeTakeFirst();
  const version = Number(last?.v ?? 0) + 1;
  const row = { spec: json(doc), updated_by: actor, updated_at: at, version };
  if (before) {
    await trx.updateTable("envoy_domains").set(row).where("domain", "=", doc.domain).execute();
  } else {
    await trx
      .insertInto("envoy_domains")
      .values({ ...row, domain: doc.domain, created_by: actor, created_at: at })
      .execute();
  }
  await trx
    .insertInto("envoy_domain_versions")
    .values({
      domain: doc.domain,
      version,
      spec: row.spec,
      action,
      created_by: actor,
      created_at: at,
    })
    .execute();
  await appendAudit(trx, actor, `envoy.${action}`, AUDIT_TARGET, doc.domain, {
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

/** Removes a domain's draft and its shadow counts. */
async function dropDraft(trx: Tx, domain: string): Promise<void> {
  const ids = trx.selectFrom("envoy_domain_drafts").select("id").where("domain", "=", domain);
  await trx.deleteFrom("envoy_draft_stats").where("draft_id", "in", ids).execute();
  await trx.deleteFrom("envoy_domain_drafts").where("domain", "=", domain).execute();
}

function planFor(
  current: Map<string, EnvoyDomainRecord>,
  docs: readonly EnvoyDomainDocument[],
  prune: boolean,
): EnvoyImportPlan {
  const plan: EnvoyImportPlan = { create: [], update: [], unchanged: [], delete: [] };
  const names = new Set(docs.map((d) => d.domain));
  for (const d of docs) {
    const before = current.get(d.domain);
    if (!before) plan.create.push(d.domain);
    else if (sameEnvoyDocument(before.doc, d)) plan.unchanged.push(d.domain);
    else plan.update.push(d.domain);
  }
  if (prune) for (const name of current.keys()) if (!names.has(name)) plan.delete.push(name);
  return plan;
}

/** A stored domain document: it must still pass the checks it passed when written. */
const documentShape = z.unknown().transform((value, ctx): EnvoyDomainDocument => {
  const r = validateEnvoyDocument(value);
  if ("issues" in r) {
    for (const i of r.issues)
      ctx.addIssue({ code: "custom", message: i.path ? `${i.path}: ${i.message}` : i.message });
    return z.NEVER;
  }
  return r.doc;
});

const domainRow = z.object({
  domain: text,
  spec: jsonColumn(documentShape),
  created_by: text,
  updated_by: text,
  created_at: text,
  updated_at: text,
  version: intColumn,
});

function toDomainRecord(row: Tables["envoy_domains"]): EnvoyDomainRecord {
  const r = readRow("envoy_domains", { domain: row.domain }, domainRow, row);
  if (r.spec.domain !== r.domain)
    throw new CorruptRecordError("envoy_domains", { domain: row.domain }, [
      { path: "spec.domain", message: `names domain "${r.spec.domain}", not "${r.domain}"` },
    ]);
  return {
    doc: r.spec,
    version: r.version,
    createdBy: r.created_by,
    updatedBy: r.updated_by,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

const versionRow = z.object({
  domain: text,
  version: intColumn,
  spec: jsonColumn(documentShape),
  action: text,
  created_by: text,
  created_at: text,
});

function toVersionRecord(row: Tables["envoy_domain_versions"]): EnvoyDomainVersionRecord {
  const r = readRow(
    "envoy_domain_versions",
    { domain: row.domain, version: row.version },
    versionRow,
    row,
  );
  return {
    domain: r.domain,
    version: r.version,
    doc: r.spec,
    action: r.action,
    createdBy: r.created_by,
    createdAt: r.created_at,
  };
}

const draftRow = z.object({
  id: intColumn,
  domain: text,
  spec: jsonColumn(documentShape),
  base_version: intColumn,
  created_by: text,
  created_at: text,
});

function toDraftRecord(row: Selectable<Tables["envoy_domain_drafts"]>): EnvoyDraftRecord {
  const r = readRow("envoy_domain_drafts", { domain: row.domain }, draftRow, row);
  return {
    id: r.id,
    domain: r.domain,
    doc: r.spec,
    baseVersion: r.base_version,
    createdBy: r.created_by,
    createdAt: r.created_at,
  };
}
