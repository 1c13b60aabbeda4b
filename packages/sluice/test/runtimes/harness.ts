/**
 * The Node side of the runtime suites: bundles `suite.ts` for a runtime (over the built
 * package, as its users import it), starts a redis-server and the Upstash REST fixture in front
 * of it, and turns the runtime's results into one vitest test each.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BuildOptions, type Plugin, build } from "esbuild";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { type UpstashRest, startUpstashRest } from "../../../../test/support/upstash-rest.js";
import { scenarios } from "../conformance/scenarios.js";
import {
  LEASED_STORES,
  LONG_ID_TAG,
  type SuiteConfig,
  type SuiteResult,
  leasedScenarios,
} from "./suite.js";

export const root = fileURLToPath(new URL("../../../../", import.meta.url));
const here = fileURLToPath(new URL(".", import.meta.url));

/** A runtime's binary from node_modules/.bin (installed from npm by `npm install`). */
export function runtimeBin(name: string): string {
  const bin = join(root, "node_modules/.bin", name);
  if (!existsSync(bin))
    throw new Error(`${name} is not installed: run npm install (it is a dev dependency)`);
  return bin;
}

/**
 * The conformance player imports the library's source (`../../src/index.js`); in a runtime it
 * must be the built package, as every other import of the suite is.
 */
const builtPackage: Plugin = {
  name: "sluice-built",
  setup(b) {
    b.onResolve({ filter: /\/src\/index\.js$/ }, async (args) => {
      if (!args.importer.includes("/test/conformance/")) return undefined;
      if (b.initialOptions.external?.includes("sluice")) return { path: "sluice", external: true };
      return b.resolve("sluice", { kind: args.kind, resolveDir: root });
    });
  },
};

/**
 * Bundles an entry of this folder into `.tmp/runtimes/<out>` (inside the repository, so that
 * a runtime resolving packages itself finds node_modules). `external`: the packages the runtime
 * loads itself (Deno, Bun); without it everything is bundled (Workers, Edge).
 */
export async function bundle(entry: string, out: string, options: BuildOptions): Promise<string> {
  if (!existsSync(join(root, "packages/sluice/dist/durable-object.js")))
    execFileSync("npm", ["run", "build", "-w", "sluice"], { cwd: root, stdio: "ignore" });
  const dir = join(root, ".tmp/runtimes");
  mkdirSync(dir, { recursive: true });
  const outfile = join(dir, out);
  await build({
    entryPoints: [join(here, entry)],
    outfile,
    bundle: true,
    format: "esm",
    target: "es2022",
    logLevel: "silent",
    plugins: [builtPackage],
    ...options,
  });
  return outfile;
}

/** How an Edge function is bundled (as Vercel does): one script, no Node, `edge-light`. */
export const EDGE_BUILD: BuildOptions = {
  format: "iife",
  platform: "neutral",
  mainFields: ["module", "main"],
  conditions: ["edge-light", "worker", "browser"],
};

/** Packages Deno and Bun resolve from node_modules themselves. */
export const PACKAGES = ["sluice", "sluice/*", "hono", "hono/*", "@upstash/redis"];

/** A redis-server and the Upstash REST fixture in front of it, for one test file. */
export interface Backend {
  readonly redis: RedisServer;
  readonly rest: UpstashRest;
  readonly config: (runtime: string) => SuiteConfig;
}

/**
 * Declares the suite of one runtime: `start` runs it (one process) and returns its results;
 * each expected result is one test. `stores` are the labels of the stores the runtime adds.
 */
export function declareRuntimeSuite(
  runtime: string,
  start: (backend: Backend) => Promise<SuiteResult[]>,
  options: {
    stores?: readonly string[];
    /** Results only this runtime gives. */
    extra?: readonly string[];
    stop?: () => Promise<void>;
  } = {},
): void {
  let backend: Backend | undefined;
  let results = new Map<string, SuiteResult>();
  let failure: unknown;
  let direct: Redis | undefined;

  beforeAll(async () => {
    const redis = await startRedis();
    const rest = await startUpstashRest({ redisUrl: redis.url });
    const config = (name: string): SuiteConfig => ({
      runtime: name,
      upstash: { url: rest.url, token: rest.token },
    });
    backend = { redis, rest, config };
    direct = new Redis(redis.url);
    try {
      results = new Map((await start(backend)).map((r) => [r.name, r]));
    } catch (err) {
      failure = err;
    }
  }, 300_000);

  afterAll(async () => {
    await options.stop?.();
    direct?.disconnect();
    await backend?.rest.stop();
    await backend?.redis.stop();
  });

  const stores = ["memory", "upstash", ...(options.stores ?? [])];
  const names = [
    ...stores.flatMap((s) => [
      ...scenarios.map((sc) => `conformance/${s}/${sc.name}`),
      ...(LEASED_STORES.includes(s)
        ? leasedScenarios.map((sc) => `conformance/${s}+leases/${sc.name}`)
        : []),
      `exactness/${s}`,
    ]),
    "keys/digests",
    "keys/written",
    "http/ip",
    ...stores.map((s) => `hono/${s}`),
    ...(options.extra ?? []),
  ];

  describe(`in ${runtime}`, () => {
    it.each(names)("%s", (name) => {
      if (failure !== undefined) throw failure;
      const r = results.get(name);
      expect(r, `${runtime} gave no result for ${name}`).toBeDefined();
      expect(r!.error ?? "", name).toBe("");
      expect(r!.ok).toBe(true);
    });

    it("gave no result the test does not know", () => {
      expect([...results.keys()].filter((n) => !names.includes(n))).toEqual([]);
    });

    it("named the long identifier's key as Node does (the same key across runtimes)", async () => {
      expect(await direct!.exists(`sl:keys-${runtime}:{${LONG_ID_TAG}}:g0`)).toBe(1);
    });
  });
}
