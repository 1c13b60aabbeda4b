import { describe, expect, it } from "vitest";
import type { Decision } from "../decision.js";
import { createLimiter } from "../limiter.js";
import { MemoryStore } from "../stores/memory.js";
import {
  ceilSeconds,
  githubHeaders,
  headerBuilders,
  ietfHeaders,
  rateLimitHeaders,
  retryAfterSeconds,
  ruleItemName,
  sfString,
  violatedPolicies,
} from "./headers.js";
import { QUOTA_EXCEEDED_TYPE, quotaExceededProblem, storeUnavailableProblem } from "./problem.js";

const T0 = 1_700_000_000_000;

function setup(policy: Parameters<typeof createLimiter>[0]["policy"]) {
  let t = T0;
  const limiter = createLimiter({ store: new MemoryStore({ now: () => t }), policy });
  return { limiter, advance: (ms: number) => (t += ms), now: () => t };
}

describe("githubHeaders", () => {
  it("formats a fixed window exactly", async () => {
    const { limiter } = setup({
      name: "api",
      algorithm: "fixed-window",
      rules: [{ limit: 3, period: "1m" }],
    });
    const d = await limiter.limit("k");
    // fixed windows align to multiples of the period: T0 is 20 s into its minute.
    const windowEnd = Math.ceil((T0 + 1) / 60_000) * 60_000;
    expect(githubHeaders(d, { nowMs: T0 })).toEqual([
      ["X-RateLimit-Limit", "3"],
      ["X-RateLimit-Remaining", "2"],
      ["X-RateLimit-Reset", String(Math.ceil(windowEnd / 1000))],
      ["X-RateLimit-Used", "1"],
    ]);
  });

  it("never sends negative or fractional values", () => {
    const d: Decision = {
      allowed: false,
      limit: 10,
      remaining: -3,
      resetAfterMs: 1234.5,
      retryAfterMs: 0.2,
      policy: "p",
      rule: 0,
      rules: [
        {
          limit: 10,
          periodMs: 1500,
          burst: 10,
          allowed: false,
          remaining: -1,
          resetAfterMs: 1234.5,
          retryAfterMs: 0.2,
        },
      ],
      cost: 1,
    };
    const all = rateLimitHeaders("both", d, { nowMs: T0 + 0.5 });
    for (const [, v] of all)
      for (const n of v.match(/-?\d+(\.\d+)?/g) ?? [])
        expect(Number(n)).toSatisfy((x: number) => Number.isInteger(x) && x >= 0);
    expect(retryAfterSeconds(d)).toBe(1);
    expect(ietfHeaders(d)).toEqual([
      ["RateLimit-Policy", '"p";q=10;w=2'],
      ["RateLimit", '"p";r=0;t=2'],
    ]);
  });

  it("reports GCRA burst and used against the burst", async () => {
    const { limiter } = setup({ name: "gcra", rules: [{ limit: 60, period: "1m", burst: 5 }] });
    await limiter.limit("k");
    const d = await limiter.limit("k");
    // 2 used of a burst of 5; the bucket refills one per second, so it is full again in 2 s.
    expect(githubHeaders(d, { nowMs: T0 })).toEqual([
      ["X-RateLimit-Limit", "60"],
      ["X-RateLimit-Remaining", "3"],
      ["X-RateLimit-Reset", String(Math.ceil((T0 + 2000) / 1000))],
      ["X-RateLimit-Used", "2"],
    ]);
    expect(ietfHeaders(d)).toEqual([
      ["RateLimit-Policy", '"gcra";q=60;w=60;sluice-burst=5'],
      ["RateLimit", '"gcra";r=3;t=2'],
    ]);
  });
});

describe("ietfHeaders", () => {
  it("lists every rule of a multi-rule policy", async () => {
    const { limiter } = setup({
      name: "api",
      algorithm: "sliding-log",
      rules: [
        { limit: 1, period: "1s" },
        { limit: 5, period: "1m" },
      ],
    });
    const a = await limiter.limit("k");
    expect(ietfHeaders(a)).toEqual([
      ["RateLimit-Policy", '"api-0";q=1;w=1, "api-1";q=5;w=60'],
      ["RateLimit", '"api-0";r=0;t=1, "api-1";r=4;t=60'],
    ]);
    const b = await limiter.limit("k");
    expect(b.allowed).toBe(false);
    expect(violatedPolicies(b)).toEqual(["api-0"]);
    expect(ruleItemName(b, 1)).toBe("api-1");
  });

  it("marks concurrency quotas and sends no window", async () => {
    const { limiter } = setup({
      name: "jobs",
      algorithm: "concurrency",
      rules: [{ limit: 2, period: "30s" }],
    });
    const d = await limiter.limit("k");
    expect(ietfHeaders(d, { algorithm: "concurrency" })).toEqual([
      ["RateLimit-Policy", '"jobs";q=2;qu="concurrent-requests"'],
      ["RateLimit", '"jobs";r=1'],
    ]);
    expect(githubHeaders(d, { nowMs: T0, algorithm: "concurrency" })).toEqual([
      ["X-RateLimit-Limit", "2"],
      ["X-RateLimit-Remaining", "1"],
      ["X-RateLimit-Used", "1"],
    ]);
  });

  it("escapes structured-field strings", () => {
    expect(sfString('a"b\\c\u00e9')).toBe('"a\\"b\\\\c"');
  });
});

describe("store errors", () => {
  const failing = {
    kind: "broken",
    decide: () => Promise.reject(new Error("down")),
    peek: () => Promise.reject(new Error("down")),
    adjust: () => Promise.reject(new Error("down")),
    release: () => Promise.reject(new Error("down")),
    reset: () => Promise.reject(new Error("down")),
  };
  it("sends only what is true: the limit and the policy", async () => {
    const limiter = createLimiter({
      store: failing,
      policy: { name: "api", rules: [{ limit: 10, period: "1m" }], onStoreError: "deny" },
    });
    const d = await limiter.limit("k");
    expect(d.reason).toBe("store-error");
    expect(headerBuilders.both(d, { nowMs: T0 })).toEqual([
      ["X-RateLimit-Limit", "10"],
      ["RateLimit-Policy", '"api";q=10;w=60'],
    ]);
    expect(storeUnavailableProblem(d)).toMatchObject({ status: 503, "violated-policies": ["api"] });
  });
});

describe("Retry-After and the problem body", () => {
  it("rounds up, and a retry after that long passes", async () => {
    const { limiter, advance } = setup({ name: "api", rules: [{ limit: 3, period: "10s" }] });
    for (let i = 0; i < 3; i++) expect((await limiter.limit("k")).allowed).toBe(true);
    const d = await limiter.limit("k");
    expect(d.allowed).toBe(false);
    expect(retryAfterSeconds(d)).toBe(ceilSeconds(d.retryAfterMs));
    expect(retryAfterSeconds(d)).toBe(4); // one token per 3333.3 ms
    advance(retryAfterSeconds(d) * 1000 - 1000);
    expect((await limiter.limit("k")).allowed).toBe(false);
    advance(1000);
    expect((await limiter.limit("k")).allowed).toBe(true);
    expect(quotaExceededProblem(d)).toEqual({
      type: QUOTA_EXCEEDED_TYPE,
      title: "Request cannot be satisfied as assigned quota has been exceeded",
      status: 429,
      detail: "Rate limit exceeded (api); retry in 4 s.",
      "violated-policies": ["api"],
      retryAfter: 4,
    });
  });
});
