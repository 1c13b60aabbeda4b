/**
 * Migration 0008 (one set of tables for every versioned document) on a database written as the
 * releases before it wrote it: migrated up to 0007, then filled with rows in the old tables as
 * their code stored them — policies as columns, their versions and drafts, draft counts, Envoy
 * domains with theirs, a deleted policy's versions, a corrupt row, drafts discarded on the way —
 * then opened by this release. Every row, version, draft and count is there after it, through
 * the repository; policy drafts keep their ids, Envoy drafts are numbered after every id issued,
 * and a new draft never takes an id issued before. On every SQL database.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Kysely, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validateEnvoyDocument } from "../src/envoy/config.js";
import { CorruptRecordError, Repository, openDatabase } from "../src/index.js";
import { type PolicyDocument, validatePolicyDocument } from "../src/model.js";
import { forEachDatabase } from "./databases.js";

/** Inserts one row into a table of the old schema; resolves to the id it got, if any. */
async function insert(db: Kysely<unknown>, table: string, row: Record<string, unknown>) {
  const cols = sql.join(Object.keys(row).map((c) => sql.ref(c)));
  const vals = sql.join(Object.values(row).map((v) => sql`${v}`));
  await sql`insert into ${sql.table(table)} (${cols}) values (${vals})`.execute(db);
}

/** A policy document as the service validated it (and stored it in versions and drafts). */
function policy(input: Record<string, unknown>): PolicyDocument {
  const r = validatePolicyDocument(input);
  if ("issues" in r) throw new Error(JSON.stringify(r.issues));
  return r.doc;
}

/** The columns of a `policies` row, as the releases before 0008 wrote them. */
function policyColumns(doc: PolicyDocument) {
  return {
    name: doc.name,
    description: doc.description ?? "",
    algorithm: doc.algorithm ?? "gcra",
    rules: JSON.stringify(doc.rules),
    options: JSON.stringify({
      ...(doc.blockDuration !== undefined ? { blockDuration: doc.blockDuration } : {}),
      ...(doc.onStoreError !== undefined ? { onStoreError: doc.onStoreError } : {}),
      ...(doc.insuranceInstances !== undefined
        ? { insuranceInstances: doc.insuranceInstances }
        : {}),
    }),
    apps: JSON.stringify(doc.apps),
    enabled: doc.enabled ? 1 : 0,
    shadow: doc.shadow ? 1 : 0,
  };
}

const API_V1 = policy({ name: "api", rules: [{ limit: 5, period: "1m" }], apps: ["web"] });
const API_V2 = policy({ ...API_V1, rules: [{ limit: 8, period: "1m", burst: 2 }] });
const API_V3 = policy({
  ...API_V2,
  blockDuration: "5m",
  onStoreError: "insurance",
  insuranceInstances: 3,
  description: "Grüße aus Köln — 限流 🚦",
});
const API_DRAFT = policy({ ...API_V3, rules: [{ limit: 2, period: "1m" }] });
const QUIET = policy({
  name: "quiet",
  algorithm: "token-bucket",
  rules: [{ limit: 10, period: 1000 }],
  shadow: true,
  enabled: false,
});
const QUIET_DRAFT = policy({ ...QUIET, enabled: true });
const GONE = policy({ name: "gone", rules: [{ limit: 1, period: "1s" }] });

function domain(yaml: Record<string, unknown>) {
  const r = validateEnvoyDocument(yaml);
  if ("issues" in r) throw new Error(JSON.stringify(r.issues));
  return r.doc;
}
const EDGE_V1 = domain({
  domain: "edge",
  descriptors: [{ key: "remote_address", rate_limit: { unit: "day", requests_per_unit: 3 } }],
});
const EDGE_V2 = domain({
  domain: "edge",
  descriptors: [{ key: "remote_address", rate_limit: { unit: "hour", requests_per_unit: 30 } }],
});
const EDGE_DRAFT = domain({
  domain: "edge",
  descriptors: [{ key: "remote_address", rate_limit: { unit: "hour", requests_per_unit: 1 } }],
});

