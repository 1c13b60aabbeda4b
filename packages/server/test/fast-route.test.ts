/**
 * `POST /v1/limit` is served from node:http before Fastify routes a request (the fast route of
 * routes/decision.ts). These tests hold it to Fastify's answers: every request below is sent
 * twice, once over a socket to the listening server (the fast route, or Fastify when the fast
 * route leaves it) and once through `app.inject`, which never reaches the server's listener
 * (Fastify's route alone), on a service whose clock stands still, and the two answers must be
 * the same — status, headers, body. The debug log tells which door answered: Fastify's request
 * lines carry a `reqId`, the fast route's do not.
 */
import { request } from "node:http";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { type TestService, requestsAroundClose, startService } from "./helpers.js";

/** An answer, as far as it is compared: status, headers but the connection's own, JSON body. */
interface Answer {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** Headers that belong to the connection or the moment, not to the answer. */
const CONNECTION_HEADERS = new Set(["date", "connection", "keep-alive", "transfer-encoding"]);

function answerOf(status: number, headers: Record<string, unknown>, text: string): Answer {
  const kept: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers))
    if (!CONNECTION_HEADERS.has(k.toLowerCase())) kept[k.toLowerCase()] = String(v);
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: compared as text
  }
  return { status, headers: kept, body };
}

/**
 * A request as sent: headers and the body's exact text (or chunks, sent chunked), or its exact
 * bytes (which need not be UTF-8).
 */
interface Sent {
  path?: string;
  headers: Record<string, string>;
  body: string | string[] | Buffer;
}

/** Sends over a real connection to the listening server. */
function overSocket(url: string, sent: Sent): Promise<Answer> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const chunked = Array.isArray(sent.body);
    const headers = { ...sent.headers };
    if (!chunked)
      headers["content-length"] = String(Buffer.byteLength(sent.body as string | Buffer));
    const req = request(
      { host: "127.0.0.1", port, method: "POST", path: sent.path ?? "/v1/limit", headers },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => resolve(answerOf(res.statusCode!, res.headers, text)));
      },
    );
    req.on("error", reject);
    if (Array.isArray(sent.body)) for (const part of sent.body) req.write(part);
    else req.write(sent.body);
    req.end();
  });
}

/** Sends to Fastify's route alone (`inject` does not pass through the server's listener). */
async function throughFastify(t: TestService, sent: Sent): Promise<Answer> {
  const body = Array.isArray(sent.body) ? sent.body.join("") : sent.body;
  const res = await t.service.app.inject({
    method: "POST",
    url: sent.path ?? "/v1/limit",
    headers: { ...sent.headers, "content-length": String(Buffer.byteLength(body)) },
    payload: body,
  });
  return answerOf(res.statusCode, res.headers, res.body);
}

type Line = Record<string, unknown>;
interface Found {
  line: Line;
  at: number;
}

/**
 * A logger at debug whose lines are kept, and `requestLine(from)`: the first request line
 * written at or after index `from`, and its index, when it is (Fastify writes its line when the
 * answer has finished, which may be after the caller has read it).
 */
function debugLog() {
  const lines: Line[] = [];
  const waiters: Array<{ from: number; resolve: (found: Found) => void }> = [];
  const found = (from: number): Found | undefined => {
    const at = lines.findIndex((l, i) => i >= from && l.msg === "request");
    return at < 0 ? undefined : { line: lines[at]!, at };
  };
  const logger = pino(
    { level: "debug" },
    {
      write: (text: string) => {
        lines.push(JSON.parse(text) as Line);
        for (const w of [...waiters]) {
          const f = found(w.from);
          if (f) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(f);
          }
        }
      },
    },
  );
  const requestLine = (from: number): Promise<Found> => {
    const f = found(from);
    return f ? Promise.resolve(f) : new Promise((resolve) => waiters.push({ from, resolve }));
  };
  return { logger, lines, requestLine };
}

