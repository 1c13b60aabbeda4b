import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const src = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      { find: /^@sluice\/api$/, replacement: src("./packages/api/src/index.ts") },
      { find: /^sluice$/, replacement: src("./packages/sluice/src/index.ts") },
      {
        find: /^sluice\/algorithms$/,
        replacement: src("./packages/sluice/src/algorithms/entry.ts"),
      },
      { find: /^sluice\/service$/, replacement: src("./packages/sluice/src/service.ts") },
      {
        find: /^sluice\/compat\/(.*)$/,
        replacement: src("./packages/sluice/src/compat/$1.ts"),
      },
      {
        find: /^sluice\/(upstash|durable-object)$/,
        replacement: src("./packages/sluice/src/stores/$1.ts"),
      },
      { find: /^sluice\/(.*)$/, replacement: src("./packages/sluice/src/http/adapters/$1.ts") },
    ],
  },
  test: {
    include: ["packages/*/src/**/*.test.ts", "packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: "forks",
  },
});
