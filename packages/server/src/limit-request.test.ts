import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { limitRequestSchema } from "@sluice/api";
import { plainLimitRequest } from "./limit-request.js";

describe("plainLimitRequest (the decision route's shortcut)", () => {
  it("accepts only what limitRequestSchema accepts, as the same value", () => {
    const str = fc.oneof(
      fc.string({ maxLength: 5 }),
      fc.string({ minLength: 120, maxLength: 140 }),
      // Halves of surrogate pairs, alone and paired: the schema refuses a key with a lone one.
      fc.string({ unit: fc.constantFrom("\ud800", "\udc00", "\ud83d\ude00", "a"), maxLength: 4 }),
    );
    const value = fc.oneof(
      str,
      fc.integer(),
      fc.double(),
      fc.constant(null),
      fc.boolean(),
      fc.constant(2 ** 60),
    );
    const body = fc.oneof(
      fc.record({ policy: value, key: value, cost: value, extra: value }, { requiredKeys: [] }),
      fc.record(
        { policy: str, key: str, cost: fc.integer({ min: -2, max: 1e6 }) },
        { requiredKeys: ["policy", "key"] },
      ),
      value,
      fc.array(value),
    );
    fc.assert(
      fc.property(body, (b) => {
        const fast = plainLimitRequest(b);
        if (fast === undefined) return;
        const slow = limitRequestSchema.safeParse(b);
        expect(slow.success, JSON.stringify(b)).toBe(true);
        expect(fast).toEqual(slow.data);
      }),
      { numRuns: 5000 },
    );
  });

  it("takes the common bodies", () => {
    expect(plainLimitRequest({ policy: "api", key: "u1" })).toEqual({ policy: "api", key: "u1" });
    expect(plainLimitRequest({ policy: "api", key: "u1", cost: 3 })).toEqual({
      policy: "api",
      key: "u1",
      cost: 3,
    });
    expect(plainLimitRequest({ policy: "api", key: "u1", extra: 1 })).toBeUndefined();
    expect(plainLimitRequest({ policy: "api", key: "" })).toBeUndefined();
    expect(plainLimitRequest({ policy: "api", key: "a\ud800" })).toBeUndefined();
    expect(plainLimitRequest({ policy: "api", key: "\ud83d\ude00" })).toEqual({
      policy: "api",
      key: "\ud83d\ude00",
    });
    expect(
      plainLimitRequest(JSON.parse('{"policy":"a","key":"k","__proto__":{}}')),
    ).toBeUndefined();
  });
});
