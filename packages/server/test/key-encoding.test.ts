/**
 * Keys are characters: a body whose bytes are not UTF-8 would have them replaced by U+FFFD, and
 * a lone surrogate (`"\ud800"`, valid JSON) is written to Redis as U+FFFD too, so distinct keys
 * would share one counter (issue 31). Both are refused with a 400 naming the field, on every
 * route that takes a key: the decision API (both doors of `POST /v1/limit` are held to the same
 * answers in fast-route.test.ts), batch, peek and release, and the Envoy JSON door — and any
 * JSON body whose bytes are not UTF-8 is refused, naming the fields that hold them.
 */
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestService, call, startService } from "./helpers.js";

/** POSTs `body`'s exact bytes. */
function postBytes(
  url: string,
  path: string,
  body: Buffer,
  token?: string,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests reach into bodies freely
): Promise<{ status: number; body: any }> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path,
        headers: {
          "content-type": "application/json",
          "content-length": String(body.length),
          ...(token ? { authorization: `Bearer ${token}` } : {}),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** A JSON text's bytes, with `\xNN` in `text` standing for the byte NN (latin1). */
const bytes = (text: string): Buffer => Buffer.from(text, "latin1");

const NOT_UTF8 = expect.stringMatching(/^is not valid UTF-8/);

describe("keys that are not well-formed characters are refused, naming the field", () => {
  let s: TestService;
  let web: string;
  beforeAll(async () => {
    s = await startService({ values: { grpcPort: 0 } });
    web = await s.createApp("web");
    await s.createPolicy({ name: "one", rules: [{ limit: 1, period: "1h" }], apps: ["web"] });
    await s.createPolicy({
      name: "jobs",
      algorithm: "concurrency",
      rules: [{ limit: 1, period: "1m" }],
      apps: ["web"],
    });
    const domain = await s.call("PUT", "/v1/admin/envoy/domains/edge", {
      raw: "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n",
      contentType: "application/yaml",
    });
    expect(domain.status).toBe(201);
    await s.sync();
  });
  afterAll(async () => {
    await s?.close();
  });

  it("POST /v1/limit: two keys of different invalid bytes are not one counter", async () => {
    for (const key of ["\xff", "\xfe", "a\xc3(", "\xed\xa0\x80"]) {
      const r = await postBytes(s.url, "/v1/limit", bytes(`{"policy":"one","key":"${key}"}`), web);
      expect(r.status).toBe(400);
      expect(r.body.error.issues).toEqual([{ path: "key", message: NOT_UTF8 }]);
    }
    // Lone surrogates, escaped: each would be U+FFFD in Redis.
    for (const key of ["\\ud800", "x\\udfff", "\\ude00\\ud83d"]) {
      const r = await call(s.url, "POST", "/v1/limit", {
        token: web,
        raw: `{"policy":"one","key":"${key}"}`,
      });
      expect(r.status).toBe(400);
      expect(r.body.error.issues).toEqual([{ path: "key", message: NOT_UTF8 }]);
    }
    // The one counter that a U+FFFD key has is its own.
    const real = await call(s.url, "POST", "/v1/limit", {
      token: web,
      body: { policy: "one", key: "\ufffd" },
    });
    expect(real.body).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("batch, peek and release name the field; a refused batch charges nothing", async () => {
    const batch = await postBytes(
      s.url,
      "/v1/limit/batch",
      bytes('{"requests":[{"policy":"one","key":"fine"},{"policy":"one","key":"\xff"}]}'),
      web,
    );
    expect(batch.status).toBe(400);
    expect(batch.body.error.issues).toEqual([{ path: "requests.1.key", message: NOT_UTF8 }]);
    const escaped = await call(s.url, "POST", "/v1/limit/batch", {
      token: web,
      raw: '{"requests":[{"policy":"one","key":"fine"},{"policy":"one","key":"\\ud800"}]}',
    });
    expect(escaped.body.error.issues).toEqual([{ path: "requests.1.key", message: NOT_UTF8 }]);
    const fine = await call(s.url, "POST", "/v1/peek", {
      token: web,
      body: { policy: "one", key: "fine" },
    });
    expect(fine.body).toMatchObject({ allowed: true, remaining: 1 });
    for (const [path, extra] of [
      ["/v1/peek", ""],
      ["/v1/release", ',"leaseId":"l1"'],
    ] as const) {
      const r = await call(s.url, "POST", path, {
        token: web,
        raw: `{"policy":"jobs","key":"\\udc00"${extra}}`,
      });
      expect(r.status).toBe(400);
      expect(r.body.error.issues).toEqual([{ path: "key", message: NOT_UTF8 }]);
    }
  });

  it("POST /json (Envoy): a descriptor's key or value, not a 500", async () => {
    const invalid = await postBytes(
      s.url,
      "/json",
      bytes('{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"\xff"}]}]}'),
    );
    expect(invalid.status).toBe(400);
    expect(invalid.body.error.issues).toEqual([
      { path: "descriptors.0.entries.0.value", message: NOT_UTF8 },
    ]);
    // A lone surrogate in a value that matches a limit was a 500 (the counter's key could not
    // be built from it).
    const matching = await call(s.url, "POST", "/json", {
      raw: '{"domain":"edge","descriptors":[{"entries":[{"key":"user","value":"\\udfff"}]}]}',
    });
    expect(matching.status).toBe(400);
    expect(matching.body.error.issues).toEqual([
      { path: "descriptors.0.entries.0.value", message: NOT_UTF8 },
    ]);
    const escaped = await call(s.url, "POST", "/json", {
      raw: '{"domain":"edge","descriptors":[{"entries":[{"key":"us\\ud800er","value":"\\udfff"}]}]}',
    });
    expect(escaped.status).toBe(400);
    expect(escaped.body.error.issues).toEqual([
      { path: "descriptors.0.entries.0.key", message: NOT_UTF8 },
      { path: "descriptors.0.entries.0.value", message: NOT_UTF8 },
    ]);
    const fine = await call(s.url, "POST", "/json", {
      body: { domain: "edge", descriptors: [{ entries: [{ key: "user", value: "\ufffd€" }] }] },
    });
    expect(fine.status).toBe(200);
  });

  it("any JSON body whose bytes are not UTF-8: 400 naming where they are", async () => {
    /** The issues of the 400 that creating an app with the body `raw` is answered with. */
    const refused = async (raw: string) => {
      const r = await postBytes(s.url, "/v1/admin/apps", bytes(raw), s.adminToken);
      expect(r.status).toBe(400);
      return r.body.error.issues;
    };
    expect(await refused('{"name":"x","description":"caf\xe9"}')).toEqual([
      { path: "description", message: NOT_UTF8 },
    ]);
    // In a field name: named by its object.
    expect(await refused('{"name":"x","\xff":1}')).toEqual([{ path: "", message: NOT_UTF8 }]);
    expect(
      (await s.call("GET", "/v1/admin/apps")).body.apps.map((a: { name: string }) => a.name),
    ).toEqual(["web"]);
  });
});
