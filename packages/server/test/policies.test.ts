/**
 * The API for embedded clients, on every SQL database: `GET /v1/policies` (the app's set, its
 * ETag, 304s, the long poll, woken by this node's changes and by another node's through the
 * revision poll, answered at once on shutdown), `POST /v1/policies/report` (draft counts added
 * to the totals the admin shows, decisions to the metrics, the heartbeat) and
 * `GET /v1/admin/clients`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientListSchema, policySetSchema } from "@sluice/api";
import { forEachDatabase } from "./databases.js";
import { type TestService, call, startService } from "./helpers.js";
import { waitFor } from "../../../test/support/ports.js";

const report = (over: Record<string, unknown> = {}) => ({
  instance: "proc-1",
  host: "web-1.internal",
  client: "sluice/0.1.0",
  revision: 1,
  ...over,
});

forEachDatabase((database) => {
  let dataDir: string;
  let a: TestService;
  let b: TestService;
  let web: string;
  let other: string;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "sluice-policies-test-"));
    const url = await database().fresh();
    // Two nodes on one database (for SQLite, one file). B polls the revision every 100 ms.
    a = await startService({ ...(url ? { databaseUrl: url } : {}), dataDir });
    b = await startService({ ...(url ? { databaseUrl: url } : {}), dataDir });
    web = await a.createApp("web");
    other = await a.createApp("other");
    await a.createPolicy({
      name: "api",
      algorithm: "gcra",
      rules: [{ limit: 5, period: "1m" }],
      apps: ["web", "other"],
    });
    await a.createPolicy({ name: "search", rules: [{ limit: 2, period: "1s" }], apps: ["web"] });
    await a.createPolicy({ name: "private", rules: [{ limit: 2, period: "1s" }], apps: ["other"] });
    await b.sync();
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const get = (s: TestService, key: string | undefined, query = "", etag?: string) =>
    fetch(`${s.url}/v1/policies${query}`, {
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(etag ? { "if-none-match": etag } : {}),
      },
    });

  describe("GET /v1/policies", () => {
    it("answers the policies granted to the app, without their grants, with an ETag and the revision", async () => {
      const res = await get(a, web);
      expect(res.status).toBe(200);
      const body = policySetSchema.parse(await res.json());
      expect(body.app).toBe("web");
      expect(body.revision).toBe(a.service.context.registry.currentRevision);
      expect(body.policies.map((p) => p.document.name)).toEqual(["api", "search"]);
      expect(body.policies[0]).toEqual({
        version: 1,
        document: {
          name: "api",
          description: "",
          algorithm: "gcra",
          rules: [{ limit: 5, period: "1m" }],
          shadow: false,
          enabled: true,
        },
      });
      expect(res.headers.get("etag")).toMatch(/^"[A-Za-z0-9_-]+"$/);
      expect(res.headers.get("sluice-revision")).toBe(String(body.revision));
      // Another app sees its own set, under another ETag.
      const o = await get(a, other);
      expect(policySetSchema.parse(await o.json()).policies.map((p) => p.document.name)).toEqual([
        "api",
        "private",
      ]);
      expect(o.headers.get("etag")).not.toBe(res.headers.get("etag"));
    });

    it("an unchanged set costs a 304; the same set on another node has the same ETag", async () => {
      const first = await get(a, web);
      const etag = first.headers.get("etag")!;
      const again = await get(a, web, "", etag);
      expect(again.status).toBe(304);
      expect(await again.text()).toBe("");
      expect(again.headers.get("etag")).toBe(etag);
      expect((await get(b, web, "", etag)).status).toBe(304);
      expect((await get(a, web, "", `W/${etag}, "other"`)).status).toBe(304);
      expect((await get(a, web, "", '"stale"')).status).toBe(200);
    });

    it("refuses a missing or unknown key and a bad query, naming the field", async () => {
      const none = await call(a.url, "GET", "/v1/policies");
      expect(none.status).toBe(401);
      expect(none.body.error.message).toBe(
        "missing Authorization: send Authorization: Bearer <api key>",
      );
      expect((await call(a.url, "GET", "/v1/policies", { token: "sk_nope" })).status).toBe(401);
      for (const [query, path, message] of [
        ["?wait=abc", "wait", "must be a whole number of ms from 0 to 60000"],
        ["?wait=60001", "wait", "must be a whole number of ms from 0 to 60000"],
        ["?revision=-1", "revision", "must be a revision number (a whole number ≥ 0)"],
        ["?since=1", "", "unknown field(s): since"],
      ] as const) {
        const r = await call(a.url, "GET", `/v1/policies${query}`, { token: web });
        expect(r.status, query).toBe(400);
        expect(r.body.error.issues, query).toEqual([{ path, message }]);
      }
    });

    it("a long poll is answered when the app's set changes, not when another app's does", async () => {
      const etag = (await get(a, web)).headers.get("etag")!;
      // A change to a policy web is not granted: web's long poll keeps waiting.
      const early = get(a, web, "?wait=400", etag);
      await a.call("PUT", "/v1/admin/policies/private", {
        body: { rules: [{ limit: 3, period: "1s" }], apps: ["other"] },
      });
      const t0 = Date.now();
      expect((await early).status).toBe(304);
      expect(Date.now() - t0).toBeGreaterThan(100);

      const waiting = get(a, web, "?wait=10000", etag);
      const changed = Date.now();
      await a.call("PUT", "/v1/admin/policies/search", {
        body: { rules: [{ limit: 3, period: "1s" }], apps: ["web"] },
      });
      const res = await waiting;
      expect(Date.now() - changed).toBeLessThan(1000);
      expect(res.status).toBe(200);
      const set = policySetSchema.parse(await res.json());
      expect(set.policies.find((p) => p.document.name === "search")).toMatchObject({
        version: 2,
        document: { rules: [{ limit: 3, period: "1s" }] },
      });
    });

    it("a change made on node A reaches a client long-polling node B within a second (B's own revision poll)", async () => {
      await b.sync();
      const etag = (await get(b, web)).headers.get("etag")!;
      const waiting = get(b, web, "?wait=10000", etag);
      const changed = Date.now();
      await a.call("PUT", "/v1/admin/policies/api", {
        body: { algorithm: "gcra", rules: [{ limit: 6, period: "1m" }], apps: ["web", "other"] },
      });
      const res = await waiting;
      expect(Date.now() - changed).toBeLessThan(1000);
      expect(res.status).toBe(200);
      const set = policySetSchema.parse(await res.json());
      expect(set.policies[0]!.document.rules).toEqual([{ limit: 6, period: "1m" }]);
      expect(set.revision).toBe(a.service.context.registry.currentRevision);
    });

    it("a revoked grant and a draft: the set says so", async () => {
      await a.call("PUT", "/v1/admin/policies/search/draft", {
        body: { rules: [{ limit: 1, period: "1s" }], apps: ["web"] },
      });
      const withDraft = policySetSchema.parse(await (await get(a, web)).json());
      const search = withDraft.policies.find((p) => p.document.name === "search")!;
      expect(search.draft).toEqual({
        id: expect.any(Number),
        document: {
          name: "search",
          description: "",
          algorithm: "gcra",
          rules: [{ limit: 1, period: "1s" }],
          shadow: false,
          enabled: true,
        },
      });
      await a.call("DELETE", "/v1/admin/policies/search/draft");
      await a.call("PUT", "/v1/admin/policies/search", {
        body: { rules: [{ limit: 3, period: "1s" }], apps: [] },
      });
      const after = policySetSchema.parse(await (await get(a, web)).json());
      expect(after.policies.map((p) => p.document.name)).toEqual(["api"]);
    });

    it("a node behind the revision the client has seen checks the database before answering", async () => {
      // B polls only every 100 ms; a client that saw A's newer revision makes B look now.
      await a.call("PUT", "/v1/admin/policies/search", {
        body: { rules: [{ limit: 4, period: "1s" }], apps: ["web"] },
      });
      const seen = a.service.context.registry.currentRevision;
      const res = await get(b, web, `?revision=${seen}`);
      expect(Number(res.headers.get("sluice-revision"))).toBeGreaterThanOrEqual(seen);
      const set = policySetSchema.parse(await res.json());
      expect(set.policies.find((p) => p.document.name === "search")?.document.rules).toEqual([
        { limit: 4, period: "1s" },
      ]);
    });
  });

  describe("POST /v1/policies/report", () => {
    it("adds draft counts to the totals the admin shows, and lists the client", async () => {
      await a.call("PUT", "/v1/admin/policies/api/draft", {
        body: { algorithm: "gcra", rules: [{ limit: 2, period: "1m" }], apps: ["web", "other"] },
      });
      await b.sync();
      const draftId = (await a.call("GET", "/v1/admin/policies/api/draft")).body.id as number;
      const counts = { evaluated: 10, wouldDeny: 4, wouldDenyNewly: 3, wouldAllowNewly: 1 };
      const r = await call(b.url, "POST", "/v1/policies/report", {
        token: web,
        body: report({
          drafts: [
            { policy: "api", draftId, ...counts },
            { policy: "api", draftId: draftId + 100, ...counts },
            { policy: "private", draftId, ...counts },
          ],
          decisions: [
            { policy: "api", allowed: true, count: 7 },
            { policy: "api", allowed: true, reason: "shadow", count: 2 },
            { policy: "api", allowed: false, count: 3 },
          ],
        }),
      });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({
        revision: b.service.context.registry.currentRevision,
        ignored: [
          {
            path: "drafts.1.draftId",
            message: `draft ${draftId + 100} is no longer the draft of policy "api" (it was replaced, promoted or discarded)`,
          },
          { path: "drafts.2.policy", message: 'policy "private" is not granted to app "web"' },
        ],
      });
      // Read on node A: the totals are in the database.
      const draft = await a.call("GET", "/v1/admin/policies/api/draft");
      expect(draft.body.stats).toEqual(counts);
      // The decisions are in node B's metrics, beside its own.
      const metrics = await (await fetch(`${b.url}/metrics`)).text();
      expect(metrics).toContain(
        'sluice_decisions_total{policy="api",outcome="allowed",reason=""} 7',
      );
      expect(metrics).toContain(
        'sluice_decisions_total{policy="api",outcome="allowed",reason="shadow"} 2',
      );
      expect(metrics).toContain(
        'sluice_decisions_total{policy="api",outcome="denied",reason=""} 3',
      );
      expect(metrics).toContain('sluice_draft_decisions_total{policy="api",outcome="denied"} 4');
      // And in the console's traffic history, beside the service's own decisions.
      const history = await b.call("GET", "/v1/admin/traffic?policy=api&window=5m");
      expect(history.body.totals).toEqual({ allowed: 7, denied: 3, shadow: 2 });

      const clients = clientListSchema.parse((await a.call("GET", "/v1/admin/clients")).body);
      expect(clients.clients).toEqual([
        {
          app: "web",
          instance: "proc-1",
          host: "web-1.internal",
          version: "sluice/0.1.0",
          revision: 1,
          firstSeen: expect.any(String),
          lastSeen: expect.any(String),
        },
      ]);
      const first = clients.clients[0]!;

      // A second report from the same process updates its row; another process adds one.
      await call(a.url, "POST", "/v1/policies/report", {
        token: web,
        body: report({ revision: 9, host: "web-1b.internal" }),
      });
      await call(a.url, "POST", "/v1/policies/report", {
        token: other,
        body: report({ instance: "proc-2", host: "worker-1", client: "sluice/0.2.0" }),
      });
      const after = clientListSchema.parse((await b.call("GET", "/v1/admin/clients")).body);
      expect(after.clients.map((c) => [c.app, c.instance, c.host, c.version, c.revision])).toEqual([
        ["other", "proc-2", "worker-1", "sluice/0.2.0", 1],
        ["web", "proc-1", "web-1b.internal", "sluice/0.1.0", 9],
      ]);
      const again = after.clients.find((c) => c.app === "web")!;
      expect(again.firstSeen).toBe(first.firstSeen);
      expect(again.lastSeen >= first.lastSeen).toBe(true);
      // Counts a report did not carry are not added twice.
      expect((await a.call("GET", "/v1/admin/policies/api/draft")).body.stats).toEqual(counts);
    });

    it("refuses bad reports whole, naming each field, and a missing key", async () => {
      const r = await call(a.url, "POST", "/v1/policies/report", {
        token: web,
        body: report({
          instance: "has spaces",
          revision: -1,
          drafts: [
            {
              policy: "api",
              draftId: 1,
              evaluated: 1,
              wouldDeny: 2,
              wouldDenyNewly: 0,
              wouldAllowNewly: 0,
            },
          ],
          decisions: [{ policy: "api", allowed: true, reason: "nope", count: 1.5 }],
          extra: true,
        }),
      });
      expect(r.status).toBe(400);
      expect(r.body.error.issues).toEqual([
        { path: "instance", message: "must be 1–64 letters, digits, '.', '_', ':' or '-'" },
        { path: "revision", message: "must be a whole number ≥ 0" },
        { path: "drafts.0.wouldDeny", message: "wouldDeny must not exceed evaluated" },
        { path: "decisions.0.reason", message: "must be a decision reason" },
        { path: "decisions.0.count", message: "must be a whole number ≥ 0" },
        { path: "", message: "unknown field(s): extra" },
      ]);
      expect((await call(a.url, "POST", "/v1/policies/report", { body: report() })).status).toBe(
        401,
      );
    });
  });

  describe("GET /v1/admin/clients", () => {
    it("needs a session", async () => {
      expect((await call(a.url, "GET", "/v1/admin/clients")).status).toBe(401);
      expect((await call(a.url, "GET", "/v1/admin/clients", { token: web })).status).toBe(401);
    });
  });
});

describe("shutting down", () => {
  it("answers the waiting long polls at once (they would hold the shutdown up)", async () => {
    const s = await startService();
    try {
      const key = await s.createApp("web");
      await s.createPolicy({ name: "api", rules: [{ limit: 1, period: "1s" }], apps: ["web"] });
      const etag = (
        await fetch(`${s.url}/v1/policies`, { headers: { authorization: `Bearer ${key}` } })
      ).headers.get("etag")!;
      const waiting = fetch(`${s.url}/v1/policies?wait=60000`, {
        headers: { authorization: `Bearer ${key}`, "if-none-match": etag },
      });
      // Until the request is in (it waits on the registry).
      const inFlight = async () =>
        (await s.service.context.metrics.inFlight.get()).values[0]?.value;
      await waitFor(async () => (await inFlight()) === 1, 10_000, 10);
      const t0 = Date.now();
      await s.service.close();
      const res = await waiting;
      expect(res.status).toBe(304);
      expect(Date.now() - t0).toBeLessThan(2000);
    } finally {
      await s.close();
    }
  });
});
