/**
 * Leases through the service (docs/leases.md): `lease` is part of the policy document (admin
 * API, validation naming the field), `POST /v1/limit` decides a hot key from a lease with Redis
 * counters — never over the limit — and `/metrics` counts leases and where decisions were made.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { type TestService, call, startService } from "./helpers.js";

let redis: RedisServer;
let s: TestService;
let key: string;

beforeAll(async () => {
  redis = await startRedis();
  // As a Redis that has served leases before (a fresh one grants none for one lease lifetime).
  const admin = new Redis(redis.url);
  await admin.set("sl:lease-epoch", "0");
  admin.disconnect();
  s = await startService({ redisUrl: redis.url });
  key = await s.createApp("web");
});

afterAll(async () => {
  await s?.close();
  await redis?.stop();
});

describe("a policy with leases", () => {
  it("keeps `lease` in its document; a bad lease is refused, naming the field", async () => {
    await s.createPolicy({
      name: "hot",
      algorithm: "fixed-window",
      rules: [{ limit: 500, period: "24h" }],
      lease: { maxShare: 0.2, hotAfter: 5 },
      apps: ["web"],
    });
    const got = await s.call("GET", "/v1/admin/policies/hot");
    expect(got.status).toBe(200);
    expect(got.body.lease).toEqual({ maxShare: 0.2, hotAfter: 5 });

    const bad = await s.call("POST", "/v1/admin/policies", {
      body: {
        name: "bad",
        algorithm: "sliding-log",
        rules: [{ limit: 5, period: "1s" }],
        lease: true,
      },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues).toEqual(
      expect.arrayContaining([expect.objectContaining({ path: "lease" })]),
    );
    const share = await s.call("POST", "/v1/admin/policies", {
      body: { name: "bad2", rules: [{ limit: 5, period: "1s" }], lease: { maxShare: 2 } },
    });
    expect(share.status).toBe(400);
    expect(share.body.error.issues).toEqual(
      expect.arrayContaining([expect.objectContaining({ path: "lease.maxShare" })]),
    );
  });

  it("POST /v1/limit: 1,000 concurrent requests at one key, limit 500 → exactly 500, most admitted from leases", async () => {
    const answers = await Promise.all(
      Array.from({ length: 1000 }, () =>
        call(s.url, "POST", "/v1/limit", { token: key, body: { policy: "hot", key: "k" } }),
      ),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(answers.filter((a) => a.body.allowed === true)).toHaveLength(500);
    expect(answers.filter((a) => a.body.reason === "store-error")).toHaveLength(0);
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    const value = (line: RegExp) => Number(line.exec(metrics)?.[1] ?? NaN);
    expect(value(/^sluice_lease_events_total\{event="taken"\} (\d+)/m)).toBeGreaterThan(0);
    const memory = value(/^sluice_lease_decisions_total\{answered="memory"\} (\d+)/m);
    const remote = value(/^sluice_lease_decisions_total\{answered="redis"\} (\d+)/m);
    expect(memory + remote).toBe(1000);
    // Every request is counted once, where it was answered: most admissions from a lease,
    // and denials after the first from Redis's last "no", which holds until its retry time.
    expect(memory).toBeGreaterThan(250);
    expect(remote).toBeGreaterThan(0);
  });
});
