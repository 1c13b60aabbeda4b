import { describe, expect, it } from "vitest";
import {
  exportEnvoyYaml,
  limitRules,
  looksLikeEnvoyFile,
  parseEnvoyFile,
  validateEnvoyDocument,
} from "./config.js";

/** The issues of a file, as `path: message` lines. */
function issues(text: string): string[] {
  const r = parseEnvoyFile(text);
  if (!("issues" in r)) throw new Error(`expected issues, got ${JSON.stringify(r.docs)}`);
  return r.issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message));
}

function doc(text: string) {
  const r = parseEnvoyFile(text);
  if ("issues" in r) throw new Error(JSON.stringify(r.issues));
  expect(r.docs).toHaveLength(1);
  return r.docs[0]!;
}

describe("reading the reference service's files", () => {
  it("reads scalars as the reference service does (YAML 1.1, text of non-strings kept)", () => {
    const d = doc(`
domain: 500
descriptors:
  - key: code
    value: 0123
    rate_limit: { unit: SECOND, requests_per_unit: 0x10 }
  - key: flag
    value: yes
    shadow_mode: yes
  - key: nothing
    value: ~
    rate_limit: { unit: Day, requests_per_unit: 5, name: ~ }
`);
    expect(d).toEqual({
      domain: "500",
      descriptors: [
        { key: "code", value: "0123", rate_limit: { unit: "second", requests_per_unit: 16 } },
        { key: "flag", value: "yes", shadow_mode: true },
        { key: "nothing", rate_limit: { unit: "day", requests_per_unit: 5 } },
      ],
    });
  });

  it("keeps the order of descriptors and every reference field, leaving false flags out", () => {
    const d = doc(`
domain: d
descriptors:
  - key: a
    detailed_metric: true
    value_to_metric: false
    quota_mode: true
    metadata: { team: payments, tier: 2 }
    rate_limit:
      name: n
      replaces: [{ name: other }]
      unit: minute
      requests_per_unit: 10
    descriptors:
      - key: b
        value: "x*"
        share_threshold: true
        rate_limit: { unlimited: true }
`);
    expect(d.descriptors[0]).toEqual({
      key: "a",
      rate_limit: {
        unit: "minute",
        requests_per_unit: 10,
        name: "n",
        replaces: [{ name: "other" }],
      },
      descriptors: [
        { key: "b", value: "x*", rate_limit: { unlimited: true }, share_threshold: true },
      ],
      quota_mode: true,
      detailed_metric: true,
      metadata: { team: "payments", tier: 2 },
    });
  });

  it("refuses what the reference service refuses, each problem with its path", () => {
    expect(
      issues("domain: d\ndescriptors:\n  - key: a\n    ratelimit: { unit: second }\n"),
    ).toEqual([
      "descriptors.0.ratelimit: unknown key 'ratelimit'; known here: key, value, rate_limit, descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, metadata",
    ]);
    expect(
      issues(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 1, shadow_mode: true }\n",
      ),
    ).toEqual([
      "descriptors.0.rate_limit.shadow_mode: unknown key 'shadow_mode' (shadow_mode is not a field of rate_limit); known here: unit, requests_per_unit, unlimited, name, replaces, algorithm, period, burst, rules, on_store_error",
    ]);
    expect(
      issues(
        "domain: d\ndescriptors:\n  - key: a\n    value: b\n  - key: a\n    value: b\n  - key: a\n  - key: a\n",
      ),
    ).toEqual([
      "descriptors.1: duplicate descriptor composite key 'a_b' (also at descriptors.0)",
      "descriptors.3: duplicate descriptor composite key 'a' (also at descriptors.2)",
    ]);
    expect(
      issues(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n",
      ),
    ).toEqual([
      "descriptors.0.rate_limit.unit: invalid rate limit unit 'fortnight': must be one of second, minute, hour, day, week, month, year",
    ]);
    expect(
      issues(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unlimited: true, unit: second }\n",
      ),
    ).toEqual(["descriptors.0.rate_limit.unit: should not specify rate limit unit when unlimited"]);
    expect(
      issues("domain: d\ndescriptors:\n  - key: a\n    rate_limit: { requests_per_unit: 1 }\n"),
    ).toEqual([
      "descriptors.0.rate_limit.unit: is required: one of second, minute, hour, day, week, month, year (or a period)",
    ]);
    expect(
      issues(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: { name: x, unit: second, requests_per_unit: 1, replaces: [{ name: x }, {}] }\n",
      ),
    ).toEqual([
      "descriptors.0.rate_limit.replaces.0.name: replaces should not contain name of same descriptor",
      "descriptors.0.rate_limit.replaces.1.name: should not have an empty replaces entry",
    ]);
    expect(
      issues("domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n"),
    ).toEqual([
      "descriptors.0.share_threshold: share_threshold can only be used with wildcard values (containing '*'), but found key 'a_b'",
    ]);
    expect(issues("domain: ''\ndescriptors:\n  - value: b\n")).toEqual([
      "domain: config file cannot have empty domain",
      "descriptors.0.key: descriptor has empty key",
    ]);
    expect(issues("domain: d\ndescriptors:\n  - just a string\n")).toEqual([
      "descriptors.0: must be a mapping (a descriptor), not string",
    ]);
    expect(issues("domain: d\ndomain: e\n")[0]).toMatch(
      /^error loading config file: Map keys must be unique/,
    );
    expect(
      issues(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: { unit: second, requests_per_unit: 1.5 }\n",
      ),
    ).toEqual([
      "descriptors.0.rate_limit.requests_per_unit: must be a whole number from 0 to 4294967295 (got 1.5)",
    ]);
    expect(issues("domain: d\ndescriptors:\n  - key: a\n    shadow_mode: 'true'\n")).toEqual([
      "descriptors.0.shadow_mode: must be true or false (got string)",
    ]);
    expect(issues("")).toEqual(["holds no domain configuration"]);
  });
});

