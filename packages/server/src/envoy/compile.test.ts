import { describe, expect, it } from "vitest";
import {
  ENVOY_POLICY_PREFIX,
  compileDomain,
  descriptorIdentifier,
  envoyPolicyName,
  matchDescriptor,
  wildcardMatch,
} from "./compile.js";
import { parseEnvoyFile } from "./config.js";

function compile(text: string) {
  const r = parseEnvoyFile(text);
  if ("issues" in r) throw new Error(JSON.stringify(r.issues));
  return compileDomain(r.docs[0]!, { prefix: ENVOY_POLICY_PREFIX });
}

const entries = (...pairs: Array<[string, string]>) =>
  pairs.map(([key, value]) => ({ key, value }));

describe("policy names", () => {
  it("are the descriptor path plus a hash of the exact path: stable, valid, never shared", () => {
    const a = envoyPolicyName("envoy.", "d", [{ key: "a_b" }]);
    const b = envoyPolicyName("envoy.", "d", [{ key: "a", value: "b" }]);
    expect(a).toMatch(/^envoy\.d\.a_b:[0-9a-f]{12}$/);
    expect(b).toMatch(/^envoy\.d\.a_b:[0-9a-f]{12}$/);
    expect(a).not.toBe(b);
    expect(envoyPolicyName("envoy.", "d", [{ key: "a_b" }])).toBe(a);
    const odd = envoyPolicyName("envoy.", "my domain", [
      { key: "path", value: "/api/*/x".repeat(30) },
    ]);
    expect(odd).toMatch(/^envoy\.my_domain\.path__api___x[A-Za-z0-9._-]*:[0-9a-f]{12}$/);
    expect(odd.length).toBe(128);
  });
});

describe("wildcards", () => {
  it("each * matches any run of characters, the parts in order", () => {
    const m = (pattern: string, value: string) => wildcardMatch(pattern.split("*"), value);
    expect(m("value*", "value1")).toBe(true);
    expect(m("value*", "value")).toBe(true);
    expect(m("value*", "valu")).toBe(false);
    expect(m("/api/*/action", "/api/123/action")).toBe(true);
    expect(m("/api/*/action", "/api/123/other")).toBe(false);
    expect(m("/api/*/resource/*/action", "/api/v1/resource/456/action")).toBe(true);
    expect(m("/api/*/resource/*/action", "/api/v1/resource/action")).toBe(false);
    expect(m("ab*ba", "aba")).toBe(false);
    expect(m("exact", "exact")).toBe(true);
  });
});

describe("matching", () => {
  const domain = compile(`
domain: d
descriptors:
  - key: k
    rate_limit: { unit: second, requests_per_unit: 1 }
  - key: k
    value: "v*"
    rate_limit: { unit: second, requests_per_unit: 2 }
  - key: k
    value: "*"
    rate_limit: { unit: second, requests_per_unit: 3 }
  - key: k
    value: v1
    rate_limit: { unit: second, requests_per_unit: 4 }
  - key: parent
    descriptors:
      - key: child
        value: "c*"
        share_threshold: true
        rate_limit: { unit: second, requests_per_unit: 5 }
`);
  const limitOf = (...pairs: Array<[string, string]>) =>
    matchDescriptor(domain, entries(...pairs)).limit?.rules[0]?.requestsPerUnit;

  it("tries key_value, then the wildcards in the order written, then the key alone", () => {
    expect(limitOf(["k", "v1"])).toBe(4);
    expect(limitOf(["k", "v2"])).toBe(2);
    expect(limitOf(["k", "x"])).toBe(3);
    expect(limitOf(["other", "x"])).toBeUndefined();
    expect(limitOf(["parent", "p"])).toBeUndefined(); // no limit at that level
    expect(limitOf(["parent", "p"], ["child", "c1"])).toBe(5);
    expect(limitOf(["parent", "p"], ["child", "x"])).toBeUndefined();
  });

  it("counts each value apart, or the wildcard as one with share_threshold", () => {
    const m1 = matchDescriptor(domain, entries(["parent", "p"], ["child", "c1"]));
    const m2 = matchDescriptor(domain, entries(["parent", "p"], ["child", "c2"]));
    expect(descriptorIdentifier(entries(["parent", "p"], ["child", "c1"]), m1.shared)).toBe(
      "parent=p&child=c*",
    );
    expect(descriptorIdentifier(entries(["parent", "p"], ["child", "c2"]), m2.shared)).toBe(
      "parent=p&child=c*",
    );
    expect(descriptorIdentifier(entries(["k", "a&b=c"]))).toBe("k=a%26b%3Dc");
  });

  it("names each limit by its path", () => {
    expect(domain.limits.map((l) => l.path)).toEqual([
      "d.k",
      "d.k_v*",
      "d.k_*",
      "d.k_v1",
      "d.parent.child_c*",
    ]);
  });
});
