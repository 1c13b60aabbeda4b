/**
 * `GET /v1/admin/explain` on every SQL database, over one Redis, the node's clock injected: why
 * a key is (or is not) limited — the rule that denies and when it frees (what `POST /v1/limit`
 * then answers), the draft's answer beside the live one, a penalty block, a disabled policy —
 * nothing charged; 400s naming the field, 404 for an unknown policy, and the key look-up's guard.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { forEachDatabase } from "./databases.js";
import { type TestService, call, startService } from "./helpers.js";

/** A whole minute (epoch ms), where the node's clock starts. */
const T0 = 1_800_000_000_000;

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

forEachDatabase((database) => {
  let now = T0;
  let s: TestService;
  let appKey: string;
  let viewer: string;

  beforeAll(async () => {
    const flush = new Redis(redis.url);
    await flush.flushall();
    flush.disconnect();
    const databaseUrl = await database().fresh();
    s = await startService({
      redisUrl: redis.url,
      now: () => now,
      ...(databaseUrl ? { databaseUrl } : {}),
    });
    appKey = await s.createApp("web");
    await s.createPolicy({
      name: "api",
      algorithm: "fixed-window",
      rules: [
        { limit: 10, period: "1h" },
        { limit: 3, period: "1m" },
      ],
      apps: ["web"],
    });
    await s.createPolicy({
      name: "boxed",
      algorithm: "fixed-window",
      rules: [{ limit: 1, period: "1m" }],
      blockDuration: "5m",
      apps: ["web"],
    });
    await s.createPolicy({
      name: "off",
      rules: [{ limit: 1, period: "1m" }],
      enabled: false,
      apps: ["web"],
    });
    viewer = await s.createUser("vera", "viewer");
  });
  afterAll(async () => {
    await s?.close();
  });

  const decide = (policy: string, key: string, cost?: number) =>
    call(s.url, "POST", "/v1/limit", {
      token: appKey,
      body: { policy, key, ...(cost ? { cost } : {}) },
    });
  const explain = (query: string, token?: string) =>
    s.call("GET", `/v1/admin/explain?${query}`, token === undefined ? {} : { token });

  describe("GET /v1/admin/explain", () => {
    it("names the denying rule and when it frees, as the next decision answers; charges nothing", async () => {
      for (let i = 0; i < 3; i++) expect((await decide("api", "u1")).body.allowed).toBe(true);
      const r = await explain("policy=api&key=u1", viewer);
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        policy: "api",
        key: "u1",
        cost: 1,
        enabled: true,
        allowedNow: false,
        denyingRule: 1,
        denyingNow: true,
        blockedForMs: 0,
        answeredBy: "store",
        rules: [
          { index: 0, limit: 10, remaining: 7, denies: false },
          { index: 1, limit: 3, remaining: 0, denies: true },
        ],
      });
      expect(r.body.draft).toBeUndefined();
      expect(r.body.freesInMs).toBeGreaterThan(0);
      // Explaining again (at any cost) charged nothing: the counts are as they were.
      await explain("policy=api&key=u1&cost=2");
      expect((await explain("policy=api&key=u1")).body.rules[0].remaining).toBe(7);
      const denied = await decide("api", "u1");
      expect(denied.body).toMatchObject({ allowed: false, rule: 1 });
      expect(denied.body.retryAfterMs).toBe(r.body.freesInMs);
      // Once it frees, it passes; the rule that will deny first is named.
      now += r.body.freesInMs;
      expect((await explain("policy=api&key=u1")).body).toMatchObject({
        allowedNow: true,
        denyingRule: 1,
        denyingNow: false,
        freesInMs: 0,
      });
    });

    it("gives the draft's answer beside the live one, the draft on its own keys", async () => {
      const put = await s.call("PUT", "/v1/admin/policies/api/draft", {
        body: {
          name: "api",
          algorithm: "fixed-window",
          rules: [{ limit: 1, period: "1m" }],
          apps: ["web"],
        },
      });
      expect(put.status).toBe(200);
      await s.sync();
      const draftId = (await s.call("GET", "/v1/admin/policies/api/draft")).body.id as number;
      expect((await decide("api", "u2")).body.allowed).toBe(true); // counted by both
      const r = await explain("policy=api&key=u2");
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({
        policy: "api",
        allowedNow: true,
        rules: [{ remaining: 9 }, { remaining: 2 }],
        draft: {
          id: draftId,
          allowedNow: false,
          explanation: {
            policy: `sluice.draft.${draftId}`,
            allowedNow: false,
            denyingRule: 0,
            denyingNow: true,
            rules: [{ limit: 1, remaining: 0, denies: true }],
          },
        },
      });
      // A cost the draft can never fit: the draft denies, without an explanation.
      const two = await explain("policy=api&key=u2&cost=2");
      expect(two.body.allowedNow).toBe(true);
      expect(two.body.draft).toEqual({ id: draftId, allowedNow: false });
      await s.call("DELETE", "/v1/admin/policies/api/draft");
      await s.sync();
      expect((await explain("policy=api&key=u2")).body.draft).toBeUndefined();
    });

    it("shows a penalty block and its end, and a disabled policy allowing", async () => {
      await decide("boxed", "b");
      expect((await decide("boxed", "b")).body.allowed).toBe(false); // the block starts
      const boxed = await explain("policy=boxed&key=b");
      expect(boxed.body).toMatchObject({
        allowedNow: false,
        reason: "blocked",
        blockedForMs: 300_000,
        freesInMs: 300_000,
      });
      now += 60_000;
      expect((await explain("policy=boxed&key=b")).body).toMatchObject({
        blockedForMs: 240_000,
        freesInMs: 240_000,
      });
      expect((await explain("policy=off&key=b")).body).toMatchObject({
        enabled: false,
        allowedNow: true,
        reason: "disabled",
        freesInMs: 0,
      });
    });

    it("400 naming the field for a missing or bad policy, key or cost; 404 for an unknown policy", async () => {
      const field = async (query: string) => {
        const r = await explain(query);
        expect({ query, status: r.status }).toEqual({ query, status: 400 });
        return (r.body.error.issues as Array<{ path: string }>).map((i) => i.path);
      };
      expect(await field("key=u1")).toEqual(["policy"]);
      expect(await field("policy=api")).toEqual(["key"]);
      expect(await field("policy=api&key=")).toEqual(["key"]);
      expect(await field("policy=&key=u1")).toEqual(["policy"]);
      for (const cost of ["0", "-1", "1.5", "two", ""])
        expect(await field(`policy=api&key=u1&cost=${cost}`)).toEqual(["cost"]);
      // More than the policy can ever hold: the limiter's own check, by field.
      const big = await explain("policy=api&key=u1&cost=4");
      expect(big.status).toBe(400);
      expect(big.body.error.issues[0]).toMatchObject({
        path: "cost",
        message: expect.stringContaining("can never fit"),
      });
      expect(await field("policy=api&key=u1&extra=1")).toEqual([""]);
      const unknown = await explain("policy=nope&key=u1");
      expect(unknown.status).toBe(404);
      expect(unknown.body.error.code).toBe("policy_not_found");
    });

    it("is guarded as the key look-up is: any session, none without one", async () => {
      const lookUp = (token?: string) =>
        call(s.url, "GET", "/v1/admin/policies/api/key?key=u1", token ? { token } : {});
      const ex = (token?: string) =>
        call(s.url, "GET", "/v1/admin/explain?policy=api&key=u1", token ? { token } : {});
      for (const token of [undefined, "not-a-session", appKey, viewer, s.adminToken])
        expect({ token, explain: (await ex(token)).status }).toEqual({
          token,
          explain: (await lookUp(token)).status,
        });
      expect((await ex(viewer)).status).toBe(200);
      expect((await ex()).status).toBe(401);
    });
  });
});
