/**
 * Every door a policy comes in by reports every problem of it at once — the admin API (create,
 * replace, draft, import as JSON and as a YAML file) and `sluice policy import` / `validate` —
 * as the library's `definePolicy` does (issue 32, item 6; the console's form is driven in
 * Chromium by packages/admin/test/admin.test.ts). And `lease` on a service whose counters are
 * in memory is accepted with a warning in the answer, naming `lease` and why (item 7): the
 * document is shared by every node and by embedded clients, which may count in Redis.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { type TestService, runCli, startService } from "./helpers.js";
import { tempDirs } from "./temp-dirs.js";

/** The example of issue 32: three problems, each of its own field. */
const THREE = { name: "", rules: [{ limit: 0, period: "-5s" }] };
const THREE_PATHS = ["name", "rules.0.limit", "rules.0.period"];

/** Three problems in a document named by the URL: two fields wrong, one that does not fit. */
const NAMED_THREE = { algorithm: "fixed-window", rules: [{ limit: 0, period: "-5s", burst: 3 }] };
const NAMED_THREE_PATHS = ["rules.0.limit", "rules.0.period", "rules.0.burst"];

type Issue = { path: string; message: string };
const pathsOf = (body: { error: { issues: Issue[] } }) => body.error.issues.map((i) => i.path);

const temp = tempDirs("sluice-doors-");

