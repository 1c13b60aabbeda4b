/**
 * An admin write costs the same whatever the number of policies: with 3,000 policies, the
 * node that makes a change, and another node on the same database, read and rebuild that one
 * change — counted (the registry's own account of each load), not timed. On every SQL database.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { validatePolicyDocument } from "../src/model.js";
import type { RegistryLoad } from "../src/registry.js";
import { forEachDatabase } from "./databases.js";
import { waitFor } from "../../../test/support/ports.js";
import { type TestService, call, startService } from "./helpers.js";

const POLICIES = 3_000;

forEachDatabase((database) => {
  let s: TestService;
  let other: TestService;
  let key: string;
  let dataDir: string;
  beforeAll(async () => {
    const databaseUrl = await database().fresh();
    dataDir = mkdtempSync(join(tmpdir(), "sluice-reload-"));
    // The writer polls rarely (it loads its own writes at once); the other node every 100 ms.
    s = await startService({
      ...(databaseUrl ? { databaseUrl } : {}),
      dataDir,
      values: { pollIntervalMs: 10_000 },
    });
    other = await startService({
      ...(databaseUrl ? { databaseUrl } : {}),
      dataDir,
      values: { pollIntervalMs: 100 },
    });
    key = await s.createApp("web");
    const docs = Array.from({ length: POLICIES }, (_, i) => {
      const valid = validatePolicyDocument({
        name: `p${i}`,
        rules: [{ limit: 10 + (i % 7), period: "1m" }],
        apps: ["web"],
      });
      if ("issues" in valid) throw new Error(JSON.stringify(valid.issues));
      return valid.doc;
    });
    await s.service.context.repo.importAll({ policies: docs }, "test");
    await s.service.context.registry.poll();
    await waitFor(
      () => other.service.context.registry.lastLoad?.live.policies === POLICIES,
      30_000,
      50,
    );
  }, 300_000);
  afterAll(async () => {
    await s?.close();
    await other?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** The writer's last load, and the other node's once it has caught up with the writer. */
  const loads = async (): Promise<[RegistryLoad, RegistryLoad]> => {
    const mine = s.service.context.registry.lastLoad!;
    await waitFor(() => other.service.context.registry.currentRevision === mine.revision, 5000, 20);
    return [mine, other.service.context.registry.lastLoad!];
  };
  const write = async (method: string, path: string, body?: unknown) => {
    const r = await s.call(method, path, body === undefined ? {} : { body });
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  };
  const nothing = { policies: 0, drafts: 0, apps: 0, envoyDomains: 0, envoyDrafts: 0 };

  it("a large import is read whole, once", () => {
    const load = s.service.context.registry.lastLoad!;
    expect(load.whole).toBe(true);
    expect(load.live.policies).toBe(POLICIES);
  });

  describe(`with ${POLICIES.toLocaleString("en")} policies, each write reads and builds one`, () => {
    it("a create", async () => {
      await write("POST", "/v1/admin/policies", {
        name: "new",
        rules: [{ limit: 5, period: "1m" }],
        apps: ["web"],
      });
      for (const load of await loads()) {
        expect(load).toMatchObject({
          whole: false,
          read: { ...nothing, policies: 1 },
          built: { policies: 1, envoyDomains: 0 },
          live: { policies: POLICIES + 1 },
        });
      }
      const d = await call(s.url, "POST", "/v1/limit", {
        token: key,
        body: { policy: "new", key: "k" },
      });
      expect(d.body).toMatchObject({ allowed: true, limit: 5 });
    });

    it("an update, a draft, a promotion", async () => {
      await write("PUT", "/v1/admin/policies/p42", {
        rules: [{ limit: 99, period: "1m" }],
        apps: ["web"],
      });
      for (const load of await loads())
        expect(load).toMatchObject({
          whole: false,
          read: { ...nothing, policies: 1 },
          built: { policies: 1 },
        });
      await write("PUT", "/v1/admin/policies/p42/draft", {
        rules: [{ limit: 98, period: "1m" }],
        apps: ["web"],
      });
      for (const load of await loads())
        expect(load).toMatchObject({
          whole: false,
          read: { ...nothing, policies: 1, drafts: 1 },
          built: { policies: 1 },
        });
      await write("POST", "/v1/admin/policies/p42/draft/promote");
      for (const load of await loads())
        expect(load).toMatchObject({
          whole: false,
          read: { ...nothing, policies: 1 },
          built: { policies: 1 },
        });
      const d = await call(other.url, "POST", "/v1/limit", {
        token: key,
        body: { policy: "p42", key: "k" },
      });
      expect(d.body.limit).toBe(98);
    });

    it("a delete", async () => {
      await write("DELETE", "/v1/admin/policies/p7");
      for (const load of await loads()) {
        expect(load).toMatchObject({
          whole: false,
          read: nothing,
          built: { policies: 0 },
          live: { policies: POLICIES },
        });
      }
      const d = await call(other.url, "POST", "/v1/limit", {
        token: key,
        body: { policy: "p7", key: "k" },
      });
      expect(d.status).toBe(404);
    });

    it("an app's key rotated, an Envoy domain: no policy read", async () => {
      const r = await s.call("POST", "/v1/admin/apps/web/rotate-key");
      expect(r.status).toBe(200);
      for (const load of await loads())
        expect(load).toMatchObject({ whole: false, read: { ...nothing, apps: 1 } });
      const rotated = r.body.apiKey as string;
      const d = await call(other.url, "POST", "/v1/limit", {
        token: rotated,
        body: { policy: "p1", key: "k" },
      });
      expect(d.status).toBe(200);
      expect(
        (await call(other.url, "POST", "/v1/limit", { token: key, body: { policy: "p1" } })).status,
      ).toBe(401);
      await write("PUT", "/v1/admin/envoy/domains/edge", {
        domain: "edge",
        descriptors: [{ key: "ip", rate_limit: { unit: "minute", requests_per_unit: 5 } }],
      });
      for (const load of await loads())
        expect(load).toMatchObject({
          whole: false,
          read: { ...nothing, envoyDomains: 1 },
          built: { policies: 0, envoyDomains: 1 },
          live: { policies: POLICIES, envoyDomains: 1 },
        });
    });
  });
  describe("what the change log cannot tell is read whole", () => {
    const meta = (key: string) =>
      s.service.context.repo.database.db
        .selectFrom("meta")
        .select("value")
        .where("key", "=", key)
        .executeTakeFirstOrThrow()
        .then((r) => Number(r.value));

    it("a revision bumped by hand (a restore, an edit in SQL)", async () => {
      await s.service.context.repo.database.db
        .updateTable("meta")
        .set((eb) => ({ value: eb("value", "+", 1) }))
        .where("key", "=", "revision")
        .execute();
      await s.service.context.registry.poll();
      expect(s.service.context.registry.lastLoad).toMatchObject({
        whole: true,
        read: { policies: POLICIES },
        built: { policies: 0 },
      });
    });

    it("a node further behind than the pruned log", async () => {
      // As if the log had been pruned past this node's revision while it was away.
      const revision = await meta("revision");
      await s.service.context.repo.database.db
        .updateTable("meta")
        .set({ value: revision + 1 })
        .where("key", "=", "changes_from")
        .execute();
      await write("PUT", "/v1/admin/policies/p43", {
        rules: [{ limit: 77, period: "1m" }],
        apps: ["web"],
      });
      expect(s.service.context.registry.lastLoad).toMatchObject({
        whole: true,
        read: { policies: POLICIES },
        built: { policies: 1 },
      });
      // The next write is told by the log again.
      await write("PUT", "/v1/admin/policies/p43", {
        rules: [{ limit: 78, period: "1m" }],
        apps: ["web"],
      });
      expect(s.service.context.registry.lastLoad).toMatchObject({
        whole: false,
        read: { policies: 1 },
      });
    });
  });
});
