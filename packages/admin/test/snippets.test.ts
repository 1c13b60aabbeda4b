/**
 * The console's copy-ready Express snippets are plain JavaScript that compiles against the
 * library as installed: each is written into a module under the repository's node_modules (so
 * `sluice`, `express` and `ioredis` resolve as in an app) and checked by TypeScript with
 * `checkJs` — a wrong import, name or call fails; nullability is not checked (strict is off, as
 * an editor checks a plain .mjs file). The browser test (admin.test.ts) shows them on the page.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { repoRoot as ROOT } from "../../../test/support/markdown.js";
import { typecheck } from "../../../test/support/tsc.js";
import type { PolicyDoc } from "../src/api.js";
import {
  expressConnectSnippet,
  expressSnippet,
  expressViaServiceSnippet,
} from "../src/snippets.js";

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
    expect(expressSnippet(doc)).toMatch(/the connectPolicies snippet follows them/);
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
      const r = typecheck(
        dir,
        {
          allowJs: true,
          checkJs: true,
          target: "es2022",
          lib: ["es2023", "dom"],
          module: "nodenext",
          moduleResolution: "nodenext",
          types: ["node"],
          skipLibCheck: true,
        },
        Object.keys(files),
      );
      expect(r.output).toBe("");
      expect(r.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
