/**
 * Versioned documents: whatever is configured — policies, Envoy domains, the next kind — is data
 * with history, kept by this one repository, parameterised by the kind (a small
 * {@link DocumentKind}: its name, how a stored document is checked and compared, and what it
 * refers to). For each document it keeps:
 *
 * - the enforced version (`documents`);
 * - every published version, kept after a delete, so any can be restored (`document_versions`);
 * - at most one draft, evaluated in shadow beside the enforced version until promoted or
 *   discarded, with its shadow counts summed over every node (`document_drafts`, `draft_stats`);
 *
 * and the all-or-nothing import of many documents. Every write is one transaction that bumps
 * the revision and audits each document it touches by name (target type: the kind), before →
 * after, which also notes it in the change log that nodes reload from (./common.ts).
 */
import type { VersionAction } from "@sluice/api";
import type { ExpressionBuilder, Selectable } from "kysely";
import type { ValidationIssue } from "sluice";
import { z } from "zod";
import type { DialectName } from "../db/migrations.js";
import type { Tables } from "../db/schema.js";
import { ApiError, type ApiErrorCode, invalid } from "../errors.js";
import {
  type Db,
  type LoadedKind,
  type Tx,
  appendAudit,
  json,
  now,
  writeTransaction,
} from "./common.js";
import { CorruptRecordError, intColumn, jsonColumn, readEach, readRow, text } from "./rows.js";

/** Where a write checks a document's references (see {@link DocumentKind.checkReferences}). */
export type ReferenceCheck =
  | { readonly op: "write" }
  | { readonly op: "restore"; readonly version: number }
  | { readonly op: "import"; readonly index: number };

/**
 * What the repository needs to know of a kind of document: its strategy. A new kind is one of
 * these, not a copy of the repository.
 */
export interface DocumentKind<D> {
  /** The kind as stored (`documents.kind`), audited (target type) and noted in `changes`. */
  readonly kind: LoadedKind;
  /** The first word of its audit actions: `policy` for `policy.update`. */
  readonly actions: "policy" | "envoy";
  /** Its noun in messages: `policy "api" does not exist`. */
  readonly noun: string;
  /** The error code of the answer for a document that does not exist. */
  readonly notFound: ApiErrorCode;
  /** A stored document, checked when read back (its shape; values are the kind's to judge). */
  readonly shape: z.ZodType<D>;
  /** The document's name (its key within the kind). */
  nameOf(doc: D): string;
  /** True when two documents say the same thing (a write of the same document is no change). */
  same(a: D, b: D): boolean;
  /**
   * Refuses (throws) a document whose references do not exist, inside the write's transaction
   * (a policy's apps). Absent: the kind refers to nothing.
   */
  checkReferences?(trx: Db | Tx, doc: D, at: ReferenceCheck): Promise<void>;
  /** What goes with a deleted document, in its delete's transaction (a policy's overrides). */
  onDelete?(trx: Tx, name: string): Promise<void>;
}

