/**
 * A token bucket refilled by interval (`refill: "interval"`, as @upstash/ratelimit's) through
 * the service: the policy document keeps `refill` (admin API, JSON and YAML export and import,
 * the SQL row read back), `POST /v1/limit` decides by whole steps, and a `refill` that does not
 * apply is refused, naming the field.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestService, startService } from "./helpers.js";

let s: TestService;
let key: string;
let t = Date.UTC(2030, 0, 1);

beforeAll(async () => {
  s = await startService({ now: () => t });
  key = await s.createApp("web");
});

afterAll(async () => {
  await s?.close();
});

describe("refill on the service's policies", () => {
  it("keeps `refill` in its document and its exports; POST /v1/limit decides by whole steps", async () => {
    await s.createPolicy({
      name: "steps",
      algorithm: "token-bucket",
      refill: "interval",
      rules: [{ limit: 2, period: "10s", burst: 3 }],
      apps: ["web"],
    });
    const got = await s.call("GET", "/v1/admin/policies/steps");
    expect(got.status).toBe(200);
    expect(got.body.refill).toBe("interval");
    const decide = async () =>
      (await s.call("POST", "/v1/limit", { token: key, body: { policy: "steps", key: "u" } }))
        .body as { allowed: boolean; remaining: number; retryAfterMs: number };
    for (const remaining of [2, 1, 0]) expect(await decide()).toMatchObject({ remaining });
    // A continuous bucket would have 1.8 tokens back by now; this one gets 2 at 10 s.
    t += 9_000;
    expect(await decide()).toMatchObject({ allowed: false, retryAfterMs: 1_000 });
    t += 1_000;
    expect(await decide()).toMatchObject({ allowed: true, remaining: 1 });

    const json = await s.call("GET", "/v1/admin/policies/export?format=json");
    expect(json.body.policies).toContainEqual(expect.objectContaining({ refill: "interval" }));
    const yaml = await (
      await fetch(`${s.url}/v1/admin/policies/export`, {
        headers: { authorization: `Bearer ${s.adminToken}` },
      })
    ).text();
    expect(yaml).toMatch(/refill: interval/);
    const back = await s.call("POST", "/v1/admin/policies/import", {
      raw: yaml,
      contentType: "application/yaml",
    });
    expect(back.status).toBe(200);
    expect(back.body.plan.unchanged).toContain("steps");
  });

  it("refuses a refill that does not apply, and with leases, naming the field", async () => {
    const gcra = await s.call("POST", "/v1/admin/policies", {
      body: { name: "g", refill: "interval", rules: [{ limit: 5, period: "1s" }] },
    });
    expect(gcra.status).toBe(400);
    expect(gcra.body.error.issues).toContainEqual({
      path: "refill",
      message: "refill applies only to token-bucket, not gcra",
    });
    const leased = await s.call("POST", "/v1/admin/policies", {
      body: {
        name: "l",
        algorithm: "token-bucket",
        refill: "interval",
        lease: true,
        rules: [{ limit: 5, period: "1s" }],
      },
    });
    expect(leased.status).toBe(400);
    expect(leased.body.error.issues.map((i: { path: string }) => i.path)).toEqual(["lease"]);
    const bad = await s.call("POST", "/v1/admin/policies", {
      body: {
        name: "b",
        algorithm: "token-bucket",
        refill: "steps",
        rules: [{ limit: 5, period: "1s" }],
      },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues.map((i: { path: string }) => i.path)).toContain("refill");
  });
});
