/**
 * A node serves its own writes at once: right after an admin change answers, a decision on
 * the same node sees it — here with a 10 s poll interval, so that no poll can help. (Other
 * nodes take up to one poll; see postgres.test.ts and cli.test.ts.) On every SQL database.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forEachDatabase } from "./databases.js";
import { type TestService, call, startService } from "./helpers.js";

forEachDatabase((database) => {
  let s: TestService;
  beforeAll(async () => {
    s = await startService({
      databaseUrl: await database().fresh(),
      values: { pollIntervalMs: 10_000 },
    });
  });
  afterAll(async () => {
    await s?.close();
  });

  const limit = (key: string, policy: string) =>
    call(s.url, "POST", "/v1/limit", { token: key, body: { policy, key: "k" } });
  const write = async (method: string, path: string, body?: unknown) => {
    const r = await s.call(method, path, body === undefined ? {} : { body });
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
    return r;
  };

  describe("every kind of change is live on the node that made it when the answer arrives", () => {
    let key: string;

    it("a new app's key", async () => {
      key = (await write("POST", "/v1/admin/apps", { name: "web" })).body.apiKey;
      // Not 401: the key is known; the policy is not there yet.
      expect((await limit(key, "api")).body.error.code).toBe("policy_not_found");
    });

    it("a new policy, an update, a grant revoked and given back", async () => {
      await write("POST", "/v1/admin/policies", {
        name: "api",
        rules: [{ limit: 5, period: "1m" }],
        apps: ["web"],
      });
      expect((await limit(key, "api")).body).toMatchObject({ allowed: true, limit: 5 });
      await write("PUT", "/v1/admin/policies/api", {
        rules: [{ limit: 7, period: "1m" }],
        apps: ["web"],
      });
      expect((await limit(key, "api")).body.limit).toBe(7);
      await write("PUT", "/v1/admin/policies/api", { rules: [{ limit: 7, period: "1m" }] });
      expect((await limit(key, "api")).status).toBe(403);
      await write("PUT", "/v1/admin/policies/api", {
        rules: [{ limit: 7, period: "1m" }],
        apps: ["web"],
      });
      expect((await limit(key, "api")).status).toBe(200);
    });

    it("a draft and its promotion, a restore", async () => {
      await write("PUT", "/v1/admin/policies/api/draft", {
        rules: [{ limit: 9, period: "1m" }],
        apps: ["web"],
      });
      const listed = (await s.call("GET", "/v1/admin/policies")).body.policies;
      expect(listed.find((p: { name: string }) => p.name === "api").hasDraft).toBe(true);
      await write("POST", "/v1/admin/policies/api/draft/promote");
      expect((await limit(key, "api")).body.limit).toBe(9);
      await write("POST", "/v1/admin/policies/api/versions/1/restore");
      expect((await limit(key, "api")).body.limit).toBe(5);
    });

    it("a rotated key, a deleted policy, an import", async () => {
      const rotated = (await write("POST", "/v1/admin/apps/web/rotate-key")).body.apiKey;
      expect((await limit(key, "api")).status).toBe(401);
      expect((await limit(rotated, "api")).status).toBe(200);
      await write("DELETE", "/v1/admin/policies/api");
      expect((await limit(rotated, "api")).status).toBe(404);
      await write("POST", "/v1/admin/policies/import", {
        policies: [{ name: "imported", rules: [{ limit: 3, period: "1m" }], apps: ["web"] }],
      });
      expect((await limit(rotated, "imported")).body.limit).toBe(3);
    });
  });
});
