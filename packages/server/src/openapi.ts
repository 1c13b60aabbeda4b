/**
 * The OpenAPI 3.1 document served at `/openapi.json`, generated from the same zod schemas the
 * handlers validate with (`z.toJSONSchema`), so the two cannot drift apart.
 */
import { z } from "zod";
import { namedSchemas } from "@sluice/api";

type Json = Record<string, unknown>;

const ref = (name: keyof typeof namedSchemas) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: keyof typeof namedSchemas) => ({
  content: { "application/json": { schema: ref(name) } },
});
const errors = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((s) => [String(s), { description: STATUS_TEXT[s] ?? "Error", ...json("Error") }]),
  );

const STATUS_TEXT: Record<number, string> = {
  400: "Bad input: `error.issues` names each field",
  401: "Missing or wrong credentials",
  403: "Not allowed (policy not granted, or role too low)",
  404: "Unknown policy or resource",
  409: "Conflict (exists, or version moved)",
  429: "Too many sign-in attempts",
  503: "Counter store or database unavailable",
};

function op(
  summary: string,
  options: {
    body?: keyof typeof namedSchemas;
    /** The body may be left out. */
    bodyOptional?: boolean;
    ok?: keyof typeof namedSchemas | "none" | "object";
    okStatus?: number;
    errs?: number[];
    security?: "app" | "admin" | "none";
    tags: string[];
  },
): Json {
  const okStatus = String(options.okStatus ?? 200);
  const ok =
    options.ok === undefined || options.ok === "object"
      ? { description: "OK", content: { "application/json": { schema: { type: "object" } } } }
      : options.ok === "none"
        ? { description: "Done" }
        : { description: "OK", ...json(options.ok) };
  return {
    summary,
    tags: options.tags,
    ...(options.body
      ? { requestBody: { required: !options.bodyOptional, ...json(options.body) } }
      : {}),
    responses: { [okStatus]: ok, ...errors(...(options.errs ?? [400, 401])) },
    ...(options.security === "none"
      ? { security: [] }
      : options.security === "app"
        ? { security: [{ apiKey: [] }] }
        : { security: [{ session: [] }] }),
  };
}

/** Adds the 304 answer of a conditional GET. */
function notModified(operation: Json): Json {
  const responses = operation.responses as Json;
  return {
    ...operation,
    responses: {
      ...responses,
      "304": { description: "Not modified: the client's set (its ETag) is still the set" },
    },
  };
}

