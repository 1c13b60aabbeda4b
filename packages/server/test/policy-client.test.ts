/**
 * `connectPolicies` against the real service on one Redis: a decision made in the app's process
 * and one made through `POST /v1/limit` touch the same keys and share one limit exactly; drafts
 * count on the same draft keys and their counts reach the totals the admin shows; the
 * middleware takes the client's limiter as it is and follows edits; a revoked grant is an
 * error. (Real processes: platform.test.ts; the client alone: packages/sluice/src/policies.)
 */
import { type Server, createServer } from "node:http";
import { Redis } from "ioredis";
import { type PolicyClient, connectPolicies, redisStore } from "sluice";
import { rateLimit } from "sluice/node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { waitFor } from "../../../test/support/ports.js";
import { type TestService, call, startService } from "./helpers.js";

let redis: RedisServer;
let s: TestService;
let client: Redis;
let key: string;
let policies: PolicyClient;
const errors: Error[] = [];

beforeAll(async () => {
  redis = await startRedis();
  s = await startService({ redisUrl: redis.url });
  key = await s.createApp("web");
  await s.createPolicy({
    name: "shared",
    algorithm: "fixed-window",
    rules: [{ limit: 5, period: "1m" }],
    apps: ["web"],
  });
  await s.createPolicy({
    name: "http",
    algorithm: "fixed-window",
    rules: [{ limit: 2, period: "1m" }],
    apps: ["web"],
  });
  client = new Redis(redis.url);
  policies = await connectPolicies({
    url: s.url,
    apiKey: key,
    store: redisStore({ client }),
    waitMs: 5000,
    host: "test-host",
    onError: (e) => errors.push(e),
  });
});
afterAll(async () => {
  // The service first: a client that gives up its long poll makes fetch open a spare
  // connection, which would hold the service's shutdown up until it times out.
  await s?.close();
  await policies?.close();
  client?.disconnect();
  await redis?.stop();
});

const serviceLimit = async (policy: string, k: string) =>
  (await call(s.url, "POST", "/v1/limit", { token: key, body: { policy, key: k } })).body as {
    allowed: boolean;
  };

/** Until the client runs the service's revision (real time: this is the propagation measured). */
const caughtUp = () =>
  waitFor(
    () => policies.status().revision === s.service.context.registry.currentRevision,
    1000,
    10,
  );

describe("an embedded client beside the service", () => {
  it("shares one limit exactly with POST /v1/limit: the same policy and key are the same Redis keys", async () => {
    const allowed: boolean[] = [];
    for (let i = 0; i < 5; i++) {
      allowed.push((await policies.limit("shared", "k")).allowed);
      allowed.push((await serviceLimit("shared", "k")).allowed);
    }
    expect(allowed.filter(Boolean)).toHaveLength(5);
    expect(allowed).toEqual([true, true, true, true, true, false, false, false, false, false]);
    // One set of keys for the key "k": the service's and the client's are the same.
    const keys = (await client.keys("*shared*")).sort();
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^sl:shared:\{k\}:/);
  });

  it("an edit reaches the client within a second, and the middleware follows it with its counters", async () => {
    const limiter = policies.limiter("http");
    const limit = rateLimit({ limiter, key: () => "one-client" });
    const server: Server = createServer(limit((_req, res) => res.end("ok")));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const addr = server.address();
    const url = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}/`;
    try {
      const statuses = async (n: number) => {
        const out: number[] = [];
        for (let i = 0; i < n; i++) out.push((await fetch(url)).status);
        return out;
      };
      expect(await statuses(3)).toEqual([200, 200, 429]);
      const t0 = Date.now();
      const r = await s.call("PUT", "/v1/admin/policies/http", {
        body: { algorithm: "fixed-window", rules: [{ limit: 3, period: "1m" }], apps: ["web"] },
      });
      expect(r.status).toBe(200);
      await waitFor(() => limiter.policy.rules[0]!.limit === 3, 1000, 5);
      expect(Date.now() - t0).toBeLessThan(1000);
      // The two requests counted under the old version still count.
      expect(await statuses(2)).toEqual([200, 429]);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("a draft runs on the same draft keys as the service's, and the client's counts reach the admin's totals", async () => {
    await s.call("PUT", "/v1/admin/policies/shared/draft", {
      body: { algorithm: "fixed-window", rules: [{ limit: 2, period: "1m" }], apps: ["web"] },
    });
    await caughtUp();
    const draftId = (await s.call("GET", "/v1/admin/policies/shared/draft")).body.id as number;
    // Two through the service, two in the client, on a fresh key: the draft (limit 2) would
    // deny the last two, whichever door they came through.
    const verdicts = [
      (await serviceLimit("shared", "d")).allowed,
      (await policies.limit("shared", "d")).allowed,
      (await serviceLimit("shared", "d")).allowed,
      (await policies.limit("shared", "d")).allowed,
    ];
    expect(verdicts).toEqual([true, true, true, true]);
    expect(await client.keys(`*sluice.draft.${draftId}*`)).toHaveLength(1);
    await policies.report();
    const draft = await s.call("GET", "/v1/admin/policies/shared/draft");
    expect(draft.body.stats).toEqual({
      evaluated: 4,
      wouldDeny: 2,
      wouldDenyNewly: 2,
      wouldAllowNewly: 0,
    });
    await s.call("DELETE", "/v1/admin/policies/shared/draft");
  });

  it("the admin lists the client: app, host, version and the revision it runs", async () => {
    await caughtUp();
    await policies.report();
    const r = await s.call("GET", "/v1/admin/clients");
    expect(r.body.clients).toEqual([
      expect.objectContaining({
        app: "web",
        host: "test-host",
        version: "sluice/0.1.0",
        revision: s.service.context.registry.currentRevision,
      }),
    ]);
  });

  it("a disabled policy allows without counting, as the service does", async () => {
    await s.call("PUT", "/v1/admin/policies/http", {
      body: {
        algorithm: "fixed-window",
        rules: [{ limit: 1, period: "1m" }],
        apps: ["web"],
        enabled: false,
      },
    });
    await caughtUp();
    const d = await policies.limit("http", "z");
    expect(d).toMatchObject({ allowed: true, reason: "disabled" });
    expect(await client.keys("*http:{z}*")).toEqual([]);
  });

  it("a revoked grant: the next decision fails with SLUICE_ERR_POLICY_NOT_FOUND", async () => {
    const t0 = Date.now();
    await s.call("PUT", "/v1/admin/policies/shared", {
      body: { algorithm: "fixed-window", rules: [{ limit: 5, period: "1m" }], apps: [] },
    });
    await waitFor(() => !policies.has("shared"), 1000, 5);
    expect(Date.now() - t0).toBeLessThan(1000);
    await expect(policies.limit("shared", "k")).rejects.toMatchObject({
      code: "SLUICE_ERR_POLICY_NOT_FOUND",
    });
    expect(errors).toEqual([]);
  });
});
