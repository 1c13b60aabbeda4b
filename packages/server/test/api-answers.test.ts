/**
 * Every answer of the admin API, parsed with the strict schema the admin page takes its types
 * from (@sluice/api, packages/api): a field the service adds, drops or retypes fails here, so the
 * page's types cannot drift from what the service sends.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { z } from "zod";
import {
  appListSchema,
  appWithKeySchema,
  auditListSchema,
  clientListSchema,
  draftSchema,
  explanationSchema,
  importResultSchema,
  keyResetSchema,
  keyStateSchema,
  loginResponseSchema,
  policyListSchema,
  policyRecordSchema,
  policyReportAnswerSchema,
  policyVersionSchema,
  sessionUserSchema,
  setupStatusSchema,
  topKeysSchema,
  trafficHistorySchema,
  trafficOverviewSchema,
  userListSchema,
  userSchema,
  versionListSchema,
} from "@sluice/api";
import {
  envoyCounterAnswerSchema,
  envoyDomainListSchema,
  envoyDomainRecordSchema,
  envoyDraftSchema,
  envoyImportResultSchema,
  envoyVersionListSchema,
  envoyVersionSchema,
} from "@sluice/api";
import { buildOpenApi } from "../src/openapi.js";
import { type TestService, startService } from "./helpers.js";

let s: TestService;
beforeAll(async () => {
  s = await startService();
});
afterAll(async () => {
  await s?.close();
});

/** Calls the API as the admin and parses the answer with `schema` (unknown fields fail). */
async function answer<S extends z.ZodType>(
  schema: S,
  method: string,
  path: string,
  body?: unknown,
  status = 200,
): Promise<z.infer<S>> {
  const r = await s.call(method, path, { token: s.adminToken, body });
  expect({ path, status: r.status }).toEqual({ path, status });
  const parsed = schema.safeParse(r.body);
  if (!parsed.success)
    throw new Error(`${method} ${path}: ${parsed.error.message}\n${JSON.stringify(r.body)}`);
  return parsed.data;
}

