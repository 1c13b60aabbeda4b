/**
 * Consumers are tested the way they import: the built package, through its package.json
 * exports, from CommonJS, ESM and TypeScript.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../../../", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "sluice-imports-"));

const program = (load: string) => `${load}
const limiter = createLimiter({ policy: { name: "api", rules: [{ limit: 2, period: "1m" }] } });
Promise.all([1, 2, 3].map(() => limiter.limit("k"))).then((ds) => console.log(ds.map((d) => d.allowed).join(",")));`;

function run(file: string, source: string, args: string[] = []): string {
  const path = join(dir, file);
  writeFileSync(path, source);
  // Resolve "sluice" from the repository's node_modules (the workspace link), as an installed package.
  return execFileSync(process.execPath, [...args, path], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, NODE_PATH: join(root, "node_modules") },
  }).trim();
}

describe("importing the built package", () => {
  beforeAll(() => {
    if (!existsSync(join(root, "packages/sluice/dist/index.js"))) {
      execFileSync("npm", ["run", "build", "-w", "sluice"], { cwd: root, stdio: "ignore" });
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("from CommonJS", () => {
    expect(
      run(
        "a.cjs",
        program(
          `const { createLimiter } = require(${JSON.stringify(join(root, "node_modules/sluice"))});`,
        ),
      ),
    ).toBe("true,true,false");
  });

  it("from ESM", () => {
    expect(
      run(
        "b.mjs",
        program(
          `import { createLimiter } from ${JSON.stringify(join(root, "node_modules/sluice/dist/index.js"))};`,
        ),
      ),
    ).toBe("true,true,false");
  });

  it("from ESM by package name", () => {
    const source = program(`import { createLimiter } from "sluice";`);
    const path = join(root, "node_modules", ".sluice-import-test.mjs");
    writeFileSync(path, source);
    try {
      expect(execFileSync(process.execPath, [path], { cwd: root, encoding: "utf8" }).trim()).toBe(
        "true,true,false",
      );
    } finally {
      rmSync(path, { force: true });
    }
  });

  it("type declarations compile under strict TypeScript", () => {
    const ts = join(root, "node_modules", ".sluice-types-test.ts");
    writeFileSync(
      ts,
      `import { createLimiter, memoryStore, type Decision } from "sluice";
const limiter = createLimiter({ store: memoryStore(), policy: { name: "api", algorithm: "gcra", rules: [{ limit: 100, period: "1m", burst: 20 }] } });
const d: Promise<Decision> = limiter.limit("user:42", { cost: 5 });
void d;
`,
    );
    try {
      execFileSync(
        join(root, "node_modules/.bin/tsc"),
        [
          "--noEmit",
          "--strict",
          "--module",
          "nodenext",
          "--moduleResolution",
          "nodenext",
          "--skipLibCheck",
          ts,
        ],
        { cwd: root, encoding: "utf8" },
      );
    } finally {
      rmSync(ts, { force: true });
    }
  });
});
