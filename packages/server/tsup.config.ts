import { defineConfig } from "tsup";

export default defineConfig({
  entry: { cli: "src/cli.ts", index: "src/index.ts" },
  format: ["esm"],
  dts: { entry: { index: "src/index.ts" } },
  sourcemap: true,
  clean: true,
  target: "node20",
  splitting: false,
  // The CLI is run directly; the shebang is harmless in index.js.
  banner: { js: "#!/usr/bin/env node" },
  // `sluice` resolves to packages/sluice/dist at runtime (the root build builds it first).
  external: ["sluice"],
});
