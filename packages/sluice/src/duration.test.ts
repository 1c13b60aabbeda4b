import { describe, expect, it } from "vitest";
import { formatDuration, parseDuration } from "./duration.js";

describe("durations", () => {
  it.each([
    [250, 250],
    ["500ms", 500],
    ["1s", 1000],
    ["1.5s", 1500],
    ["1m", 60_000],
    ["1h", 3_600_000],
    ["1d", 86_400_000],
  ] as const)("parses %j", (input, ms) => expect(parseDuration(input)).toBe(ms));

  it.each(["", "1w", "-1s", "1.0001s", "s"])("rejects %j with the field named", (input) => {
    expect(() => parseDuration(input as never, "period")).toThrow(/period: must be/);
  });

  it("formats in the largest whole unit", () => {
    expect([60_000, 1500, 86_400_000, 7].map(formatDuration)).toEqual([
      "1m",
      "1500ms",
      "1d",
      "7ms",
    ]);
  });
});
