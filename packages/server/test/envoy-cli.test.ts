/**
 * The reference rate limit service's own example configurations (from its README), unchanged:
 * `sluice policy validate` and `import` read them from a directory (beside a sluice policy
 * file), a service on that database answers them as the README documents, and `export --envoy`
 * writes them back. Also `sluice serve --grpc-port` from the environment, and its shutdown.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../test/support/ports.js";
import { type RlsClient, type TestRequest, rlsClient } from "./envoy-client.js";
import { type TestService, runCli, spawnServe, startService } from "./helpers.js";

// The examples of envoyproxy/ratelimit's README ("Configuration" › "Examples"), as written there.
const EXAMPLES: Record<string, string> = {
  "example1.yaml": `domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
`,
  "example2.yaml": `domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`,
  "example3.yaml": `domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
`,
  "example4.yaml": `domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
`,
  "example5.yaml": `domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
`,
  "example6.yaml": `domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
`,
  "example7.yaml": `domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`,
  "example8.yaml": `domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
`,
  "example9.yaml": `domain: example9
descriptors:
  - key: route
    value: /api/*/resource/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
`,
  "example11.yaml": `domain: example11
descriptors:
  # With share_threshold: true, all files/* matches share the same threshold
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10

  # Without share_threshold, each files_no_share/* match has its own isolated threshold
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
`,
};

const POLICIES = `version: 1
policies:
  - name: api
    rules: [{ limit: 100, period: 1m }]
