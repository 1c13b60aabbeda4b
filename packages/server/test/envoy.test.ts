/**
 * The Envoy rate limit service through a real gRPC client speaking the project's .proto files
 * (as Envoy does), against a started service: matching (exact, wildcard, key only, nested,
 * replaces, override, unlimited, shadow), hits_addend, windows and durations as the reference
 * service computes them, headers and the 429 body, errors, `POST /json`, metrics. Memory
 * counters on an injected clock: windows move only when the test says.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestService, call, startService } from "./helpers.js";
import { type RlsClient, type TestRequest, rlsClient } from "./envoy-client.js";

/** 2030-01-01T00:00:30Z: 30 s into a minute, an hour, a day (all aligned to the epoch). */
const START = Date.UTC(2030, 0, 1, 0, 0, 30);
let nowMs = START;

let s: TestService;
let rls: RlsClient;

const CONFIG = `
domain: shop
descriptors:
  # exact key and value
  - key: database
    value: users
    rate_limit:
      unit: minute
      requests_per_unit: 3
  # any value of the key, each counted apart
  - key: remote_address
    rate_limit:
      unit: hour
      requests_per_unit: 2
  # a more specific value of the same key wins
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
  # wildcard
  - key: path
    value: /api/*/orders
    rate_limit:
      unit: day
      requests_per_unit: 2
  # nested: a limit only at the last entry
  - key: client
    value: acme
    rate_limit:
      unit: day
      requests_per_unit: 100
    descriptors:
      - key: user
        rate_limit:
          name: per_user
          unit: day
          requests_per_unit: 4
  - key: partner
    value: big
    descriptors:
      - key: user
        rate_limit:
          replaces:
            - name: per_user
          unit: day
          requests_per_unit: 6
  - key: internal
    rate_limit:
      unlimited: true
  - key: trial
    shadow_mode: true
    rate_limit:
      unit: day
      requests_per_unit: 1
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 2
  - key: quota_a
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 1 }
  - key: quota_b
    quota_mode: true
    rate_limit: { unit: day, requests_per_unit: 2 }
  - key: week
    rate_limit: { unit: week, requests_per_unit: 5 }
  - key: month
    rate_limit: { unit: month, requests_per_unit: 5 }
  - key: year
    rate_limit: { unit: year, requests_per_unit: 5 }
  # sluice's extensions
  - key: smooth
    rate_limit:
      algorithm: gcra
      requests_per_unit: 10
      period: 30s
      burst: 2
  - key: layered
    rate_limit:
      algorithm: fixed-window
      rules:
        - { requests_per_unit: 2, unit: minute }
        - { requests_per_unit: 3, period: 5m }
`;

const one = (domain: string, ...entries: Array<[string, string]>): TestRequest => ({
  domain,
  descriptors: [{ entries: entries.map(([key, value]) => ({ key, value })) }],
});

/** Codes of a request's statuses, then the overall code. */
async function codes(req: TestRequest): Promise<string[]> {
  const r = await rls.shouldRateLimit(req);
  return [...r.statuses.map((x) => x.code), r.overallCode];
}

async function putDomain(name: string, yaml: string): Promise<void> {
  const r = await s.call("PUT", `/v1/admin/envoy/domains/${name}`, {
    raw: yaml,
    contentType: "application/yaml",
  });
  if (r.status !== 200 && r.status !== 201)
    throw new Error(`PUT ${name}: ${r.status} ${JSON.stringify(r.body)}`);
}

beforeAll(async () => {
  s = await startService({ values: { grpcPort: 0 }, now: () => nowMs });
  await putDomain("shop", CONFIG);
  rls = rlsClient(`127.0.0.1:${s.service.grpcPort()}`);
});
afterAll(async () => {
  rls?.close();
  await s?.close();
});

