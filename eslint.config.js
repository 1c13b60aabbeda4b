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
    // The admin page runs in a browser: it takes the API's types from the server's schemas, but
    // no server code may reach its bundle.
    files: ["packages/admin/src/**/*.ts"],
    rules: {
      "@typescript-eslint/no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["**/server/**", "@sluice/server", "@sluice/server/*"],
              allowTypeImports: true,
              message: "only `import type` from the server: its code must not reach the browser",
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
