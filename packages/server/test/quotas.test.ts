/**
 * Calendar quotas through the service: a fixed-window rule per calendar month in a time zone
 * keeps its fields in the policy document (admin API, the SQL row read back, YAML export and
 * import), `POST /v1/limit` waits to the local midnight that ends the window, and a bad time
 * zone is refused naming the field.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestService, startService } from "./helpers.js";

let s: TestService;
let key: string;
// Jan 31 2026, 23:30 in New York (EST, UTC−5).
let t = Date.UTC(2026, 1, 1, 4, 30);

beforeAll(async () => {
  s = await startService({ now: () => t });
  key = await s.createApp("web");
});

afterAll(async () => {
  await s?.close();
});

describe("calendar quotas on the service's policies", () => {
  it("keeps the calendar rule in its document and exports; POST /v1/limit waits to local midnight", async () => {
    const rule = { limit: 3, calendar: "month", timeZone: "America/New_York" };
    await s.createPolicy({
      name: "monthly",
      algorithm: "fixed-window",
      rules: [rule],
      apps: ["web"],
    });
    const got = await s.call("GET", "/v1/admin/policies/monthly");
    expect(got.status).toBe(200);
    expect(got.body.rules).toEqual([rule]);
    const decide = async () =>
      (await s.call("POST", "/v1/limit", { token: key, body: { policy: "monthly", key: "u" } }))
        .body as { allowed: boolean; remaining: number; retryAfterMs: number };
    for (const remaining of [2, 1, 0]) expect(await decide()).toMatchObject({ remaining });
    expect(await decide()).toMatchObject({ allowed: false, retryAfterMs: 30 * 60_000 });
    t += 30 * 60_000;
    expect(await decide()).toMatchObject({ allowed: true, remaining: 2 });

    const yaml = await (
      await fetch(`${s.url}/v1/admin/policies/export`, {
        headers: { authorization: `Bearer ${s.adminToken}` },
      })
    ).text();
    expect(yaml).toMatch(/calendar: month/);
    expect(yaml).toMatch(/timeZone: America\/New_York/);
    const back = await s.call("POST", "/v1/admin/policies/import", {
      raw: yaml,
      contentType: "application/yaml",
    });
    expect(back.status).toBe(200);
    expect(back.body.plan.unchanged).toContain("monthly");
  });

  it("refuses an unknown time zone, a calendar with a period and a calendar on gcra, naming the field", async () => {
    const post = (body: object) => s.call("POST", "/v1/admin/policies", { body });
    const zone = await post({
      name: "z",
      algorithm: "fixed-window",
      rules: [{ limit: 5, calendar: "day", timeZone: "Europe/Atlantis" }],
    });
    expect(zone.status).toBe(400);
    expect(zone.body.error.issues.map((i: { path: string }) => i.path)).toEqual([
      "rules.0.timeZone",
    ]);
    const both = await post({
      name: "b",
      algorithm: "fixed-window",
      rules: [{ limit: 5, calendar: "day", period: "1d" }],
    });
    expect(both.body.error.issues.map((i: { path: string }) => i.path)).toEqual([
      "rules.0.calendar",
    ]);
    const gcra = await post({ name: "g", rules: [{ limit: 5, calendar: "week" }] });
    expect(gcra.body.error.issues).toContainEqual({
      path: "rules.0.calendar",
      message: "calendar windows apply only to fixed-window, not gcra",
    });
    expect((await s.call("GET", "/v1/admin/policies/z")).status).toBe(404);
  });
});