describe("sluice's extensions", () => {
  it("algorithm, period, burst, rules and on_store_error", () => {
    const d = doc(`
domain: d
descriptors:
  - key: a
    rate_limit: { algorithm: gcra, requests_per_unit: 10, period: 30s, burst: 3, on_store_error: deny }
  - key: b
    rate_limit:
      algorithm: sliding-window
      rules:
        - { requests_per_unit: 5, unit: second }
        - { requests_per_unit: 100, period: 5m }
`);
    expect(limitRules(d.descriptors[0]!.rate_limit!)).toEqual([
      { requestsPerUnit: 10, periodMs: 30_000, unit: undefined, burst: 3 },
    ]);
    expect(limitRules(d.descriptors[1]!.rate_limit!)).toEqual([
      { requestsPerUnit: 5, periodMs: 1000, unit: "second", burst: undefined },
      { requestsPerUnit: 100, periodMs: 300_000, unit: undefined, burst: undefined },
    ]);
    // A period that is a unit's length reports that unit.
    expect(limitRules({ requests_per_unit: 1, period: "1d" })[0]!.unit).toBe("day");
  });

  it("are checked by sluice itself", () => {
    expect(
      issues(`
domain: d
descriptors:
  - key: a
    rate_limit: { requests_per_unit: 10, unit: second, burst: 3 }
  - key: b
    rate_limit: { algorithm: concurrency, requests_per_unit: 1, unit: second }
  - key: c
    rate_limit: { requests_per_unit: 1, period: 5 fortnights }
  - key: e
    rate_limit: { requests_per_unit: 1, unit: second, period: 1s }
  - key: f
    rate_limit:
      rules: [{ requests_per_unit: 0, unit: second }]
      unit: second
`),
    ).toEqual([
      "descriptors.1.rate_limit.algorithm: concurrency does not apply: Envoy never releases what it took",
      'descriptors.2.rate_limit.period: must be milliseconds or a string like "500ms", "1s", "1m", "1h", "1d" (got "5 fortnights")',
      "descriptors.3.rate_limit: takes a unit or a period, not both",
      "descriptors.4.rate_limit.rules.0.requests_per_unit: must be a whole number from 1 to 4294967295 (got 0)",
      "descriptors.4.rate_limit.unit: goes inside each of rules when rules is given",
    ]);
    // Checked by sluice's definePolicy once the shape is right.
    expect(
      issues(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: { requests_per_unit: 10, unit: second, burst: 3 }\n",
      ),
    ).toEqual([
      "descriptors.0.rate_limit.burst: burst applies only to gcra and token-bucket, not fixed-window",
    ]);
  });
});

describe("writing back", () => {
  it("export then import gives the same document", () => {
    const original = doc(`
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5
  - key: to_number
    rate_limit: { unit: day, requests_per_unit: 100, algorithm: gcra, burst: 10 }
`);
    const text = exportEnvoyYaml(original);
    expect(text).toContain("domain: messaging\n");
    expect(doc(text)).toEqual(original);
  });

  it("several documents in one text are several domains", () => {
    const r = parseEnvoyFile("domain: a\ndescriptors: []\n---\ndomain: b\n---\n");
    expect("docs" in r && r.docs.map((d) => d.domain)).toEqual(["a", "b"]);
    const bad = parseEnvoyFile("domain: a\n---\ndomain: ''\n");
    expect("issues" in bad && bad.issues).toEqual([
      { path: "1.domain", message: "config file cannot have empty domain" },
    ]);
  });

  it("tells a reference file from a sluice policy file", () => {
    expect(looksLikeEnvoyFile({ domain: "x", descriptors: [] })).toBe(true);
    expect(looksLikeEnvoyFile({ version: 1, policies: [] })).toBe(false);
    expect(validateEnvoyDocument({ domain: "x", descriptors: [] })).toEqual({
      doc: { domain: "x", descriptors: [] },
    });
  });
});