describe("matching, as the reference service matches", () => {
  it("an exact key and value: limit_remaining counts down, then OVER_LIMIT", async () => {
    const req = one("shop", ["database", "users"]);
    const seen = [];
    for (let i = 0; i < 4; i++) {
      const r = await rls.shouldRateLimit(req);
      seen.push([r.overallCode, r.statuses[0]!.limitRemaining]);
    }
    expect(seen).toEqual([
      ["OK", 2],
      ["OK", 1],
      ["OK", 0],
      ["OVER_LIMIT", 0],
    ]);
    const r = await rls.shouldRateLimit(req);
    expect(r.statuses[0]!.currentLimit).toEqual({ requestsPerUnit: 3, unit: "MINUTE", name: "" });
    // 30 s into the minute: 30 s left.
    expect(r.statuses[0]!.durationUntilReset).toEqual({ seconds: "30", nanos: 0 });
    // Another value of the key matches nothing: OK with no limit.
    const other = await rls.shouldRateLimit(one("shop", ["database", "orders"]));
    expect(other.statuses[0]).toEqual({
      code: "OK",
      currentLimit: null,
      limitRemaining: 0,
      durationUntilReset: null,
    });
  });

  it("a key without value counts each value apart; a listed value is tried first", async () => {
    const a = one("shop", ["remote_address", "10.0.0.1"]);
    const b = one("shop", ["remote_address", "10.0.0.2"]);
    expect(await codes(a)).toEqual(["OK", "OK"]);
    expect(await codes(a)).toEqual(["OK", "OK"]);
    expect(await codes(a)).toEqual(["OVER_LIMIT", "OVER_LIMIT"]);
    expect(await codes(b)).toEqual(["OK", "OK"]);
    // The blocked address: 0 per second, always over.
    const blocked = await rls.shouldRateLimit(one("shop", ["remote_address", "50.0.0.5"]));
    expect(blocked.overallCode).toBe("OVER_LIMIT");
    expect(blocked.statuses[0]!.currentLimit).toEqual({
      requestsPerUnit: 0,
      unit: "SECOND",
      name: "",
    });
    expect(blocked.statuses[0]!.durationUntilReset).toEqual({ seconds: "1", nanos: 0 });
  });

  it("a wildcard value matches any text in place of its *, each value counted apart", async () => {
    const x = one("shop", ["path", "/api/v1/orders"]);
    expect(await codes(x)).toEqual(["OK", "OK"]);
    expect(await codes(x)).toEqual(["OK", "OK"]);
    expect(await codes(x)).toEqual(["OVER_LIMIT", "OVER_LIMIT"]);
    expect(await codes(one("shop", ["path", "/api/v2/orders"]))).toEqual(["OK", "OK"]);
    // Not matching the pattern: no limit.
    const none = await rls.shouldRateLimit(one("shop", ["path", "/api/v1/users"]));
    expect(none.statuses[0]!.currentLimit).toBeNull();
  });

  it("share_threshold: every value matching the wildcard shares one counter", async () => {
    expect(await codes(one("shop", ["files", "files/a.pdf"]))).toEqual(["OK", "OK"]);
    expect(await codes(one("shop", ["files", "files/b.csv"]))).toEqual(["OK", "OK"]);
    expect(await codes(one("shop", ["files", "files/c.txt"]))).toEqual([
      "OVER_LIMIT",
      "OVER_LIMIT",
    ]);
  });

  it("nested descriptors: the limit applies only at the request's last entry", async () => {
    const user = one("shop", ["client", "acme"], ["user", "u1"]);
    const first = await rls.shouldRateLimit(user);
    expect(first.statuses[0]!.currentLimit).toEqual({
      requestsPerUnit: 4,
      unit: "DAY",
      name: "per_user",
    });
    expect(first.statuses[0]!.limitRemaining).toBe(3);
    // (client, acme) alone has its own limit; one more entry than the tree has: no limit.
    const top = await rls.shouldRateLimit(one("shop", ["client", "acme"]));
    expect(top.statuses[0]!.currentLimit?.requestsPerUnit).toBe(100);
    const deeper = await rls.shouldRateLimit(
      one("shop", ["client", "acme"], ["user", "u1"], ["device", "d"]),
    );
    expect(deeper.statuses[0]!.currentLimit).toBeNull();
  });

  it("replaces: a matched limit drops the named one, which is not counted", async () => {
    const req: TestRequest = {
      domain: "shop",
      descriptors: [
        {
          entries: [
            { key: "client", value: "acme" },
            { key: "user", value: "u2" },
          ],
        },
        {
          entries: [
            { key: "partner", value: "big" },
            { key: "user", value: "u2" },
          ],
        },
      ],
    };
    const r = await rls.shouldRateLimit(req);
    expect(r.statuses[0]).toMatchObject({ code: "OK", currentLimit: null, limitRemaining: 0 });
    expect(r.statuses[1]).toMatchObject({ code: "OK", limitRemaining: 5 });
    expect(r.statuses[1]!.currentLimit?.requestsPerUnit).toBe(6);
    // per_user of u2 was left untouched: 4 remain for it alone.
    const alone = await rls.shouldRateLimit(one("shop", ["client", "acme"], ["user", "u2"]));
    expect(alone.statuses[0]!.limitRemaining).toBe(3);
  });

  it("unlimited: OK with the largest limit_remaining, never counted", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await rls.shouldRateLimit(one("shop", ["internal", "x"]));
      expect(r.statuses[0]).toEqual({
        code: "OK",
        currentLimit: null,
        limitRemaining: 4294967295,
        durationUntilReset: null,
      });
    }
  });

  it("shadow_mode: OK when over the limit, with nothing remaining", async () => {
    const req = one("shop", ["trial", "t1"]);
    expect((await rls.shouldRateLimit(req)).statuses[0]).toMatchObject({
      code: "OK",
      limitRemaining: 0,
    });
    const over = await rls.shouldRateLimit(req);
    expect(over.overallCode).toBe("OK");
    expect(over.statuses[0]).toMatchObject({ code: "OK", limitRemaining: 0 });
    expect(over.rawBody.length).toBe(0);
  });

  it("an override sent by Envoy wins over the configuration, and counts where it would", async () => {
    const req: TestRequest = {
      domain: "shop",
      descriptors: [
        {
          entries: [{ key: "database", value: "users" }],
          limit: { requestsPerUnit: 1, unit: "HOUR" },
        },
      ],
    };
    const r = await rls.shouldRateLimit({
      ...req,
      descriptors: [{ ...req.descriptors[0]!, entries: [{ key: "database", value: "reports" }] }],
    });
    // No configured limit for reports: the override alone decides.
    expect(r.statuses[0]).toMatchObject({
      code: "OK",
      currentLimit: { requestsPerUnit: 1, unit: "HOUR", name: "" },
      limitRemaining: 0,
      durationUntilReset: { seconds: String(3600 - 30) },
    });
    expect(
      (
        await rls.shouldRateLimit({
          ...req,
          descriptors: [
            { ...req.descriptors[0]!, entries: [{ key: "database", value: "reports" }] },
          ],
        })
      ).overallCode,
    ).toBe("OVER_LIMIT");
    // In an unknown domain too.
    const elsewhere = await rls.shouldRateLimit({ ...req, domain: "nowhere" });
    expect(elsewhere.statuses[0]!.currentLimit?.requestsPerUnit).toBe(1);
  });

  it("an unknown domain, or a descriptor matching nothing, is OK with no limit", async () => {
    const r = await rls.shouldRateLimit(one("nowhere", ["database", "users"]));
    expect(r.overallCode).toBe("OK");
    expect(r.statuses[0]!.currentLimit).toBeNull();
    expect(r.responseHeadersToAdd).toEqual([]);
  });

  it("several descriptors: OVER_LIMIT when any is over; each is counted on its own", async () => {
    const req: TestRequest = {
      domain: "shop",
      descriptors: [
        { entries: [{ key: "remote_address", value: "10.9.9.9" }] },
        { entries: [{ key: "remote_address", value: "50.0.0.5" }] },
      ],
    };
    const r = await rls.shouldRateLimit(req);
    expect([r.overallCode, r.statuses.map((x) => x.code)]).toEqual([
      "OVER_LIMIT",
      ["OK", "OVER_LIMIT"],
    ]);
    // The first descriptor was within its limit, so it was counted (as the reference service does).
    const again = await rls.shouldRateLimit(one("shop", ["remote_address", "10.9.9.9"]));
    expect(again.statuses[0]!.limitRemaining).toBe(0);
  });

  it("quota_mode: over only when every quota descriptor of the request is", async () => {
    const req: TestRequest = {
      domain: "shop",
      descriptors: [
        { entries: [{ key: "quota_a", value: "q" }] },
        { entries: [{ key: "quota_b", value: "q" }] },
      ],
    };
    expect(await codes(req)).toEqual(["OK", "OK", "OK"]);
    expect(await codes(req)).toEqual(["OVER_LIMIT", "OK", "OK"]);
    expect(await codes(req)).toEqual(["OVER_LIMIT", "OVER_LIMIT", "OVER_LIMIT"]);
  });
});

