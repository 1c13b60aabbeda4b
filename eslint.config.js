import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["**/dist/**", "**/node_modules/**", ".tmp/**", "coverage/**", "**/*.d.ts"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Every TypeScript file, tests included, is linted with type information: each belongs to
    // a tsconfig.json (packages/*/tsconfig.json, packages/*/test/tsconfig.json, the root one for
    // test/support and the build configs), which `npm run typecheck` also checks.
    files: ["**/*.{ts,mts,cts}"],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/no-explicit-any": "error",
    },
  },
  {
    // The library writes nothing to the console of the apps that use it (a middleware's default
    // error report is console.error).
    files: ["packages/sluice/src/**/*.ts"],
    ignores: ["**/*.test.ts"],
    rules: { "no-console": ["error", { allow: ["error", "warn"] }] },
  },
  {
    // On Workers (and wherever a timer is a number) `timer.unref()` throws: the library lets
    // timers go through `unrefTimer` (platform.ts), which calls it only where it exists.
    files: ["packages/sluice/src/**/*.ts"],
    ignores: ["**/*.test.ts", "packages/sluice/src/platform.ts"],
    rules: {
      "no-restricted-syntax": [
        "error",
        {
          selector:
            "MemberExpression[property.name='unref'], MemberExpression[property.value='unref']",
          message:
            "call unrefTimer(timer) from platform.ts: on Workers a timer is a number, without unref()",
        },
      ],
    },
  },
  {
    // The benchmarks and examples are JavaScript (run as they are): linted as JS, plus the
    // promise rules with type information (bench/ and examples/ have a tsconfig.json with
    // allowJs for this; their types are inferred, not checked).
    files: ["bench/**/*.mjs", "examples/**/*.mjs"],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
    },
  },
  {
    // The admin page runs in a browser and speaks to the service through its API contract
    // (@sluice/api) alone: types only (no schema code in its bundle), and nothing of the server.
    files: ["packages/admin/src/**/*.ts"],
    rules: {
      "@typescript-eslint/no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["**/server/**", "@sluice/server", "@sluice/server/*"],
              message: "the console imports nothing of the server: use the contract, @sluice/api",
            },
            {
              group: ["@sluice/api", "**/api/src/**"],
              allowTypeImports: true,
              message: "only `import type` from @sluice/api: its schemas stay out of the bundle",
            },
          ],
        },
      ],
    },
  },
  {
    files: ["**/*.{js,mjs,cjs}"],
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        URL: "readonly",
        setTimeout: "readonly",
        clearTimeout: "readonly",
        Buffer: "readonly",
      },
    },
  },
  {
    rules: {
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_" },
      ],
    },
  },
);