/** A document as enforced, with its bookkeeping. */
export interface DocumentRecord<D> {
  readonly doc: D;
  readonly version: number;
  readonly createdBy: string;
  readonly updatedBy: string;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** One kept version of a document. */
export interface VersionRecord<D> {
  readonly name: string;
  readonly version: number;
  readonly doc: D;
  /** What made it: `create`, `update`, `restore`, `promote`, `import`. */
  readonly action: string;
  readonly createdBy: string;
  readonly createdAt: string;
}

/** A draft, evaluated in shadow beside the enforced version until promoted or discarded. */
export interface DraftRecord<D> {
  /** Unique over every kind: it names the draft's counters (`sluice.draft.<id>`) and its counts. */
  readonly id: number;
  readonly name: string;
  readonly doc: D;
  /** The enforced version the draft was written against. */
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

/** What an import does to each document. */
export interface ImportPlan {
  readonly create: string[];
  readonly update: string[];
  readonly unchanged: string[];
  readonly delete: string[];
}

/** Options of a write that replaces or creates a document. */
export interface PutOptions<D> {
  /** 409 unless the stored version is this one (optimistic concurrency). */
  readonly expectVersion?: number | undefined;
  /** 409 when the document exists. */
  readonly mustNotExist?: boolean;
  /** Runs in the transaction with the stored record, to refuse (throw) before anything is written. */
  readonly check?: (before: DocumentRecord<D> | undefined) => void;
}

/** Options of a draft write. */
export interface DraftOptions<D> {
  /** 409 unless the enforced version is this one (the draft's base). */
  readonly expectVersion?: number | undefined;
  /** The draft this one replaces: required when there is one, refused when there is none. */
  readonly draftId?: number | undefined;
  readonly check?: (before: DocumentRecord<D>) => void;
}

/** Options of a promotion. */
export interface PromoteOptions<D> {
  readonly expectVersion?: number | undefined;
  /** 409 unless the draft is still this one (the one reviewed). */
  readonly draftId?: number | undefined;
  readonly check?: (before: DocumentRecord<D>, draft: D) => void;
}

/**
 * Every enforced document of a kind and every draft, or those `only` names (read inside the
 * snapshot's transaction); corrupt rows are set aside in `corrupt` rather than thrown.
 */
export async function liveDocuments<D>(
  trx: Db | Tx,
  kind: DocumentKind<D>,
  only?: readonly string[],
): Promise<{
  documents: DocumentRecord<D>[];
  drafts: DraftRecord<D>[];
  corrupt: CorruptRecordError[];
}> {
  if (only?.length === 0) return { documents: [], drafts: [], corrupt: [] };
  let docRows = trx.selectFrom("documents").selectAll().where("kind", "=", kind.kind);
  let draftRows = trx.selectFrom("document_drafts").selectAll().where("kind", "=", kind.kind);
  if (only) {
    docRows = docRows.where("name", "in", only);
    draftRows = draftRows.where("name", "in", only);
  }
  const documents = readEach(await docRows.orderBy("name").execute(), (r) => toRecord(kind, r));
  const drafts = readEach(await draftRows.execute(), (r) => toDraft(kind, r));
  return {
    documents: documents.records,
    drafts: drafts.records,
    corrupt: [...documents.corrupt, ...drafts.corrupt],
  };
}

/** The documents of one kind: their versions, drafts and imports. */
export class DocumentRepository<D> {
  constructor(
    private readonly db: Db,
    readonly kind: DocumentKind<D>,
  ) {}

  private describe(name: string): string {
    return `${this.kind.noun} "${name}"`;
  }

  /** Every document, by name. */
  async list(): Promise<DocumentRecord<D>[]> {
    const rows = await this.db
      .selectFrom("documents")
      .selectAll()
      .where("kind", "=", this.kind.kind)
      .orderBy("name")
      .execute();
    return rows.map((r) => toRecord(this.kind, r));
  }

  /** One document, or undefined. */
  async get(name: string, db: Db | Tx = this.db): Promise<DocumentRecord<D> | undefined> {
    const row = await db
      .selectFrom("documents")
      .selectAll()
      .where("kind", "=", this.kind.kind)
      .where("name", "=", name)
      .executeTakeFirst();
    return row && toRecord(this.kind, row);
  }

  /** Every kept version of a document, newest first. */
  async listVersions(name: string): Promise<VersionRecord<D>[]> {
    const rows = await this.db
      .selectFrom("document_versions")
      .selectAll()
      .where("kind", "=", this.kind.kind)
      .where("name", "=", name)
      .orderBy("version", "desc")
      .execute();
    return rows.map((r) => toVersion(this.kind, r));
  }

  /** One kept version, or undefined. */
  async getVersion(
    name: string,
    version: number,
    db: Db | Tx = this.db,
  ): Promise<VersionRecord<D> | undefined> {
    const row = await db
      .selectFrom("document_versions")
      .selectAll()
      .where("kind", "=", this.kind.kind)
      .where("name", "=", name)
      .where("version", "=", version)
      .executeTakeFirst();
    return row && toVersion(this.kind, row);
  }