describe("windows, as the reference service counts them", () => {
  it("a window is aligned to the epoch: DAY ends at 00:00 UTC, WEEK on Thursday, MONTH is 30 days, YEAR 365", async () => {
    const reset = async (key: string) =>
      Number(
        (await rls.shouldRateLimit(one("shop", [key, "w"]))).statuses[0]!.durationUntilReset!
          .seconds,
      );
    const t = START / 1000;
    expect(await reset("week")).toBe(7 * 86_400 - (t % (7 * 86_400)));
    expect(await reset("month")).toBe(30 * 86_400 - (t % (30 * 86_400)));
    expect(await reset("year")).toBe(365 * 86_400 - (t % (365 * 86_400)));
    const day = await rls.shouldRateLimit(one("shop", ["path", "/api/w/orders"]));
    expect(day.statuses[0]!.durationUntilReset!.seconds).toBe(String(86_400 - 30));
  });

  it("a new window starts afresh", async () => {
    const req = one("shop", ["database", "users"]);
    expect((await rls.shouldRateLimit(req)).overallCode).toBe("OVER_LIMIT");
    nowMs = START + 30_000; // the next minute
    try {
      const r = await rls.shouldRateLimit(req);
      expect([r.overallCode, r.statuses[0]!.limitRemaining]).toEqual(["OK", 2]);
      expect(r.statuses[0]!.durationUntilReset!.seconds).toBe("60");
    } finally {
      nowMs = START;
    }
  });
});

