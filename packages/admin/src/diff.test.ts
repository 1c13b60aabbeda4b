import { describe, expect, it } from "vitest";
import { diff, show } from "./diff.js";

describe("diff", () => {
  it("names each changed field with both sides", () => {
    const v1 = {
      name: "api",
      algorithm: "gcra",
      rules: [{ limit: 5, period: "1m" }],
      apps: ["web", "mobile"],
      shadow: false,
    };
    const v2 = {
      name: "api",
      algorithm: "gcra",
      rules: [
        { limit: 8, period: "1m", burst: 8 },
        { limit: 100, period: "1h" },
      ],
      apps: ["web", "billing"],
      shadow: false,
      blockDuration: "5m",
    };
    expect(diff(v1, v2)).toEqual([
      { path: "rules.0.limit", kind: "changed", before: "5", after: "8" },
      { path: "rules.0.burst", kind: "added", after: "8" },
      { path: "rules.1", kind: "added", after: '{ limit: 100, period: "1h" }' },
      { path: "apps", kind: "changed", before: '["web", "mobile"]', after: "+ billing, − mobile" },
      { path: "blockDuration", kind: "added", after: '"5m"' },
    ]);
  });

  it("is empty for equal values, and whole for a value that appears or goes", () => {
    expect(diff({ a: [1, { b: "x" }] }, { a: [1, { b: "x" }] })).toEqual([]);
    expect(diff(["b", "a"], ["a", "b"])).toEqual([]);
    expect(diff(undefined, { role: "admin" })).toEqual([
      { path: "", kind: "added", after: '{ role: "admin" }' },
    ]);
    expect(diff({ x: 1 }, undefined)).toEqual([{ path: "", kind: "removed", before: "{ x: 1 }" }]);
    expect(diff({ role: "owner" }, { role: "admin" })).toEqual([
      { path: "role", kind: "changed", before: '"owner"', after: '"admin"' },
    ]);
  });

  it("shows values as short text", () => {
    expect(show(undefined)).toBe("(none)");
    expect(show(null)).toBe("null");
    expect(show({ a: [1, "b"], c: true })).toBe('{ a: [1, "b"], c: true }');
  });
});
