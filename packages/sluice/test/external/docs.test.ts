/**
 * The documentation's code is tested the way a reader uses it: every TypeScript (`ts`) and
 * JavaScript (`js`) snippet of the README and the library's docs is copied, in order, into a
 * program that imports the built package by name; each program must type-check under strict
 * TypeScript (JavaScript with `checkJs`), and those that need no server (they import only
 * `sluice` and `sluice/algorithms`) must also run. The README's first Express program is run
 * as an app by test/install.test.ts, from the packed tarball.
 *
 * A snippet that begins with imports starts a new program; one without continues the program
 * before it (in its own block, so that it may declare a name again, as a reader's next edit
 * would). The work a reader fills in (`callModel`, `runReport`) is the only thing supplied.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Block, blocks, repoRoot as root } from "../../../../test/support/markdown.js";
import { typecheck } from "../../../../test/support/tsc.js";

/** The documents whose snippets are checked. */
const DOCS = [
  "README.md",
  "docs/http.md",
  "docs/redis.md",
  "docs/platform.md",
  "docs/runtimes.md",
  "docs/observability.md",
  "docs/quotas.md",
  "docs/adaptive.md",
  "docs/multi-region.md",
  "packages/sluice/README.md",
  "packages/sluice/src/algorithms/README.md",
];

/** Stand-ins for the reader's own work that the snippets call (TypeScript, and JavaScript). */
const PRELUDE = {
  ts: `// The reader's own work, named in the snippets.
const callModel = async (): Promise<number> => 1_800;
const runReport = async (): Promise<void> => undefined;
`,
  js: "",
} as const;

/** The languages checked, by fence: TypeScript and JavaScript (ESM). */
const LANGS: Record<string, "ts" | "js"> = { ts: "ts", js: "js" };

interface Program {
  readonly name: string;
  readonly lang: "ts" | "js";
  readonly blocks: Block[];
}

function startsWithImport(code: string): boolean {
  const first = code.split("\n").find((l) => l.trim() !== "" && !l.trim().startsWith("//"));
  return first?.startsWith("import ") ?? false;
}

/**
 * The programs a reader assembles from one document: a block that begins with imports starts
 * one, a block without continues the last program of its language.
 */
function programs(file: string): Program[] {
  const out: Program[] = [];
  for (const b of blocks(file)) {
    const lang = LANGS[b.lang];
    if (!lang) continue;
    const last = out.findLast((p) => p.lang === lang);
    if (startsWithImport(b.code) || !last) out.push({ name: b.where, lang, blocks: [b] });
    else last.blocks.push(b);
  }
  return out;
}

function source(p: Program): string {
  const [first, ...rest] = p.blocks;
  return [
    `// ${first!.where}`,
    first!.code,
    PRELUDE[p.lang],
    ...rest.map((b) => `// ${b.where}\n{\n${b.code}\n}`),
    "export {};",
  ].join("\n");
}

/** Only the library: no server, no Redis, nothing listening. */
function runnable(src: string): boolean {
  const modules = [...src.matchAll(/from "([^"]+)"/g)].map((m) => m[1]);
  return modules.every((m) => m === "sluice" || m === "sluice/algorithms");
}

const all = DOCS.flatMap(programs);
let dir: string;
const files = new Map<Program, string>();

describe("the documentation's TypeScript", () => {
  beforeAll(() => {
    if (!existsSync(join(root, "packages/sluice/dist/algorithms.js"))) {
      execFileSync("npm", ["run", "build", "-w", "sluice"], { cwd: root, stdio: "ignore" });
    }
    // Inside the repository's node_modules, so that "sluice" resolves as an installed package.
    dir = mkdtempSync(join(root, "node_modules", ".sluice-docs-"));
    all.forEach((p, i) => {
      const file = join(dir, `program-${i}.${p.lang === "ts" ? "mts" : "mjs"}`);
      writeFileSync(file, source(p));
      files.set(p, file);
    });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("is all in ts or js blocks (so every snippet is checked), and there is some in every document", () => {
    for (const file of DOCS) {
      const b = blocks(file);
      expect(
        b
          .filter((x) => ["javascript", "typescript", "tsx", "jsx", "mjs", "cjs"].includes(x.lang))
          .map((x) => x.where),
      ).toEqual([]);
      expect(programs(file).length, file).toBeGreaterThan(0);
    }
  });

  it("starts the README with a complete Express program in plain JavaScript, then its Redis change", () => {
    const readme = programs("README.md");
    const [first, second] = readme;
    expect(first!.lang).toBe("js");
    expect(first!.blocks).toHaveLength(1);
    expect(first!.blocks[0]!.code).toMatch(/from "sluice\/express"/);
    expect(first!.blocks[0]!.code).toMatch(/\.listen\(/);
    expect(second!.lang).toBe("js");
    expect(second!.blocks[0]!.code).toMatch(/redisStore\(/);
    // Plain JavaScript: nothing only TypeScript accepts (a non-null `!`, type annotations).
    for (const p of [first!, second!]) expect(p.blocks[0]!.code).not.toMatch(/!\)|: string\b/);
  });

  it("type-checks under strict TypeScript, each program copied in order", () => {
    const r = typecheck(
      dir,
      {
        strict: true,
        target: "es2022",
        lib: ["es2023"],
        module: "nodenext",
        moduleResolution: "nodenext",
        types: ["node"],
        allowJs: true,
        checkJs: true,
        // The frameworks' own declarations are not ours to check (see imports.test.ts for
        // the package's own, checked in full).
        skipLibCheck: true,
      },
      [...files.values()],
    );
    const report = [...files.entries()]
      .map(([p, f]) => `${f} = ${p.blocks.map((b) => b.where).join(" + ")}`)
      .join("\n");
    expect(r.output, report).toBe("");
    expect(r.status).toBe(0);
  });

  it("runs, for every program that needs only the library", () => {
    const run = all.filter((p) => runnable(source(p)));
    // The README's quick start, reservation and concurrency snippets among them.
    const readme = run.flatMap((p) => p.blocks).filter((b) => b.where.startsWith("README.md"));
    for (const call of ["limiter.limit(", ".reserve(", ".acquire("])
      expect(readme.some((b) => b.code.includes(call))).toBe(true);
    for (const p of run) {
      const r = spawnSync(
        process.execPath,
        [join(root, "node_modules/tsx/dist/cli.mjs"), files.get(p)!],
        { cwd: root, encoding: "utf8", timeout: 60_000 },
      );
      expect({ program: p.blocks.map((b) => b.where), stderr: r.stderr, status: r.status }).toEqual(
        { program: p.blocks.map((b) => b.where), stderr: "", status: 0 },
      );
    }
  });
});