describe("sluice's extensions", () => {
  it("algorithm and period: a GCRA of 10 per 30 s with a burst of 2", async () => {
    const req = one("shop", ["smooth", "s"]);
    const r1 = await rls.shouldRateLimit(req);
    expect(r1.statuses[0]).toMatchObject({
      code: "OK",
      limitRemaining: 1,
      // 30 s is no reference unit.
      currentLimit: { requestsPerUnit: 10, unit: "UNKNOWN" },
    });
    expect((await rls.shouldRateLimit(req)).overallCode).toBe("OK");
    expect((await rls.shouldRateLimit(req)).overallCode).toBe("OVER_LIMIT");
    nowMs = START + 3000; // one emission interval later, one more fits
    try {
      expect((await rls.shouldRateLimit(req)).overallCode).toBe("OK");
    } finally {
      nowMs = START;
    }
  });

  it("several limits on one descriptor: all-or-nothing, reporting the tightest", async () => {
    const req = one("shop", ["layered", "l"]);
    expect((await rls.shouldRateLimit(req)).statuses[0]!.limitRemaining).toBe(1);
    expect((await rls.shouldRateLimit(req)).statuses[0]!.limitRemaining).toBe(0);
    const over = await rls.shouldRateLimit(req);
    expect(over.statuses[0]).toMatchObject({
      code: "OVER_LIMIT",
      currentLimit: { requestsPerUnit: 2, unit: "MINUTE" },
    });
    nowMs = START + 30_000; // a new minute: 2 more by the minute, but only 1 by the 5 minutes
    try {
      const r = await rls.shouldRateLimit(req);
      expect(r.statuses[0]).toMatchObject({
        code: "OK",
        limitRemaining: 0,
        currentLimit: { requestsPerUnit: 3 },
      });
      expect((await rls.shouldRateLimit(req)).overallCode).toBe("OVER_LIMIT");
    } finally {
      nowMs = START;
    }
  });
});