`;

/** 2030-01-01T00:00:00.250Z: at the start of every window, so no edge falls in a test. */
const NOW = Date.UTC(2030, 0, 1) + 250;

let dir: string;
let data: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "sluice-envoy-examples-"));
  data = mkdtempSync(join(tmpdir(), "sluice-envoy-data-"));
  for (const [name, text] of Object.entries(EXAMPLES)) writeFileSync(join(dir, name), text);
  writeFileSync(join(dir, "policies.yaml"), POLICIES);
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(data, { recursive: true, force: true });
});

describe("sluice policy validate / import / export with reference files", () => {
  it("validates and imports a directory of them (and a sluice policy file) in one go", async () => {
    const v = await runCli(["policy", "validate", dir]);
    expect(v.output).toBe(`${dir}: 1 valid policy, 10 valid Envoy domains\n`);
    expect(v.code).toBe(0);
    const imp = await runCli(["policy", "import", dir, "--data-dir", data]);
    expect(imp.code).toBe(0);
    expect(imp.output).toBe(
      [
        "create 1, update 0, delete 0, unchanged 0",
        "  + api",
        "Envoy domains: create 10, update 0, delete 0, unchanged 0",
        // In the order of the files' names.
        ...[
          "mongo_cps",
          "example11",
          "messaging",
          "edge_proxy_per_ip",
          "example4",
          "internal",
          "example6",
          "example7",
          "example8",
          "example9",
        ].map((d) => `  + ${d}`),
        "",
      ].join("\n"),
    );
  });

  it("refuses a directory with an error naming the file and the field, changing nothing", async () => {
    const bad = mkdtempSync(join(tmpdir(), "sluice-envoy-bad-"));
    try {
      writeFileSync(join(bad, "a.yaml"), EXAMPLES["example1.yaml"]!);
      writeFileSync(
        join(bad, "b.yaml"),
        EXAMPLES["example1.yaml"]!.replace("unit: second", "unit: sec"),
      );
      writeFileSync(join(bad, "c.yaml"), EXAMPLES["example1.yaml"]!);
      const r = await runCli(["policy", "import", bad, "--data-dir", data]);
      expect(r.code).toBe(1);
      expect(r.output).toBe(
        [
          `${bad}: import refused, nothing was changed:`,
          "  - b.yaml: descriptors.0.rate_limit.unit: invalid rate limit unit 'sec': must be one of second, minute, hour, day, week, month, year",
          "  - c.yaml: domain: duplicate domain 'mongo_cps' (also in a.yaml)",
          "",
        ].join("\n"),
      );
    } finally {
      rmSync(bad, { recursive: true, force: true });
    }
  });

  it("exports every domain back, one file each, which imports unchanged", async () => {
    const out = mkdtempSync(join(tmpdir(), "sluice-envoy-out-"));
    try {
      const e = await runCli(["policy", "export", "--envoy", "-o", out, "--data-dir", data]);
      expect(e.output).toBe(`wrote 10 domain file(s) to ${out}\n`);
      expect(readdirSync(out).sort()).toEqual(
        [
          "edge_proxy_per_ip",
          "example11",
          "example4",
          "example6",
          "example7",
          "example8",
          "example9",
          "internal",
          "messaging",
          "mongo_cps",
        ].map((d) => `${d}.yaml`),
      );
      expect(readFileSync(join(out, "mongo_cps.yaml"), "utf8")).toBe(
        [
          "domain: mongo_cps",
          "descriptors:",
          "  - key: database",
          "    value: users",
          "    rate_limit:",
          "      unit: second",
          "      requests_per_unit: 500",
          "  - key: database",
          "    value: default",
          "    rate_limit:",
          "      unit: second",
          "      requests_per_unit: 500",
          "",
        ].join("\n"),
      );
      const again = await runCli(["policy", "import", out, "--dry-run", "--data-dir", data]);
      expect(again.output).toContain(
        "dry run: Envoy domains: would create 0, would update 0, would delete 0, unchanged 10",
      );
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it("-o names a directory that need not exist yet (one file per domain), or a .yaml file", async () => {
    const parent = mkdtempSync(join(tmpdir(), "sluice-envoy-out-"));
    try {
      const dir = join(parent, "domains");
      const e = await runCli(["policy", "export", "--envoy", "-o", dir, "--data-dir", data]);
      expect(e.output).toBe(`wrote 10 domain file(s) to ${dir}\n`);
      expect(readdirSync(dir)).toHaveLength(10);
      const file = join(parent, "all.yaml");
      const f = await runCli(["policy", "export", "--envoy", "-o", file, "--data-dir", data]);
      expect(f.output).toBe(`wrote 10 domain(s) to ${file}\n`);
      expect(readFileSync(file, "utf8").split("\n---\n")).toHaveLength(10);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });
});

describe("the README's examples answer as documented there", () => {
  let s: TestService;
  let rls: RlsClient;
  beforeAll(async () => {
    s = await startService({ dataDir: data, values: { grpcPort: 0 }, now: () => NOW });
    rls = rlsClient(`127.0.0.1:${s.service.grpcPort()}`);
  });
  afterAll(async () => {
    rls?.close();
    await s?.close();
  });

  const request = (
    domain: string,
    ...descriptors: Array<Array<[string, string]>>
  ): TestRequest => ({
    domain,
    descriptors: descriptors.map((d) => ({ entries: d.map(([key, value]) => ({ key, value })) })),
  });
  const limits = async (req: TestRequest) =>
    (await rls.shouldRateLimit(req)).statuses.map((x) =>
      x.currentLimit
        ? `${x.currentLimit.requestsPerUnit}/${x.currentLimit.unit}`
        : x.limitRemaining === 4294967295
          ? "unlimited"
          : "none",
    );

  it("example 1: 500 per second for the users and default databases", async () => {
    expect(
      await limits(
        request(
          "mongo_cps",
          [["database", "users"]],
          [["database", "default"]],
          [["database", "other"]],
        ),
      ),
    ).toEqual(["500/SECOND", "500/SECOND", "none"]);
  });

  it("example 2: 5 marketing messages a day to a number, and 100 messages a day to any number", async () => {
    const req = request(
      "messaging",
      [
        ["message_type", "marketing"],
        ["to_number", "2061111111"],
      ],
      [["to_number", "2061111111"]],
    );
    const codes = [];
    for (let i = 0; i < 6; i++) codes.push((await rls.shouldRateLimit(req)).overallCode);
    expect(codes).toEqual(["OK", "OK", "OK", "OK", "OK", "OVER_LIMIT"]);
    const last = await rls.shouldRateLimit(req);
    expect(last.statuses.map((x) => [x.code, x.limitRemaining])).toEqual([
      ["OVER_LIMIT", 0],
      ["OK", 93], // each number counted apart: 100 a day, 7 used (a logical OR of the limits)
    ]);
    // Another number has its own 5.
    expect(
      (
        await rls.shouldRateLimit(
          request("messaging", [
            ["message_type", "marketing"],
            ["to_number", "2062222222"],
          ]),
        )
      ).statuses[0]!.limitRemaining,
    ).toBe(4);
  });

  it("example 3: 10 per second per IP; the black-listed IP always over", async () => {
    expect(await limits(request("edge_proxy_per_ip", [["remote_address", "50.0.0.1"]]))).toEqual([
      "10/SECOND",
    ]);
    for (let i = 0; i < 3; i++)
      expect(
        (await rls.shouldRateLimit(request("edge_proxy_per_ip", [["remote_address", "50.0.0.5"]])))
          .overallCode,
      ).toBe("OVER_LIMIT");
  });

  it("example 4: a request must have as many entries as the tree has levels", async () => {
    expect(
      await limits(
        request("example4", [
          ["key", "value"],
          ["subkey", "subvalue"],
        ]),
      ),
    ).toEqual(["300/SECOND"]);
    expect(await limits(request("example4", [["key", "value"]]))).toEqual(["none"]);
  });

  it("example 5: unlimited answers OK with LimitRemaining at MaxUint32", async () => {
    expect(await limits(request("internal", [["ldap", "x"]], [["azure", "y"]]))).toEqual([
      "unlimited",
      "100/MINUTE",
    ]);
  });

  it("example 6: user-a is in shadow mode (never limited), user-b 20 per second", async () => {
    const a = request("example6", [
      ["service", "auth-service"],
      ["user", "user-a"],
    ]);
    const codes = new Set<string>();
    for (let i = 0; i < 15; i++) codes.add((await rls.shouldRateLimit(a)).overallCode);
    expect([...codes]).toEqual(["OK"]);
    expect(
      await limits(
        request("example6", [
          ["service", "auth-service"],
          ["user", "user-b"],
        ]),
      ),
    ).toEqual(["20/SECOND"]);
  });

  it("example 7: replaces — together, only the replacing limit applies", async () => {
    expect(
      await limits(
        request("example7", [
          ["key_1", "value_1"],
          ["user", "bkthomps"],
        ]),
      ),
    ).toEqual(["5/SECOND"]);
    expect(
      await limits(
        request("example7", [
          ["key_2", "value_2"],
          ["user", "bkthomps"],
        ]),
      ),
    ).toEqual(["10/SECOND"]);
    expect(
      await limits(
        request(
          "example7",
          [
            ["key_1", "value_1"],
            ["user", "bkthomps"],
          ],
          [
            ["key_2", "value_2"],
            ["user", "bkthomps"],
          ],
        ),
      ),
    ).toEqual(["none", "10/SECOND"]);
  });

  it("example 8: 10 per minute for any value, 20 for value1", async () => {
    expect(
      await limits(request("example8", [["key1", "unspecified_value"]], [["key1", "value1"]])),
    ).toEqual(["10/MINUTE", "20/MINUTE"]);
  });

  it("example 9: multiple wildcards, each * an independent segment in order", async () => {
    expect(
      await limits(
        request(
          "example9",
          [["route", "/api/v1/resource/123/action"]],
          [["route", "/api/v2/resource/456/action"]],
          [["route", "/api/v1/other/123/action"]],
        ),
      ),
    ).toEqual(["20/MINUTE", "20/MINUTE", "none"]);
  });

  it("example 11: files/* share one threshold; files_no_share/* each have their own", async () => {
    const f = (key: string, value: string) =>
      rls.shouldRateLimit(request("example11", [[key, value]]));
    for (let i = 0; i < 5; i++) await f("files", "files/a.pdf");
    for (let i = 0; i < 5; i++) await f("files", "files/b.csv");
    expect((await f("files", "files/c.txt")).overallCode).toBe("OVER_LIMIT");
    for (let i = 0; i < 10; i++) await f("files_no_share", "files_no_share/a.pdf");
    expect((await f("files_no_share", "files_no_share/a.pdf")).overallCode).toBe("OVER_LIMIT");
    expect((await f("files_no_share", "files_no_share/b.csv")).overallCode).toBe("OK");
  });
});

describe("sluice serve with SLUICE_GRPC_PORT", () => {
  it("serves the Envoy service beside HTTP, says so, and stops it on SIGTERM", async () => {
    const port = await freePort();
    const serve = await spawnServe(["--data-dir", data], {
      SLUICE_GRPC_PORT: String(port),
      SLUICE_SHUTDOWN_TIMEOUT_MS: "3000",
    });
    const rls = rlsClient(`127.0.0.1:${port}`);
    try {
      expect(serve.stderr()).toContain(
        `Envoy RLS:     gRPC 127.0.0.1:${port} (envoy.service.ratelimit.v3), POST ${serve.url}/json`,
      );
      const r = await rls.shouldRateLimit(request1());
      expect(r.statuses[0]!.currentLimit?.requestsPerUnit).toBe(500);
      const started = Date.now();
      expect(await serve.stop("SIGTERM")).toBe(0);
      expect(Date.now() - started).toBeLessThan(3000);
      await expect(rls.shouldRateLimit(request1(), { deadlineMs: 1000 })).rejects.toMatchObject({
        code: expect.any(Number),
      });
    } finally {
      rls.close();
      await serve.stop("SIGKILL");
    }
  });
});

function request1(): TestRequest {
  return { domain: "mongo_cps", descriptors: [{ entries: [{ key: "database", value: "users" }] }] };
}
