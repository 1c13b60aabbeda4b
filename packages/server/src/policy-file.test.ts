import { describe, expect, it } from "vitest";
import { exportPolicyFile, parsePolicyFile } from "./policy-file.js";

describe("policy files", () => {
  it("round-trips through YAML", () => {
    const text =
      "version: 1\npolicies:\n  - name: a\n    rules: [{ limit: 5, period: 1m, burst: 2 }]\n    apps: [web]\n";
    const r = parsePolicyFile(text);
    if ("issues" in r) throw new Error(JSON.stringify(r.issues));
    const out = exportPolicyFile(r.docs);
    expect(out).toMatch(/^# sluice policies \(1\)/);
    expect(parsePolicyFile(out)).toEqual(r);
  });

  it("accepts a bare list and reports every problem", () => {
    expect(parsePolicyFile("- name: a\n  rules: [{ limit: 1, period: 1s }]\n")).toMatchObject({
      docs: [{ name: "a" }],
    });
    expect(
      parsePolicyFile(
        "version: 2\nextra: 1\npolicies:\n  - name: a\n    rules: []\n  - name: a\n    rules: [{ limit: 1, period: 1s }]\n",
      ),
    ).toEqual({
      issues: [
        { path: "version", message: "must be 1" },
        { path: "extra", message: "unknown field (a policy file has version and policies)" },
        { path: "policies.0.rules", message: "rules must have at least one rule" },
        { path: "policies.1.name", message: '"a" is also defined at policies.0' },
      ],
    });
    expect(parsePolicyFile("policies: {")).toMatchObject({
      issues: [{ path: "", message: expect.stringContaining("not valid YAML") }],
    });
    expect(parsePolicyFile("hello")).toEqual({
      issues: [{ path: "policies", message: "must be a list of policy documents" }],
    });
  });
});