describe("hits_addend", () => {
  let counter = "a";
  const req = (hits?: number, perDescriptor?: number): TestRequest => ({
    domain: "shop",
    ...(hits !== undefined ? { hitsAddend: hits } : {}),
    descriptors: [
      {
        entries: [{ key: "remote_address", value: `hits-${counter}` }],
        ...(perDescriptor !== undefined ? { hitsAddend: { value: perDescriptor } } : {}),
      },
    ],
  });

  it("the request's hits count; 0 (unset) means 1", async () => {
    counter = "b";
    expect((await rls.shouldRateLimit(req(2))).statuses[0]!.limitRemaining).toBe(0);
    counter = "c";
    expect((await rls.shouldRateLimit(req(0))).statuses[0]!.limitRemaining).toBe(1);
  });

  it("a descriptor's hits win over the request's; 0 there checks without counting", async () => {
    counter = "d";
    const r = await rls.shouldRateLimit(req(2, 1));
    expect(r.statuses[0]!.limitRemaining).toBe(1);
    for (let i = 0; i < 3; i++) {
      const check = await rls.shouldRateLimit(req(2, 0));
      expect([check.overallCode, check.statuses[0]!.limitRemaining]).toEqual(["OK", 1]);
    }
    // Still 1 left: the checks counted nothing.
    expect((await rls.shouldRateLimit(req(0, 1))).statuses[0]!.limitRemaining).toBe(0);
    // A check when nothing is left: a request of 1 would not pass.
    expect((await rls.shouldRateLimit(req(2, 0))).overallCode).toBe("OVER_LIMIT");
  });

  it("more hits than the limit holds: OVER_LIMIT, and nothing is counted", async () => {
    counter = "e";
    const big = await rls.shouldRateLimit(req(3, 5));
    expect(big.overallCode).toBe("OVER_LIMIT");
    expect((await rls.shouldRateLimit(req(3, 2))).statuses[0]!.limitRemaining).toBe(0);
  });
});

describe("headers and the 429 body", () => {
  it("IETF RateLimit-Policy / RateLimit of the descriptor closest to its limit", async () => {
    const r = await rls.shouldRateLimit({
      domain: "shop",
      descriptors: [
        { entries: [{ key: "client", value: "acme" }] },
        {
          entries: [
            { key: "client", value: "acme" },
            { key: "user", value: "h1" },
          ],
        },
      ],
    });
    expect(r.responseHeadersToAdd).toEqual([
      { key: "RateLimit-Policy", value: '"per_user";q=4;w=86400' },
      { key: "RateLimit", value: `"per_user";r=3;t=${86_400 - 30}` },
    ]);
    expect(r.rawBody.length).toBe(0);
  });

  it("over limit: a problem+json body naming the limits exceeded, Retry-After, its content type", async () => {
    const r = await rls.shouldRateLimit({
      domain: "shop",
      descriptors: [
        { entries: [{ key: "remote_address", value: "50.0.0.5" }] },
        { entries: [{ key: "remote_address", value: "body-test" }] },
      ],
    });
    expect(r.overallCode).toBe("OVER_LIMIT");
    const headers = Object.fromEntries(r.responseHeadersToAdd.map((h) => [h.key, h.value]));
    expect(headers).toEqual({
      "RateLimit-Policy": '"shop.remote_address_50.0.0.5";q=0;w=1',
      RateLimit: '"shop.remote_address_50.0.0.5";r=0;t=1',
      "Retry-After": "1",
      "Content-Type": "application/problem+json",
    });
    expect(JSON.parse(r.rawBody.toString("utf8"))).toEqual({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      title: "Request cannot be satisfied as assigned quota has been exceeded",
      status: 429,
      detail: "Rate limit exceeded (shop.remote_address_50.0.0.5); retry in 1 s.",
      "violated-policies": ["shop.remote_address_50.0.0.5"],
      retryAfter: 1,
    });
  });
});