describe("POST /v1/limit: the fast route answers as Fastify's route does", () => {
  const log = debugLog();
  let s: TestService;
  let web: string;
  const json = (token: string, extra: Record<string, string> = {}) => ({
    "content-type": "application/json",
    authorization: `Bearer ${token}`,
    ...extra,
  });
  /** {@link throughFastify}, once its request line is written (none is left to come late). */
  const viaFastify = async (sent: Sent): Promise<Answer> => {
    const from = log.lines.length;
    const answer = await throughFastify(s, sent);
    expect((await log.requestLine(from)).line.reqId).toBeDefined();
    return answer;
  };
  // Each request is sent to the two doors with its own key (`{k}` in the body), so each starts
  // from the same state: the clock stands still, so the same counts give the same answers.
  let n = 0;
  const twice = async (
    sent: Sent,
    door: "fast" | "fastify",
  ): Promise<{ socket: Answer; fastify: Answer }> => {
    n++;
    const keyed = (k: string): Sent => ({
      ...sent,
      body: Array.isArray(sent.body)
        ? sent.body.map((b) => b.replaceAll("{k}", k))
        : Buffer.isBuffer(sent.body)
          ? // Byte for byte: latin1 maps each byte to one character and back.
            Buffer.from(sent.body.toString("latin1").replaceAll("{k}", k), "latin1")
          : sent.body.replaceAll("{k}", k),
    });
    const from = log.lines.length;
    const socket = await overSocket(s.url, keyed(`socket-${n}`));
    // A request line is written for every answer at debug level; only Fastify's has a reqId.
    const { line, at } = await log.requestLine(from);
    expect(line.reqId === undefined ? "fast" : "fastify").toBe(door);
    const fastify = await viaFastify(keyed(`fastify-${n}`));
    expect(log.lines.slice(at + 1).filter((l) => l.msg === "request")).toHaveLength(1);
    return { socket, fastify };
  };
  const same = async (sent: Sent, door: "fast" | "fastify" = "fast"): Promise<Answer> => {
    const { socket, fastify } = await twice(sent, door);
    expect(socket).toEqual(fastify);
    return socket;
  };

  beforeAll(async () => {
    s = await startService({ logger: log.logger, now: () => 1_800_000_000_500 });
    web = await s.createApp("web");
    await s.createApp("other");
    await s.createPolicy({ name: "api", rules: [{ limit: 3, period: "1m" }], apps: ["web"] });
    await s.createPolicy({
      name: "windows",
      algorithm: "fixed-window",
      rules: [
        { limit: 2, period: "1h" },
        { limit: 5, period: "1d" },
      ],
      apps: ["web"],
      blockDuration: "1m",
    });
    await s.createPolicy({
      name: "off",
      rules: [{ limit: 1, period: "1m" }],
      apps: ["web"],
      enabled: false,
    });
    await s.createPolicy({ name: "theirs", rules: [{ limit: 5, period: "1m" }], apps: ["other"] });
    await s.createPolicy({ name: "shadowed", rules: [{ limit: 10, period: "1m" }], apps: ["web"] });
    await s.createPolicy({ name: "keys", rules: [{ limit: 10, period: "1m" }], apps: ["web"] });
    const draft = await s.call("PUT", "/v1/admin/policies/shadowed/draft", {
      body: { rules: [{ limit: 1, period: "1m" }], apps: ["web"] },
    });
    expect(draft.status).toBe(200);
    await s.sync();
  });
  afterAll(async () => {
    await s?.close();
  });

  it("allowed, with every rate-limit header", async () => {
    const a = await same({ headers: json(web), body: '{"policy":"api","key":"{k}"}' });
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({ allowed: true, remaining: 2, policy: "api" });
    expect(a.headers).toMatchObject({
      "x-ratelimit-limit": "3",
      "x-ratelimit-remaining": "2",
      "content-type": "application/json; charset=utf-8",
    });
    expect(Object.keys(a.headers)).toEqual(
      expect.arrayContaining(["x-ratelimit-reset", "ratelimit-policy", "ratelimit"]),
    );
  });

  it("a cost, and a charset in the content type", async () => {
    const a = await same({
      headers: json(web, { "content-type": "application/json; charset=UTF-8" }),
      body: '{"key":"{k}","cost":3,"policy":"api"}',
    });
    expect(a.body).toMatchObject({ allowed: true, remaining: 0, cost: 3 });
  });

  it("denied, with Retry-After; then blocked by the penalty", async () => {
    // Each door's four requests on one key of its own: allowed, allowed, denied (which starts
    // the block), blocked.
    const sent = (key: string): Sent => ({
      headers: json(web),
      body: `{"policy":"windows","key":"${key}"}`,
    });
    const socket: Answer[] = [];
    const fastify: Answer[] = [];
    for (let i = 0; i < 4; i++) {
      socket.push(await overSocket(s.url, sent("deny-socket")));
      fastify.push(await viaFastify(sent("deny-fastify")));
    }
    expect(socket).toEqual(fastify);
    expect(socket.map((d) => (d.body as { allowed: boolean }).allowed)).toEqual([
      true,
      true,
      false,
      false,
    ]);
    const denied = socket[2]!.body as { retryAfterMs: number };
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    expect(socket[2]!.headers["retry-after"]).toBe(String(Math.ceil(denied.retryAfterMs / 1000)));
    expect(socket[3]!.body).toMatchObject({ reason: "blocked" });
  });

  it("a disabled policy: allowed, flagged, no rate-limit headers", async () => {
    const a = await same({ headers: json(web), body: '{"policy":"off","key":"{k}"}' });
    expect(a.body).toMatchObject({ allowed: true, disabled: true });
    expect(a.headers["x-ratelimit-limit"]).toBeUndefined();
  });

  it("a draft is evaluated in shadow on both doors", async () => {
    await same({ headers: json(web), body: '{"policy":"shadowed","key":"{k}"}' });
    await same({ headers: json(web), body: '{"policy":"shadowed","key":"{k}"}' });
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    // Four decisions of the enforced version, four of the draft (limit 1: each key's first
    // allowed, a second key each time, so all four allowed).
    expect(metrics).toMatch(
      /sluice_draft_decisions_total\{policy="shadowed",outcome="allowed"\} 4/,
    );
    expect(metrics).toMatch(
      /sluice_decisions_total\{policy="shadowed",outcome="allowed",reason=""\} 4/,
    );
  });

  it.each([
    ["an unknown policy (404)", '{"policy":"nope","key":"{k}"}', 404, "policy_not_found"],
    ["a policy of another app (403)", '{"policy":"theirs","key":"{k}"}', 403, "forbidden"],
    [
      "a cost over the capacity (400)",
      '{"policy":"api","key":"{k}","cost":4}',
      400,
      "invalid_request",
    ],
    ["bad JSON (400)", '{"policy":"api","key":', 400, "invalid_request"],
    ["an unknown field (400)", '{"policy":"api","key":"{k}","extra":1}', 400, "invalid_request"],
    ["a missing key (400)", '{"policy":"api"}', 400, "invalid_request"],
    [
      "a key too long (400)",
      `{"policy":"api","key":"${"k".repeat(4097)}"}`,
      400,
      "invalid_request",
    ],
    ["a cost of 0 (400)", '{"policy":"api","key":"{k}","cost":0}', 400, "invalid_request"],
    ["an array (400)", '[{"policy":"api","key":"{k}"}]', 400, "invalid_request"],
    ["null (400)", "null", 400, "invalid_request"],
    [
      "a __proto__ key (400)",
      '{"policy":"api","key":"{k}","__proto__":{"x":1}}',
      400,
      "invalid_request",
    ],
    [
      "nested too deep (400)",
      `{"policy":"api","key":"{k}","x":${"[".repeat(150)}${"]".repeat(150)}}`,
      400,
      "invalid_request",
    ],
  ])("%s", async (_what, body, status, code) => {
    const a = await same({ headers: json(web), body });
    expect(a.status).toBe(status);
    expect((a.body as { error: { code: string } }).error.code).toBe(code);
    expect(a.headers["content-type"]).toBe("application/json; charset=utf-8");
  });

  it.each([
    ["invalid UTF-8 in the key", Buffer.from('{"policy":"keys","key":"{k}\xff"}', "latin1")],
    [
      "an overlong encoding in the key",
      Buffer.from('{"policy":"keys","key":"{k}\xc0\xaf"}', "latin1"),
    ],
    ["a lone surrogate escaped in the key", '{"policy":"keys","key":"{k}\\ud800"}'],
  ])("400 naming the key: %s (it would share a counter with other keys)", async (_what, body) => {
    const a = await same({ headers: json(web), body });
    expect(a.status).toBe(400);
    expect(a.body).toEqual({
      error: {
        code: "invalid_request",
        // Bytes that are not UTF-8 are refused with the body; an escape, with the request.
        message: expect.stringMatching(/^Invalid (body|limit request): key: is not valid UTF-8/),
        issues: [{ path: "key", message: expect.stringMatching(/^is not valid UTF-8/) }],
      },
    });
  });

  it("any key of well-formed characters is its own: U+FFFD, emoji, and escapes of them", async () => {
    for (const body of [
      '{"policy":"keys","key":"{k}\\u20ac\\ufffd\\ud83d\\ude00"}',
      Buffer.from('{"policy":"keys","key":"{k}€\ufffd😀"}', "utf8"),
    ]) {
      const a = await same({ headers: json(web), body });
      expect(a.status).toBe(200);
      expect(a.body).toMatchObject({ allowed: true, remaining: 9 });
    }
  });

  it.each([
    ["no Authorization (401)", {}, '{"policy":"api","key":"{k}"}', 401],
    [
      "an unknown API key (401)",
      { authorization: "Bearer sk_nope" },
      '{"policy":"api","key":"{k}"}',
      401,
    ],
    [
      "a Basic Authorization (401)",
      { authorization: "Basic dTpw" },
      '{"policy":"api","key":"{k}"}',
      401,
    ],
    ["text/plain (415)", { "content-type": "text/plain" }, '{"policy":"api","key":"{k}"}', 415],
    [
      "JSON in latin1 (Fastify's parser)",
      { "content-type": "application/json; charset=latin1" },
      '{"policy":"api","key":"{k}"}',
      200,
    ],
    ["an empty body (400)", {}, "", 400],
    ["Expect: 100-continue", { expect: "100-continue" }, '{"policy":"api","key":"{k}"}', 200],
  ])("left to Fastify: %s", async (_what, extra, body, status) => {
    const headers: Record<string, string> = { "content-type": "application/json", ...extra };
    if (!("authorization" in extra) && status !== 401) headers.authorization = `Bearer ${web}`;
    const a = await same({ headers, body }, "fastify");
    expect(a.status).toBe(status);
  });

  it("left to Fastify: a chunked body, read whole by Fastify after the fast route passed", async () => {
    const a = await same(
      { headers: json(web), body: ['{"policy":"api",', '"key":"{k}"}'] },
      "fastify",
    );
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({ allowed: true, remaining: 2 });
  });

  it("left to Fastify: a body over bodyLimit (413), and a query string", async () => {
    const big = `{"policy":"api","key":"{k}","pad":"${"x".repeat(s.service.context.config.bodyLimit)}"}`;
    expect((await same({ headers: json(web), body: big }, "fastify")).status).toBe(413);
    const q = await same(
      { path: "/v1/limit?trace=1", headers: json(web), body: '{"policy":"api","key":"{k}"}' },
      "fastify",
    );
    expect(q.status).toBe(200);
  });

  it("counts what it serves: decisions, requests in flight back to 0", async () => {
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    const count = (policy: string) =>
      Number(
        new RegExp(
          `sluice_decisions_total\\{policy="${policy}",outcome="allowed",reason=""\\} (\\d+)`,
        ).exec(metrics)?.[1] ?? 0,
      );
    // "api": 1 + 1 (the first two tests) and 1 (chunked) and 1 (query) per door, and the two
    // Fastify-only 200s (latin1, Expect) per door.
    expect(count("api")).toBe(12);
    // Only this request (GET /metrics) is in flight.
    expect(metrics).toMatch(/sluice_http_requests_in_flight 1\b/);
  });

  it("logs a failed request's line at info, as Fastify does", async () => {
    const from = log.lines.length;
    await overSocket(s.url, { headers: json(web), body: '{"policy":"nope","key":"x"}' });
    const { line } = await log.requestLine(from);
    expect(line).toMatchObject({ level: 30, method: "POST", url: "/v1/limit", status: 404 });
    expect(typeof line.ms).toBe("number");
  });
});