  /** The document's draft, or undefined. */
  async getDraft(name: string, db: Db | Tx = this.db): Promise<DraftRecord<D> | undefined> {
    const row = await db
      .selectFrom("document_drafts")
      .selectAll()
      .where("kind", "=", this.kind.kind)
      .where("name", "=", name)
      .executeTakeFirst();
    return row && toDraft(this.kind, row);
  }

  /**
   * Creates or replaces a document: a new version, unless the document is the stored one (then
   * nothing is written and the stored record is returned). See {@link PutOptions}.
   */
  put(doc: D, actor: string, options: PutOptions<D> = {}): Promise<DocumentRecord<D>> {
    const name = this.kind.nameOf(doc);
    return writeTransaction(this.db, async (trx) => {
      await this.kind.checkReferences?.(trx, doc, { op: "write" });
      const before = await this.get(name, trx);
      options.check?.(before);
      if (options.mustNotExist && before)
        throw new ApiError("conflict", `${this.describe(name)} already exists`);
      if (options.expectVersion !== undefined && before?.version !== options.expectVersion) {
        throw new ApiError(
          "conflict",
          `${this.describe(name)} is at version ${before?.version ?? "none"}, not ${options.expectVersion}: reload and retry`,
        );
      }
      if (before && this.kind.same(before.doc, doc)) return before;
      return writeVersion(trx, this.kind, doc, before, actor, before ? "update" : "create");
    });
  }

  /** Deletes a document and its draft; its versions are kept, so it can be restored. */
  async delete(
    name: string,
    actor: string,
    check?: (before: DocumentRecord<D>) => void,
  ): Promise<void> {
    await writeTransaction(this.db, async (trx) => {
      const before = await this.get(name, trx);
      if (!before) throw new ApiError(this.kind.notFound, `${this.describe(name)} does not exist`);
      check?.(before);
      await deleteDocument(trx, this.kind, name, before, actor);
    });
  }

  /** Makes an earlier version the enforced one again, as a new version; works after a delete too. */
  restore(
    name: string,
    version: number,
    actor: string,
    check?: (before: DocumentRecord<D> | undefined, restored: D) => void,
  ): Promise<DocumentRecord<D>> {
    return writeTransaction(this.db, async (trx) => {
      const kept = await this.getVersion(name, version, trx);
      if (!kept)
        throw new ApiError("not_found", `${this.describe(name)} has no version ${version}`);
      const before = await this.get(name, trx);
      check?.(before, kept.doc);
      await this.kind.checkReferences?.(trx, kept.doc, { op: "restore", version });
      return writeVersion(trx, this.kind, kept.doc, before, actor, "restore", {
        restoredFrom: version,
      });
    });
  }

  /**
   * Writes the document's draft, based on the enforced version. Refused (409) when
   * `expectVersion` is given and the document is at another version, and when a draft exists
   * unless `draftId` names it (so a second author never silently replaces the first one's
   * draft); `draftId` with no draft stored is refused too (promoted or discarded meanwhile).
   */
  putDraft(doc: D, actor: string, options: DraftOptions<D> = {}): Promise<DraftRecord<D>> {
    const name = this.kind.nameOf(doc);
    const what = this.describe(name);
    return writeTransaction(this.db, async (trx) => {
      const live = await this.get(name, trx);
      if (!live)
        throw new ApiError(
          this.kind.notFound,
          `${what} does not exist; create it before drafting a change`,
        );
      options.check?.(live);
      if (options.expectVersion !== undefined && live.version !== options.expectVersion) {
        throw new ApiError(
          "conflict",
          `${what} is at version ${live.version}, not ${options.expectVersion}: reload it and draft from the current version`,
        );
      }
      const existing = await this.getDraft(name, trx);
      if (existing && options.draftId !== existing.id) {
        throw new ApiError(
          "conflict",
          `${what} already has a draft (id ${existing.id}, by ${existing.createdBy}, based on version ${existing.baseVersion})${options.draftId !== undefined ? `, not draft ${options.draftId}` : ""}: send "draftId": ${existing.id} to replace it, or discard it first`,
        );
      }
      if (!existing && options.draftId !== undefined) {
        throw new ApiError(
          "conflict",
          `${what} has no draft ${options.draftId} any more (promoted or discarded): leave draftId out to write a new draft`,
        );
      }
      await this.kind.checkReferences?.(trx, doc, { op: "write" });
      await dropDraft(trx, this.kind, name);
      await trx
        .insertInto("document_drafts")
        .values({
          kind: this.kind.kind,
          name,
          spec: json(doc),
          base_version: live.version,
          created_by: actor,
          created_at: now(),
        })
        .execute();
      // Before → after: the draft it replaces, or else the enforced version it is based on.
      await appendAudit(trx, actor, `${this.kind.actions}.draft`, this.kind.kind, name, {
        baseVersion: live.version,
        ...(existing ? { replacedDraftId: existing.id } : {}),
        before: existing ? existing.doc : live.doc,
        after: doc,
      });
      return (await this.getDraft(name, trx))!;
    });
  }