describe("errors", () => {
  it("a request that cannot be answered is INVALID_ARGUMENT naming the field", async () => {
    await expect(rls.shouldRateLimit(one("", ["a", "b"]))).rejects.toMatchObject({
      code: 3,
      details: "Invalid rate limit request: domain: rate limit domain must not be empty",
    });
    await expect(rls.shouldRateLimit({ domain: "shop", descriptors: [] })).rejects.toMatchObject({
      code: 3,
      details:
        "Invalid rate limit request: descriptors: rate limit descriptor list must not be empty",
    });
    await expect(
      rls.shouldRateLimit({
        domain: "shop",
        descriptors: [
          { entries: [{ key: "a", value: "b" }], limit: { requestsPerUnit: 1, unit: "UNKNOWN" } },
        ],
      }),
    ).rejects.toMatchObject({
      code: 3,
      details:
        "Invalid rate limit request: descriptors.0.limit.unit: must be SECOND, MINUTE, HOUR, DAY, MONTH or YEAR (got UNKNOWN)",
    });
  });

  it("answers gRPC health checks", async () => {
    expect(await rls.health()).toBe("SERVING");
    await expect(rls.health("other.Service")).rejects.toMatchObject({ code: 5 });
  });
});

describe("POST /json", () => {
  it("takes and returns protojson: 200 when OK, 429 over the limit", async () => {
    const body = {
      domain: "shop",
      descriptors: [{ entries: [{ key: "remote_address", value: "json-1" }] }],
    };
    const ok = await call(s.url, "POST", "/json", { body });
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({
      overallCode: "OK",
      statuses: [
        {
          code: "OK",
          currentLimit: { requestsPerUnit: 2, unit: "HOUR" },
          limitRemaining: 1,
          durationUntilReset: `${3600 - 30}s`,
        },
      ],
      responseHeadersToAdd: [
        { key: "RateLimit-Policy", value: '"shop.remote_address";q=2;w=3600' },
        { key: "RateLimit", value: `"shop.remote_address";r=1;t=${3600 - 30}` },
      ],
    });
    // snake_case names and numbers as strings are protojson too; the reference's `curl --data`
    // sends a form content type, which is accepted.
    const res = await fetch(`${s.url}/json`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: JSON.stringify({ ...body, hits_addend: "1" }),
    });
    expect(res.status).toBe(200);
    const over = await call(s.url, "POST", "/json", { body });
    expect(over.status).toBe(429);
    expect(over.body.overallCode).toBe("OVER_LIMIT");
    expect(Buffer.from(over.body.rawBody as string, "base64").toString()).toContain(
      '"violated-policies":["shop.remote_address"]',
    );
  });

  it("bad input is 400 naming the field (not Envoy's 400 for everything)", async () => {
    const r = await call(s.url, "POST", "/json", {
      body: { domain: "shop", descriptors: [{ entries: [{ key: "a", valeu: "b" }] }] },
    });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({
      code: "invalid_request",
      issues: [
        { path: "descriptors.0.entries.0.valeu", message: "unknown field (known: key, value)" },
      ],
    });
    const empty = await call(s.url, "POST", "/json", { body: { descriptors: [] } });
    expect(empty.status).toBe(400);
    expect(empty.body.error.issues).toEqual([
      { path: "domain", message: "rate limit domain must not be empty" },
      { path: "descriptors", message: "rate limit descriptor list must not be empty" },
    ]);
  });
});

describe("metrics", () => {
  it("per domain and descriptor path, never a request's values", async () => {
    const text = (await call(s.url, "GET", "/metrics")).body as string;
    expect(text).toContain(
      'sluice_envoy_descriptor_decisions_total{domain="shop",descriptor="shop.remote_address",outcome="over_limit"}',
    );
    expect(text).toMatch(
      /sluice_envoy_descriptor_decisions_total\{domain="shop",descriptor="shop.trial",outcome="shadow"\} 1/,
    );
    expect(text).toContain('sluice_envoy_requests_total{domain="(unknown)",code="ok"}');
    expect(text).toContain('sluice_envoy_requests_total{domain="shop",code="invalid"}');
    expect(text).not.toContain("10.0.0.1");
    expect(text).toMatch(/sluice_envoy_domains 1/);
  });
});
