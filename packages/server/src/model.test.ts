import { describe, expect, it } from "vitest";
import { sameDocument, validatePolicyDocument } from "./model.js";

describe("validatePolicyDocument", () => {
  it("returns the canonical document and the resolved policy", () => {
    const r = validatePolicyDocument({
      rules: [{ period: "1m", limit: 10 }],
      name: "api",
      apps: ["web"],
    });
    if ("issues" in r) throw new Error(JSON.stringify(r.issues));
    expect(r.doc).toEqual({
      name: "api",
      description: "",
      algorithm: "gcra",
      rules: [{ limit: 10, period: "1m" }],
      shadow: false,
      apps: ["web"],
      enabled: true,
    });
    expect(r.policy.rules[0]).toMatchObject({ limit: 10, periodMs: 60_000, burst: 10 });
  });

  it("keeps a calendar rule's fields (quotas: docs/quotas.md)", () => {
    const r = validatePolicyDocument({
      name: "llm-budget",
      algorithm: "fixed-window",
      rules: [
        { limit: 60, period: "1m" },
        { limit: 1_000_000, calendar: "month", timeZone: "Europe/Berlin", anchor: 15 },
      ],
    });
    if ("issues" in r) throw new Error(JSON.stringify(r.issues));
    expect(r.doc.rules).toEqual([
      { limit: 60, period: "1m" },
      { limit: 1_000_000, calendar: "month", timeZone: "Europe/Berlin", anchor: 15 },
    ]);
    expect(r.policy.rules[1]!.calendar).toMatchObject({ calendar: "month", anchor: 15 });
    const bad = validatePolicyDocument({
      name: "q",
      algorithm: "fixed-window",
      rules: [{ limit: 1, calendar: "month", timeZone: "Nowhere/Land" }],
    });
    expect("issues" in bad && bad.issues.map((i) => i.path)).toEqual(["rules.0.timeZone"]);
  });

  it("keeps an adaptive concurrency policy's settings (docs/adaptive.md)", () => {
    const r = validatePolicyDocument({
      name: "backend",
      algorithm: "concurrency",
      rules: [{ limit: 64, period: "30s" }],
      adaptive: { algorithm: "vegas", min: 2, max: 32 },
    });
    if ("issues" in r) throw new Error(JSON.stringify(r.issues));
    expect(r.doc.adaptive).toEqual({ algorithm: "vegas", min: 2, max: 32 });
    expect(r.policy.adaptive).toMatchObject({ algorithm: "vegas", min: 2, max: 32 });
    const bad = validatePolicyDocument({
      name: "b",
      algorithm: "concurrency",
      rules: [{ limit: 8, period: "30s" }],
      adaptive: { min: 9 },
    });
    expect("issues" in bad && bad.issues.map((i) => i.path)).toContain("adaptive.min");
  });

  it("reports every issue with its field, from sluice's validation and the service's own", () => {
    const r = validatePolicyDocument({
      name: "sluice.login",
      rules: [{ limit: 1.5, period: "1m" }],
      apps: ["web", "web"],
      enabled: 1,
    });
    expect("issues" in r && r.issues).toEqual([
      { path: "apps", message: "must not name an app twice" },
      { path: "enabled", message: "must be true or false" },
      { path: "rules.0.limit", message: "limit must be a positive integer (got 1.5)" },
      { path: "name", message: 'names starting with "sluice." are reserved for the service' },
    ]);
    const envoy = validatePolicyDocument({
      name: "envoy.api",
      rules: [{ limit: 1, period: "1s" }],
    });
    expect("issues" in envoy && envoy.issues).toEqual([
      {
        path: "name",
        message: 'names starting with "envoy." are reserved for Envoy descriptor limits',
      },
    ]);
    // A field of the wrong type is reported as such, not as missing.
    const typed = validatePolicyDocument({
      name: "x",
      rules: [{ limit: 1, period: "1s" }],
      shadow: "yes",
    });
    expect("issues" in typed && typed.issues).toEqual([
      { path: "shadow", message: "shadow must be true or false" },
    ]);
    expect(validatePolicyDocument("nope")).toEqual({
      issues: [{ path: "", message: "must be an object (a policy document)" }],
    });
    const missing = validatePolicyDocument({
      name: "x",
      rules: [{ limit: 1, period: "1s" }],
      apps: "web",
    });
    expect("issues" in missing && missing.issues).toEqual([
      { path: "apps", message: "must be a list of app names" },
    ]);
  });

  it("compares documents regardless of key order", () => {
    const a = validatePolicyDocument({ name: "a", rules: [{ limit: 1, period: 1000 }] });
    const b = validatePolicyDocument({
      rules: [{ period: 1000, limit: 1 }],
      apps: [],
      name: "a",
      enabled: true,
    });
    if ("issues" in a || "issues" in b) throw new Error("invalid");
    expect(sameDocument(a.doc, b.doc)).toBe(true);
    expect(sameDocument(a.doc, { ...b.doc, enabled: false })).toBe(false);
  });
});