describe("admin API answers match their schemas", () => {
  it("sign-in and the session user", async () => {
    const login = await s.call("POST", "/v1/admin/login", {
      body: { username: "root", password: "root-password" },
    });
    const parsed = loginResponseSchema.parse(login.body);
    expect(sessionUserSchema.parse(parsed.user)).toEqual({
      username: "root",
      role: "admin",
      apps: [],
    });
    expect(await answer(sessionUserSchema, "GET", "/v1/admin/me")).toMatchObject({
      username: "root",
    });
  });

  it("apps, users, policies, versions, drafts, import and audit", async () => {
    const app = await answer(appWithKeySchema, "POST", "/v1/admin/apps", { name: "web" }, 201);
    expect(app.apiKey).not.toBe("");
    await answer(appWithKeySchema, "POST", "/v1/admin/apps/web/rotate-key");

    await answer(
      userSchema,
      "POST",
      "/v1/admin/users",
      { username: "olivia", password: "olivia-password", role: "owner", apps: ["web"] },
      201,
    );
    await answer(userSchema, "PATCH", "/v1/admin/users/olivia", { apps: [] });
    expect((await answer(userListSchema, "GET", "/v1/admin/users")).users).toHaveLength(2);

    const doc = { name: "api", rules: [{ limit: 5, period: "1m" }], apps: ["web"] };
    const created = await answer(policyRecordSchema, "POST", "/v1/admin/policies", doc, 201);
    expect(created).toMatchObject({ name: "api", version: 1, algorithm: "gcra", enabled: true });
    await answer(policyRecordSchema, "PUT", "/v1/admin/policies/api", {
      ...doc,
      description: "v2",
    });
    await answer(policyRecordSchema, "GET", "/v1/admin/policies/api");
    const versions = await answer(versionListSchema, "GET", "/v1/admin/policies/api/versions");
    expect(versions.versions.map((v) => v.version)).toEqual([2, 1]);
    await answer(policyVersionSchema, "GET", "/v1/admin/policies/api/versions/1");
    await answer(policyRecordSchema, "POST", "/v1/admin/policies/api/versions/1/restore");

    await answer(draftSchema, "PUT", "/v1/admin/policies/api/draft", {
      ...doc,
      rules: [{ limit: 1, period: "1m" }],
    });
    const draft = await answer(draftSchema, "GET", "/v1/admin/policies/api/draft");
    expect(draft.stats).toEqual({
      evaluated: 0,
      wouldDeny: 0,
      wouldDenyNewly: 0,
      wouldAllowNewly: 0,
    });
    await s.sync(); // `hasDraft` is what this node runs
    const list = await answer(policyListSchema, "GET", "/v1/admin/policies");
    expect(list.policies.map((p) => [p.name, p.hasDraft])).toEqual([["api", true]]);
    await answer(policyRecordSchema, "POST", "/v1/admin/policies/api/draft/promote");

    const apps = await answer(appListSchema, "GET", "/v1/admin/apps");
    expect(apps.apps.map((a) => [a.name, a.policies])).toEqual([["web", ["api"]]]);

    const more = { policies: [doc, { name: "other", rules: [{ limit: 1, period: "1s" }] }] };
    const plan = await answer(importResultSchema, "POST", "/v1/admin/policies/import", {
      ...more,
      dryRun: true,
    });
    expect(plan).toEqual({
      dryRun: true,
      plan: { create: ["other"], update: ["api"], unchanged: [], delete: [] }, // api: the promoted draft differs
    });
    await answer(importResultSchema, "POST", "/v1/admin/policies/import", more);

    // A leased policy on this service's memory counters: every answer about it warns.
    const leased = { name: "hot", rules: [{ limit: 50, period: "1s" }], lease: true };
    const warning = [{ path: "lease", message: expect.stringContaining("counts in memory") }];
    expect(
      (await answer(policyRecordSchema, "POST", "/v1/admin/policies", leased, 201)).warnings,
    ).toEqual(warning);
    expect((await answer(policyRecordSchema, "GET", "/v1/admin/policies/hot")).warnings).toEqual(
      warning,
    );
    expect(
      (await answer(draftSchema, "PUT", "/v1/admin/policies/hot/draft", leased)).warnings,
    ).toEqual(warning);
    expect((await answer(draftSchema, "GET", "/v1/admin/policies/hot/draft")).warnings).toEqual(
      warning,
    );
    expect(
      (
        await answer(importResultSchema, "POST", "/v1/admin/policies/import", {
          policies: [leased],
          dryRun: true,
        })
      ).warnings,
    ).toEqual([{ ...warning[0], path: "policies.0.lease" }]);

    const audit = await answer(auditListSchema, "GET", "/v1/admin/audit?limit=500");
    expect(audit.entries.length).toBeGreaterThanOrEqual(10);

    // An embedded client's report (with the app's current key), then the list of clients.
    const key = (await answer(appWithKeySchema, "POST", "/v1/admin/apps/web/rotate-key")).apiKey;
    await s.sync();
    const reported = await s.call("POST", "/v1/policies/report", {
      token: key,
      body: { instance: "p1", host: "h1", client: "sluice/0.1.0", revision: 3 },
    });
    expect(policyReportAnswerSchema.parse(reported.body).ignored).toEqual([]);
    const clients = await answer(clientListSchema, "GET", "/v1/admin/clients");
    expect(clients.clients.map((c) => [c.app, c.instance, c.host, c.revision])).toEqual([
      ["web", "p1", "h1", 3],
    ]);
  });

  it("Envoy domains, versions, drafts, import and counters", async () => {
    const yaml =
      "domain: edge\ndescriptors:\n  - key: ip\n    rate_limit: { unit: day, requests_per_unit: 2 }\n";
    const r = await s.call("PUT", "/v1/admin/envoy/domains/edge", {
      raw: yaml,
      contentType: "application/yaml",
    });
    expect(r.status).toBe(201);
    expect(envoyDomainRecordSchema.parse(r.body).limits).toHaveLength(1);
    await answer(envoyDomainRecordSchema, "PUT", "/v1/admin/envoy/domains/edge", {
      descriptors: [{ key: "ip", rate_limit: { unit: "day", requests_per_unit: 3 } }],
    });
    await answer(envoyDomainRecordSchema, "GET", "/v1/admin/envoy/domains/edge");
    const list = await answer(envoyDomainListSchema, "GET", "/v1/admin/envoy/domains");
    expect(list.domains.map((d) => [d.domain, d.version])).toEqual([["edge", 2]]);
    // Started without a gRPC port: this node does not serve the Envoy service.
    expect(list.service).toEqual({ grpc: false });
    await answer(envoyVersionListSchema, "GET", "/v1/admin/envoy/domains/edge/versions");
    await answer(envoyVersionSchema, "GET", "/v1/admin/envoy/domains/edge/versions/1");
    await answer(
      envoyDomainRecordSchema,
      "POST",
      "/v1/admin/envoy/domains/edge/versions/1/restore",
    );
    await answer(envoyDraftSchema, "PUT", "/v1/admin/envoy/domains/edge/draft", {
      descriptors: [],
    });
    await answer(envoyDraftSchema, "GET", "/v1/admin/envoy/domains/edge/draft");
    await answer(envoyDomainRecordSchema, "POST", "/v1/admin/envoy/domains/edge/draft/promote");
    await answer(envoyImportResultSchema, "POST", "/v1/admin/envoy/import", {
      domains: [{ domain: "other", descriptors: [] }],
      dryRun: true,
    });
    await answer(
      envoyDomainRecordSchema,
      "POST",
      "/v1/admin/envoy/domains/edge/versions/1/restore",
    );
    const entries = [{ key: "ip", value: "1.2.3.4" }];
    const peek = await answer(
      envoyCounterAnswerSchema,
      "POST",
      "/v1/admin/envoy/domains/edge/counters/peek",
      { entries },
    );
    expect(peek.identifier).toBe("ip=1.2.3.4");
    await answer(envoyCounterAnswerSchema, "POST", "/v1/admin/envoy/domains/edge/counters/reset", {
      entries,
    });
  });

  it("traffic, keys and setup", async () => {
    const key = (await s.call("POST", "/v1/admin/apps/web/rotate-key")).body.apiKey as string;
    for (let i = 0; i < 3; i++)
      await s.call("POST", "/v1/limit", { token: key, body: { policy: "api", key: "u1" } });
    const overview = await answer(trafficOverviewSchema, "GET", "/v1/admin/traffic/overview");
    expect(overview.policies.map((p) => p.name)).toContain("api");
    const history = await answer(trafficHistorySchema, "GET", "/v1/admin/traffic?policy=api");
    expect(history.totals.allowed).toBe(3);
    const top = await answer(topKeysSchema, "GET", "/v1/admin/traffic/keys?policy=api");
    expect(top.busiest[0]).toEqual({ key: "u1", count: 3, overcount: 0 });
    await answer(keyStateSchema, "GET", "/v1/admin/policies/api/key?key=u1");
    await answer(explanationSchema, "GET", "/v1/admin/explain?policy=api&key=u1");
    await answer(keyResetSchema, "POST", "/v1/admin/policies/api/key/reset", { key: "u1" });
    expect(await answer(setupStatusSchema, "GET", "/v1/admin/setup")).toEqual({
      needed: false,
      tokenActive: false,
    });
  });

  it("are named in the OpenAPI document for every admin route that answers JSON", () => {
    type Op = { responses: Record<string, { content?: Record<string, { schema: unknown }> }> };
    const doc = buildOpenApi() as { paths: Record<string, Record<string, Op>> };
    const untyped: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      if (!path.startsWith("/v1/admin/")) continue;
      for (const [method, op] of Object.entries(item)) {
        if (method === "parameters") continue;
        for (const r of Object.values(op.responses)) {
          const schema = r.content?.["application/json"]?.schema as { $ref?: string } | undefined;
          if (schema && schema.$ref === undefined) untyped.push(`${method} ${path}`);
        }
      }
    }
    // The exports answer files (YAML, or the same as JSON): the policy-file format and the
    // reference rate limit service's format.
    expect(untyped).toEqual(["get /v1/admin/policies/export", "get /v1/admin/envoy/export"]);
  });
});
