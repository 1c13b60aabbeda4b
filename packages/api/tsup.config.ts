import { defineConfig } from "tsup";

export default defineConfig({
  entry: { index: "src/index.ts" },
  format: ["esm"],
  dts: true,
  sourcemap: true,
  clean: true,
  target: "es2022",
  // `sluice/algorithms` (ALGORITHMS) and zod resolve from node_modules at run time.
  external: ["sluice", "zod"],
});
