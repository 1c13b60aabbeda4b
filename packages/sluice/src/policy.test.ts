import { describe, expect, it } from "vitest";
import { ValidationError } from "./errors.js";
import { createLimiter } from "./limiter.js";
import { type PolicyInput, definePolicy, policyToInput } from "./policy.js";
import { memoryStore } from "./stores/memory.js";

function issuesOf(input: unknown): Array<{ path: string; message: string }> {
  try {
    definePolicy(input as PolicyInput);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).code).toBe("SLUICE_ERR_POLICY");
    return [...(err as ValidationError).issues];
  }
  throw new Error("expected a validation error");
}

describe("definePolicy", () => {
  it("resolves durations, defaults and burst", () => {
    const p = definePolicy({ name: "api", rules: [{ limit: 100, period: "1m", burst: 20 }] });
    expect(p).toMatchObject({
      name: "api",
      algorithm: "gcra",
      blockMs: 0,
      onStoreError: "allow",
      shadow: false,
    });
    expect(p.rules).toEqual([{ limit: 100, periodMs: 60_000, burst: 20 }]);
    expect(Object.isFrozen(p)).toBe(true);
    expect(
      definePolicy({ name: "w", algorithm: "fixed-window", rules: [{ limit: 5, period: 1500 }] })
        .rules[0],
    ).toEqual({ limit: 5, periodMs: 1500, burst: 5 });
  });

  it("round-trips through its input form", () => {
    const input: PolicyInput = {
      name: "x",
      algorithm: "token-bucket",
      rules: [{ limit: 10, period: 1000, burst: 3 }],
      blockDuration: 5000,
      onStoreError: "deny",
      shadow: true,
      description: "d",
    };
    expect(definePolicy(policyToInput(definePolicy(input)))).toEqual(definePolicy(input));
  });

  it("resetOnBlock: needs a blockDuration, not for concurrency, round-tripped", () => {
    const input: PolicyInput = {
      name: "rb",
      algorithm: "sliding-log",
      rules: [{ limit: 5, period: 1000 }],
      blockDuration: 2000,
      resetOnBlock: true,
    };
    expect(definePolicy(input).resetOnBlock).toBe(true);
    expect(policyToInput(definePolicy(input))).toEqual(input);
    expect(issuesOf({ ...input, blockDuration: undefined })).toEqual([
      { path: "resetOnBlock", message: "needs a blockDuration" },
    ]);
    expect(issuesOf({ ...input, algorithm: "concurrency" })).toEqual([
      { path: "resetOnBlock", message: "does not apply to concurrency (permits are not counts)" },
    ]);
  });

  it("windowStart: first-request fixed windows, validated and round-tripped", () => {
    const input: PolicyInput = {
      name: "fw",
      algorithm: "fixed-window",
      windowStart: "first-request",
      rules: [{ limit: 5, period: "1m" }],
    };
    const p = definePolicy(input);
    expect(p.windowStart).toBe("first-request");
    expect(policyToInput(p)).toEqual({ ...input, rules: [{ limit: 5, period: 60_000 }] });
    expect(definePolicy({ name: "g", rules: [{ limit: 1, period: 1 }] }).windowStart).toBe(
      "aligned",
    );
    expect(
      policyToInput(definePolicy({ name: "g", rules: [{ limit: 1, period: 1 }] })),
    ).not.toHaveProperty("windowStart");
    expect(issuesOf({ ...input, algorithm: "gcra" })).toEqual([
      { path: "windowStart", message: "windowStart applies only to fixed-window, not gcra" },
    ]);
    expect(issuesOf({ ...input, windowStart: "first" })).toEqual([
      { path: "windowStart", message: "windowStart must be aligned or first-request" },
    ]);
  });

  it("refill: token buckets refilled continuously or by whole intervals, validated and round-tripped", () => {
    const input: PolicyInput = {
      name: "tb",
      algorithm: "token-bucket",
      refill: "interval",
      rules: [{ limit: 5, period: "1m", burst: 8 }],
    };
    const p = definePolicy(input);
    expect(p.refill).toBe("interval");
    expect(policyToInput(p)).toEqual({ ...input, rules: [{ limit: 5, period: 60_000, burst: 8 }] });
    expect(definePolicy(policyToInput(p))).toEqual(p);
    // Continuous is the default, and not written back.
    const continuous = definePolicy({ ...input, refill: "continuous" });
    expect(continuous.refill).toBe("continuous");
    expect(policyToInput(continuous)).not.toHaveProperty("refill");
    expect(definePolicy({ name: "g", rules: [{ limit: 1, period: 1 }] }).refill).toBe("continuous");
    expect(issuesOf({ ...input, algorithm: "gcra" })).toEqual([
      { path: "refill", message: "refill applies only to token-bucket, not gcra" },
    ]);
    expect(
      issuesOf({ ...input, algorithm: "fixed-window", rules: [{ limit: 5, period: 1 }] }),
    ).toEqual([
      { path: "refill", message: "refill applies only to token-bucket, not fixed-window" },
    ]);
    expect(issuesOf({ ...input, refill: "steps" })).toEqual([
      { path: "refill", message: "refill must be continuous or interval" },
    ]);
    expect(issuesOf({ ...input, lease: true })).toEqual([
      {
        path: "lease",
        message:
          "allotments need a continuous refill (refill interval adds tokens at each key's own anchor)",
      },
    ]);
    // The two refills keep apart what they count, under one name (their states differ).
    const store = memoryStore({ now: () => 1_700_006_400_000 });
    const stepped = createLimiter({ store, policy: input });
    const smooth = createLimiter({ store, policy: { ...input, refill: "continuous" } });
    for (let i = 0; i < 8; i++) expect(stepped.limitSync("k").allowed).toBe(true);
    expect(stepped.limitSync("k").allowed).toBe(false);
    expect(smooth.limitSync("k").remaining).toBe(7);
  });

  it.each([
    [
      { name: "a", rules: [{ limit: -1, period: "1s" }] },
      "rules.0.limit",
      "limit must be a positive integer (got -1)",
    ],
    [
      { name: "a", rules: [{ limit: 1.5, period: "1s" }] },
      "rules.0.limit",
      "limit must be a positive integer (got 1.5)",
    ],
    [
      { name: "a", rules: [{ limit: "10", period: "1s" }] },
      "rules.0.limit",
      'limit must be a positive integer (got "10")',
    ],
    [
      { name: "a", rules: [{ limit: Number.NaN, period: "1s" }] },
      "rules.0.limit",
      "limit must be a positive integer (got NaN)",
    ],
    [
      { name: "a", rules: [{ limit: 1, period: "1 fortnight" }] },
      "rules.0.period",
      'must be milliseconds or a string like "500ms", "1s", "1m", "1h", "1d" (got "1 fortnight")',
    ],
    [{ name: "a", rules: [{ limit: 1, period: 0 }] }, "rules.0.period", "must be positive (got 0)"],
    [
      { name: "a", rules: [{ limit: 1, period: 2.5 }] },
      "rules.0.period",
      "must be a whole number of milliseconds (got 2.5)",
    ],
    [{ name: "a", rules: [] }, "rules", "rules must have at least one rule"],
    [{ name: "a" }, "rules", "is required"],
    [
      { name: "a b", rules: [{ limit: 1, period: "1s" }] },
      "name",
      "name must be 1–128 characters of letters, digits, '.', '_', '-', ':'",
    ],
    [
      { name: "a", algorithm: "leaky", rules: [{ limit: 1, period: "1s" }] },
      "algorithm",
      "algorithm must be one of gcra, token-bucket, fixed-window, sliding-window, sliding-log, concurrency",
    ],
    [
      { name: "a", rules: [{ limit: 1, period: "1s", brust: 3 }] },
      "rules.0",
      "unknown field(s): brust",
    ],
    [
      { name: "a", algorithm: "fixed-window", rules: [{ limit: 1, period: "1s", burst: 3 }] },
      "rules.0.burst",
      "burst applies only to gcra and token-bucket, not fixed-window",
    ],
    [
      {
        name: "a",
        algorithm: "concurrency",
        rules: [
          { limit: 1, period: "1s" },
          { limit: 2, period: "1s" },
        ],
      },
      "rules",
      "concurrency takes exactly one rule",
    ],
    [
      { name: "a", rules: [{ limit: 1, period: "1s" }], onStoreError: "maybe" },
      "onStoreError",
      "onStoreError must be allow, deny or insurance",
    ],
    // The largest figures any store answers (docs/redis.md, "What crosses the wire").
    [
      { name: "a", rules: [{ limit: 2 ** 48 + 1, period: "1s" }] },
      "rules.0.limit",
      "limit must be at most 281474976710656 (got 281474976710657)",
    ],
    [
      { name: "a", rules: [{ limit: 5, period: "1s", burst: 2 ** 50 }] },
      "rules.0.burst",
      "burst must be at most 281474976710656 (got 1125899906842624)",
    ],
    [
      { name: "a", rules: [{ limit: 5, period: "36501d" }] },
      "rules.0.period",
      "must be at most 100 years (got 3153686400000 ms)",
    ],
  ])("rejects %j naming %s", (input, path, message) => {
    expect(issuesOf(input)).toContainEqual({ path, message });
  });

  it("calendar: fixed-window rules per day, week, month or year in a zone; validated and round-tripped", () => {
    const input: PolicyInput = {
      name: "quota",
      algorithm: "fixed-window",
      rules: [
        { limit: 100, period: 60_000 },
        { limit: 5000, calendar: "month", timeZone: "America/New_York", anchor: 15 },
        { limit: 900, calendar: "week" },
      ],
    };
    const p = definePolicy(input);
    expect(p.rules[1]!.calendar).toMatchObject({
      calendar: "month",
      timeZone: "America/New_York",
      anchor: 15,
    });
    expect(p.rules[1]!.periodMs).toBe(31 * 86_400_000);
    // Defaults: UTC, Monday.
    expect(p.rules[2]!.calendar).toMatchObject({ calendar: "week", timeZone: "UTC", anchor: 1 });
    expect(policyToInput(p).rules).toEqual(input.rules);
    expect(definePolicy(policyToInput(p)).rules[1]!.calendar!.endAt(Date.UTC(2026, 0, 20))).toBe(
      Date.UTC(2026, 1, 15, 5),
    );
    const one = (rule: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      issuesOf({ name: "q", algorithm: "fixed-window", rules: [rule], ...extra });
    expect(one({ limit: 1, calendar: "fortnight" })).toEqual([
      { path: "rules.0.calendar", message: "calendar must be one of day, week, month, year" },
    ]);
    expect(one({ limit: 1, calendar: "day", timeZone: "Mars/Olympus" })).toEqual([
      {
        path: "rules.0.timeZone",
        message:
          'timeZone "Mars/Olympus" is not a time zone this runtime knows (an IANA name such as Europe/Berlin)',
      },
    ]);
    expect(one({ limit: 1, calendar: "month", anchor: 32 })).toEqual([
      {
        path: "rules.0.anchor",
        message: "anchor of a month must be a day of the month 1 to 31 (got 32)",
      },
    ]);
    expect(one({ limit: 1, calendar: "year", anchor: "13-01" })).toEqual([
      {
        path: "rules.0.anchor",
        message: 'anchor of a year must be a date "MM-DD" such as "04-01" (got "13-01")',
      },
    ]);
    expect(one({ limit: 1, calendar: "day", period: "1d" })).toEqual([
      {
        path: "rules.0.calendar",
        message: "a rule counts per period or per calendar window, not both: remove period",
      },
    ]);
    expect(one({ limit: 1 })).toEqual([
      { path: "rules.0.period", message: "is required (or a calendar)" },
    ]);
    expect(one({ limit: 1, period: "1d", timeZone: "UTC" })).toEqual([
      { path: "rules.0.timeZone", message: "timeZone applies only with calendar" },
    ]);
    expect(
      issuesOf({ name: "q", algorithm: "gcra", rules: [{ limit: 1, calendar: "day" }] }),
    ).toEqual([
      {
        path: "rules.0.calendar",
        message: "calendar windows apply only to fixed-window, not gcra",
      },
    ]);
    expect(one({ limit: 1, calendar: "day" }, { windowStart: "first-request" })).toEqual([
      {
        path: "windowStart",
        message: "calendar windows start at local midnights: windowStart must be aligned",
      },
    ]);
    expect(one({ limit: 1, calendar: "day" }, { lease: true })).toEqual([
      {
        path: "lease",
        message: "allotments and calendar windows do not go together (yet): remove lease",
      },
    ]);
  });

  it("takes the largest limit and period", () => {
    const p = definePolicy({ name: "a", rules: [{ limit: 2 ** 48, period: "36500d" }] });
    expect(p.rules[0]!.limit).toBe(2 ** 48);
    expect(p.rules[0]!.periodMs).toBe(36500 * 86_400_000);
  });

  it("reports every problem at once: fields and how they go together, whatever else is wrong", () => {
    // The service's example (issue 32): three problems, three issues.
    expect(issuesOf({ name: "", rules: [{ limit: 0, period: "-5s" }] }).map((i) => i.path)).toEqual(
      ["name", "rules.0.limit", "rules.0.period"],
    );
    // A field that does not fit the others is named beside fields that are wrong on their own.
    expect(
      issuesOf({
        name: "",
        algorithm: "fixed-window",
        rules: [
          { limit: 0, period: "-5s", burst: 3 },
          { limit: 5, period: "1m", burst: 0 },
        ],
        blockDuration: "1m",
        lease: true,
      }),
    ).toEqual([
      {
        path: "name",
        message: "name must be 1–128 characters of letters, digits, '.', '_', '-', ':'",
      },
      { path: "rules.0.limit", message: "limit must be a positive integer (got 0)" },
      {
        path: "rules.0.period",
        message:
          'must be milliseconds or a string like "500ms", "1s", "1m", "1h", "1d" (got "-5s")',
      },
      { path: "rules.1.burst", message: "burst must be a positive integer (got 0)" },
      {
        path: "rules.0.burst",
        message: "burst applies only to gcra and token-bucket, not fixed-window",
      },
      {
        path: "rules.1.burst",
        message: "burst applies only to gcra and token-bucket, not fixed-window",
      },
      {
        path: "lease",
        message:
          "allotments and blockDuration do not go together (an allotment would admit during a block)",
      },
    ]);
    expect(
      issuesOf({
        name: "x y",
        algorithm: "sliding-log",
        rules: [{ limit: 200_000, period: "1m" }],
        windowStart: "first-request",
        refill: "interval",
        resetOnBlock: true,
        onStoreError: "maybe",
      }).map((i) => i.path),
    ).toEqual(["name", "onStoreError", "rules.0.limit", "resetOnBlock", "windowStart", "refill"]);
    // What cannot be known is not guessed at: an unknown algorithm says nothing of burst, a
    // blockDuration that is wrong is not also "missing".
    expect(
      issuesOf({
        name: "a",
        algorithm: "leaky",
        rules: [{ limit: 1, period: "1s", burst: 2 }],
        blockDuration: "soon",
        resetOnBlock: true,
      }).map((i) => i.path),
    ).toEqual(["algorithm", "blockDuration"]);
    // createLimiter validates through definePolicy: the same issues.
    const input = {
      name: "",
      algorithm: "fixed-window",
      rules: [{ limit: 0, period: "-5s", burst: 3 }],
    };
    let thrown: unknown;
    try {
      createLimiter({ policy: input as unknown as PolicyInput });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ValidationError);
    expect((thrown as ValidationError).issues).toEqual(issuesOf(input));
    expect((thrown as ValidationError).issues).toHaveLength(4);
  });

  it("names the policy and every problem in the message", () => {
    expect(() =>
      definePolicy({ name: "login", rules: [{ limit: 0, period: "x" as never }] }),
    ).toThrow(
      /Invalid policy "login": rules\.0\.limit: limit must be a positive integer \(got 0\); rules\.0\.period: must be/,
    );
  });

  describe("lease", () => {
    it("resolves true to the defaults and keeps tuning; round-trips", () => {
      expect(
        definePolicy({ name: "a", rules: [{ limit: 9, period: "1s" }], lease: true }).lease,
      ).toEqual({
        maxShare: 0.1,
        ttlMs: 1000,
        hotAfter: 20,
      });
      const tuned: PolicyInput = {
        name: "b",
        algorithm: "fixed-window",
        rules: [{ limit: 9, period: 1000 }],
        lease: { maxShare: 0.25, ttl: 500, hotAfter: 5 },
      };
      const p = definePolicy(tuned);
      expect(p.lease).toEqual({ maxShare: 0.25, ttlMs: 500, hotAfter: 5 });
      expect(policyToInput(p)).toEqual(tuned);
      expect(
        policyToInput(definePolicy({ name: "c", rules: [{ limit: 1, period: 1 }], lease: true }))
          .lease,
      ).toBe(true);
      expect(
        definePolicy({ name: "d", rules: [{ limit: 1, period: 1 }], lease: false }).lease,
      ).toBeUndefined();
    });

    it("refuses sliding-window, sliding-log and blockDuration, naming the field", () => {
      for (const algorithm of ["sliding-window", "sliding-log"] as const) {
        expect(
          issuesOf({ name: "x", algorithm, rules: [{ limit: 5, period: "1s" }], lease: true }),
        ).toEqual([{ path: "lease", message: expect.stringContaining(`not ${algorithm}`) }]);
      }
      expect(
        issuesOf({
          name: "x",
          rules: [{ limit: 5, period: "1s" }],
          blockDuration: "1m",
          lease: true,
        }),
      ).toEqual([{ path: "lease", message: expect.stringContaining("blockDuration") }]);
    });

    it("checks its tuning", () => {
      const bad = (lease: unknown) =>
        issuesOf({ name: "x", rules: [{ limit: 5, period: "1s" }], lease }).map((i) => i.path);
      expect(bad({ maxShare: 0 })).toEqual(["lease.maxShare"]);
      expect(bad({ maxShare: 1.5 })).toEqual(["lease.maxShare"]);
      expect(bad({ hotAfter: 0 })).toEqual(["lease.hotAfter"]);
      expect(bad({ ttl: "soon" })).toEqual(["lease.ttl"]);
      expect(bad({ size: 3 })).toEqual(["lease"]); // unknown field(s): size
      expect(bad("yes")).toEqual(["lease"]);
    });
  });
});
