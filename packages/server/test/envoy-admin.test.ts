/**
 * Envoy domains as data with history, on every SQL database: import and export in the
 * reference format, versions and restore, drafts evaluated in shadow on live gRPC requests,
 * roles, a descriptor's counters (peek, reset), the audit log (before → after, as for policies)
 * and the traffic history and top keys that Envoy's decisions feed.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forEachDatabase } from "./databases.js";
import { type RlsClient, rlsClient } from "./envoy-client.js";
import { type TestService, startService } from "./helpers.js";

const API = `
domain: api
descriptors:
  - key: remote_address
    rate_limit:
      unit: day
      requests_per_unit: 2
`;
const OTHER = `
domain: other
descriptors:
  - key: database
    value: users
    rate_limit: { unit: second, requests_per_unit: 500 }
`;

forEachDatabase((database) => {
  let s: TestService;
  let rls: RlsClient;
  let viewer: string;
  let owner: string;

  beforeAll(async () => {
    s = await startService({ databaseUrl: await database().fresh(), values: { grpcPort: 0 } });
    rls = rlsClient(`127.0.0.1:${s.service.grpcPort()}`);
    await s.createApp("web");
    viewer = await s.createUser("vera", "viewer");
    owner = await s.createUser("otto", "owner", ["web"]);
  });
  afterAll(async () => {
    rls?.close();
    await s?.close();
  });

  const ask = (domain: string, value: string) =>
    rls.shouldRateLimit({
      domain,
      descriptors: [{ entries: [{ key: "remote_address", value }] }],
    });

  describe("import and export", () => {
    it("imports reference files (YAML, several domains) all or nothing, admins only", async () => {
      const text = `${API}---\n${OTHER}`;
      for (const token of [viewer, owner]) {
        const r = await s.call("POST", "/v1/admin/envoy/import", {
          token,
          raw: text,
          contentType: "application/yaml",
        });
        expect(r.status).toBe(403);
      }
      const dry = await s.call("POST", "/v1/admin/envoy/import?dryRun=true", {
        raw: text,
        contentType: "application/yaml",
      });
      expect(dry.body).toEqual({
        dryRun: true,
        plan: { create: ["api", "other"], update: [], unchanged: [], delete: [] },
      });
      const bad = await s.call("POST", "/v1/admin/envoy/import", {
        raw: `${API}---\ndomain: broken\ndescriptors:\n  - key: a\n    rate_limit: { unit: eon }\n`,
        contentType: "application/yaml",
      });
      expect(bad.status).toBe(400);
      expect(bad.body.error.issues).toEqual([
        {
          path: "1.descriptors.0.rate_limit.unit",
          message:
            "invalid rate limit unit 'eon': must be one of second, minute, hour, day, week, month, year",
        },
      ]);
      expect((await s.call("GET", "/v1/admin/envoy/domains")).body.domains).toEqual([]);
      const r = await s.call("POST", "/v1/admin/envoy/import", {
        raw: text,
        contentType: "application/yaml",
      });
      expect(r.body.plan.create).toEqual(["api", "other"]);
      // Live on this node at once (read your writes).
      expect((await ask("api", "1.1.1.1")).statuses[0]!.limitRemaining).toBe(1);
    });

    it("lists domains and shows each limit as the node runs it, to every role", async () => {
      const list = await s.call("GET", "/v1/admin/envoy/domains", { token: viewer });
      expect(list.body.service).toEqual({ grpc: true });
      expect(
        list.body.domains.map((d: { domain: string; limits: number }) => [d.domain, d.limits]),
      ).toEqual([
        ["api", 1],
        ["other", 1],
      ]);
      const one = await s.call("GET", "/v1/admin/envoy/domains/api", { token: owner });
      expect(one.status).toBe(200);
      expect(one.body.limits).toEqual([
        {
          path: "api.remote_address",
          policy: expect.stringMatching(/^envoy\.api\.remote_address:[0-9a-f]{12}$/),
          name: null,
          replaces: [],
          unlimited: false,
          shadow: false,
          quota: false,
          algorithm: "fixed-window",
          onStoreError: "allow",
          rules: [{ requestsPerUnit: 2, periodMs: 86_400_000, unit: "day", burst: null }],
        },
      ]);
      expect((await s.call("GET", "/v1/admin/envoy/domains/nope")).status).toBe(404);
    });

    it("exports the reference format back (YAML or JSON), which imports unchanged", async () => {
      const yaml = await s.call("GET", "/v1/admin/envoy/export");
      expect(yaml.status).toBe(200);
      expect(yaml.headers.get("content-type")).toMatch(/^application\/yaml/);
      const again = await s.call("POST", "/v1/admin/envoy/import", {
        raw: yaml.body as string,
        contentType: "application/yaml",
      });
      expect(again.body.plan).toEqual({
        create: [],
        update: [],
        unchanged: ["api", "other"],
        delete: [],
      });
      const json = await s.call("GET", "/v1/admin/envoy/export?format=json&domain=other");
      expect(json.body).toEqual({
        domains: [
          {
            domain: "other",
            descriptors: [
              {
                key: "database",
                value: "users",
                rate_limit: { unit: "second", requests_per_unit: 500 },
              },
            ],
          },
        ],
      });
    });

    it("refuses an export query it does not know, naming the field (400)", async () => {
      for (const [query, issue] of [
        ["format=xml", { path: "format", message: expect.stringMatching(/yaml or json/) }],
        ["domain=", { path: "domain" }],
        ["bogus=1", { path: "", message: expect.stringMatching(/bogus/) }],
      ] as const) {
        const r = await s.call("GET", `/v1/admin/envoy/export?${query}`);
        expect([r.status, r.body.error.code]).toEqual([400, "invalid_request"]);
        expect(r.body.error.issues).toEqual([expect.objectContaining(issue)]);
      }
      const missing = await s.call("GET", "/v1/admin/envoy/export?domain=nope");
      expect(missing.status).toBe(404);
      expect(missing.body.error.message).toBe('domain "nope" does not exist');
    });
  });

  describe("versions", () => {
    it("each change is a version: update, conflict on a stale expectVersion, restore", async () => {
      const put = await s.call("PUT", "/v1/admin/envoy/domains/api", {
        body: {
          expectVersion: 1,
          descriptors: [
            { key: "remote_address", rate_limit: { unit: "day", requests_per_unit: 3 } },
          ],
        },
      });
      expect([put.status, put.body.version]).toEqual([200, 2]);
      const stale = await s.call("PUT", "/v1/admin/envoy/domains/api", {
        body: { expectVersion: 1, descriptors: [] },
      });
      expect(stale.status).toBe(409);
      const mismatch = await s.call("PUT", "/v1/admin/envoy/domains/api", {
        body: { domain: "other", descriptors: [] },
      });
      expect(mismatch.body.error.issues).toEqual([
        { path: "domain", message: 'must match the URL ("api") or be left out' },
      ]);
      expect(
        (
          await s.call("PUT", "/v1/admin/envoy/domains/api", {
            token: owner,
            body: { descriptors: [] },
          })
        ).status,
      ).toBe(403);
      const versions = await s.call("GET", "/v1/admin/envoy/domains/api/versions");
      expect(
        versions.body.versions.map((v: { version: number; action: string }) => [
          v.version,
          v.action,
        ]),
      ).toEqual([
        [2, "update"],
        [1, "import"],
      ]);
      const restored = await s.call("POST", "/v1/admin/envoy/domains/api/versions/1/restore");
      expect([restored.body.version, restored.body.limits[0].rules[0].requestsPerUnit]).toEqual([
        3, 2,
      ]);
    });

    it("a deleted domain answers no limit, and can be restored", async () => {
      const created = await s.call("PUT", "/v1/admin/envoy/domains/gone", {
        raw: "domain: gone\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: day, requests_per_unit: 1 }\n",
        contentType: "application/yaml",
      });
      expect(created.status).toBe(201);
      expect((await ask("gone", "x")).statuses[0]!.currentLimit).not.toBeNull();
      expect((await s.call("DELETE", "/v1/admin/envoy/domains/gone")).status).toBe(204);
      expect((await ask("gone", "x")).statuses[0]!.currentLimit).toBeNull();
      await s.call("POST", "/v1/admin/envoy/domains/gone/versions/1/restore");
      expect((await ask("gone", "y")).statuses[0]!.currentLimit).not.toBeNull();
    });
  });

  describe("drafts", () => {
    it("a draft runs in shadow beside the enforced version and counts what it would change", async () => {
      const draft = await s.call("PUT", "/v1/admin/envoy/domains/api/draft", {
        raw: "domain: api\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: day, requests_per_unit: 1 }\n",
        contentType: "application/yaml",
      });
      expect(draft.status).toBe(200);
      // Enforced: 2 a day; draft: 1 a day. Three requests of one address.
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push((await ask("api", "draft-test")).overallCode);
      expect(answers).toEqual(["OK", "OK", "OVER_LIMIT"]);
      const got = await s.call("GET", "/v1/admin/envoy/domains/api/draft");
      expect(got.body.stats).toEqual({
        evaluated: 3,
        wouldDeny: 2,
        wouldDenyNewly: 1,
        wouldAllowNewly: 0,
      });
      // The draft's own counters: the enforced limit was charged exactly as without a draft.
      const peek = await s.call("POST", "/v1/admin/envoy/domains/api/counters/peek", {
        body: { entries: [{ key: "remote_address", value: "draft-test" }] },
      });
      expect(peek.body.decision.remaining).toBe(0);
      const promoted = await s.call("POST", "/v1/admin/envoy/domains/api/draft/promote", {
        body: { draftId: draft.body.id },
      });
      expect(promoted.status).toBe(200);
      expect(promoted.body.limits[0].rules[0].requestsPerUnit).toBe(1);
      expect((await s.call("GET", "/v1/admin/envoy/domains/api/draft")).status).toBe(404);
    });
  });

  describe("counters", () => {
    it("peek shows a descriptor's counter; reset (admins) clears it and is audited", async () => {
      const entries = [{ key: "remote_address", value: "9.9.9.9" }];
      await ask("api", "9.9.9.9");
      const peek = await s.call("POST", "/v1/admin/envoy/domains/api/counters/peek", {
        token: viewer,
        body: { entries },
      });
      expect(peek.body).toMatchObject({
        limit: { path: "api.remote_address" },
        identifier: "remote_address=9.9.9.9",
        decision: { allowed: false, remaining: 0 },
      });
      expect(
        (
          await s.call("POST", "/v1/admin/envoy/domains/api/counters/reset", {
            token: viewer,
            body: { entries },
          })
        ).status,
      ).toBe(403);
      const reset = await s.call("POST", "/v1/admin/envoy/domains/api/counters/reset", {
        body: { entries },
      });
      expect(reset.body).toMatchObject({ reset: true, identifier: "remote_address=9.9.9.9" });
      expect((await ask("api", "9.9.9.9")).overallCode).toBe("OK");
      const none = await s.call("POST", "/v1/admin/envoy/domains/api/counters/peek", {
        body: { entries: [{ key: "unknown", value: "x" }] },
      });
      expect(none.body).toEqual({ limit: null, identifier: null, decision: null });
      const audit = await s.call("GET", "/v1/admin/audit?target=api");
      const actions = audit.body.entries.map((e: { action: string }) => e.action);
      expect(actions.slice(0, 3)).toEqual(["envoy.counters.reset", "envoy.promote", "envoy.draft"]);
      expect(audit.body.entries[0]).toMatchObject({
        actor: "root",
        targetType: "envoy_domain",
        detail: { path: "api.remote_address", identifier: "remote_address=9.9.9.9" },
      });
      // A draft is audited as a policy's is: the version it is based on → the draft.
      const draft = audit.body.entries.find((e: { action: string }) => e.action === "envoy.draft");
      expect(draft.detail).toMatchObject({
        before: { domain: "api", descriptors: [{ rate_limit: { requests_per_unit: 2 } }] },
        after: { domain: "api", descriptors: [{ rate_limit: { requests_per_unit: 1 } }] },
      });
    });
  });

  describe("traffic", () => {
    it("Envoy's decisions feed the traffic history (as envoy:<domain>) and the top keys of each limit", async () => {
      const edge = `domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: minute, requests_per_unit: 2 }\n`;
      await s.call("PUT", "/v1/admin/envoy/domains/edge", {
        raw: edge,
        contentType: "application/yaml",
      });
      const rec = await s.call("GET", "/v1/admin/envoy/domains/edge");
      const policy = rec.body.limits[0].policy as string;
      for (let i = 0; i < 3; i++) await ask("edge", "10.1.1.1");
      await ask("edge", "10.2.2.2");
      const history = await s.call("GET", "/v1/admin/traffic?app=envoy:edge&window=5m", {
        token: viewer,
      });
      expect(history.body.totals).toEqual({ allowed: 3, denied: 1, shadow: 0 });
      expect(history.body.by).toEqual([
        { name: policy, counts: { allowed: 3, denied: 1, shadow: 0 } },
      ]);
      const keys = await s.call(
        "GET",
        `/v1/admin/traffic/keys?policy=${encodeURIComponent(policy)}&window=5m`,
        { token: viewer },
      );
      expect(keys.body.busiest[0]).toMatchObject({ key: "remote_address=10.1.1.1", count: 3 });
      expect(keys.body.denied).toEqual([
        { key: "remote_address=10.1.1.1", count: 1, overcount: 0 },
      ]);
    });
  });
});