describe("POST /v1/limit's fast route: the counter store down, and shutting down", () => {
  let redis: RedisServer;
  let s: TestService;
  let web: string;
  beforeAll(async () => {
    redis = await startRedis();
    s = await startService({ redisUrl: redis.url });
    web = await s.createApp("web");
    await s.createPolicy({
      name: "strict",
      rules: [{ limit: 5, period: "1m" }],
      apps: ["web"],
      onStoreError: "deny",
    });
  });
  afterAll(async () => {
    await s?.close();
    await redis?.stop();
  });

  const headers = () => ({ "content-type": "application/json", authorization: `Bearer ${web}` });

  it("the store down: the policy's onStoreError decides, on both doors alike", async () => {
    await redis.stop();
    const sent: Sent = { headers: headers(), body: '{"policy":"strict","key":"k"}' };
    const socket = await overSocket(s.url, sent);
    const fastify = await throughFastify(s, sent);
    expect(socket).toEqual(fastify);
    expect(socket.status).toBe(200);
    expect(socket.body).toMatchObject({ allowed: false, reason: "store-error" });
  });

  it("a request in flight when the service starts closing is answered; the next one on its connection gets 503", async () => {
    const body = '{"policy":"strict","key":"k"}';
    const head = `POST /v1/limit HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nAuthorization: Bearer ${web}\r\nContent-Length: ${body.length}\r\n\r\n`;
    const responses = await requestsAroundClose(s, { head, body }, `${head}${body}`);
    expect(responses).toHaveLength(2);
    expect(responses[0]).toMatch(/^HTTP\/1\.1 200 /);
    expect(responses[0]).toContain('"allowed":false');
    expect(responses[1]).toMatch(/^HTTP\/1\.1 503 /);
    expect(responses[1]).toMatch(/^connection: close$/im);
    expect(responses[1]).toContain('"code":"shutting_down"');
  });
});
