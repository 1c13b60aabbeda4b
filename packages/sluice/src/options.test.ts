import { describe, expect, it } from "vitest";
import { systemTimers } from "./clock.js";
import { ValidationError } from "./errors.js";
import { TIMERS_MESSAGE, hasShape, option, resolveOptions } from "./options.js";

/** The issues `resolveOptions` reports, as `path: message`, or the resolved options. */
function check(
  schema: Parameters<typeof resolveOptions>[1],
  options: unknown,
  rules?: Parameters<typeof resolveOptions>[3],
): string[] | Record<string, unknown> {
  try {
    return resolveOptions("Invalid test options", schema, options, rules);
  } catch (err) {
    if (err instanceof ValidationError) return err.issues.map((i) => `${i.path}: ${i.message}`);
    throw err;
  }
}

describe("hasShape", () => {
  it("checks each member's type, and that an object member is not null", () => {
    const shape = { decide: "function", kind: "string", policy: "object" } as const;
    const good = { decide: () => 1, kind: "memory", policy: {} };
    expect(hasShape(good, shape)).toBe(true);
    expect(hasShape({ ...good, policy: null }, shape)).toBe(false);
    expect(hasShape({ ...good, kind: 1 }, shape)).toBe(false);
    expect(hasShape({ kind: "memory", policy: {} }, shape)).toBe(false);
    expect(hasShape(null, shape)).toBe(false);
    expect(hasShape("decide", shape)).toBe(false);
    // A function can carry members too (a class, a callable object).
    expect(
      hasShape(
        Object.assign(() => 1, { limit: () => 1 }),
        { limit: "function" },
      ),
    ).toBe(true);
  });
});

describe("option fields", () => {
  it("int and optionalInt say what a value must be, in the field's own words when given", () => {
    const schema = {
      a: option.int(1, 5),
      b: option.int(0, 32, 32, "must be a whole number 0–32"),
      c: option.optionalInt(1, 10, "must be between 1 and 10"),
    };
    expect(check(schema, {})).toEqual({ a: 5, b: 32, c: undefined });
    expect(check(schema, { a: 0, b: 33, c: "2" })).toEqual([
      "a: must be an integer ≥ 1 (got 0)",
      "b: must be a whole number 0–32 (got 33)",
      'c: must be between 1 and 10 (got "2")',
    ]);
  });

  it("oneOf takes only its values, and its default when absent", () => {
    const schema = {
      headers: option.oneOf(["github", "ietf", false], "github", "must be github, ietf or false"),
      countOnly: option.oneOf(["failed"], undefined, 'must be "failed"'),
    };
    expect(check(schema, {})).toEqual({ headers: "github", countOnly: undefined });
    expect(check(schema, { headers: false, countOnly: "failed" })).toEqual({
      headers: false,
      countOnly: "failed",
    });
    expect(check(schema, { headers: true, countOnly: "FAILED" })).toEqual([
      "headers: must be github, ietf or false",
      'countOnly: must be "failed"',
    ]);
  });

  it("fn keeps a function, and takes its default when absent", () => {
    const dflt = () => 7;
    const given = () => 8;
    const schema = { f: option.fn<() => number>("must be a function", dflt), g: option.fn("no") };
    expect(check(schema, {})).toEqual({ f: dflt, g: undefined });
    expect(check(schema, { f: given, g: given })).toEqual({ f: given, g: given });
    expect(check(schema, { f: 1, g: "x" })).toEqual(["f: must be a function", "g: no"]);
  });

  it("timers is the system's when absent, and must have setTimeout and clearTimeout", () => {
    const schema = { timers: option.timers() };
    const own = { setTimeout: () => 1, clearTimeout: () => undefined };
    expect(check(schema, {})).toEqual({ timers: systemTimers });
    expect(check(schema, { timers: own })).toEqual({ timers: own });
    expect(check(schema, { timers: { setTimeout: () => 1 } })).toEqual([
      `timers: ${TIMERS_MESSAGE}`,
    ]);
  });

  it("a check's problems are reported at their paths inside the field", () => {
    const schema = {
      strategy: option.custom(
        (v) =>
          v === "ok"
            ? v
            : {
                problems: [
                  { path: "", message: "is wrong" },
                  { path: "maxWaitMs", message: "must be positive" },
                  { path: "list.1", message: "is not an IP" },
                ],
              },
        "ok",
      ),
    };
    expect(check(schema, { strategy: "no" })).toEqual([
      "strategy: is wrong",
      "strategy.maxWaitMs: must be positive",
      "strategy.list.1: is not an IP",
    ]);
  });
});

describe("resolveOptions", () => {
  const schema = { min: option.int(1, 1), max: option.int(1, 10) };
  const rules = {
    notAnObject: "must be an object with min and max",
    across: (
      r: { readonly min?: number; readonly max?: number },
      fail: (path: string, message: string) => void,
    ) => {
      if (r.min !== undefined && r.max !== undefined && r.max < r.min)
        fail("max", `must be at least min (${r.min})`);
    },
  };

  it("names every problem at once: unknown options first, then the fields, then across them", () => {
    expect(check(schema, { colour: 1, min: 5, max: 2, size: 2 }, rules)).toEqual([
      "colour: unknown option",
      "size: unknown option",
      "max: must be at least min (5)",
    ]);
    expect(check(schema, { min: 0, max: 2, x: 1 }, rules)).toEqual([
      "x: unknown option",
      "min: must be an integer ≥ 1 (got 0)",
    ]);
  });

  it("checks across fields with only the fields that resolved", () => {
    const seen: unknown[] = [];
    check(schema, { min: "a", max: 3 }, { across: (r) => seen.push({ ...r }) });
    expect(seen).toEqual([{ max: 3 }]);
  });

  it("says what a value that is not an object must be", () => {
    expect(check(schema, null, rules)).toEqual([": must be an object with min and max"]);
    expect(check(schema, [], {})).toEqual([": must be an object"]);
  });

  it("answers the resolved options, frozen", () => {
    const r = resolveOptions("Invalid test options", schema, { max: 4 });
    expect(r).toEqual({ min: 1, max: 4 });
    expect(Object.isFrozen(r)).toBe(true);
    expect(() => resolveOptions("Invalid test options", schema, { min: 0 })).toThrow(
      /^Invalid test options: min: must be an integer ≥ 1 \(got 0\)$/,
    );
  });
});