  /** Discards the document's draft. */
  async deleteDraft(
    name: string,
    actor: string,
    check?: (before: DocumentRecord<D>) => void,
  ): Promise<void> {
    await writeTransaction(this.db, async (trx) => {
      const live = await this.get(name, trx);
      const draft = await this.getDraft(name, trx);
      if (!live || !draft) throw new ApiError("not_found", `${this.describe(name)} has no draft`);
      check?.(live);
      await dropDraft(trx, this.kind, name);
      await appendAudit(trx, actor, `${this.kind.actions}.draft.discard`, this.kind.kind, name, {
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
  promoteDraft(
    name: string,
    actor: string,
    options: PromoteOptions<D> = {},
  ): Promise<DocumentRecord<D>> {
    return writeTransaction(this.db, async (trx) => {
      const live = await this.get(name, trx);
      const draft = await this.getDraft(name, trx);
      const what = this.describe(name);
      if (!live || !draft) throw new ApiError("not_found", `${what} has no draft`);
      options.check?.(live, draft.doc);
      if (options.draftId !== undefined && draft.id !== options.draftId) {
        throw new ApiError(
          "conflict",
          `the draft of ${what} is now draft ${draft.id} (by ${draft.createdBy}), not ${options.draftId}: review it before promoting`,
        );
      }
      if (options.expectVersion !== undefined && live.version !== options.expectVersion) {
        throw new ApiError(
          "conflict",
          `${what} is at version ${live.version}, not ${options.expectVersion}: reload and retry`,
        );
      }
      if (draft.baseVersion !== live.version) {
        throw new ApiError(
          "conflict",
          `the draft of ${what} was made from version ${draft.baseVersion}, but version ${live.version} is enforced now: promoting it would undo the changes since. Write the draft again from version ${live.version} (PUT …/draft with "draftId": ${draft.id}), or discard it`,
        );
      }
      await this.kind.checkReferences?.(trx, draft.doc, { op: "write" });
      await dropDraft(trx, this.kind, name);
      return writeVersion(trx, this.kind, draft.doc, live, actor, "promote", {
        draftId: draft.id,
        baseVersion: draft.baseVersion,
      });
    });
  }

  /**
   * What importing `docs` would do (with `prune`, the documents of this kind absent from `docs`
   * are deleted); refused as the import would be when a reference does not exist.
   */
  async planImport(docs: readonly D[], prune: boolean): Promise<ImportPlan> {
    await checkImport(this.db, this.kind, docs);
    const current = new Map((await this.list()).map((r) => [this.kind.nameOf(r.doc), r]));
    return planFor(this.kind, current, docs, prune);
  }

  /**
   * Imports validated documents in one transaction: creates, updates (only what changed) and,
   * with `prune`, deletes the rest. Any failure writes nothing.
   */
  import(
    docs: readonly D[],
    actor: string,
    options: { prune?: boolean } = {},
  ): Promise<ImportPlan> {
    return writeTransaction(this.db, (trx) => importIn(trx, this.kind, docs, actor, options));
  }
}

/**
 * Imports validated documents of one kind inside a write transaction (see
 * {@link DocumentRepository.import}); throws, writing nothing, when a reference does not exist.
 */
export async function importIn<D>(
  trx: Tx,
  kind: DocumentKind<D>,
  docs: readonly D[],
  actor: string,
  options: { prune?: boolean } = {},
): Promise<ImportPlan> {
  await checkImport(trx, kind, docs);
  const rows = await trx
    .selectFrom("documents")
    .selectAll()
    .where("kind", "=", kind.kind)
    .execute();
  const current = new Map(rows.map((r) => [r.name, toRecord(kind, r)]));
  const plan = planFor(kind, current, docs, options.prune ?? false);
  for (const d of docs) {
    const before = current.get(kind.nameOf(d));
    if (before && kind.same(before.doc, d)) continue;
    await writeVersion(trx, kind, d, before, actor, "import");
  }
  for (const name of plan.delete)
    await deleteDocument(trx, kind, name, current.get(name), actor, { via: "import" });
  return plan;
}

/** Refuses an import (or its dry run) whose documents refer to what does not exist: every problem. */
async function checkImport<D>(
  db: Db | Tx,
  kind: DocumentKind<D>,
  docs: readonly D[],
): Promise<void> {
  if (!kind.checkReferences) return;
  const issues: ValidationIssue[] = [];
  for (const [index, d] of docs.entries()) {
    try {
      await kind.checkReferences(db, d, { op: "import", index });
    } catch (err) {
      if (!(err instanceof ApiError) || err.issues === undefined) throw err;
      issues.push(...err.issues);
    }
  }
  if (issues.length > 0) throw invalid("Import refused, nothing was changed", issues);
}

/** Adds one node's counts to a draft's totals (an upsert that bumps no revision). */
export async function addDraftStats(
  db: Db | Tx,
  dialect: DialectName,
  draftId: number,
  d: DraftStats,
): Promise<void> {
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
  if (dialect === "mysql") await insert.onDuplicateKeyUpdate(sums).execute();
  else await insert.onConflict((oc) => oc.column("draft_id").doUpdateSet(sums)).execute();
}

/** A draft's shadow counts, summed over every node (zeros before any node reported). */
export async function getDraftStats(db: Db, draftId: number): Promise<DraftStats> {
  const r = await db
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

/** Writes the enforced row and a new version, and audits the change (before → after). */
async function writeVersion<D>(
  trx: Tx,
  kind: DocumentKind<D>,
  doc: D,
  before: DocumentRecord<D> | undefined,
  actor: string,
  action: VersionAction,
  extra: Record<string, unknown> = {},
): Promise<DocumentRecord<D>> {
  const at = now();
  const name = kind.nameOf(doc);
  const last = await trx
    .selectFrom("document_versions")
    .select((eb) => eb.fn.max("version").as("v"))
    .where("kind", "=", kind.kind)
    .where("name", "=", name)
    .executeTakeFirst();
  const version = Number(last?.v ?? 0) + 1;
  const row = { spec: json(doc), updated_by: actor, updated_at: at, version };
  if (before) {
    await trx
      .updateTable("documents")
      .set(row)
      .where("kind", "=", kind.kind)
      .where("name", "=", name)
      .execute();
  } else {
    await trx
      .insertInto("documents")
      .values({ ...row, kind: kind.kind, name, created_by: actor, created_at: at })
      .execute();
  }
  await trx
    .insertInto("document_versions")
    .values({
      kind: kind.kind,
      name,
      version,
      spec: row.spec,
      action,
      created_by: actor,
      created_at: at,
    })
    .execute();
  await appendAudit(trx, actor, `${kind.actions}.${action}`, kind.kind, name, {
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

/** Deletes the enforced row and the draft (the versions stay), and audits it. */
async function deleteDocument<D>(
  trx: Tx,
  kind: DocumentKind<D>,
  name: string,
  before: DocumentRecord<D> | undefined,
  actor: string,
  extra: Record<string, unknown> = {},
): Promise<void> {
  await trx
    .deleteFrom("documents")
    .where("kind", "=", kind.kind)
    .where("name", "=", name)
    .execute();
  await dropDraft(trx, kind, name);
  await kind.onDelete?.(trx, name);
  await appendAudit(trx, actor, `${kind.actions}.delete`, kind.kind, name, {
    ...extra,
    version: before?.version,
    before: before?.doc,
  });
}

/** Removes a document's draft and its shadow counts. */
async function dropDraft<D>(trx: Tx, kind: DocumentKind<D>, name: string): Promise<void> {
  const ids = trx
    .selectFrom("document_drafts")
    .select("id")
    .where("kind", "=", kind.kind)
    .where("name", "=", name);
  await trx.deleteFrom("draft_stats").where("draft_id", "in", ids).execute();
  await trx
    .deleteFrom("document_drafts")
    .where("kind", "=", kind.kind)
    .where("name", "=", name)
    .execute();
}

function planFor<D>(
  kind: DocumentKind<D>,
  current: Map<string, DocumentRecord<D>>,
  docs: readonly D[],
  prune: boolean,
): ImportPlan {
  const plan: ImportPlan = { create: [], update: [], unchanged: [], delete: [] };
  const names = new Set(docs.map((d) => kind.nameOf(d)));
  for (const d of docs) {
    const name = kind.nameOf(d);
    const before = current.get(name);
    if (!before) plan.create.push(name);
    else if (kind.same(before.doc, d)) plan.unchanged.push(name);
    else plan.update.push(name);
  }
  if (prune) for (const name of current.keys()) if (!names.has(name)) plan.delete.push(name);
  return plan;
}

/** A row's stored document, named as the row says (a document naming another is corrupt). */
function storedDocument<D>(
  kind: DocumentKind<D>,
  table: keyof Tables,
  key: Readonly<Record<string, unknown>>,
  name: string,
  doc: D,
): D {
  const named = kind.nameOf(doc);
  if (named !== name)
    throw new CorruptRecordError(table, key, [
      { path: "spec", message: `names ${kind.noun} "${named}", not "${name}"` },
    ]);
  return doc;
}

function toRecord<D>(kind: DocumentKind<D>, row: Tables["documents"]): DocumentRecord<D> {
  const key = { kind: row.kind, name: row.name };
  const r = readRow(
    "documents",
    key,
    z.object({
      name: text,
      spec: jsonColumn(kind.shape),
      created_by: text,
      updated_by: text,
      created_at: text,
      updated_at: text,
      version: intColumn,
    }),
    row,
  );
  return {
    doc: storedDocument(kind, "documents", key, r.name, r.spec),
    version: r.version,
    createdBy: r.created_by,
    updatedBy: r.updated_by,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

function toVersion<D>(kind: DocumentKind<D>, row: Tables["document_versions"]): VersionRecord<D> {
  const key = { kind: row.kind, name: row.name, version: row.version };
  const r = readRow(
    "document_versions",
    key,
    z.object({
      name: text,
      version: intColumn,
      spec: jsonColumn(kind.shape),
      action: text,
      created_by: text,
      created_at: text,
    }),
    row,
  );
  return {
    name: r.name,
    version: r.version,
    doc: r.spec,
    action: r.action,
    createdBy: r.created_by,
    createdAt: r.created_at,
  };
}

function toDraft<D>(
  kind: DocumentKind<D>,
  row: Selectable<Tables["document_drafts"]>,
): DraftRecord<D> {
  const key = { kind: row.kind, name: row.name };
  const r = readRow(
    "document_drafts",
    key,
    z.object({
      id: intColumn,
      name: text,
      spec: jsonColumn(kind.shape),
      base_version: intColumn,
      created_by: text,
      created_at: text,
    }),
    row,
  );
  return {
    id: r.id,
    name: r.name,
    doc: storedDocument(kind, "document_drafts", key, r.name, r.spec),
    baseVersion: r.base_version,
    createdBy: r.created_by,
    createdAt: r.created_at,
  };
}
