/**
 * Errors that say what is wrong, through a started service: credentials with another scheme
 * than Bearer, a body with a `__proto__` key, bad JSON, and JSON sent as text/plain (415).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestService, startService } from "./helpers.js";

/** A raw request: the body and headers exactly as given. */
async function send(
  s: TestService,
  path: string,
  init: { body?: string; headers?: Record<string, string> },
) {
  const res = await fetch(`${s.url}${path}`, { method: "POST", ...init });
  return { status: res.status, body: (await res.json()) as { error: Record<string, unknown> } };
}

describe("error messages", () => {
  let s: TestService;
  let key: string;
  beforeAll(async () => {
    s = await startService();
    key = await s.createApp("web");
    await s.createPolicy({ name: "api", rules: [{ limit: 5, period: "1m" }], apps: ["web"] });
  });
  afterAll(async () => {
    await s?.close();
  });

  const json = { "content-type": "application/json" };
  const limitBody = JSON.stringify({ policy: "api", key: "k" });

  it("Authorization with another scheme says it is not a Bearer token", async () => {
    const basic = `Basic ${Buffer.from("web:secret").toString("base64")}`;
    const decision = await send(s, "/v1/limit", {
      body: limitBody,
      headers: { ...json, authorization: basic },
    });
    expect(decision.status).toBe(401);
    expect(decision.body.error).toEqual({
      code: "unauthorized",
      message:
        'Authorization uses the "Basic" scheme, not Bearer: send Authorization: Bearer <api key>',
    });
    const admin = await fetch(`${s.url}/v1/admin/me`, { headers: { authorization: basic } });
    expect(admin.status).toBe(401);
    expect(((await admin.json()) as { error: { message: string } }).error.message).toBe(
      'Authorization uses the "Basic" scheme, not Bearer: send Authorization: Bearer <session token> (from POST /v1/admin/login)',
    );
    const missing = await send(s, "/v1/limit", { body: limitBody, headers: json });
    expect(missing.body.error.message).toBe(
      "missing Authorization: send Authorization: Bearer <api key>",
    );
  });

  it("a body with a __proto__ key is refused as such, naming where it is", async () => {
    const r = await send(s, "/v1/limit", {
      body: '{"policy":"api","key":"k","__proto__":{"cost":5}}',
      headers: { ...json, authorization: `Bearer ${key}` },
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({
      code: "invalid_request",
      issues: [
        {
          path: "__proto__",
          message: 'a key named "__proto__" is refused (it could change the prototype of objects)',
        },
      ],
    });
    const nested = await send(s, "/v1/admin/login", {
      body: '{"username":"root","password":"x","extra":[{"constructor":{"prototype":{}}}]}',
      headers: json,
    });
    expect(nested.status).toBe(400);
    expect(nested.body.error.issues).toEqual([
      {
        path: "extra.0.constructor.prototype",
        message:
          'a key named "constructor.prototype" is refused (it could change the prototype of objects)',
      },
    ]);
  });

  it("an empty JSON body is no body: fine where the body is optional, 'required' where it is not", async () => {
    const admin = { ...json, authorization: `Bearer ${s.adminToken}` };
    const rotated = await send(s, "/v1/admin/apps/web/rotate-key", { body: "", headers: admin });
    expect(rotated.status).toBe(200);
    key = (rotated.body as unknown as { apiKey: string }).apiKey;
    const none = await send(s, "/v1/admin/apps", { body: "", headers: admin });
    expect(none.status).toBe(400);
    expect(none.body.error.message).toBe("Invalid app: a JSON body is required");
  });

  it("bad JSON says where the parser stopped", async () => {
    const r = await send(s, "/v1/limit", {
      body: '{"policy": "api", ',
      headers: { ...json, authorization: `Bearer ${key}` },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(/^Invalid body: is not valid JSON: /);
  });

  it("JSON sent as text/plain is 415 unsupported_media_type, naming the type", async () => {
    const r = await send(s, "/v1/limit", {
      body: limitBody,
      headers: { "content-type": "text/plain", authorization: `Bearer ${key}` },
    });
    expect(r.status).toBe(415);
    expect(r.body.error).toEqual({
      code: "unsupported_media_type",
      message:
        'Content-Type "text/plain" is not accepted: send JSON with Content-Type: application/json (or YAML with application/yaml to import policies)',
    });
    // The same body as JSON is fine.
    const ok = await send(s, "/v1/limit", {
      body: limitBody,
      headers: { ...json, authorization: `Bearer ${key}` },
    });
    expect(ok.status).toBe(200);
  });
});
