/**
 * Per-key overrides through the service, on every SQL database, two nodes on one database and
 * an embedded client (`connectPolicies`) of one of them: a key with an override gets its rules
 * and every other key the policy's; `PUT …/overrides/acme` is in force on the other node (its
 * revision poll, every 250 ms) and on the client (its long poll) within a second, and in the
 * audit log; a bad override is refused naming the field, and the good one stays; a new version
 * of the policy keeps the overrides; deleting the policy deletes them.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type PolicyClient, connectPolicies, memoryStore } from "sluice";
import { afterAll, beforeAll, expect, it } from "vitest";
import { forEachDatabase } from "./databases.js";
import { waitFor } from "../../../test/support/ports.js";
import { type TestService, call, startService } from "./helpers.js";

forEachDatabase((database) => {
  let s: TestService;
  let other: TestService;
  let appKey: string;
  let client: PolicyClient;
  let dataDir: string;
  const clientErrors: Error[] = [];

  beforeAll(async () => {
    const databaseUrl = await database().fresh();
    dataDir = mkdtempSync(join(tmpdir(), "sluice-overrides-"));
    s = await startService({ ...(databaseUrl ? { databaseUrl } : {}), dataDir });
    // The other node polls the database's revision every 250 ms (the default).
    other = await startService({
      ...(databaseUrl ? { databaseUrl } : {}),
      dataDir,
      values: { pollIntervalMs: 250 },
    });
    appKey = await s.createApp("web");
    await s.createPolicy({
      name: "plan",
      algorithm: "fixed-window",
      rules: [{ limit: 2, period: "1m" }],
      apps: ["web"],
    });
    // The other node loads the app and the policy now, not on its next poll.
    await other.sync();
    client = await connectPolicies({
      url: other.url,
      apiKey: appKey,
      store: memoryStore(),
      waitMs: 5000,
      onError: (e) => clientErrors.push(e),
    });
  }, 120_000);
  afterAll(async () => {
    await s?.close();
    await other?.close();
    await client?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** The limit a decision of `key` reports on a node (its key counted once more). */
  const limitOn = async (node: TestService, key: string) =>
    (
      await call(node.url, "POST", "/v1/limit", {
        token: appKey,
        body: { policy: "plan", key },
      })
    ).body.limit as number;
  /** Until the other node and the client show `want` for `key` (within a second). */
  const appliesWithinASecond = async (key: string, want: number) => {
    const started = Date.now();
    await waitFor(async () => (await limitOn(other, key)) === want, 1000, 20);
    await waitFor(async () => (await client.limiter("plan").peek(key)).limit === want, 1000, 20);
    return Date.now() - started;
  };

  it("a key with an override gets its rules, others the policy's; on every node and client within a second", async () => {
    const put = await s.call("PUT", "/v1/admin/policies/plan/overrides/acme", {
      body: { rules: [{ limit: 7, period: "1m" }] },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(201);
    expect(put.body).toMatchObject({
      policy: "plan",
      key: "acme",
      rules: [{ limit: 7, period: "1m" }],
      updatedBy: "root",
    });
    // This node serves its own write at once.
    expect(await limitOn(s, "acme")).toBe(7);
    expect(await limitOn(s, "globex")).toBe(2);
    const took = await appliesWithinASecond("acme", 7);
    expect(took).toBeLessThan(1000);
    expect(await limitOn(other, "globex")).toBe(2);
    expect((await client.limiter("plan").peek("globex")).limit).toBe(2);
    // Counted on the key's own state: 7 pass in all, over both nodes (one database, memory
    // counters per node here, so each node counts its own).
    const explained = await s.call("GET", "/v1/admin/explain?policy=plan&key=acme");
    expect(explained.body).toMatchObject({ override: true, rules: [{ limit: 7 }] });
    expect((await client.limiter("plan").explain("acme")).override).toBe(true);
    expect(client.limiter("plan").override("acme")).toEqual([{ limit: 7, period: 60_000 }]);

    const got = await s.call("GET", "/v1/admin/policies/plan/overrides/acme");
    expect(got.body).toMatchObject({ key: "acme", rules: [{ limit: 7, period: "1m" }] });
    const audit = await s.call("GET", "/v1/admin/audit?action=policy.override");
    expect(audit.body.entries[0]).toMatchObject({
      actor: "root",
      action: "policy.override.put",
      targetType: "policy_override",
      target: "plan/acme",
    });
  });

  it("a change of one override moves that one alone, on the other node and the client", async () => {
    await s.call("PUT", "/v1/admin/policies/plan/overrides/initech", {
      body: { rules: [{ limit: 4, period: "1m" }] },
    });
    await appliesWithinASecond("initech", 4);
    const before = other.service.context.registry.lastLoad!;
    const r = await s.call("PUT", "/v1/admin/policies/plan/overrides/acme", {
      body: { rules: [{ limit: 9, period: "1m" }] },
    });
    expect(r.status).toBe(200);
    await appliesWithinASecond("acme", 9);
    const load = other.service.context.registry.lastLoad!;
    expect(load.revision).toBeGreaterThan(before.revision);
    expect(load).toMatchObject({
      whole: false,
      read: { policies: 0, overrides: 1 },
      built: { policies: 0, overrides: 1 },
    });
    expect(await limitOn(other, "initech")).toBe(4);
  });

  it("refuses a bad override naming the field, and keeps the good one", async () => {
    const bad = await s.call("PUT", "/v1/admin/policies/plan/overrides/acme", {
      body: { rules: [{ limit: -1, period: "1m" }] },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues).toEqual([expect.objectContaining({ path: "rules.0.limit" })]);
    // burst is no fixed-window field: refused as the policy with these rules would be.
    const burst = await s.call("PUT", "/v1/admin/policies/plan/overrides/acme", {
      body: { rules: [{ limit: 3, period: "1m", burst: 5 }] },
    });
    expect(burst.status).toBe(400);
    expect(burst.body.error.issues[0].path).toMatch(/^rules\.0/);
    const none = await s.call("PUT", "/v1/admin/policies/plan/overrides/acme", { body: {} });
    expect(none.status).toBe(400);
    expect(none.body.error.issues[0].path).toBe("rules");
    const unknown = await s.call("PUT", "/v1/admin/policies/nope/overrides/acme", {
      body: { rules: [{ limit: 3, period: "1m" }] },
    });
    expect(unknown.status).toBe(404);
    expect((await s.call("GET", "/v1/admin/policies/plan/overrides/acme")).body.rules).toEqual([
      { limit: 9, period: "1m" },
    ]);
    expect(await limitOn(s, "acme")).toBe(9);
  });

  it("lists overrides by page", async () => {
    for (const k of ["t:1", "t:2", "t:3"])
      await s.call("PUT", `/v1/admin/policies/plan/overrides/${encodeURIComponent(k)}`, {
        body: { rules: [{ limit: 3, period: "1m" }] },
      });
    const first = await s.call("GET", "/v1/admin/policies/plan/overrides?limit=2");
    expect(first.body.total).toBe(5);
    expect(first.body.overrides.map((o: { key: string }) => o.key)).toEqual(["acme", "initech"]);
    expect(first.body.next).toBe("initech");
    const second = await s.call("GET", "/v1/admin/policies/plan/overrides?limit=2&after=initech");
    expect(second.body.overrides.map((o: { key: string }) => o.key)).toEqual(["t:1", "t:2"]);
    const last = await s.call("GET", "/v1/admin/policies/plan/overrides?limit=2&after=t:2");
    expect(last.body.overrides.map((o: { key: string }) => o.key)).toEqual(["t:3"]);
    expect(last.body.next).toBeUndefined();
    const prefixed = await s.call("GET", "/v1/admin/policies/plan/overrides?prefix=t:");
    expect(prefixed.body.total).toBe(3);
    const badLimit = await s.call("GET", "/v1/admin/policies/plan/overrides?limit=0");
    expect(badLimit.body.error.issues[0].path).toBe("limit");
  });

  it("takes a cost the key's override fits, though the policy's rules never could", async () => {
    await s.call("PUT", "/v1/admin/policies/plan/overrides/bulk", {
      body: { rules: [{ limit: 20, period: "1m" }] },
    });
    const limit = (key: string, cost: number) =>
      call(s.url, "POST", "/v1/limit", { token: appKey, body: { policy: "plan", key, cost } });
    const big = await limit("bulk", 10);
    expect(big.status).toBe(200);
    expect(big.body).toMatchObject({ allowed: true, remaining: 10 });
    const other = await limit("small", 10);
    expect(other.status).toBe(400);
    expect(other.body.error.issues[0].path).toBe("cost");
    // Past the override's capacity: refused by the key's own rules.
    expect((await limit("bulk", 21)).status).toBe(400);
    expect((await s.call("DELETE", "/v1/admin/policies/plan/overrides/bulk")).status).toBe(204);
  });

  it("a new version of the policy keeps the overrides, on every node and client", async () => {
    const r = await s.call("PUT", "/v1/admin/policies/plan", {
      body: {
        algorithm: "fixed-window",
        rules: [{ limit: 3, period: "1m" }],
        apps: ["web"],
      },
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    await waitFor(async () => (await limitOn(other, "hooli")) === 3, 1000, 20);
    await waitFor(async () => (await client.limiter("plan").peek("hooli")).limit === 3, 1000, 20);
    expect(await limitOn(s, "acme")).toBe(9);
    expect(await limitOn(other, "acme")).toBe(9);
    expect((await client.limiter("plan").peek("acme")).limit).toBe(9);
  });

  it("DELETE removes it everywhere within a second, audited", async () => {
    const del = await s.call("DELETE", "/v1/admin/policies/plan/overrides/acme");
    expect(del.status).toBe(204);
    expect(await limitOn(s, "acme")).toBe(3);
    await appliesWithinASecond("acme", 3);
    expect((await s.call("GET", "/v1/admin/policies/plan/overrides/acme")).status).toBe(404);
    expect((await s.call("DELETE", "/v1/admin/policies/plan/overrides/acme")).status).toBe(404);
    const audit = await s.call("GET", "/v1/admin/audit?action=policy.override.delete");
    expect(audit.body.entries[0]).toMatchObject({ target: "plan/acme" });
    expect(clientErrors).toEqual([]);
  });

  it("a client that connects later gets every override at once", async () => {
    const late = await connectPolicies({ url: s.url, apiKey: appKey, store: memoryStore() });
    try {
      expect(late.limiter("plan").override("initech")).toEqual([{ limit: 4, period: 60_000 }]);
      expect(late.limiter("plan").override("acme")).toBeUndefined();
      expect(() => late.limiter("plan").setOverride("x", [{ limit: 1, period: "1s" }])).toThrow(
        /set in the sluice service/,
      );
    } finally {
      await late.close();
    }
  });

  it("a policy newly granted to a client's app comes with its overrides", async () => {
    await s.createPolicy({
      name: "later",
      algorithm: "fixed-window",
      rules: [{ limit: 2, period: "1m" }],
      apps: [],
    });
    const r = await s.call("PUT", "/v1/admin/policies/later/overrides/acme", {
      body: { rules: [{ limit: 6, period: "1m" }] },
    });
    expect(r.status).toBe(201);
    // The client runs a revision past the override's before the policy is granted to it (a
    // change to a policy it has wakes it).
    await s.call("PUT", "/v1/admin/policies/plan/overrides/zeta", {
      body: { rules: [{ limit: 5, period: "1m" }] },
    });
    await waitFor(() => client.limiter("plan").override("zeta") !== undefined, 1000, 10);
    expect(client.status().revision).toBeGreaterThanOrEqual(r.body.revision);
    await s.call("PUT", "/v1/admin/policies/later", {
      body: { algorithm: "fixed-window", rules: [{ limit: 2, period: "1m" }], apps: ["web"] },
    });
    await waitFor(() => client.has("later"), 1000, 10);
    await waitFor(() => client.limiter("later").override("acme")?.[0]?.limit === 6, 1000, 10);
    expect((await client.limiter("later").peek("globex")).limit).toBe(2);
  });

  it("deleting the policy deletes its overrides", async () => {
    expect((await s.call("DELETE", "/v1/admin/policies/plan")).status).toBe(204);
    await s.createPolicy({
      name: "plan",
      algorithm: "fixed-window",
      rules: [{ limit: 2, period: "1m" }],
      apps: ["web"],
    });
    const list = await s.call("GET", "/v1/admin/policies/plan/overrides");
    expect(list.body).toMatchObject({ overrides: [], total: 0 });
    expect(await limitOn(s, "initech")).toBe(2);
  });
});
