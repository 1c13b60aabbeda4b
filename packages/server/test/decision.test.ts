/**
 * The decision API with memory counters, on every SQL database of ./databases.ts: decisions
 * and headers, grants, errors, batch, peek, release, disabled policies, metrics, OpenAPI.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decisionSchema } from "@sluice/api";
import { forEachDatabase } from "./databases.js";
import { type TestService, call, startService } from "./helpers.js";

forEachDatabase((database) => {
  let s: TestService;
  let webKey: string;
  let otherKey: string;

  beforeAll(async () => {
    s = await startService({ databaseUrl: await database().fresh() });
    webKey = await s.createApp("web");
    otherKey = await s.createApp("other");
    await s.createPolicy({ name: "api", rules: [{ limit: 3, period: "1m" }], apps: ["web"] });
    await s.createPolicy({
      name: "multi",
      // Long windows, so a window edge cannot fall between the test's requests.
      algorithm: "fixed-window",
      rules: [
        { limit: 2, period: "1h" },
        { limit: 5, period: "1d" },
      ],
      apps: ["web"],
    });
    await s.createPolicy({
      name: "jobs",
      algorithm: "concurrency",
      rules: [{ limit: 1, period: "1m" }],
      apps: ["web"],
    });
    await s.createPolicy({
      name: "off",
      rules: [{ limit: 1, period: "1m" }],
      apps: ["web"],
      enabled: false,
    });
    await s.createPolicy({
      name: "off-multi",
      rules: [
        { limit: 10, period: "1s" },
        { limit: 5, period: "1h" },
        { limit: 5, period: "1m" },
      ],
      apps: ["web"],
      enabled: false,
    });
    await s.createPolicy({
      name: "private",
      rules: [{ limit: 10, period: "1m" }],
      apps: ["other"],
    });
  });
  afterAll(async () => {
    await s?.close();
  });

  const limit = (body: unknown, key = webKey) =>
    call(s.url, "POST", "/v1/limit", { token: key, body });

  describe("POST /v1/limit", () => {
    it("allows up to the limit, then denies with Retry-After, with both header formats", async () => {
      const results = [];
      for (let i = 0; i < 4; i++) results.push(await limit({ policy: "api", key: "alice" }));
      expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
      expect(results.map((r) => r.body.allowed)).toEqual([true, true, true, false]);
      expect(results.map((r) => r.body.remaining)).toEqual([2, 1, 0, 0]);
      const ok = results[0]!;
      expect(ok.headers.get("x-ratelimit-limit")).toBe("3");
      expect(ok.headers.get("x-ratelimit-remaining")).toBe("2");
      expect(Number(ok.headers.get("x-ratelimit-reset"))).toBeGreaterThan(Date.now() / 1000);
      expect(ok.headers.get("ratelimit-policy")).toBe('"api";q=3;w=60');
      expect(ok.headers.get("ratelimit")).toMatch(/^"api";r=2;t=\d+$/);
      expect(ok.headers.get("retry-after")).toBeNull();
      const denied = results[3]!;
      expect(denied.body.retryAfterMs).toBeGreaterThan(0);
      expect(denied.headers.get("retry-after")).toBe(
        String(Math.ceil(denied.body.retryAfterMs / 1000)),
      );
      // Another key is counted apart.
      expect((await limit({ policy: "api", key: "bob" })).body.allowed).toBe(true);
    });

    it("charges cost units and reports every rule of a multi-rule policy", async () => {
      const r = await limit({ policy: "multi", key: "k", cost: 2 });
      expect(r.body).toMatchObject({ allowed: true, cost: 2, remaining: 0 });
      expect(r.body.rules).toHaveLength(2);
      expect(r.headers.get("ratelimit-policy")).toBe('"multi-0";q=2;w=3600, "multi-1";q=5;w=86400');
      const denied = await limit({ policy: "multi", key: "k" });
      expect(denied.body.allowed).toBe(false);
    });

    it("401 without a key or with a wrong key", async () => {
      const none = await call(s.url, "POST", "/v1/limit", { body: { policy: "api", key: "x" } });
      expect(none.status).toBe(401);
      expect(none.body.error.code).toBe("unauthorized");
      expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
      const wrong = await limit(
        { policy: "api", key: "x" },
        webKey.slice(0, -4) + (webKey.endsWith("AAAA") ? "BBBB" : "AAAA"),
      );
      expect(wrong.status).toBe(401);
      const garbage = await limit({ policy: "api", key: "x" }, "not-a-key");
      expect(garbage.status).toBe(401);
    });

    it("403 for a policy not granted to the app, 404 for an unknown one", async () => {
      const r = await limit({ policy: "private", key: "x" });
      expect(r.status).toBe(403);
      expect(r.body.error).toMatchObject({ code: "forbidden", issues: [{ path: "policy" }] });
      expect((await limit({ policy: "private", key: "x" }, otherKey)).status).toBe(200);
      const unknown = await limit({ policy: "nope", key: "x" });
      expect(unknown.status).toBe(404);
      expect(unknown.body.error.code).toBe("policy_not_found");
    });

    it.each([
      [{ key: "x" }, "policy", "is required"],
      [{ policy: "api" }, "key", "is required"],
      [{ policy: "api", key: "" }, "key", "must not be empty"],
      [{ policy: "api", key: 42 }, "key", "must be a string"],
      [{ policy: "api", key: "x", cost: 0 }, "cost", "must be a positive integer"],
      [{ policy: "api", key: "x", cost: 1.5 }, "cost", "must be a positive integer"],
      [{ policy: "api", key: "x", cost: "2" }, "cost", "must be a positive integer"],
      [{ policy: "api", key: "x", cost: 4 }, "cost", "can never fit"],
      [{ policy: "api", key: "x", extra: true }, "", "unknown field(s): extra"],
      [[1, 2], "", "expected object"],
    ])("400 naming the field for %j", async (body, path, message) => {
      const r = await limit(body);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("invalid_request");
      expect(r.body.error.issues).toContainEqual({
        path,
        message: expect.stringContaining(message),
      });
    });

    it("400 (never 500) for malformed JSON, an empty body and a wrong content type", async () => {
      const bad = await call(s.url, "POST", "/v1/limit", { token: webKey, raw: '{"policy":' });
      expect(bad.status).toBe(400);
      expect(bad.body.error.code).toBe("invalid_request");
      const empty = await call(s.url, "POST", "/v1/limit", { token: webKey });
      expect(empty.status).toBe(400);
      expect(empty.body.error.message).toMatch(/body/);
      const text = await call(s.url, "POST", "/v1/limit", {
        token: webKey,
        raw: "policy=api",
        contentType: "application/x-www-form-urlencoded",
      });
      expect(text.status).toBe(415);
      expect(text.body.error.code).toBe("unsupported_media_type");
      const huge = await call(s.url, "POST", "/v1/limit", {
        token: webKey,
        raw: JSON.stringify({ policy: "api", key: "x".repeat(2_000_000) }),
      });
      expect(huge.status).toBe(413);
    });

    it("a disabled policy allows everything without counting, as a whole Decision", async () => {
      const untouched = {
        allowed: true,
        remaining: 1,
        resetAfterMs: 0,
        retryAfterMs: 0,
        limit: 1,
        periodMs: 60_000,
        burst: 1,
      };
      for (let i = 0; i < 3; i++) {
        const r = await limit({ policy: "off", key: "x", cost: 1 });
        expect(r.body).toEqual({
          allowed: true,
          limit: 1,
          remaining: 1,
          resetAfterMs: 0,
          retryAfterMs: 0,
          policy: "off",
          rule: 0,
          rules: [untouched],
          cost: 1,
          reason: "disabled",
          disabled: true,
        });
        expect(decisionSchema.safeParse(r.body).success).toBe(true);
      }
      // One entry per rule; the reported one is the least remaining, ties to the longer period.
      const multi = await limit({ policy: "off-multi", key: "x", cost: 2 });
      expect(multi.body.rules.map((r: { remaining: number }) => r.remaining)).toEqual([10, 5, 5]);
      expect(multi.body).toMatchObject({ rule: 1, limit: 5, remaining: 5, cost: 2 });
      expect(multi.body.rules[multi.body.rule].periodMs).toBe(3_600_000);
    });

    it("peeking at a disabled policy answers the same shape and counts no decision", async () => {
      const counted = async () => {
        const text = await (await fetch(`${s.url}/metrics`)).text();
        const m =
          /sluice_decisions_total\{policy="off",outcome="allowed",reason="disabled"\} (\d+)/.exec(
            text,
          );
        return Number(m?.[1] ?? 0);
      };
      const before = await counted();
      const r = await call(s.url, "POST", "/v1/peek", {
        token: webKey,
        body: { policy: "off", key: "x" },
      });
      expect(await counted()).toBe(before);
      expect(r.body).toMatchObject({ allowed: true, reason: "disabled", rule: 0, rules: [{}] });
    });
  });

  describe("batch, peek, release", () => {
    it("decides a batch, and refuses the whole batch (charging nothing) when one item is bad", async () => {
      const r = await call(s.url, "POST", "/v1/limit/batch", {
        token: webKey,
        body: {
          requests: [
            { policy: "api", key: "b1" },
            { policy: "api", key: "b1", cost: 2 },
            { policy: "api", key: "b1" },
          ],
        },
      });
      expect(r.status).toBe(200);
      expect(r.body.results.map((d: { allowed: boolean }) => d.allowed).sort()).toEqual([
        false,
        true,
        true,
      ]);

      const bad = await call(s.url, "POST", "/v1/limit/batch", {
        token: webKey,
        body: {
          requests: [
            { policy: "api", key: "b2" },
            { policy: "private", key: "b2" },
          ],
        },
      });
      expect(bad.status).toBe(403);
      expect(bad.body.error.issues).toEqual([
        { path: "requests.1.policy", message: "not granted to this app" },
      ]);
      const invalid = await call(s.url, "POST", "/v1/limit/batch", {
        token: webKey,
        body: {
          requests: [
            { policy: "api", key: "b2" },
            { policy: "api", key: "b2", cost: -1 },
          ],
        },
      });
      expect(invalid.status).toBe(400);
      expect(invalid.body.error.issues[0].path).toBe("requests.1.cost");
      const peek = await call(s.url, "POST", "/v1/peek", {
        token: webKey,
        body: { policy: "api", key: "b2" },
      });
      expect(peek.body.remaining).toBe(3);
      expect(
        (await call(s.url, "POST", "/v1/limit/batch", { token: webKey, body: { requests: [] } }))
          .status,
      ).toBe(400);
      expect(
        (await call(s.url, "POST", "/v1/limit/batch", { token: webKey, body: {} })).body.error
          .issues[0],
      ).toEqual({ path: "requests", message: "is required" });
    });

    it("peek does not charge", async () => {
      for (let i = 0; i < 5; i++) {
        const r = await call(s.url, "POST", "/v1/peek", {
          token: webKey,
          body: { policy: "api", key: "peeker" },
        });
        expect(r.body).toMatchObject({ allowed: true, remaining: 3 });
        expect(r.headers.get("x-ratelimit-remaining")).toBe("3");
      }
    });

    it("takes and releases a concurrency lease", async () => {
      const first = await limit({ policy: "jobs", key: "w" });
      expect(first.body.allowed).toBe(true);
      expect(typeof first.body.leaseId).toBe("string");
      expect((await limit({ policy: "jobs", key: "w" })).body.allowed).toBe(false);
      const rel = await call(s.url, "POST", "/v1/release", {
        token: webKey,
        body: { policy: "jobs", key: "w", leaseId: first.body.leaseId },
      });
      expect(rel.status).toBe(200);
      expect(rel.body).toEqual({ released: true });
      // Releasing it again, or a lease never taken, frees nothing and says so.
      const again = await call(s.url, "POST", "/v1/release", {
        token: webKey,
        body: { policy: "jobs", key: "w", leaseId: first.body.leaseId },
      });
      expect(again.body).toEqual({ released: false });
      const unknown = await call(s.url, "POST", "/v1/release", {
        token: webKey,
        body: { policy: "jobs", key: "w", leaseId: "no-such-lease" },
      });
      expect(unknown.body).toEqual({ released: false });
      expect((await limit({ policy: "jobs", key: "w" })).body.allowed).toBe(true);
      const wrong = await call(s.url, "POST", "/v1/release", {
        token: webKey,
        body: { policy: "api", key: "w", leaseId: "x" },
      });
      expect(wrong.status).toBe(400);
      expect(wrong.body.error.issues[0].path).toBe("policy");
      const missing = await call(s.url, "POST", "/v1/release", {
        token: webKey,
        body: { policy: "jobs", key: "w" },
      });
      expect(missing.body.error.issues).toEqual([{ path: "leaseId", message: "is required" }]);
    });
  });

  describe("operations", () => {
    it("exposes decisions by policy and outcome, store latency and errors in /metrics", async () => {
      const r = await fetch(`${s.url}/metrics`);
      const text = await r.text();
      expect(r.headers.get("content-type")).toMatch(/text\/plain/);
      expect(text).toMatch(
        /sluice_decisions_total\{policy="api",outcome="allowed",reason=""\} \d+/,
      );
      expect(text).toMatch(/sluice_decisions_total\{policy="api",outcome="denied",reason=""\} \d+/);
      // The memory store decides in-process and cannot fail: it is not timed (Redis is, see
      // postgres.test.ts), and its limiters keep their synchronous path.
      expect(text).toContain("# TYPE sluice_store_duration_seconds histogram");
      expect(text).not.toMatch(/sluice_store_duration_seconds_count\{store="memory"/);
      expect(text).toContain("# TYPE sluice_store_errors_total counter");
      expect(text).toMatch(/sluice_policies 6/);
    });

    it("answers /healthz, /readyz and an OpenAPI 3.1 document built from the schemas", async () => {
      expect((await call(s.url, "GET", "/healthz")).body).toEqual({ status: "ok" });
      const ready = await call(s.url, "GET", "/readyz");
      expect(ready.status).toBe(200);
      expect(ready.body.checks).toEqual({ database: "ok", counters: "ok" });
      const doc = (await call(s.url, "GET", "/openapi.json")).body;
      expect(doc.openapi).toBe("3.1.0");
      expect(doc.paths["/v1/limit"].post.requestBody.content["application/json"].schema).toEqual({
        $ref: "#/components/schemas/LimitRequest",
      });
      expect(doc.components.schemas.LimitRequest.required).toEqual(["policy", "key"]);
      expect(doc.components.schemas.PolicyDocument.properties.rules.items).toEqual({
        $ref: "#/components/schemas/Rule",
      });
      expect(Object.keys(doc.paths)).toContain("/v1/admin/policies/{name}/draft/promote");
    });

    it("redirects / to the admin page", async () => {
      const r = await fetch(`${s.url}/`, { redirect: "manual" });
      expect(r.status).toBe(302);
      expect(r.headers.get("location")).toBe("/admin/");
    });

    it("404 JSON for an unknown route", async () => {
      const r = await call(s.url, "GET", "/nope");
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe("not_found");
    });
  });
});
