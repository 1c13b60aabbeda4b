/**
 * The console's copy-ready Express snippets are plain JavaScript that compiles against the
 * library as installed: each is written into a module under the repository's node_modules (so
 * `sluice`, `express` and `ioredis` resolve as in an app) and checked by TypeScript with
 * `checkJs` — a wrong import, name or call fails; nullability is not checked (strict is off, as
 * an editor checks a plain .mjs file). The browser test (admin.test.ts) shows them on the page.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { PolicyDoc } from "../src/api.js";
import {
  expressConnectSnippet,
  expressSnippet,
  expressViaServiceSnippet,
} from "../src/snippets.js";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

const doc: PolicyDoc = {
  name: "api.search",
  algorithm: "gcra",
  rules: [{ limit: 100, period: "1m", burst: 20 }],
  apps: ["web"],
};

beforeEach(() => vi.stubGlobal("location", { origin: "http://127.0.0.1:8080" }));
afterEach(() => vi.unstubAllGlobals());

describe("the console's Express snippets", () => {
  it("the library snippet points at connectPolicies, which follows the console", () => {
    expect(expressSnippet(doc)).toMatch(/connectPolicies \(below\) follows them/);
    const connect = expressConnectSnippet(doc.name);
    expect(connect).toContain(`url: "http://127.0.0.1:8080"`);
    expect(connect).toContain(`policies.limiter("api.search")`);
  });

  it("compile as plain JavaScript against the library's declarations", () => {
    const dir = mkdtempSync(join(ROOT, "node_modules", ".sluice-snippets-"));
    try {
      const files = {
        "library.mjs": expressSnippet(doc),
        "connect.mjs": expressConnectSnippet(doc.name),
        "service.mjs": `${expressViaServiceSnippet(doc.name)}\napp.listen(3000);\n`,
      };
      for (const [name, code] of Object.entries(files)) writeFileSync(join(dir, name), code);
      writeFileSync(
        join(dir, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            allowJs: true,
            checkJs: true,
            noEmit: true,
            target: "es2022",
            lib: ["es2023", "dom"],
            module: "nodenext",
            moduleResolution: "nodenext",
            types: ["node"],
            skipLibCheck: true,
          },
          files: Object.keys(files),
        }),
      );
      const r = spawnSync(
        process.execPath,
        [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", join(dir, "tsconfig.json")],
        { cwd: ROOT, encoding: "utf8" },
      );
      expect(r.stdout + r.stderr).toBe("");
      expect(r.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