describe("every door reports every problem of a policy at once", () => {
  let s: TestService;
  beforeAll(async () => {
    s = await startService();
    await s.createApp("web");
    await s.createPolicy({ name: "api", rules: [{ limit: 5, period: "1m" }], apps: ["web"] });
  });
  afterAll(async () => {
    await s?.close();
  });

  it("POST /v1/admin/policies: the name, the limit and the period in one answer", async () => {
    const r = await s.call("POST", "/v1/admin/policies", { body: THREE });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("invalid_request");
    expect(pathsOf(r.body)).toEqual(THREE_PATHS);
    expect(r.body.error.message).toMatch(
      /^Invalid policy: name: .*; rules\.0\.limit: .*; rules\.0\.period: /,
    );
  });

  it("POST with no name at all: `name` is required, beside every other problem", async () => {
    const r = await s.call("POST", "/v1/admin/policies", {
      body: { rules: [{ limit: 0, period: "-5s" }], apps: "web" },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.issues).toEqual([
      { path: "apps", message: "must be a list of app names" },
      { path: "name", message: "is required" },
      { path: "rules.0.limit", message: "limit must be a positive integer (got 0)" },
      {
        path: "rules.0.period",
        message:
          'must be milliseconds or a string like "500ms", "1s", "1m", "1h", "1d" (got "-5s")',
      },
    ]);
    // A name that is not a string is named as such, not as a mismatch with a URL.
    const typed = await s.call("POST", "/v1/admin/policies", {
      body: { name: 7, rules: [{ limit: 0, period: "1m" }] },
    });
    expect(typed.body.error.issues.map((i: Issue) => i.path)).toEqual(["name", "rules.0.limit"]);
    expect(typed.body.error.issues[0].message).toBe("name must be a string");
  });

  it("PUT and PUT …/draft: fields wrong and a field that does not fit, together", async () => {
    const put = await s.call("PUT", "/v1/admin/policies/api", { body: NAMED_THREE });
    expect(put.status).toBe(400);
    expect(pathsOf(put.body)).toEqual(NAMED_THREE_PATHS);
    const draft = await s.call("PUT", "/v1/admin/policies/api/draft", { body: NAMED_THREE });
    expect(draft.status).toBe(400);
    expect(pathsOf(draft.body)).toEqual(NAMED_THREE_PATHS);
  });

  it("POST …/import, as JSON and as a YAML file: every problem of every document", async () => {
    const json = await s.call("POST", "/v1/admin/policies/import", {
      body: { policies: [THREE, { name: "b", ...NAMED_THREE }] },
    });
    expect(json.status).toBe(400);
    expect(pathsOf(json.body)).toEqual([
      ...THREE_PATHS.map((p) => `policies.0.${p}`),
      ...NAMED_THREE_PATHS.map((p) => `policies.1.${p}`),
    ]);
    const yaml = await s.call("POST", "/v1/admin/policies/import", {
      raw: [
        "version: 1",
        "policies:",
        '  - name: ""',
        "    algorithm: fixed-window",
        "    rules: [{ limit: 0, period: -5s, burst: 3 }]",
      ].join("\n"),
      contentType: "application/yaml",
    });
    expect(yaml.status).toBe(400);
    expect(pathsOf(yaml.body)).toEqual(
      ["name", ...NAMED_THREE_PATHS].map((p) => `policies.0.${p}`),
    );
  });

  it("sluice policy validate and import: every problem, and nothing imported", async () => {
    const { dir, file } = temp.file(
      "policies.yaml",
      [
        "version: 1",
        "policies:",
        "  - name: api",
        "    algorithm: fixed-window",
        "    rules: [{ limit: 0, period: -5s, burst: 3 }]",
      ].join("\n"),
    );
    const expected = [
      "policies.0.rules.0.limit: limit must be a positive integer (got 0)",
      'policies.0.rules.0.period: must be milliseconds or a string like "500ms", "1s", "1m", "1h", "1d" (got "-5s")',
      "policies.0.rules.0.burst: burst applies only to gcra and token-bucket, not fixed-window",
    ];
    const validate = await runCli(["policy", "validate", file]);
    expect(validate.code).toBe(1);
    for (const line of expected) expect(validate.output).toContain(line);
    const data = join(dir, "data");
    const imported = await runCli(["policy", "import", file, "--data-dir", data]);
    expect(imported.code).toBe(1);
    expect(imported.output).toContain("import refused, nothing was changed");
    for (const line of expected) expect(imported.output).toContain(line);
  });
});

/** The warning every answer about a leased policy carries on memory counters. */
const LEASE_WARNING = {
  path: "lease",
  message: expect.stringMatching(
    /^this service counts in memory \(no Redis counters\): its own decisions ignore lease; embedded clients \(connectPolicies\) whose store is Redis take allotments/,
  ),
};

describe("lease on a service with memory counters: accepted, with a warning naming it", () => {
  let s: TestService;
  beforeAll(async () => {
    s = await startService();
    await s.createApp("web");
  });
  afterAll(async () => {
    await s?.close();
  });

  it("create, read, replace, draft, restore and promote answer with the warning", async () => {
    const doc = { name: "hot", rules: [{ limit: 100, period: "1s" }], apps: ["web"] };
    const created = await s.call("POST", "/v1/admin/policies", { body: { ...doc, lease: true } });
    expect(created.status).toBe(201);
    expect(created.body.lease).toBe(true);
    expect(created.body.warnings).toEqual([LEASE_WARNING]);
    expect((await s.call("GET", "/v1/admin/policies/hot")).body.warnings).toEqual([LEASE_WARNING]);
    const { name: _name, ...rest } = doc;
    const tuned = await s.call("PUT", "/v1/admin/policies/hot", {
      body: { ...rest, lease: { maxShare: 0.2 } },
    });
    expect(tuned.status).toBe(200);
    expect(tuned.body.warnings).toEqual([LEASE_WARNING]);
    // Without a lease, no warning.
    const plain = await s.call("PUT", "/v1/admin/policies/hot", { body: rest });
    expect(plain.status).toBe(200);
    expect(plain.body).not.toHaveProperty("warnings");
    const draft = await s.call("PUT", "/v1/admin/policies/hot/draft", {
      body: { ...rest, lease: true },
    });
    expect(draft.status).toBe(200);
    expect(draft.body.warnings).toEqual([LEASE_WARNING]);
    expect((await s.call("GET", "/v1/admin/policies/hot/draft")).body.warnings).toEqual([
      LEASE_WARNING,
    ]);
    const promoted = await s.call("POST", "/v1/admin/policies/hot/draft/promote");
    expect(promoted.status).toBe(200);
    expect(promoted.body.warnings).toEqual([LEASE_WARNING]);
    const restored = await s.call("POST", "/v1/admin/policies/hot/versions/3/restore");
    expect(restored.status).toBe(200);
    expect(restored.body).not.toHaveProperty("warnings");
    // Decisions are made as without a lease: the memory store decides in one place.
    await s.sync();
  });

  it("import, as JSON (dry run too) and as a YAML file: a warning per leased policy", async () => {
    const policies = [
      { name: "a", rules: [{ limit: 10, period: "1s" }], lease: true },
      { name: "b", rules: [{ limit: 10, period: "1s" }] },
      { name: "c", rules: [{ limit: 10, period: "1s" }], lease: { hotAfter: 5 } },
    ];
    const expected = [
      { ...LEASE_WARNING, path: "policies.0.lease" },
      { ...LEASE_WARNING, path: "policies.2.lease" },
    ];
    const dry = await s.call("POST", "/v1/admin/policies/import", {
      body: { policies, dryRun: true },
    });
    expect(dry.status).toBe(200);
    expect(dry.body.warnings).toEqual(expected);
    const json = await s.call("POST", "/v1/admin/policies/import", { body: { policies } });
    expect(json.status).toBe(200);
    expect(json.body.plan.create).toEqual(["a", "b", "c"]);
    expect(json.body.warnings).toEqual(expected);
    const yaml = await s.call("POST", "/v1/admin/policies/import", {
      raw: "policies:\n  - { name: d, rules: [{ limit: 10, period: 1s }], lease: true }\n",
      contentType: "application/yaml",
    });
    expect(yaml.status).toBe(200);
    expect(yaml.body.warnings).toEqual([{ ...LEASE_WARNING, path: "policies.0.lease" }]);
    const none = await s.call("POST", "/v1/admin/policies/import", {
      body: { policies: [policies[1]] },
    });
    expect(none.body).not.toHaveProperty("warnings");
  });

  it("sluice policy import says it too, unless Redis counters are configured", async () => {
    const { dir, file } = temp.file(
      "policies.yaml",
      "policies:\n  - { name: hot, rules: [{ limit: 10, period: 1s }], lease: true }\n",
    );
    const data = join(dir, "data");
    const warned = await runCli(["policy", "import", file, "--data-dir", data], {
      REDIS_URL: undefined,
    });
    expect(warned.code).toBe(0);
    expect(warned.output).toContain("create 1");
    expect(warned.output).toMatch(
      /warning: policies\.0\.lease: no Redis counters are configured here \(redisUrl, --redis-url, REDIS_URL\)/,
    );
    // With Redis counters configured (the flag, or REDIS_URL as `serve` reads it), not a word.
    const quiet = await runCli(
      ["policy", "import", file, "--data-dir", data, "--redis-url", "redis://127.0.0.1:1"],
      { REDIS_URL: undefined },
    );
    expect(quiet.code).toBe(0);
    expect(quiet.output).not.toContain("warning");
    const quietEnv = await runCli(["policy", "import", file, "--data-dir", data], {
      REDIS_URL: "redis://127.0.0.1:1",
    });
    expect(quietEnv.code).toBe(0);
    expect(quietEnv.output).not.toContain("warning");
  });
});

describe("lease on a service with Redis counters: no warning", () => {
  let redis: RedisServer;
  let s: TestService;
  beforeAll(async () => {
    redis = await startRedis();
    s = await startService({ redisUrl: redis.url });
  });
  afterAll(async () => {
    await s?.close();
    await redis?.stop();
  });

  it("answers the document alone", async () => {
    const created = await s.call("POST", "/v1/admin/policies", {
      body: { name: "hot", rules: [{ limit: 100, period: "1s" }], lease: true },
    });
    expect(created.status).toBe(201);
    expect(created.body.lease).toBe(true);
    expect(created.body).not.toHaveProperty("warnings");
    const imported = await s.call("POST", "/v1/admin/policies/import", {
      body: { policies: [{ name: "a", rules: [{ limit: 1, period: "1s" }], lease: true }] },
    });
    expect(imported.status).toBe(200);
    expect(imported.body).not.toHaveProperty("warnings");
  });
});
