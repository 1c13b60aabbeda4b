/**
 * The admin API, on every SQL database of ./databases.ts: sign-in (and its own rate limit),
 * roles, bad input on every endpoint (400 naming the field, nothing written), versions and
 * restore, drafts in shadow, apps and keys, users, audit, import/export.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forEachDatabase } from "./databases.js";
import { type TestService, call, startService } from "./helpers.js";

forEachDatabase((database) => {
  let s: TestService;
  let webKey: string;
  let ownerToken: string;
  let viewerToken: string;

  beforeAll(async () => {
    s = await startService({
      databaseUrl: await database().fresh(),
      values: { loginLimitPerUser: 3 },
    });
    webKey = await s.createApp("web");
    await s.createApp("mobile");
    await s.createApp("billing");
    await s.createPolicy({ name: "web-api", rules: [{ limit: 5, period: "1m" }], apps: ["web"] });
    await s.createPolicy({
      name: "billing-api",
      rules: [{ limit: 5, period: "1m" }],
      apps: ["billing"],
    });
    ownerToken = await s.createUser("olivia", "owner", ["web"]);
    viewerToken = await s.createUser("victor", "viewer");
  });
  afterAll(async () => {
    await s?.close();
  });

  /** Everything a write could change, to prove a refused request changed nothing. */
  async function dbState() {
    const db = s.service.context.repo.database.db;
    const tables = [
      "documents",
      "document_versions",
      "document_drafts",
      "apps",
      "users",
      "audit",
      "meta",
    ] as const;
    const out: Record<string, unknown> = {};
    // Sorted: PostgreSQL returns rows in no particular order.
    for (const t of tables)
      out[t] = (await db.selectFrom(t).selectAll().execute()).map((r) => JSON.stringify(r)).sort();
    return out;
  }

  describe("sign-in", () => {
    it("returns a session token; a wrong password or token is 401", async () => {
      const r = await call(s.url, "POST", "/v1/admin/login", {
        body: { username: "root", password: "root-password" },
      });
      expect(r.status).toBe(200);
      expect(r.body.token).toMatch(/^st_[0-9a-f]{16}_/);
      expect(r.body.user).toEqual({ username: "root", role: "admin", apps: [] });
      expect(
        (await call(s.url, "GET", "/v1/admin/me", { token: r.body.token })).body.username,
      ).toBe("root");
      // The token is stored hashed only.
      const row = await s.service.context.repo.database.db
        .selectFrom("sessions")
        .selectAll()
        .execute();
      expect(JSON.stringify(row)).not.toContain((r.body.token as string).slice(20));
      expect((await call(s.url, "POST", "/v1/admin/logout", { token: r.body.token })).status).toBe(
        204,
      );
      expect((await call(s.url, "GET", "/v1/admin/me", { token: r.body.token })).status).toBe(401);
      expect((await call(s.url, "GET", "/v1/admin/policies")).status).toBe(401);
      expect(
        (
          await call(s.url, "GET", "/v1/admin/policies", {
            token: "st_0000000000000000_" + "A".repeat(43),
          })
        ).status,
      ).toBe(401);
      // An app key is not a session.
      expect((await call(s.url, "GET", "/v1/admin/policies", { token: webKey })).status).toBe(401);
    });

    it("limits sign-in attempts per username with sluice itself (429 with Retry-After)", async () => {
      const statuses = [];
      for (let i = 0; i < 4; i++)
        statuses.push(
          (
            await call(s.url, "POST", "/v1/admin/login", {
              body: { username: "mallory", password: "guess" + i },
            })
          ).status,
        );
      expect(statuses).toEqual([401, 401, 401, 429]);
      const r = await call(s.url, "POST", "/v1/admin/login", {
        body: { username: "mallory", password: "x" },
      });
      expect(r.status).toBe(429);
      expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(r.body.error.code).toBe("too_many_requests");
    });

    it("limits sign-in attempts per client IP too, whatever the username", async () => {
      const other = await startService({
        databaseUrl: await database().fresh(),
        values: { loginLimitPerIp: 3 },
      });
      try {
        const statuses = [];
        for (const u of ["a", "b", "c", "d"])
          statuses.push(
            (
              await call(other.url, "POST", "/v1/admin/login", {
                body: { username: u, password: "x" },
              })
            ).status,
          );
        // Failures count, not sign-ins: root's (in startService) left all 3 attempts.
        expect(statuses).toEqual([401, 401, 401, 429]);
      } finally {
        await other.close();
      }
    });

    it.each([
      [{ username: "root" }, "password", "is required"],
      [{ username: 1, password: "x" }, "username", "must be a string"],
      [{ username: "root", password: "x", otp: 1 }, "", "unknown field(s): otp"],
    ])("400 naming the field for %j", async (body, path, message) => {
      const r = await call(s.url, "POST", "/v1/admin/login", { body });
      expect(r.status).toBe(400);
      expect(r.body.error.issues).toContainEqual({
        path,
        message: expect.stringContaining(message),
      });
    });
  });

  describe("roles", () => {
    const doc = { rules: [{ limit: 9, period: "1m" }], apps: ["web"] };

    it("a viewer reads but cannot change anything", async () => {
      expect((await call(s.url, "GET", "/v1/admin/policies", { token: viewerToken })).status).toBe(
        200,
      );
      expect((await call(s.url, "GET", "/v1/admin/audit", { token: viewerToken })).status).toBe(
        200,
      );
      const before = await dbState();
      const edits = [
        await call(s.url, "PUT", "/v1/admin/policies/web-api", { token: viewerToken, body: doc }),
        await call(s.url, "POST", "/v1/admin/policies", {
          token: viewerToken,
          body: { name: "v1", ...doc },
        }),
        await call(s.url, "DELETE", "/v1/admin/policies/web-api", { token: viewerToken }),
        await call(s.url, "PUT", "/v1/admin/policies/web-api/draft", {
          token: viewerToken,
          body: doc,
        }),
        await call(s.url, "POST", "/v1/admin/apps", { token: viewerToken, body: { name: "x" } }),
        await call(s.url, "POST", "/v1/admin/users", {
          token: viewerToken,
          body: { username: "x", password: "12345678", role: "admin" },
        }),
      ];
      expect(edits.map((r) => r.status)).toEqual([403, 403, 403, 403, 403, 403]);
      expect(edits[0]!.body.error.code).toBe("forbidden");
      expect(await dbState()).toEqual(before);
    });

    it("an owner edits only the policies granted to its apps, and cannot grant apps it does not own", async () => {
      const ok = await call(s.url, "PUT", "/v1/admin/policies/web-api", {
        token: ownerToken,
        body: { ...doc, description: "by owner" },
      });
      expect(ok.status).toBe(200);
      expect(ok.body).toMatchObject({ version: 2, updatedBy: "olivia", createdBy: "root" });
      const before = await dbState();
      const other = await call(s.url, "PUT", "/v1/admin/policies/billing-api", {
        token: ownerToken,
        body: { rules: [{ limit: 1, period: "1s" }], apps: ["billing", "web"] },
      });
      expect(other.status).toBe(403);
      const grant = await call(s.url, "PUT", "/v1/admin/policies/web-api", {
        token: ownerToken,
        body: { ...doc, apps: ["web", "mobile"] },
      });
      expect(grant.status).toBe(403);
      expect(grant.body.error.message).toContain("mobile");
      const dropAll = await call(s.url, "PUT", "/v1/admin/policies/web-api", {
        token: ownerToken,
        body: { ...doc, apps: [] },
      });
      expect(dropAll.status).toBe(403);
      const del = await call(s.url, "DELETE", "/v1/admin/policies/billing-api", {
        token: ownerToken,
      });
      expect(del.status).toBe(403);
      const rotate = await call(s.url, "POST", "/v1/admin/apps/billing/rotate-key", {
        token: ownerToken,
      });
      expect(rotate.status).toBe(403);
      expect(await dbState()).toEqual(before);
      const created = await call(s.url, "POST", "/v1/admin/policies", {
        token: ownerToken,
        body: { name: "web-extra", ...doc },
      });
      expect(created.status).toBe(201);
      const notMine = await call(s.url, "POST", "/v1/admin/policies", {
        token: ownerToken,
        body: { name: "mobile-x", rules: doc.rules, apps: ["mobile"] },
      });
      expect(notMine.status).toBe(403);
    });

    it("only an admin manages apps and users; the last admin stays", async () => {
      const r = await call(s.url, "POST", "/v1/admin/users", {
        token: ownerToken,
        body: { username: "eve", password: "12345678", role: "admin" },
      });
      expect(r.status).toBe(403);
      const last = await s.call("DELETE", "/v1/admin/users/root");
      expect(last.status).toBe(409);
      const demote = await s.call("PATCH", "/v1/admin/users/root", { body: { role: "viewer" } });
      expect(demote.status).toBe(409);
    });
  });

  describe("bad input on every admin endpoint: 400 naming the field, nothing written", () => {
    const cases: Array<[string, string, unknown, string]> = [
      [
        "POST",
        "/v1/admin/policies",
        { name: "p", rules: [{ limit: 0, period: "1m" }] },
        "rules.0.limit",
      ],
      ["POST", "/v1/admin/policies", { name: "p", rules: [] }, "rules"],
      ["POST", "/v1/admin/policies", { rules: [{ limit: 1, period: "1m" }] }, "name"],
      [
        "POST",
        "/v1/admin/policies",
        { name: "bad name!", rules: [{ limit: 1, period: "1m" }] },
        "name",
      ],
      [
        "POST",
        "/v1/admin/policies",
        { name: "sluice.x", rules: [{ limit: 1, period: "1m" }] },
        "name",
      ],
      [
        "POST",
        "/v1/admin/policies",
        { name: "p", rules: [{ limit: 1, period: "1m" }], apps: ["nope"] },
        "apps.0",
      ],
      [
        "POST",
        "/v1/admin/policies",
        { name: "p", rules: [{ limit: 1, period: "1m" }], enabled: "yes" },
        "enabled",
      ],
      [
        "PUT",
        "/v1/admin/policies/web-api",
        { rules: [{ limit: 1, period: "soon" }] },
        "rules.0.period",
      ],
      [
        "PUT",
        "/v1/admin/policies/web-api",
        { algorithm: "magic", rules: [{ limit: 1, period: "1m" }] },
        "algorithm",
      ],
      [
        "PUT",
        "/v1/admin/policies/web-api",
        { rules: [{ limit: 1, period: "1m", burst: 2 }], algorithm: "fixed-window" },
        "rules.0.burst",
      ],
      [
        "PUT",
        "/v1/admin/policies/web-api",
        { name: "other", rules: [{ limit: 1, period: "1m" }] },
        "name",
      ],
      [
        "PUT",
        "/v1/admin/policies/web-api",
        { rules: [{ limit: 1, period: "1m" }], expectVersion: "2" },
        "expectVersion",
      ],
      [
        "PUT",
        "/v1/admin/policies/web-api",
        { rules: [{ limit: 1, period: "1m" }], apps: "web" },
        "apps",
      ],
      [
        "PUT",
        "/v1/admin/policies/web-api/draft",
        { rules: [{ limit: -1, period: "1m" }] },
        "rules.0.limit",
      ],
      ["POST", "/v1/admin/policies/web-api/versions/abc/restore", undefined, "version"],
      [
        "POST",
        "/v1/admin/policies/import",
        {
          policies: [
            { name: "ok", rules: [{ limit: 1, period: "1m" }] },
            { name: "bad", rules: [{ limit: 1 }] },
          ],
        },
        "policies.1.rules.0.period",
      ],
      ["POST", "/v1/admin/policies/import", { policies: "all" }, "policies"],
      ["POST", "/v1/admin/apps", { name: "has space" }, "name"],
      ["POST", "/v1/admin/apps", { name: "x", description: 5 }, "description"],
      ["POST", "/v1/admin/users", { username: "u", password: "short", role: "viewer" }, "password"],
      ["POST", "/v1/admin/users", { username: "u", password: "12345678", role: "god" }, "role"],
      [
        "POST",
        "/v1/admin/users",
        { username: "u", password: "12345678", role: "owner", apps: ["nope"] },
        "apps.0",
      ],
      ["PATCH", "/v1/admin/users/victor", { role: "root" }, "role"],
      // Only owners own apps, however a user is written.
      [
        "POST",
        "/v1/admin/users",
        { username: "u", password: "12345678", role: "viewer", apps: ["web"] },
        "apps",
      ],
      ["PATCH", "/v1/admin/users/victor", { apps: ["web"] }, "apps"],
      ["PATCH", "/v1/admin/users/olivia", { role: "admin" }, "apps"],
      ["PATCH", "/v1/admin/users/olivia", { role: "viewer", apps: ["web"] }, "apps"],
      ["PATCH", "/v1/admin/users/victor", { nickname: "v" }, ""],
      ["GET", "/v1/admin/audit?limit=0", undefined, "limit"],
      ["GET", "/v1/admin/policies/export?format=xml", undefined, "format"],
    ];
    it.each(cases)("%s %s %j → 400 at %s", async (method, path, body, field) => {
      const before = await dbState();
      const r = await s.call(method, path, body === undefined ? {} : { body });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
      expect(r.body.error.issues.map((i: { path: string }) => i.path)).toContain(field);
      expect(await dbState()).toEqual(before);
    });

    it("malformed JSON on an admin endpoint is 400, not 500", async () => {
      const r = await s.call("PUT", "/v1/admin/policies/web-api", { raw: "{nope" });
      expect(r.status).toBe(400);
    });

    it("404 for unknown policies, versions, apps and users; 409 for duplicates and stale versions", async () => {
      expect((await s.call("GET", "/v1/admin/policies/nope")).status).toBe(404);
      expect((await s.call("GET", "/v1/admin/policies/web-api/versions/99")).status).toBe(404);
      expect((await s.call("DELETE", "/v1/admin/apps/nope")).status).toBe(404);
      expect(
        (await s.call("PATCH", "/v1/admin/users/nope", { body: { role: "viewer" } })).status,
      ).toBe(404);
      expect((await s.call("POST", "/v1/admin/policies/nope/draft/promote")).status).toBe(404);
      expect(
        (
          await s.call("POST", "/v1/admin/policies", {
            body: { name: "web-api", rules: [{ limit: 1, period: "1m" }] },
          })
        ).status,
      ).toBe(409);
      expect((await s.call("POST", "/v1/admin/apps", { body: { name: "web" } })).status).toBe(409);
      const stale = await s.call("PUT", "/v1/admin/policies/web-api", {
        body: { rules: [{ limit: 1, period: "1m" }], apps: ["web"], expectVersion: 1 },
      });
      expect(stale.status).toBe(409);
      expect((await s.call("DELETE", "/v1/admin/apps/web")).status).toBe(409);
    });
  });

  describe("versions, restore and drafts", () => {
    it("keeps every version; restoring makes an old one enforced as a new version", async () => {
      await s.createPolicy({ name: "v", rules: [{ limit: 1, period: "1m" }], apps: ["web"] });
      // Saving the same document again is not a change: no new version.
      const same = await s.call("PUT", "/v1/admin/policies/v", {
        body: { rules: [{ limit: 1, period: "1m" }], apps: ["web"] },
      });
      expect(same.body.version).toBe(1);
      await s.call("PUT", "/v1/admin/policies/v", {
        body: { rules: [{ limit: 2, period: "1m" }], apps: ["web"] },
      });
      await s.call("PUT", "/v1/admin/policies/v", {
        body: { rules: [{ limit: 3, period: "1m" }], apps: ["web"], expectVersion: 2 },
      });
      const versions = (await s.call("GET", "/v1/admin/policies/v/versions")).body.versions;
      expect(
        versions.map((v: { version: number; doc: { rules: Array<{ limit: number }> } }) => [
          v.version,
          v.doc.rules[0]!.limit,
        ]),
      ).toEqual([
        [3, 3],
        [2, 2],
        [1, 1],
      ]);
      const restored = await s.call("POST", "/v1/admin/policies/v/versions/1/restore");
      expect(restored.status).toBe(200);
      expect(restored.body).toMatchObject({ version: 4, rules: [{ limit: 1, period: "1m" }] });
      await s.sync();
      const a = await call(s.url, "POST", "/v1/limit", {
        token: webKey,
        body: { policy: "v", key: "r" },
      });
      expect(a.body).toMatchObject({ allowed: true, limit: 1 });
      // A deleted policy can be restored too.
      expect((await s.call("DELETE", "/v1/admin/policies/v")).status).toBe(204);
      expect((await s.call("POST", "/v1/admin/policies/v/versions/3/restore")).body.version).toBe(
        5,
      );
      const audit = (await s.call("GET", "/v1/admin/audit?target=v")).body.entries.map(
        (e: { action: string }) => e.action,
      );
      expect(audit).toEqual([
        "policy.restore",
        "policy.delete",
        "policy.restore",
        "policy.update",
        "policy.update",
        "policy.create",
      ]);
    });

    it("evaluates a draft in shadow, records what it would deny, and promotes it", async () => {
      await s.createPolicy({ name: "d", rules: [{ limit: 10, period: "1m" }], apps: ["web"] });
      const put = await s.call("PUT", "/v1/admin/policies/d/draft", {
        body: { rules: [{ limit: 2, period: "1m" }], apps: ["web"] },
      });
      expect(put.status).toBe(200);
      expect(put.body.baseVersion).toBe(1);
      await s.sync();
      for (let i = 0; i < 5; i++) {
        const r = await call(s.url, "POST", "/v1/limit", {
          token: webKey,
          body: { policy: "d", key: "k" },
        });
        // The enforced version decides.
        expect(r.body).toMatchObject({ allowed: true, limit: 10 });
      }
      const draft = (await s.call("GET", "/v1/admin/policies/d/draft")).body;
      expect(draft.stats).toEqual({
        evaluated: 5,
        wouldDeny: 3,
        wouldDenyNewly: 3,
        wouldAllowNewly: 0,
      });
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      expect(metrics).toMatch(/sluice_draft_decisions_total\{policy="d",outcome="denied"\} 3/);
      expect(
        (await s.call("GET", "/v1/admin/policies")).body.policies.find(
          (p: { name: string }) => p.name === "d",
        ).hasDraft,
      ).toBe(true);

      const promoted = await s.call("POST", "/v1/admin/policies/d/draft/promote");
      expect(promoted.body).toMatchObject({ version: 2, rules: [{ limit: 2, period: "1m" }] });
      expect((await s.call("GET", "/v1/admin/policies/d/draft")).status).toBe(404);
      await s.sync();
      const r = await call(s.url, "POST", "/v1/limit", {
        token: webKey,
        body: { policy: "d", key: "fresh" },
      });
      expect(r.body).toMatchObject({ allowed: true, limit: 2 });

      await s.call("PUT", "/v1/admin/policies/d/draft", {
        body: { rules: [{ limit: 1, period: "1m" }], apps: ["web"] },
      });
      expect((await s.call("DELETE", "/v1/admin/policies/d/draft")).status).toBe(204);
      expect((await s.call("GET", "/v1/admin/policies/d/draft")).status).toBe(404);
    });
    it("refuses (409) to promote a draft made from an older version, which would undo the newer one", async () => {
      await s.createPolicy({ name: "stale", rules: [{ limit: 10, period: "1m" }], apps: ["web"] });
      const draft = await s.call("PUT", "/v1/admin/policies/stale/draft", {
        body: { rules: [{ limit: 3, period: "1m" }], apps: ["web"], expectVersion: 1 },
      });
      expect(draft.body).toMatchObject({ baseVersion: 1, id: expect.any(Number) });
      // Meanwhile someone else changes the enforced policy: version 2.
      const v2 = await s.call("PUT", "/v1/admin/policies/stale", {
        body: { rules: [{ limit: 20, period: "1m" }], apps: ["web"], expectVersion: 1 },
      });
      expect(v2.body.version).toBe(2);
      const before = await dbState();
      const promote = await s.call("POST", "/v1/admin/policies/stale/draft/promote");
      expect(promote.status).toBe(409);
      expect(promote.body.error).toEqual({
        code: "conflict",
        message: expect.stringContaining(
          'the draft of policy "stale" was made from version 1, but version 2 is enforced now',
        ),
      });
      expect(await dbState()).toEqual(before);
      expect((await s.call("GET", "/v1/admin/policies/stale")).body).toMatchObject({
        version: 2,
        rules: [{ limit: 20, period: "1m" }],
      });
      // Drafting again from version 2 (replacing the draft by its id) makes it promotable.
      const redraft = await s.call("PUT", "/v1/admin/policies/stale/draft", {
        body: {
          rules: [{ limit: 3, period: "1m" }],
          apps: ["web"],
          expectVersion: 2,
          draftId: draft.body.id,
        },
      });
      expect(redraft.body.baseVersion).toBe(2);
      // What the caller looked at must still be so.
      expect(
        (
          await s.call("POST", "/v1/admin/policies/stale/draft/promote", {
            body: { draftId: draft.body.id },
          })
        ).status,
      ).toBe(409);
      expect(
        (
          await s.call("POST", "/v1/admin/policies/stale/draft/promote", {
            body: { expectVersion: 1 },
          })
        ).status,
      ).toBe(409);
      const ok = await s.call("POST", "/v1/admin/policies/stale/draft/promote", {
        body: { draftId: redraft.body.id, expectVersion: 2 },
      });
      expect(ok.status).toBe(200);
      expect(ok.body).toMatchObject({ version: 3, rules: [{ limit: 3, period: "1m" }] });
    });

    it("refuses (409) to replace a draft without naming it, or to draft from a stale version", async () => {
      await s.createPolicy({ name: "two", rules: [{ limit: 10, period: "1m" }], apps: ["web"] });
      const first = await s.call("PUT", "/v1/admin/policies/two/draft", {
        body: { rules: [{ limit: 5, period: "1m" }], apps: ["web"] },
      });
      expect(first.status).toBe(200);
      const second = await s.call("PUT", "/v1/admin/policies/two/draft", {
        body: { rules: [{ limit: 6, period: "1m" }], apps: ["web"] },
      });
      expect(second.status).toBe(409);
      expect(second.body.error.message).toContain(
        `policy "two" already has a draft (id ${first.body.id}, by root, based on version 1)`,
      );
      expect((await s.call("GET", "/v1/admin/policies/two/draft")).body.doc.rules).toEqual([
        { limit: 5, period: "1m" },
      ]);
      const wrongId = await s.call("PUT", "/v1/admin/policies/two/draft", {
        body: { rules: [{ limit: 6, period: "1m" }], apps: ["web"], draftId: first.body.id + 1000 },
      });
      expect(wrongId.status).toBe(409);
      const staleBase = await s.call("PUT", "/v1/admin/policies/two/draft", {
        body: {
          rules: [{ limit: 6, period: "1m" }],
          apps: ["web"],
          draftId: first.body.id,
          expectVersion: 7,
        },
      });
      expect(staleBase.status).toBe(409);
      const replaced = await s.call("PUT", "/v1/admin/policies/two/draft", {
        body: { rules: [{ limit: 6, period: "1m" }], apps: ["web"], draftId: first.body.id },
      });
      expect(replaced.status).toBe(200);
      expect(replaced.body.id).not.toBe(first.body.id);
      const audit = (await s.call("GET", "/v1/admin/audit?target=two&limit=1")).body.entries[0];
      expect(audit).toMatchObject({
        action: "policy.draft",
        detail: { replacedDraftId: first.body.id },
      });
      // The id of a draft that is gone is refused, rather than taken as "no draft".
      expect((await s.call("DELETE", "/v1/admin/policies/two/draft")).status).toBe(204);
      const gone = await s.call("PUT", "/v1/admin/policies/two/draft", {
        body: { rules: [{ limit: 6, period: "1m" }], apps: ["web"], draftId: replaced.body.id },
      });
      expect(gone.status).toBe(409);
      // draftId is a field of drafts only.
      const onPolicy = await s.call("PUT", "/v1/admin/policies/two", {
        body: { rules: [{ limit: 6, period: "1m" }], apps: ["web"], draftId: 1 },
      });
      expect(onPolicy.status).toBe(400);
    });
  });

  describe("apps, users, audit, import/export", () => {
    it("names are case-sensitive, and text (any Unicode) reads back as written", async () => {
      // MySQL's usual collations compare "Web" equal to "web"; the tables' binary collation
      // keeps them two names, as SQLite and PostgreSQL do.
      const upper = await s.call("POST", "/v1/admin/apps", { body: { name: "Web" } });
      expect(upper.status).toBe(201);
      const description = "Grüße aus Köln — 限流 🚦 (four-byte characters too)";
      for (const [name, limit] of [
        ["Case.sensitive", 3],
        ["case.sensitive", 4],
      ] as const) {
        const r = await s.call("POST", "/v1/admin/policies", {
          body: { name, description, rules: [{ limit, period: "1m" }], apps: ["Web"] },
        });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
      }
      for (const [name, limit] of [
        ["Case.sensitive", 3],
        ["case.sensitive", 4],
      ] as const) {
        const r = await s.call("GET", `/v1/admin/policies/${name}`);
        expect(r.body).toMatchObject({ name, description, rules: [{ limit, period: "1m" }] });
      }
      expect((await s.call("GET", "/v1/admin/policies/CASE.SENSITIVE")).status).toBe(404);
      const apps = (await s.call("GET", "/v1/admin/apps")).body.apps as {
        name: string;
        policies: string[];
      }[];
      const named = (n: string) => apps.filter((a) => a.name === n);
      expect(named("Web")).toMatchObject([{ policies: ["Case.sensitive", "case.sensitive"] }]);
      expect(named("web")).toHaveLength(1);
      expect(named("web")[0]!.policies).not.toContain("case.sensitive");
      expect((await s.call("DELETE", "/v1/admin/apps/WEB")).status).toBe(404);
      // "Web" is granted both; "web" neither.
      expect(
        (
          await call(s.url, "POST", "/v1/limit", {
            token: webKey,
            body: { policy: "case.sensitive", key: "k" },
          })
        ).status,
      ).toBe(403);
      for (const name of ["Case.sensitive", "case.sensitive"])
        expect((await s.call("DELETE", `/v1/admin/policies/${name}`)).status).toBe(204);
      expect((await s.call("DELETE", "/v1/admin/apps/Web")).status).toBe(204);
      expect(
        ((await s.call("GET", "/v1/admin/apps")).body.apps as { name: string }[]).some(
          (a) => a.name === "web",
        ),
      ).toBe(true);
    });

    it("shows an app key once, stores it hashed, and rotates it", async () => {
      const created = await s.call("POST", "/v1/admin/apps", {
        body: { name: "cli-app", description: "d" },
      });
      expect(created.status).toBe(201);
      const key = created.body.apiKey as string;
      expect(key).toMatch(/^sk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
      const listed = await s.call("GET", "/v1/admin/apps");
      expect(JSON.stringify(listed.body)).not.toContain(key);
      const rows = await s.service.context.repo.database.db
        .selectFrom("apps")
        .selectAll()
        .execute();
      expect(JSON.stringify(rows)).not.toContain(key.slice(20));
      await s.createPolicy({
        name: "cli-policy",
        rules: [{ limit: 5, period: "1m" }],
        apps: ["cli-app"],
      });
      expect(
        (
          await call(s.url, "POST", "/v1/limit", {
            token: key,
            body: { policy: "cli-policy", key: "x" },
          })
        ).status,
      ).toBe(200);
      const rotated = await s.call("POST", "/v1/admin/apps/cli-app/rotate-key");
      await s.sync();
      expect(
        (
          await call(s.url, "POST", "/v1/limit", {
            token: key,
            body: { policy: "cli-policy", key: "x" },
          })
        ).status,
      ).toBe(401);
      expect(
        (
          await call(s.url, "POST", "/v1/limit", {
            token: rotated.body.apiKey,
            body: { policy: "cli-policy", key: "x" },
          })
        ).status,
      ).toBe(200);
    });

    it("changes a user's role and ends their sessions", async () => {
      const token = await s.createUser("temp", "viewer");
      const r = await s.call("PATCH", "/v1/admin/users/temp", {
        body: { role: "owner", apps: ["mobile"] },
      });
      expect(r.body).toMatchObject({ username: "temp", role: "owner", apps: ["mobile"] });
      expect((await call(s.url, "GET", "/v1/admin/me", { token })).status).toBe(401);
      // Back to viewer: its apps must go in the same change.
      const refused = await s.call("PATCH", "/v1/admin/users/temp", { body: { role: "viewer" } });
      expect(refused.status).toBe(400);
      expect(refused.body.error.issues).toEqual([
        {
          path: "apps",
          message:
            'only owners own apps: a viewer must own none (send "apps": [] with "role": "viewer")',
        },
      ]);
      const viewer = await s.call("PATCH", "/v1/admin/users/temp", {
        body: { role: "viewer", apps: [] },
      });
      expect(viewer.body).toMatchObject({ role: "viewer", apps: [] });
      expect((await s.call("DELETE", "/v1/admin/users/temp")).status).toBe(204);
      const users = (await s.call("GET", "/v1/admin/users")).body.users;
      expect(JSON.stringify(users)).not.toMatch(/password|scrypt/);
    });

    it("records every change in the audit log, newest first, paged", async () => {
      const page = (await s.call("GET", "/v1/admin/audit?limit=3")).body.entries;
      expect(page).toHaveLength(3);
      const next = (await s.call("GET", `/v1/admin/audit?limit=3&before=${page[2].id}`)).body
        .entries;
      expect(next[0].id).toBeLessThan(page[2].id);
      const all = (await s.call("GET", "/v1/admin/audit?limit=500")).body.entries.map(
        (e: { action: string }) => e.action,
      );
      for (const a of [
        "app.create",
        "user.create",
        "policy.create",
        "policy.update",
        "policy.draft",
        "policy.promote",
        "app.rotate-key",
        "user.delete",
      ])
        expect(all).toContain(a);
    });

    it("exports YAML and imports it back (all or nothing; unchanged policies keep their version)", async () => {
      const exp = await fetch(`${s.url}/v1/admin/policies/export`, {
        headers: { authorization: `Bearer ${s.adminToken}` },
      });
      const yaml = await exp.text();
      expect(exp.headers.get("content-type")).toMatch(/yaml/);
      expect(yaml).toMatch(/^version: 1$/m);
      expect(yaml).toContain("name: web-api");
      const same = await s.call("POST", "/v1/admin/policies/import", {
        raw: yaml,
        contentType: "application/yaml",
      });
      expect(same.status).toBe(200);
      expect(same.body.plan.create).toEqual([]);
      expect(same.body.plan.update).toEqual([]);
      const changed = yaml.replace(
        "name: web-api\n    description: by owner",
        "name: web-api\n    description: from git",
      );
      const dry = await s.call("POST", "/v1/admin/policies/import?dryRun=true", {
        raw: changed,
        contentType: "application/yaml",
      });
      expect(dry.body).toMatchObject({ dryRun: true, plan: { update: ["web-api"] } });
      const ghostDry = await s.call("POST", "/v1/admin/policies/import?dryRun=true", {
        body: {
          version: 1,
          policies: [{ name: "ghosted", rules: [{ limit: 1, period: "1s" }], apps: ["ghost"] }],
        },
      });
      expect(ghostDry.status).toBe(400);
      expect(JSON.stringify(ghostDry.body.error)).toContain("unknown app(s): ghost");
      const before = await dbState();
      const bad = await s.call("POST", "/v1/admin/policies/import", {
        raw: changed.replace("limit: 5", "limit: -5"),
        contentType: "application/yaml",
      });
      expect(bad.status).toBe(400);
      expect(await dbState()).toEqual(before);
      const applied = await s.call("POST", "/v1/admin/policies/import", {
        raw: changed,
        contentType: "application/yaml",
      });
      expect(applied.body.plan.update).toEqual(["web-api"]);
      expect((await s.call("GET", "/v1/admin/policies/web-api")).body.description).toBe("from git");
    });

    it("exports JSON and YAML that import back unchanged", async () => {
      const json = await s.call("GET", "/v1/admin/policies/export?format=json");
      expect(json.body.version).toBe(1);
      const back = await s.call("POST", "/v1/admin/policies/import", { body: json.body });
      expect(back.status).toBe(200);
      expect(back.body.plan).toMatchObject({ create: [], update: [], delete: [] });
      expect(back.body.plan.unchanged.length).toBe(json.body.policies.length);
      const yaml = await (
        await fetch(`${s.url}/v1/admin/policies/export`, {
          headers: { authorization: `Bearer ${s.adminToken}` },
        })
      ).text();
      const yamlBack = await s.call("POST", "/v1/admin/policies/import", {
        raw: yaml,
        contentType: "application/yaml",
      });
      expect(yamlBack.body.plan).toEqual(back.body.plan);
      const badVersion = await s.call("POST", "/v1/admin/policies/import", {
        body: { ...json.body, version: 2 },
      });
      expect(badVersion.status).toBe(400);
      expect(badVersion.body.error.issues).toEqual([
        { path: "version", message: "must be 1 (the policy file version)" },
      ]);
    });

    it.each(["export", "import"])(
      "refuses a policy named %j, a route word (it could not be read back)",
      async (name) => {
        for (const r of [
          await s.call("POST", "/v1/admin/policies", {
            body: { name, rules: [{ limit: 1, period: "1s" }] },
          }),
          await s.call("PUT", `/v1/admin/policies/${name}`, {
            body: { rules: [{ limit: 1, period: "1s" }] },
          }),
          await s.call("POST", "/v1/admin/policies/import", {
            body: { policies: [{ name, rules: [{ limit: 1, period: "1s" }] }] },
          }),
        ]) {
          expect(r.status).toBe(400);
          expect(r.body.error.issues).toContainEqual({
            path: expect.stringMatching(/(^|\.)name$/),
            message: `"${name}" is reserved: it is a route of the admin API (/v1/admin/policies/${name})`,
          });
        }
      },
    );

    it("audits each policy an import deletes (prune), with the deleted document", async () => {
      const keep = (await s.call("GET", "/v1/admin/policies/export?format=json")).body.policies;
      await s.createPolicy({ name: "pruned-a", rules: [{ limit: 1, period: "1s" }] });
      await s.createPolicy({
        name: "pruned-b",
        description: "goes",
        rules: [{ limit: 2, period: "1s" }],
      });
      const docs = {
        a: (await s.call("GET", "/v1/admin/policies/pruned-a")).body,
        b: (await s.call("GET", "/v1/admin/policies/pruned-b")).body,
      };
      const r = await s.call("POST", "/v1/admin/policies/import", {
        body: { policies: keep, prune: true },
      });
      expect(r.body.plan.delete.sort()).toEqual(["pruned-a", "pruned-b"]);
      for (const [name, rec] of [
        ["pruned-a", docs.a],
        ["pruned-b", docs.b],
      ] as const) {
        const entry = (await s.call("GET", `/v1/admin/audit?target=${name}&limit=1`)).body
          .entries[0];
        expect(entry).toMatchObject({
          action: "policy.delete",
          actor: "root",
          detail: {
            via: "import",
            version: 1,
            before: {
              name,
              rules: rec.rules,
              description: rec.description,
              apps: [],
              enabled: true,
            },
          },
        });
      }
    });
  });
});
