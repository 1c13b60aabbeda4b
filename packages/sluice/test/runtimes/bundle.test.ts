/**
 * The entry points meant for every runtime bundle with nothing of Node: esbuild, for the
 * `neutral` platform (what a Worker's or an Edge function's bundler does) and for browsers,
 * over the built package as it is published. Any import of a Node built-in — `node:crypto`,
 * or `crypto` as a build may write it — fails the build or this test.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { builtinModules } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BuildOptions, build } from "esbuild";
import { beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../../../", import.meta.url));

/** The entry points that must run outside Node (the Node adapters are left out on purpose). */
export const PORTABLE_ENTRIES = [
  "sluice",
  "sluice/algorithms",
  "sluice/http",
  "sluice/hono",
  "sluice/upstash",
  "sluice/durable-object",
] as const;

const NODE_BUILTINS = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));

beforeAll(() => {
  if (!existsSync(join(root, "packages/sluice/dist/durable-object.js")))
    execFileSync("npm", ["run", "build", "-w", "sluice"], { cwd: root, stdio: "ignore" });
});

const platforms: Array<[string, BuildOptions]> = [
  // What wrangler and Vercel do for Workers and Edge functions: no Node, web conditions.
  [
    "neutral",
    {
      platform: "neutral",
      mainFields: ["module", "main"],
      conditions: ["workerd", "worker", "edge-light", "browser"],
    },
  ],
  ["browser", { platform: "browser" }],
];

describe.each(platforms)("bundled for the %s platform", (_name, options) => {
  it.each(PORTABLE_ENTRIES)("%s imports no Node built-in", async (entry) => {
    const result = await build({
      ...options,
      stdin: { contents: `export * from ${JSON.stringify(entry)};`, resolveDir: root },
      bundle: true,
      write: false,
      format: "esm",
      metafile: true,
      logLevel: "silent",
    });
    const imported = Object.values(result.metafile.inputs).flatMap((input) =>
      input.imports.map((i) => i.path),
    );
    expect(imported.filter((p) => NODE_BUILTINS.has(p))).toEqual([]);
    const code = result.outputFiles[0]!.text;
    // Nothing left for the runtime to resolve: no require of a built-in, no literal import of
    // one (the policy cache file's `node:fs` is loaded by a computed name, only when used).
    expect(code).not.toMatch(/\brequire\(\s*["'`]/);
    expect(code).not.toMatch(/\bimport\(\s*["'`](node:|fs|os|net|crypto)/);
    // No Node global either.
    expect(code).not.toMatch(/\bBuffer\./);
    expect(code).not.toMatch(/\bsetImmediate\(/);
  });
});
