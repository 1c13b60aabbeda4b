/**
 * The service's error contract, both ways: every code the service can answer is documented in
 * docs/server.md (with its status), nothing undocumented is listed there, and every code is
 * produced by a real request through a started service, with the documented status and the
 * `{ error: { code, message } }` body. Adding a code to API_ERROR_CODES without a row in
 * CASES below fails the typecheck; without a line in the docs, this test.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_ERROR_CODES, type ApiErrorCode } from "../src/index.js";
import { startPostgres } from "../../../test/support/postgres.js";
import { startRedis } from "../../../test/support/redis.js";
import {
  ROOT,
  type Res,
  type TestService,
  call,
  requestsAroundClose,
  startService,
} from "./helpers.js";

/** The documented status of each code: the table under "## Errors" in docs/server.md. */
function documentedCodes(): Map<string, number> {
  const doc = readFileSync(`${ROOT}docs/server.md`, "utf8");
  const section = doc.slice(
    doc.indexOf("\n## Errors"),
    doc.indexOf("\n## ", doc.indexOf("\n## Errors") + 1),
  );
  const out = new Map<string, number>();
  for (const line of section.split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    const status = Number(cells[1]);
    if (!Number.isInteger(status) || status < 100) continue;
    for (const m of (cells[2] ?? "").matchAll(/`([a-z_]+)`/g)) out.set(m[1]!, status);
  }
  return out;
}

describe("documentation", () => {
  it("lists every code with its status, and no other", () => {
    expect(Object.fromEntries(documentedCodes())).toEqual(API_ERROR_CODES);
  });
});

/**
 * Sends a request on a connection that is busy with another one when the service starts
 * closing: the in-flight request finishes; the one behind it is turned away.
 */
async function requestWhileClosing(t: TestService): Promise<Res> {
  const body = JSON.stringify({ username: "nobody", password: "whatever" });
  const responses = await requestsAroundClose(
    t,
    {
      head: `POST /v1/admin/login HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      body,
    },
    "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n",
  );
  expect(responses).toHaveLength(2);
  expect(responses[0]).toMatch(/^HTTP\/1\.1 401 /); // the request in flight was finished
  const second = responses[1]!;
  const [head, text] = second.split("\r\n\r\n");
  expect(head).toMatch(/^connection: close$/im);
  return {
    status: Number(/^HTTP\/1\.1 (\d+)/.exec(second)![1]),
    headers: new Headers(),
    body: JSON.parse(text!),
  };
}

describe("every code, produced by a request", () => {
  let s: TestService;
  let key: string;
  let viewer: string;
  beforeAll(async () => {
    s = await startService({ values: { loginLimitPerUser: 1 } });
    key = await s.createApp("web");
    await s.createApp("other");
    await s.createPolicy({ name: "mine", rules: [{ limit: 5, period: "1m" }], apps: ["web"] });
    await s.createPolicy({ name: "theirs", rules: [{ limit: 5, period: "1m" }], apps: ["other"] });
    viewer = await s.createUser("vera", "viewer");
  });
  afterAll(async () => {
    await s?.close();
  });

  const limit = (body: unknown) => call(s.url, "POST", "/v1/limit", { token: key, body });

  const CASES: Record<ApiErrorCode, () => Promise<Res>> = {
    invalid_request: () => limit({ policy: "mine" }),
    unauthorized: () => call(s.url, "POST", "/v1/limit", { body: { policy: "mine", key: "k" } }),
    forbidden: () => limit({ policy: "theirs", key: "k" }),
    not_found: () => s.call("GET", "/v1/nothing-here"),
    policy_not_found: () => limit({ policy: "nope", key: "k" }),
    conflict: () => s.call("POST", "/v1/admin/apps", { body: { name: "web" } }),
    payload_too_large: () => limit({ policy: "mine", key: "k".repeat(2 * 1024 * 1024) }),
    unsupported_media_type: () =>
      call(s.url, "POST", "/v1/limit", {
        token: key,
        raw: "policy=mine&key=k",
        contentType: "application/x-www-form-urlencoded",
      }),
    too_many_requests: async () => {
      const attempt = () =>
        call(s.url, "POST", "/v1/admin/login", { body: { username: "vera", password: "wrong" } });
      await attempt();
      return attempt();
    },
    store_unavailable: async () => {
      // Counters in a Redis that goes away: a lease release has no onStoreError to fall back on.
      const redis = await startRedis();
      const own = await startService({ redisUrl: redis.url });
      try {
        const k = await own.createApp("web");
        await own.createPolicy({
          name: "jobs",
          algorithm: "concurrency",
          rules: [{ limit: 1, period: "1m" }],
          apps: ["web"],
        });
        await redis.stop();
        return await call(own.url, "POST", "/v1/release", {
          token: k,
          body: { policy: "jobs", key: "k", leaseId: "l" },
        });
      } finally {
        await own.close();
        await redis.stop();
      }
    },
    database_unavailable: async () => {
      const pg = await startPostgres();
      const own = await startService({ databaseUrl: await pg.createDatabase("gone") });
      try {
        await pg.stop();
        return await own.call("GET", "/v1/admin/policies");
      } finally {
        await own.close();
        await pg.stop();
      }
    },
    shutting_down: async () => requestWhileClosing(await startService()),
    corrupt_record: async () => {
      const db = s.service.context.repo.database.db;
      const row = db
        .updateTable("documents")
        .where("kind", "=", "policy")
        .where("name", "=", "mine");
      const { spec } = await db
        .selectFrom("documents")
        .select("spec")
        .where("kind", "=", "policy")
        .where("name", "=", "mine")
        .executeTakeFirstOrThrow();
      await row.set({ spec: "{" }).execute();
      try {
        return await call(s.url, "GET", "/v1/admin/policies/mine", { token: viewer });
      } finally {
        await row.set({ spec }).execute();
      }
    },
    internal: async () => {
      // A database whose schema was damaged behind the service's back: a bug-class failure,
      // not an outage and not the caller's doing.
      const own = await startService();
      try {
        await own.service.context.repo.database.db.schema.dropTable("audit").execute();
        return await own.call("POST", "/v1/admin/apps", { body: { name: "x" } });
      } finally {
        await own.close();
      }
    },
  };

  it.each(Object.keys(API_ERROR_CODES) as ApiErrorCode[])("%s", async (code) => {
    const r = await CASES[code]();
    expect(r.body).toEqual({
      error: expect.objectContaining({ code, message: expect.any(String) }),
    });
    expect(r.status).toBe(API_ERROR_CODES[code]);
  });
});
