import { defineConfig } from "tsup";

export default defineConfig({
  entry: { index: "src/index.ts" },
  format: ["esm", "cjs"],
  dts: true,
  sourcemap: true,
  clean: true,
  target: "node20",
  tsconfig: "tsconfig.build.json",
  // `import.meta.url` in CommonJS: the optional peers (@nestjs/websockets, @nestjs/microservices,
  // graphql) are required lazily, from this module's location (optional.ts).
  shims: true,
  // sluice and every Nest package resolve from the app's node_modules (peers: one copy of each).
  external: [/^sluice(\/.*)?$/, /^@nestjs\//, "graphql", "reflect-metadata", "rxjs"],
});
