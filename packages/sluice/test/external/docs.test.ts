/**
 * The documentation's code is tested the way a reader uses it: every TypeScript snippet of the
 * README and the library's docs is copied, in order, into a program that imports the built
 * package by name; each program must type-check under strict TypeScript, and those that need
 * no server (they import only `sluice` and `sluice/algorithms`) must also run.
 *
 * A snippet that begins with imports starts a new program; one without continues the program
 * before it (in its own block, so that it may declare a name again, as a reader's next edit
 * would). The work a reader fills in (`callModel`, `runReport`) is the only thing supplied.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../../../", import.meta.url));

/** The documents whose snippets are checked. */
const DOCS = [
  "README.md",
  "docs/http.md",
  "docs/redis.md",
  "docs/platform.md",
  "packages/sluice/README.md",
  "packages/sluice/src/algorithms/README.md",
];

/** Stand-ins for the reader's own work that the snippets call. */
const PRELUDE = `// The reader's own work, named in the snippets.
const callModel = async (): Promise<number> => 1_800;
const runReport = async (): Promise<void> => undefined;
`;

interface Block {
  readonly where: string;
  readonly lang: string;
  readonly code: string;
}

/** The fenced code blocks of a Markdown file, dedented (a block may sit inside a list item). */
function blocks(file: string): Block[] {
  const lines = readFileSync(join(root, file), "utf8").split("\n");
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const indent = open[1]!.length;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]!); i++)
      body.push(lines[i]!.slice(indent));
    out.push({ where: `${file}:${start + 1}`, lang: open[2]!, code: body.join("\n") });
  }
  return out;
}

interface Program {
  readonly name: string;
  readonly blocks: Block[];
}

function startsWithImport(code: string): boolean {
  const first = code.split("\n").find((l) => l.trim() !== "" && !l.trim().startsWith("//"));
  return first?.startsWith("import ") ?? false;
}

/** The programs a reader assembles from one document. */
function programs(file: string): Program[] {
  const out: Array<{ name: string; blocks: Block[] }> = [];
  for (const b of blocks(file).filter((x) => x.lang === "ts" || x.lang === "typescript")) {
    if (startsWithImport(b.code) || out.length === 0) out.push({ name: b.where, blocks: [b] });
    else out[out.length - 1]!.blocks.push(b);
  }
  return out;
}

function source(p: Program): string {
  const [first, ...rest] = p.blocks;
  return [
    `// ${first!.where}`,
    first!.code,
    PRELUDE,
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
      const file = join(dir, `program-${i}.mts`);
      writeFileSync(file, source(p));
      files.set(p, file);
    });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("is all in ts blocks (so every snippet is checked), and there is some in every document", () => {
    for (const file of DOCS) {
      const b = blocks(file);
      expect(
        b.filter((x) => ["js", "javascript", "tsx", "mjs"].includes(x.lang)).map((x) => x.where),
      ).toEqual([]);
      expect(programs(file).length, file).toBeGreaterThan(0);
    }
  });

  it("type-checks under strict TypeScript, each program copied in order", () => {
    writeFileSync(
      join(dir, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: "es2022",
          lib: ["es2023"],
          module: "nodenext",
          moduleResolution: "nodenext",
          types: ["node"],
          // The frameworks' own declarations are not ours to check (see imports.test.ts for
          // the package's own, checked in full).
          skipLibCheck: true,
        },
        files: [...files.values()],
      }),
    );
    const r = spawnSync(
      process.execPath,
      [join(root, "node_modules/typescript/bin/tsc"), "-p", join(dir, "tsconfig.json")],
      { cwd: root, encoding: "utf8" },
    );
    const report = [...files.entries()]
      .map(([p, f]) => `${f} = ${p.blocks.map((b) => b.where).join(" + ")}`)
      .join("\n");
    expect(r.stdout + r.stderr, report).toBe("");
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