const T = "2025-01-02T03:04:05.000Z";
const counts = (n: number) => ({
  evaluated: n,
  would_deny: n - 1,
  would_deny_newly: n - 2,
  would_allow_newly: 1,
});

forEachDatabase((database) => {
  let dataDir: string;
  let where: { databaseUrl: string | undefined; dataDir: string };
  let ids: { apiDraft: number; quietDraft: number; edgeDraft: number; issued: number };
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "sluice-0008-"));
    where = { databaseUrl: await database().fresh(), dataDir };
    const old = await openDatabase({ ...where, migrateUntil: "0007_changes" });
    const db = old.db as unknown as Kysely<unknown>;
    try {
      await insert(db, "apps", {
        name: "web",
        description: "",
        key_id: "0123456789abcdef",
        key_hash: "0".repeat(64),
        created_by: "root",
        created_at: T,
        updated_at: T,
      });
      for (const [doc, version] of [
        [API_V3, 3],
        [QUIET, 1],
      ] as const)
        await insert(db, "policies", {
          ...policyColumns(doc),
          created_by: "root",
          updated_by: "ada",
          created_at: T,
          updated_at: T,
          version,
        });
      // A row another tool broke: its rules are not JSON.
      await insert(db, "policies", {
        ...policyColumns(GONE),
        name: "broken",
        rules: "{not json",
        created_by: "root",
        updated_by: "root",
        created_at: T,
        updated_at: T,
        version: 1,
      });
      const versions: [PolicyDocument, number, string][] = [
        [API_V1, 1, "create"],
        [API_V2, 2, "update"],
        [API_V3, 3, "promote"],
        [QUIET, 1, "import"],
        [GONE, 1, "create"],
      ];
      for (const [doc, version, action] of versions)
        await insert(db, "policy_versions", {
          policy_name: doc.name,
          version,
          spec: JSON.stringify(doc),
          action,
          created_by: "root",
          created_at: T,
        });
      // Drafts numbered as the sequence gave them: a discarded one before each kept one, and
      // the last one issued discarded too, so the sequence has gone past every id kept.
      const draft = async (table: string, key: string, name: string, spec: unknown) => {
        await insert(db, table, {
          [key]: name,
          spec: JSON.stringify(spec),
          base_version: 1,
          created_by: "root",
          created_at: T,
        });
        const row = await sql<{ id: number | string }>`
          select id from ${sql.table(table)} where ${sql.ref(key)} = ${name}`.execute(db);
        return Number(row.rows[0]!.id);
      };
      const drop = (table: string, id: number) =>
        sql`delete from ${sql.table(table)} where id = ${id}`.execute(db);
      await drop("policy_drafts", await draft("policy_drafts", "policy_name", "api", API_V1));
      const apiDraft = await draft("policy_drafts", "policy_name", "api", API_DRAFT);
      const quietDraft = await draft("policy_drafts", "policy_name", "quiet", QUIET_DRAFT);
      const lastPolicyDraft = await draft("policy_drafts", "policy_name", "gone", GONE);
      await drop("policy_drafts", lastPolicyDraft);
      await sql`update policy_drafts set base_version = 3 where id = ${apiDraft}`.execute(db);
      await insert(db, "draft_stats", { draft_id: apiDraft, ...counts(7) });
      await insert(db, "draft_stats", { draft_id: quietDraft, ...counts(5) });

      for (const [doc, version] of [
        [EDGE_V1, 1],
        [EDGE_V2, 2],
      ] as const)
        await insert(db, "envoy_domain_versions", {
          domain: doc.domain,
          version,
          spec: JSON.stringify(doc),
          action: version === 1 ? "import" : "update",
          created_by: "root",
          created_at: T,
        });
      await insert(db, "envoy_domains", {
        domain: "edge",
        spec: JSON.stringify(EDGE_V2),
        created_by: "root",
        updated_by: "ada",
        created_at: T,
        updated_at: T,
        version: 2,
      });
      const edgeDraft = await draft("envoy_domain_drafts", "domain", "edge", EDGE_DRAFT);
      await insert(db, "envoy_draft_stats", { draft_id: edgeDraft, ...counts(11) });
      ids = { apiDraft, quietDraft, edgeDraft, issued: lastPolicyDraft };
    } finally {
      await old.close();
    }
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  describe("0008_documents, from a database of the releases before it", () => {
    let repo: Repository;
    let close: () => Promise<void>;
    beforeAll(async () => {
      const migrated = await openDatabase(where);
      repo = new Repository(migrated);
      close = () => migrated.close();
    });
    afterAll(() => close?.());

    it("keeps every policy, as the document its columns said, with its bookkeeping", async () => {
      expect(await repo.policies.get("api")).toEqual({
        doc: API_V3,
        version: 3,
        createdBy: "root",
        updatedBy: "ada",
        createdAt: T,
        updatedAt: T,
      });
      expect((await repo.policies.get("quiet"))?.doc).toEqual(QUIET);
      // A row that was corrupt is kept, and still says so (it is not silently mended).
      const broken = await repo.policies.get("broken").catch((err: unknown) => err);
      expect(broken).toBeInstanceOf(CorruptRecordError);
      expect((broken as Error).message).toContain(
        'table "documents", kind "policy", name "broken": spec: is not JSON',
      );
      const snap = await repo.snapshot();
      expect(snap.policies.map((p) => p.doc.name)).toEqual(["api", "quiet"]);
      expect(snap.corrupt.map((e) => e.key)).toEqual([{ kind: "policy", name: "broken" }]);
    });

    it("keeps every version, a deleted policy's too", async () => {
      const api = await repo.policies.listVersions("api");
      expect(api.map((v) => [v.version, v.action, v.doc])).toEqual([
        [3, "promote", API_V3],
        [2, "update", API_V2],
        [1, "create", API_V1],
      ]);
      expect((await repo.policies.getVersion("gone", 1))?.doc).toEqual(GONE);
      expect((await repo.policies.listVersions("quiet")).map((v) => v.doc)).toEqual([QUIET]);
    });

    it("keeps the policies' drafts with their ids, and their counts", async () => {
      expect(await repo.policies.getDraft("api")).toMatchObject({
        id: ids.apiDraft,
        doc: API_DRAFT,
        baseVersion: 3,
      });
      expect((await repo.policies.getDraft("quiet"))?.id).toBe(ids.quietDraft);
      expect(await repo.getDraftStats(ids.apiDraft)).toEqual({
        evaluated: 7,
        wouldDeny: 6,
        wouldDenyNewly: 5,
        wouldAllowNewly: 1,
      });
      expect((await repo.getDraftStats(ids.quietDraft)).evaluated).toBe(5);
    });

    it("keeps every Envoy domain, version and draft; the draft numbered after every policy draft, its counts with it", async () => {
      expect(await repo.envoyDomains.get("edge")).toEqual({
        doc: EDGE_V2,
        version: 2,
        createdBy: "root",
        updatedBy: "ada",
        createdAt: T,
        updatedAt: T,
      });
      expect((await repo.envoyDomains.listVersions("edge")).map((v) => v.doc)).toEqual([
        EDGE_V2,
        EDGE_V1,
      ]);
      const draft = await repo.envoyDomains.getDraft("edge");
      expect(draft?.doc).toEqual(EDGE_DRAFT);
      expect(draft!.id).toBeGreaterThan(Math.max(ids.apiDraft, ids.quietDraft));
      expect(draft!.id).toBe(ids.issued + ids.edgeDraft);
      expect((await repo.getDraftStats(draft!.id)).evaluated).toBe(11);
    });

    it("the old tables are gone, and a new draft takes an id never issued before", async () => {
      const tables = (await repo.database.db.introspection.getTables()).map((t) => t.name);
      expect(tables).toEqual(expect.arrayContaining(["documents", "document_versions"]));
      for (const old of ["policies", "policy_drafts", "envoy_domains", "envoy_draft_stats"])
        expect(tables).not.toContain(old);
      await repo.policies.put(GONE, "root");
      const fresh = await repo.policies.putDraft(
        { ...GONE, rules: [{ limit: 2, period: "1s" }] },
        "root",
      );
      const edge = (await repo.envoyDomains.getDraft("edge"))!.id;
      expect(fresh.id).toBeGreaterThan(Math.max(edge, ids.issued));
    });
  });
});
