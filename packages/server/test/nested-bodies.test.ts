/**
 * A body nested thousands of levels deep (about 10 KB) is bad input like any other: 400 naming
 * the problem on every route that takes a body, with or without credentials — never a 500.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_NESTING } from "../src/json-body.js";
import { type TestService, startService } from "./helpers.js";

const DEPTH = 5000;
/** `{"a":{"a":…{"a":1}…}}`, 5,000 objects deep (about 25 KB); and arrays of arrays (10 KB). */
const OBJECTS = `${'{"a":'.repeat(DEPTH)}1${"}".repeat(DEPTH)}`;
const ARRAYS = `${"[".repeat(DEPTH)}${"]".repeat(DEPTH)}`;
/** The same in YAML's flow style, for the routes that import YAML. */
const YAML = `policies: ${"[".repeat(DEPTH)}${"]".repeat(DEPTH)}\n`;

interface Operation {
  method: string;
  path: string;
}

describe("a body nested 5,000 levels deep", () => {
  let s: TestService;
  let apiKey: string;
  let operations: Operation[];
  beforeAll(async () => {
    s = await startService({ values: { grpcPort: 0 } });
    apiKey = await s.createApp("web");
    await s.createPolicy({ name: "api", rules: [{ limit: 5, period: "1m" }], apps: ["web"] });
    // Every operation of the service that takes a body, from its own OpenAPI document.
    const doc = (await (await fetch(`${s.url}/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { requestBody?: unknown }>>;
    };
    operations = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => op.requestBody !== undefined)
        .map(([method, _]) => ({
          method: method.toUpperCase(),
          // Path parameters: names that exist (a policy, an app, a user, version 1).
          path: path
            .replace("{name}", path.includes("/apps/") ? "web" : "api")
            .replace("{username}", "root")
            .replace("{domain}", "edge")
            .replace("{version}", "1"),
        })),
    );
  });
  afterAll(async () => {
    await s?.close();
  });

  const send = async (op: Operation, body: string, type: string, token?: string) => {
    const res = await fetch(`${s.url}${op.path}`, {
      method: op.method,
      body,
      headers: {
        "content-type": type,
        ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
      },
    });
    return { status: res.status, body: (await res.json()) as { error: Record<string, unknown> } };
  };

  it("covers the routes that matter", () => {
    const paths = operations.map((o) => o.path);
    for (const p of ["/v1/admin/login", "/v1/limit", "/v1/admin/policies/import", "/json"])
      expect(paths).toContain(p);
  });

  it("is 400 naming the nesting, on every route, without and with credentials", async () => {
    const answers: string[] = [];
    for (const op of operations) {
      const token = op.path.startsWith("/v1/admin/") ? s.adminToken : apiKey;
      for (const [label, credentials] of [
        ["none", undefined],
        ["valid", token],
      ] as const) {
        for (const body of [OBJECTS, ARRAYS]) {
          const r = await send(op, body, "application/json", credentials);
          answers.push(`${op.method} ${op.path} (${label}): ${r.status} ${r.body.error?.code}`);
          expect(r.status, `${op.method} ${op.path}`).toBe(400);
          expect(r.body.error).toMatchObject({
            code: "invalid_request",
            message: expect.stringMatching(/nested more than \d+ levels deep/),
          });
        }
      }
    }
    expect(answers.length).toBeGreaterThan(40);
  });

  it("is 400 in YAML too, on the routes that import YAML", async () => {
    for (const path of ["/v1/admin/policies/import", "/v1/admin/envoy/import"]) {
      const r = await send({ method: "POST", path }, YAML, "application/yaml", s.adminToken);
      expect(r.status, path).toBe(400);
      expect(r.body.error.message).toMatch(/nested more than \d+ levels deep/);
    }
  });

  it("refuses one level past the limit; a body at the limit reaches its schema", async () => {
    /** A decision request with an extra field of arrays: `levels` deep in all. */
    const body = (levels: number) =>
      `{"policy":"api","key":"k","extra":${"[".repeat(levels - 1)}${"]".repeat(levels - 1)}}`;
    const limit = { method: "POST", path: "/v1/limit" };
    const atLimit = await send(limit, body(MAX_NESTING), "application/json", apiKey);
    expect(atLimit.status).toBe(400);
    expect(atLimit.body.error.issues).toEqual([{ path: "", message: "unknown field(s): extra" }]);
    const past = await send(limit, body(MAX_NESTING + 1), "application/json", apiKey);
    expect(past.status).toBe(400);
    expect(past.body.error.issues).toEqual([
      { path: "", message: `is nested more than ${MAX_NESTING} levels deep (objects and arrays)` },
    ]);
  });
});
