/**
 * Consumers are tested the way they import: the built package, through its package.json
 * exports, from CommonJS, ESM and TypeScript.
 */
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { typecheck } from "../../../../test/support/tsc.js";

const root = fileURLToPath(new URL("../../../../", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "sluice-imports-"));

const program = (load: string) => `${load}
const limiter = createLimiter({ policy: { name: "api", rules: [{ limit: 2, period: "1m" }] } });
Promise.all([1, 2, 3].map(() => limiter.limit("k"))).then((ds) => console.log(ds.map((d) => d.allowed).join(",")));`;

function run(file: string, source: string, args: string[] = []): string {
  const path = join(dir, file);
  writeFileSync(path, source);
  // Resolve "sluice" from the repository's node_modules (the workspace link), as an installed package.
  return execFileSync(process.execPath, [...args, path], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, NODE_PATH: join(root, "node_modules") },
  }).trim();
}

describe("importing the built package", () => {
  beforeAll(() => {
    if (!existsSync(join(root, "packages/sluice/dist/index.js"))) {
      execFileSync("npm", ["run", "build", "-w", "sluice"], { cwd: root, stdio: "ignore" });
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("from CommonJS", () => {
    expect(
      run(
        "a.cjs",
        program(
          `const { createLimiter } = require(${JSON.stringify(join(root, "node_modules/sluice"))});`,
        ),
      ),
    ).toBe("true,true,false");
  });

  it("from ESM", () => {
    expect(
      run(
        "b.mjs",
        program(
          `import { createLimiter } from ${JSON.stringify(join(root, "node_modules/sluice/dist/index.js"))};`,
        ),
      ),
    ).toBe("true,true,false");
  });

  // OpenTelemetry (issue 33): the built package finds the app's @opentelemetry/api at once,
  // from either build, so even the first decision is counted and timed.
  const telemetryProgram = (load: string) => {
    const resolve = (id: string) =>
      JSON.stringify(createRequire(join(root, "package.json")).resolve(id));
    return `${load}
const { metrics } = require(${resolve("@opentelemetry/api")});
const { MeterProvider, MetricReader } = require(${resolve("@opentelemetry/sdk-metrics")});
class Reader extends MetricReader { onForceFlush() { return Promise.resolve(); } onShutdown() { return Promise.resolve(); } }
const reader = new Reader();
metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
(async () => {
  const { createLimiter } = await sluice();
  const limiter = createLimiter({ policy: { name: "api", rules: [{ limit: 2, period: "1m" }] } });
  for (let i = 0; i < 3; i++) await limiter.limit("k");
  const { resourceMetrics } = await reader.collect();
  const out = {};
  for (const m of resourceMetrics.scopeMetrics.flatMap((s) => s.metrics))
    out[m.descriptor.name] = m.dataPoints.map((p) => p.value.count ?? p.value).join(",");
  console.log(JSON.stringify(out));
})();`;
  };

  it.each([
    [
      "CommonJS",
      "t.cjs",
      `const sluice = async () => require(${JSON.stringify(join(root, "node_modules/sluice"))});`,
    ],
    [
      "ESM",
      "t.mjs",
      `import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const sluice = () => import(${JSON.stringify(join(root, "node_modules/sluice/dist/index.js"))});`,
    ],
  ])("OpenTelemetry from %s: every decision counted and timed", (_kind, file, load) => {
    expect(JSON.parse(run(file, telemetryProgram(load)))).toEqual({
      "ratelimit.decisions": "2,1",
      "ratelimit.decision.duration": "3",
    });
  });

  it("from ESM by package name", () => {
    const source = program(`import { createLimiter } from "sluice";`);
    const path = join(root, "node_modules", ".sluice-import-test.mjs");
    writeFileSync(path, source);
    try {
      expect(execFileSync(process.execPath, [path], { cwd: root, encoding: "utf8" }).trim()).toBe(
        "true,true,false",
      );
    } finally {
      rmSync(path, { force: true });
    }
  });

  // The drop-in faces, as their users load them (the peers' users are often on CommonJS):
  // by package name, from CommonJS (require) and from ESM (import).
  const compat: Array<[entry: string, names: string, program: string, expected: string]> = [
    [
      "sluice/compat/rate-limiter-flexible",
      "{ RateLimiterMemory, RateLimiterRes }",
      `const l = new RateLimiterMemory({ points: 1, duration: 60 });
l.consume("k").then(() => l.consume("k")).then(
  () => console.log("allowed"),
  (r) => console.log(r instanceof RateLimiterRes, r.consumedPoints, r.remainingPoints));`,
      "true 2 0",
    ],
    [
      "sluice/compat/express-rate-limit",
      "{ SluiceStore }",
      `const store = new SluiceStore();
store.init({ windowMs: 60000 });
store.increment("k").then(() => store.increment("k")).then((r) => console.log(r.totalHits, r.resetTime instanceof Date));`,
      "2 true",
    ],
    [
      "sluice/compat/nestjs-throttler",
      "{ SluiceThrottlerStorage }",
      `const s = new SluiceThrottlerStorage();
const hit = () => s.increment("k", 60000, 1, 60000, "default");
hit().then(hit).then((r) => console.log(r.isBlocked, r.totalHits, r.timeToBlockExpire));`,
      "true 2 60",
    ],
    [
      "sluice/compat/upstash",
      "{ Ratelimit }",
      `const r = new Ratelimit({ limiter: Ratelimit.slidingWindow(1, "10 s") });
r.limit("k").then(() => r.limit("k")).then((x) => console.log(x.success, x.remaining, x.reset > Date.now()));`,
      "false 0 true",
    ],
  ];

  it.each(compat)(
    "%s by package name from CommonJS and from ESM",
    (entry, names, body, expected) => {
      const cjs = join(root, "node_modules", ".sluice-compat-test.cjs");
      const esm = join(root, "node_modules", ".sluice-compat-test.mjs");
      writeFileSync(cjs, `const ${names} = require(${JSON.stringify(entry)});\n${body}`);
      writeFileSync(esm, `import ${names} from ${JSON.stringify(entry)};\n${body}`);
      try {
        for (const file of [cjs, esm])
          expect(
            execFileSync(process.execPath, [file], { cwd: root, encoding: "utf8" }).trim(),
          ).toBe(expected);
      } finally {
        rmSync(cjs, { force: true });
        rmSync(esm, { force: true });
      }
    },
  );

  it("type declarations compile under strict TypeScript", () => {
    const ts = join(root, "node_modules", ".sluice-types-test.ts");
    writeFileSync(
      ts,
      `import { connectPolicies, createLimiter, memoryStore, type Decision } from "sluice";
const limiter = createLimiter({ store: memoryStore(), policy: { name: "api", algorithm: "gcra", rules: [{ limit: 100, period: "1m", burst: 20 }] } });
const d: Promise<Decision> = limiter.limit("user:42", { cost: 5 });
void d;
// The runtime's own fetch is a PolicyFetch.
void connectPolicies({ url: "http://sluice:8080", apiKey: "k", store: memoryStore(), fetch: globalThis.fetch });
`,
    );
    try {
      execFileSync(
        join(root, "node_modules/.bin/tsc"),
        [
          "--noEmit",
          "--strict",
          "--module",
          "nodenext",
          "--moduleResolution",
          "nodenext",
          "--skipLibCheck",
          ts,
        ],
        { cwd: root, encoding: "utf8" },
      );
    } finally {
      rmSync(ts, { force: true });
    }
  });

  // Which entry points need @types/node: sluice, sluice/algorithms, sluice/http and
  // sluice/upstash are Node-free in their types (a browser, Deno or edge project compiles them
  // with `types: []`), sluice/hono and sluice/durable-object need only the DOM lib (Request,
  // Response; Workers' own types declare them too); sluice/node, sluice/express,
  // sluice/koa and sluice/fastify describe Node servers and need @types/node.
  const nodeFree: Array<[entry: string, lib: string[], program: string]> = [
    [
      "sluice",
      ["es2023"],
      `import { connectPolicies, createLimiter, fileCache, memoryStore, redisStore, type Decision, type PolicyClient, type PolicyFetch, type RedisClientLike } from "sluice";
const limiter = createLimiter({ store: memoryStore(), policy: { name: "api", rules: [{ limit: 1, period: "1m" }] } });
export const d: Promise<Decision> = limiter.limit("k");
export const r = (client: RedisClientLike) => redisStore({ client });
export const p = (fetch: PolicyFetch): Promise<PolicyClient> =>
  connectPolicies({ url: "http://sluice:8080", apiKey: "k", store: memoryStore(), cache: fileCache("/tmp/p.json"), fetch });`,
    ],
    [
      "sluice/algorithms",
      ["es2023"],
      `import { definePolicy, evaluate, type KeyState } from "sluice/algorithms";
const state: KeyState | undefined = undefined;
export const ev = evaluate(definePolicy({ name: "a", rules: [{ limit: 1, period: 1000 }] }), state, 0, 1, true);`,
    ],
    [
      "sluice/http",
      ["es2023"],
      `import { RateLimitCore, githubHeaders, type RateLimitOptions } from "sluice/http";
export const core = (o: RateLimitOptions) => new RateLimitCore(o);
export const h = githubHeaders;`,
    ],
    [
      "sluice/compat/rate-limiter-flexible",
      ["es2023"],
      `import { RateLimiterMemory, RateLimiterRedis, RateLimiterUnion, RateLimiterRes, type RateLimiterRedisOptions } from "sluice/compat/rate-limiter-flexible";
import type { RedisClientLike } from "sluice";
export const m = new RateLimiterMemory({ points: 5, duration: 1 });
export const r = (o: RateLimiterRedisOptions) => new RateLimiterRedis(o);
export const u = (c: RedisClientLike) => new RateLimiterUnion(m, new RateLimiterRedis({ storeClient: c, points: 1, duration: 1 }));
export const p: Promise<RateLimiterRes> = m.consume("k", 2);`,
    ],
    [
      "sluice/compat/express-rate-limit",
      ["es2023"],
      `import { SluiceStore, type ClientRateLimitInfo } from "sluice/compat/express-rate-limit";
import type { RedisClientLike } from "sluice";
export const m = new SluiceStore({ algorithm: "gcra", burst: 5 });
export const r = (client: RedisClientLike) => new SluiceStore({ client, prefix: "api" });
export const i: Promise<ClientRateLimitInfo> = m.increment("k");`,
    ],
    [
      "sluice/compat/nestjs-throttler",
      ["es2023"],
      `import { SluiceThrottlerStorage, type ThrottlerStorageRecord } from "sluice/compat/nestjs-throttler";
export const s = new SluiceThrottlerStorage({ prefix: "api" });
export const r: Promise<ThrottlerStorageRecord> = s.increment("k", 1000, 5, 1000, "default");`,
    ],
    [
      "sluice/compat/upstash",
      ["es2023"],
      `import { Ratelimit, type RatelimitResponse } from "sluice/compat/upstash";
import type { RedisClientLike } from "sluice";
export const r = (redis: RedisClientLike) => new Ratelimit({ redis, limiter: Ratelimit.tokenBucket(5, "10 s", 10) });
export const p: Promise<RatelimitResponse> = new Ratelimit({ limiter: Ratelimit.fixedWindow(5, "1m") }).limit("k", { rate: 2 });`,
    ],
    [
      "sluice/upstash",
      ["es2023"],
      `import { upstashClient, upstashStore, type UpstashRedisLike } from "sluice/upstash";
import type { RedisClientLike } from "sluice";
export const s = (redis: UpstashRedisLike) => upstashStore({ redis, timeoutMs: 1000 });
export const c = (redis: UpstashRedisLike): RedisClientLike => upstashClient(redis);`,
    ],
    [
      "sluice/durable-object",
      ["es2023", "dom"],
      `import { SluiceDurableObject, durableObjectStore, type DurableObjectNamespaceLike } from "sluice/durable-object";
export const s = (namespace: DurableObjectNamespaceLike) => durableObjectStore({ namespace, shards: 4 });
export { SluiceDurableObject };`,
    ],
    [
      "sluice/hono",
      ["es2023", "dom"],
      `import { rateLimit } from "sluice/hono";
export const m = rateLimit;`,
    ],
  ];

  it.each(nodeFree)(
    "%s: its declarations compile without @types/node, strictly and unskipped (ESM and CJS)",
    (entry, lib, program) => {
      const d = mkdtempSync(join(root, "node_modules", ".sluice-types-"));
      try {
        writeFileSync(join(d, "esm.mts"), program);
        writeFileSync(
          join(d, "cjs.cts"),
          `import m = require(${JSON.stringify(entry)});\nexport = m;\n`,
        );
        const r = typecheck(
          d,
          {
            strict: true,
            target: "es2022",
            lib,
            module: "nodenext",
            moduleResolution: "nodenext",
            types: [],
            skipLibCheck: false,
          },
          ["esm.mts", "cjs.cts"],
        );
        expect(r.output).toBe("");
        expect(r.status).toBe(0);
      } finally {
        rmSync(d, { recursive: true, force: true });
      }
    },
  );

  it("sluice/algorithms loads no Node module (it is bundled for browsers)", () => {
    const seen = new Set<string>();
    const external = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const code = readFileSync(file, "utf8");
      for (const m of code.matchAll(/(?:from|import)\s*"([^"]+)"/g)) {
        const spec = m[1]!;
        if (spec.startsWith(".")) visit(join(dirname(file), spec));
        else external.add(spec);
      }
    };
    visit(join(root, "packages/sluice/dist/algorithms.js"));
    expect(seen.size).toBeGreaterThan(1);
    expect([...external]).toEqual(["zod"]);
  });
});
