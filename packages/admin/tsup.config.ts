import { dirname, join } from "node:path";
import type { Plugin } from "esbuild";
import { defineConfig } from "tsup";

/**
 * zod (used by sluice's policy validation) re-exports every locale from its namespace object,
 * which defeats tree shaking (~260 KB). Only English is ever configured, so the locales index
 * is replaced by one that exports `en` alone.
 */
const zodEnglishOnly: Plugin = {
  name: "zod-english-only",
  setup(build) {
    build.onResolve({ filter: /\/locales\/index\.js$/ }, (args) => {
      if (!/[\\/]zod[\\/]/.test(args.importer)) return undefined;
      return { path: join(dirname(args.importer), "../locales"), namespace: "zod-locales" };
    });
    build.onLoad({ filter: /.*/, namespace: "zod-locales" }, (args) => ({
      contents: 'export { default as en } from "./en.js";',
      resolveDir: args.path,
      loader: "js",
    }));
  },
};

/**
 * One browser bundle (dist/app.js) plus the static files in public/ (index.html, app.css).
 * The simulator's algorithms, evaluate() and policy validation come from `sluice/algorithms`
 * (the built package, which has no Node APIs), so it runs exactly the code the service runs.
 */
export default defineConfig({
  entry: { app: "src/main.ts" },
  format: ["iife"],
  platform: "browser",
  target: "es2022",
  outDir: "dist",
  outExtension: () => ({ js: ".js" }),
  publicDir: "public",
  minify: true,
  sourcemap: true,
  clean: true,
  dts: false,
  splitting: false,
  esbuildPlugins: [zodEnglishOnly],
});