/** Builds the OpenAPI document. */
export function buildOpenApi(): Json {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(namedSchemas)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    target: "draft-2020-12",
    io: "input",
    unrepresentable: "any",
    uri: (id) => `#/components/schemas/${id}`,
  });
  for (const s of Object.values(schemas)) delete (s as Json).$schema;

  const app = (
    summary: string,
    body: keyof typeof namedSchemas,
    ok: keyof typeof namedSchemas | "object",
  ) =>
    op(summary, {
      body,
      ok,
      security: "app",
      errs: [400, 401, 403, 404, 503],
      tags: ["decisions"],
    });
  const admin = (summary: string, o: Partial<Parameters<typeof op>[1]> = {}) =>
    op(summary, { tags: ["admin"], errs: [400, 401, 403, 404], ...o });
  const nameParam = { name: "name", in: "path", required: true, schema: { type: "string" } };
  const withName = (o: Json) => ({ parameters: [nameParam], ...o });
  const envoy = (summary: string, o: Partial<Parameters<typeof op>[1]> = {}) =>
    op(summary, { tags: ["envoy"], errs: [400, 401, 403, 404], ...o });
  const domainParam = { name: "domain", in: "path", required: true, schema: { type: "string" } };
  const withDomain = (o: Json) => ({ parameters: [domainParam], ...o });

  return {
    openapi: "3.1.0",
    info: {
      title: "sluice decision and admin API",
      version: "1",
      description: "Rate-limit decisions for apps, and policy administration. See docs/server.md.",
    },
    components: {
      schemas,
      securitySchemes: {
        apiKey: {
          type: "http",
          scheme: "bearer",
          description: "An app's API key (from POST /v1/admin/apps).",
        },
        session: {
          type: "http",
          scheme: "bearer",
          description: "A session token (from POST /v1/admin/login).",
        },
      },
    },
    paths: {
      "/v1/limit": {
        post: app("Decide one request (and charge it when allowed)", "LimitRequest", "Decision"),
      },
      "/v1/limit/batch": {
        post: app(
          "Decide several requests; every item is checked before any is charged",
          "BatchRequest",
          "BatchResponse",
        ),
      },
      "/v1/peek": {
        post: app("What a cost-1 request would get, without charging", "PeekRequest", "Decision"),
      },
      "/v1/release": { post: app("Release a concurrency permit", "ReleaseRequest", "object") },
      "/v1/policies": {
        get: {
          ...notModified(
            op(
              "The policies granted to the app (for embedded clients); with If-None-Match and ?wait, a long poll that answers 304 when nothing changed",
              {
                ok: "PolicySet",
                security: "app",
                errs: [400, 401, 503],
                tags: ["embedded clients"],
              },
            ),
          ),
          parameters: [
            {
              name: "wait",
              in: "query",
              required: false,
              schema: { type: "integer", minimum: 0, maximum: 60000 },
              description:
                "Long poll: when the set's ETag equals If-None-Match, wait up to this long (ms) for a change before answering 304.",
            },
            {
              name: "revision",
              in: "query",
              required: false,
              schema: { type: "integer", minimum: 0 },
              description:
                "The revision the client has seen: a node behind it checks the database before answering.",
            },
            {
              name: "If-None-Match",
              in: "header",
              required: false,
              schema: { type: "string" },
              description: "The ETag of the set the client has: 304 while it is still the set.",
            },
          ],
        },
      },
      "/v1/policies/report": {
        post: op(
          "An embedded client's counts since its last report (drafts, decisions) and its heartbeat",
          {
            body: "PolicyReport",
            ok: "PolicyReportAnswer",
            security: "app",
            errs: [400, 401, 503],
            tags: ["embedded clients"],
          },
        ),
      },
      "/v1/admin/login": {
        post: admin("Sign in; returns a session token", {
          body: "LoginRequest",
          ok: "LoginResponse",
          security: "none",
          errs: [400, 401, 429],
        }),
      },
      "/v1/admin/logout": {
        post: admin("End the session", { ok: "none", okStatus: 204, errs: [401] }),
      },
      "/v1/admin/me": { get: admin("The signed-in user", { ok: "SessionUser", errs: [401] }) },
      "/v1/admin/me/password": {
        post: admin(
          "Change your own password (the current one is checked; your other sessions end)",
          { body: "PasswordChange", ok: "none", okStatus: 204, errs: [400, 401, 429] },
        ),
      },
      "/v1/admin/setup": {
        get: admin("Whether the first admin is still to be made", {
          ok: "SetupStatus",
          security: "none",
          errs: [],
        }),
        post: admin(
          "Create the first admin with the one-time setup token sluice serve printed; signs in",
          { body: "SetupRequest", ok: "LoginResponse", security: "none", errs: [400, 401, 409] },
        ),
      },
      "/v1/admin/traffic/overview": {
        get: admin(
          "Every policy with its current rate, last 5 minutes and a sparkline, in order of attention (every node's counts)",
          { ok: "TrafficOverview", errs: [401] },
        ),
      },
      "/v1/admin/traffic": {
        get: admin(
          "Allowed / denied / shadow would-deny per bucket (?policy, ?app, ?window=5m|15m|1h|6h|24h), every node's counts",
          { ok: "TrafficHistory" },
        ),
      },
      "/v1/admin/traffic/keys": {
        get: admin(
          "The busiest and most-denied keys of a policy (?policy, ?window=1m|5m|15m|1h), merged over every node",
          { ok: "TopKeys" },
        ),
      },
      "/v1/admin/policies": {
        get: admin("List policies", { ok: "PolicyList" }),
        post: admin("Create a policy (admin, or owner of a granted app)", {
          body: "PolicyDocument",
          ok: "PolicyRecord",
          okStatus: 201,
          errs: [400, 401, 403, 409],
        }),
      },
      "/v1/admin/policies/export": {
        get: admin("Export every policy as a YAML (or ?format=json) policy file"),
      },
      "/v1/admin/policies/import": {
        post: admin(
          "Import a policy file (JSON body, or YAML with Content-Type application/yaml); all or nothing",
          { body: "ImportRequest", ok: "ImportResult", errs: [400, 401, 403] },
        ),
      },
      "/v1/admin/policies/{name}": withName({
        get: admin("One policy", { ok: "PolicyRecord" }),
        put: admin("Create or replace a policy (a new version)", {
          body: "PolicyWrite",
          ok: "PolicyRecord",
          errs: [400, 401, 403, 409],
        }),
        delete: admin("Delete a policy (its versions are kept)", { ok: "none", okStatus: 204 }),
      }),
      "/v1/admin/policies/{name}/key": withName({
        get: admin("What a key has left under the policy (?key=…): a peek, nothing charged", {
          ok: "KeyState",
        }),
      }),
      "/v1/admin/explain": {
        get: {
          ...admin(
            "Why a key is (or is not) limited under a policy, now: each rule's state, the rule that denies (or will deny first) and when it frees, a penalty block, what answers, and the draft's answer; nothing charged",
            { ok: "Explanation", errs: [400, 401, 404, 503] },
          ),
          parameters: [
            {
              name: "policy",
              in: "query",
              required: true,
              schema: { type: "string" },
              description: "The policy's name.",
            },
            {
              name: "key",
              in: "query",
              required: true,
              schema: { type: "string" },
              description: "The identifier your app sends as key.",
            },
            {
              name: "cost",
              in: "query",
              required: false,
              schema: { type: "integer", minimum: 1 },
              description: "The cost explained (default 1).",
            },
          ],
        },
      },
      "/v1/admin/policies/{name}/key/reset": withName({
        post: admin(
          "Unblock a key: reset its counters (audited; admin, or owner of a granted app)",
          {
            body: "KeyResetRequest",
            ok: "KeyReset",
            errs: [400, 401, 403, 404, 503],
          },
        ),
      }),
      "/v1/admin/policies/{name}/overrides": {
        parameters: [
          nameParam,
          { name: "after", in: "query", required: false, schema: { type: "string" } },
          { name: "prefix", in: "query", required: false, schema: { type: "string" } },
          {
            name: "limit",
            in: "query",
            required: false,
            schema: { type: "integer", minimum: 1, maximum: 500, default: 100 },
          },
        ],
        get: admin("A page of the policy's per-key overrides, by key (?after, ?prefix, ?limit)", {
          ok: "OverrideList",
        }),
      },
      "/v1/admin/policies/{name}/overrides/{key}": {
        parameters: [
          nameParam,
          { name: "key", in: "path", required: true, schema: { type: "string", maxLength: 191 } },
        ],
        get: admin("One key's override", { ok: "Override" }),
        put: admin(
          "Set a key's override: rules that replace the policy's for this key (validated as the policy with these rules; audited; admin, or owner of a granted app). 201 when new",
          { body: "OverrideWrite", ok: "Override", errs: [400, 401, 403, 404, 503] },
        ),
        delete: admin("Delete a key's override (audited)", { ok: "none", okStatus: 204 }),
      },
      "/v1/admin/policies/{name}/versions": withName({
        get: admin("Every version, newest first", { ok: "VersionList" }),
      }),
      "/v1/admin/policies/{name}/versions/{version}": {
        parameters: [
          nameParam,
          { name: "version", in: "path", required: true, schema: { type: "integer" } },
        ],
        get: admin("One version", { ok: "PolicyVersion" }),
      },
      "/v1/admin/policies/{name}/versions/{version}/restore": {
        parameters: [
          nameParam,
          { name: "version", in: "path", required: true, schema: { type: "integer" } },
        ],
        post: admin("Make an earlier version the enforced one (as a new version)", {
          ok: "PolicyRecord",
        }),
      },
      "/v1/admin/policies/{name}/draft": withName({
        get: admin("The draft and what it would have denied (this node's shadow counts)", {
          ok: "Draft",
        }),
        put: admin(
          "Write the draft, evaluated in shadow beside the enforced version (replacing a draft takes its draftId)",
          { body: "DraftWrite", ok: "Draft", errs: [400, 401, 403, 404, 409] },
        ),
        delete: admin("Discard the draft", { ok: "none", okStatus: 204 }),
      }),
      "/v1/admin/policies/{name}/draft/promote": withName({
        post: admin(
          "Make the draft the enforced version (409 when it was made from an older version)",
          {
            body: "PromoteRequest",
            bodyOptional: true,
            ok: "PolicyRecord",
            errs: [400, 401, 403, 404, 409],
          },
        ),
      }),
      "/v1/admin/apps": {
        get: admin("List apps (never their keys)", { ok: "AppList" }),
        post: admin("Create an app; the API key is returned once (admin)", {
          body: "AppCreate",
          ok: "AppWithKey",
          okStatus: 201,
          errs: [400, 401, 403, 409],
        }),
      },
      "/v1/admin/apps/{name}/rotate-key": withName({
        post: admin("Replace an app's API key (admin, or its owner)", { ok: "AppWithKey" }),
      }),
      "/v1/admin/apps/{name}": withName({
        delete: admin("Delete an app (refused while policies are granted to it)", {
          ok: "none",
          okStatus: 204,
          errs: [401, 403, 404, 409],
        }),
      }),
      "/v1/admin/users": {
        get: admin("List users", { ok: "UserList" }),
        post: admin("Create a user (admin)", {
          body: "UserCreate",
          ok: "User",
          okStatus: 201,
          errs: [400, 401, 403, 409],
        }),
      },
      "/v1/admin/users/{username}": {
        parameters: [{ name: "username", in: "path", required: true, schema: { type: "string" } }],
        patch: admin("Change a user's role, apps or password (admin)", {
          body: "UserUpdate",
          ok: "User",
        }),
        delete: admin("Delete a user (admin; not the last admin)", {
          ok: "none",
          okStatus: 204,
          errs: [401, 403, 404, 409],
        }),
      },
      "/v1/admin/clients": {
        get: admin("Embedded policy clients seen in the last day (app, host, version, revision)", {
          ok: "ClientList",
          errs: [401],
        }),
      },
      "/v1/admin/audit": {
        get: admin(
          "The audit log, newest first (?limit, ?before, ?target, ?actor, ?action, ?object, ?since, ?until)",
          { ok: "AuditList" },
        ),
      },
      "/json": {
        post: {
          summary:
            "Envoy rate limit service, protojson form of ShouldRateLimit (on when grpcPort is set): 200 OK, 429 over limit, 503 only the counter store failing says no",
          tags: ["envoy"],
          security: [],
          requestBody: {
            required: true,
            content: { "application/json": { schema: { type: "object" } } },
          },
          responses: {
            "200": { description: "RateLimitResponse, overallCode OK" },
            "429": { description: "RateLimitResponse, overallCode OVER_LIMIT" },
            "503": {
              description:
                "RateLimitResponse, OVER_LIMIT because the counter store failed and the limits fail closed",
            },
            ...errors(400),
          },
        },
      },
      "/v1/admin/envoy/domains": {
        get: envoy("List Envoy domains", { ok: "EnvoyDomainList" }),
      },
      "/v1/admin/envoy/export": {
        get: envoy(
          "Export Envoy domains in the reference format: YAML (one document per domain), or ?format=json; ?domain= for one",
        ),
      },
      "/v1/admin/envoy/import": {
        post: envoy(
          "Import reference-format files (YAML with Content-Type application/yaml, one document per domain; or JSON) all or nothing (admin)",
          { body: "EnvoyImportRequest", ok: "EnvoyImportResult", errs: [400, 401, 403] },
        ),
      },
      "/v1/admin/envoy/domains/{domain}": withDomain({
        get: envoy("One domain, with its limits as this node runs them", {
          ok: "EnvoyDomainRecord",
        }),
        put: envoy(
          "Create or replace a domain (admin): JSON, or the reference YAML with Content-Type application/yaml",
          { body: "EnvoyDomainWrite", ok: "EnvoyDomainRecord", errs: [400, 401, 403, 409] },
        ),
        delete: envoy("Delete a domain (admin; its versions are kept)", {
          ok: "none",
          okStatus: 204,
        }),
      }),
      "/v1/admin/envoy/domains/{domain}/versions": withDomain({
        get: envoy("Every version, newest first", { ok: "EnvoyVersionList" }),
      }),
      "/v1/admin/envoy/domains/{domain}/versions/{version}": {
        parameters: [
          domainParam,
          { name: "version", in: "path", required: true, schema: { type: "integer" } },
        ],
        get: envoy("One version", { ok: "EnvoyVersion" }),
      },
      "/v1/admin/envoy/domains/{domain}/versions/{version}/restore": {
        parameters: [
          domainParam,
          { name: "version", in: "path", required: true, schema: { type: "integer" } },
        ],
        post: envoy("Make an earlier version the enforced one (admin)", {
          ok: "EnvoyDomainRecord",
        }),
      },
      "/v1/admin/envoy/domains/{domain}/draft": withDomain({
        get: envoy("The draft and what it would have changed on live requests", {
          ok: "EnvoyDraft",
        }),
        put: envoy("Write the draft, evaluated in shadow (admin)", {
          body: "EnvoyDomainWrite",
          ok: "EnvoyDraft",
          errs: [400, 401, 403, 404, 409],
        }),
        delete: envoy("Discard the draft (admin)", { ok: "none", okStatus: 204 }),
      }),
      "/v1/admin/envoy/domains/{domain}/draft/promote": withDomain({
        post: envoy("Make the draft the enforced version (admin)", {
          body: "PromoteRequest",
          bodyOptional: true,
          ok: "EnvoyDomainRecord",
          errs: [400, 401, 403, 404, 409],
        }),
      }),
      "/v1/admin/envoy/domains/{domain}/counters/peek": withDomain({
        post: envoy("What a descriptor's counter holds now (no charge)", {
          body: "EnvoyCounterRequest",
          ok: "EnvoyCounterAnswer",
          errs: [400, 401, 404, 503],
        }),
      }),
      "/v1/admin/envoy/domains/{domain}/counters/reset": withDomain({
        post: envoy("Clear a descriptor's counter (admin; audited)", {
          body: "EnvoyCounterRequest",
          ok: "EnvoyCounterAnswer",
          errs: [400, 401, 403, 404, 503],
        }),
      }),
      "/healthz": { get: op("Liveness", { security: "none", errs: [], tags: ["operations"] }) },
      "/readyz": {
        get: op(
          "Readiness: database and counter store reachable (the causes of a failure for an admin's session token only)",
          {
            security: "none",
            errs: [503],
            tags: ["operations"],
          },
        ),
      },
      "/metrics": {
        get: {
          summary: "Prometheus metrics",
          tags: ["operations"],
          security: [],
          responses: {
            "200": {
              description: "Prometheus text format",
              content: { "text/plain": { schema: { type: "string" } } },
            },
          },
        },
      },
      "/openapi.json": {
        get: {
          summary: "This document",
          tags: ["operations"],
          security: [],
          responses: { "200": { description: "OpenAPI 3.1" } },
        },
      },
    },
  };
}
