/**
 * What the service does with stored rows that do not hold what it writes (a hand edit, a bad
 * restore, another tool): every read checks the row and answers 500 `corrupt_record` naming
 * the table, the record and the field — and a node keeps the last good version of a corrupt
 * policy or app in force while every other change still reaches it. And the migration that
 * brought old rows in line with "only owners own apps". On every SQL database.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "../src/index.js";
import { forEachDatabase } from "./databases.js";
import { type TestService, call, startService } from "./helpers.js";

forEachDatabase((database) => {
  let s: TestService;
  let key: string;
  beforeAll(async () => {
    s = await startService({ databaseUrl: await database().fresh() });
    key = await s.createApp("web");
  });
  afterAll(async () => {
    await s?.close();
  });

  const db = () => s.service.context.repo.database.db;
  /** The row of one policy, to change behind the service's back. */
  const policyRow = (name: string) =>
    db().updateTable("documents").where("kind", "=", "policy").where("name", "=", name);
  /** Changes the stored document of one policy behind the service's back. */
  const tamper = async (name: string, change: (doc: Record<string, unknown>) => unknown) => {
    const row = await db()
      .selectFrom("documents")
      .select("spec")
      .where("kind", "=", "policy")
      .where("name", "=", name)
      .executeTakeFirstOrThrow();
    const next = change(JSON.parse(row.spec) as Record<string, unknown>);
    await policyRow(name)
      .set({ spec: typeof next === "string" ? next : JSON.stringify(next) })
      .execute();
  };
  const dropPolicy = (name: string) =>
    db().deleteFrom("documents").where("kind", "=", "policy").where("name", "=", name).execute();
  const limit = (policy: string) =>
    call(s.url, "POST", "/v1/limit", { token: key, body: { policy, key: "k" } });

  describe("a corrupt policy row", () => {
    it.each([
      ["the document", () => "{not json", /spec: is not JSON/],
      [
        "rules",
        (d: Record<string, unknown>) => ({ ...d, rules: [{ limit: "many", period: "1m" }] }),
        /spec\.rules\.0\.limit: must be a number/,
      ],
      [
        "rules",
        (d: Record<string, unknown>) => ({ ...d, rules: [] }),
        /spec\.rules: must hold at least one rule/,
      ],
      [
        "algorithm",
        (d: Record<string, unknown>) => ({ ...d, algorithm: "magic" }),
        /spec\.algorithm: /,
      ],
      ["enabled", (d: Record<string, unknown>) => ({ ...d, enabled: 7 }), /spec\.enabled: /],
      [
        "apps",
        (d: Record<string, unknown>) => ({ ...d, apps: "web" }),
        /spec\.apps: must be a list of app names/,
      ],
      // A policy document holds its own fields and no others.
      [
        "a field",
        (d: Record<string, unknown>) => ({ ...d, options: {} }),
        /spec: unknown field\(s\): options/,
      ],
      // A document stored under another policy's name.
      [
        "name",
        (d: Record<string, unknown>) => ({ ...d, name: "other" }),
        /spec: names policy "other"/,
      ],
    ])("%s: 500 corrupt_record naming the table, record and field", async (_f, change, detail) => {
      const name = `bad-${Math.random().toString(36).slice(2, 8)}`;
      await s.createPolicy({ name, rules: [{ limit: 5, period: "1m" }], apps: ["web"] });
      await tamper(name, change);
      for (const path of [`/v1/admin/policies/${name}`, "/v1/admin/policies"]) {
        const r = await s.call("GET", path);
        expect(r.status).toBe(500);
        expect(r.body.error.code).toBe("corrupt_record");
        expect(r.body.error.message).toContain(`table "documents", kind "policy", name "${name}"`);
        expect(r.body.error.message).toMatch(detail);
      }
      await dropPolicy(name);
    });
  });

  it("names a corrupt version, draft, user, app and audit entry", async () => {
    await s.createPolicy({ name: "hist", rules: [{ limit: 5, period: "1m" }], apps: ["web"] });
    await s.call("PUT", "/v1/admin/policies/hist/draft", {
      body: { rules: [{ limit: 1, period: "1m" }], apps: ["web"] },
    });
    await db()
      .updateTable("document_versions")
      .set({ spec: '{"name":"hist","rules":[{"limit":5,"period":"1m"}],"apps":[]}' })
      .where("kind", "=", "policy")
      .where("name", "=", "hist")
      .execute();
    const v = await s.call("GET", "/v1/admin/policies/hist/versions/1");
    expect(v.status).toBe(500);
    expect(v.body.error.message).toBe(
      'corrupt record in the database: table "document_versions", kind "policy", name "hist", version 1: spec.enabled: Invalid input: expected boolean, received undefined',
    );

    await db().updateTable("document_drafts").set({ spec: "nope" }).execute();
    const d = await s.call("GET", "/v1/admin/policies/hist/draft");
    expect(d.body.error).toMatchObject({ code: "corrupt_record" });
    expect(d.body.error.message).toContain(
      'table "document_drafts", kind "policy", name "hist": spec: is not JSON',
    );

    await s.createUser("uma", "viewer");
    await db()
      .updateTable("users")
      .set({ role: "superuser" })
      .where("username", "=", "uma")
      .execute();
    const u = await s.call("GET", "/v1/admin/users");
    expect(u.body.error.code).toBe("corrupt_record");
    expect(u.body.error.message).toContain('table "users", username "uma": role:');
    // Signing in as that user is refused the same way, not with a crash.
    const login = await call(s.url, "POST", "/v1/admin/login", {
      body: { username: "uma", password: "uma-password" },
    });
    expect(login.body.error.code).toBe("corrupt_record");
    await db().deleteFrom("users").where("username", "=", "uma").execute();

    await s.createApp("tmp");
    await db()
      .updateTable("apps")
      .set({ key_hash: "not-a-hash" })
      .where("name", "=", "tmp")
      .execute();
    const a = await s.call("GET", "/v1/admin/apps");
    expect(a.body.error.message).toContain(
      'table "apps", name "tmp": key_hash: must be a SHA-256 (hex)',
    );
    await db().deleteFrom("apps").where("name", "=", "tmp").execute();

    const last = await db()
      .selectFrom("audit")
      .select("id")
      .orderBy("id", "desc")
      .executeTakeFirstOrThrow();
    await db().updateTable("audit").set({ detail: "{" }).where("id", "=", last.id).execute();
    const au = await s.call("GET", "/v1/admin/audit");
    expect(au.body.error.message).toContain(
      `table "audit", id ${Number(last.id)}: detail: is not JSON`,
    );
    await db().deleteFrom("audit").where("id", "=", last.id).execute();
    await db().deleteFrom("document_drafts").execute();
  });

  it("a node keeps the last good version of a corrupt policy, and still takes every other change", async () => {
    await s.createPolicy({ name: "kept", rules: [{ limit: 3, period: "1m" }], apps: ["web"] });
    expect((await limit("kept")).body.limit).toBe(3);
    await policyRow("kept").set({ spec: "{broken", version: 99 }).execute();
    await s.createPolicy({ name: "fresh", rules: [{ limit: 4, period: "1m" }], apps: ["web"] });
    const fresh = await limit("fresh");
    expect(fresh.status).toBe(200);
    expect(fresh.body.limit).toBe(4);
    const kept = await limit("kept");
    expect(kept.status).toBe(200);
    expect(kept.body.limit).toBe(3);
    await dropPolicy("kept");

    // A corrupt app row: its last good key keeps working.
    await db().updateTable("apps").set({ key_hash: "zz" }).where("name", "=", "web").execute();
    await s.createPolicy({ name: "later", rules: [{ limit: 6, period: "1m" }], apps: ["web"] });
    const later = await limit("later");
    expect(later.status).toBe(200);
    expect(later.body.limit).toBe(6);
  });

  /** The tables made by the migrations after 0003 (0005: Envoy domains). */
  it("migration 0003 takes apps away from users who are not owners", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "sluice-migrate-"));
    const where = { databaseUrl: await database().fresh(), dataDir };
    try {
      const first = await openDatabase(where);
      const user = (username: string, role: string) => ({
        username,
        role,
        apps: '["web"]',
        password_hash: "x",
        created_at: "t",
        updated_at: "t",
      });
      await first.db
        .insertInto("users")
        .values([user("v", "viewer"), user("a", "admin"), user("o", "owner")])
        .execute();
      // As if these rows predated the migration: forget that it ran (a migration not yet run
      // runs whatever its number) and open the database again.
      await sql`delete from kysely_migration where name = '0003_only_owners_own_apps'`.execute(
        first.db,
      );
      await first.close();
      const again = await openDatabase(where);
      const rows = await again.db
        .selectFrom("users")
        .select(["username", "apps"])
        .orderBy("username")
        .execute();
      await again.close();
      expect(rows).toEqual([
        { username: "a", apps: "[]" },
        { username: "o", apps: '["web"]' },
        { username: "v", apps: "[]" },
      ]);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
