/**
 * The fenced code blocks of the repository's Markdown files, as a reader copies them: the
 * documentation tests compile and run them, and the install test runs the README's program.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root directory. */
export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

/** One fenced code block. */
export interface Block {
  /** `file:line` of its opening fence. */
  readonly where: string;
  /** The fence's language (`ts`, `js`, `sh`, …; `""` when none). */
  readonly lang: string;
  /** The code, dedented by the fence's indent (a block may sit inside a list item). */
  readonly code: string;
}

/** The fenced code blocks of a Markdown file (a path relative to the repository's root). */
export function blocks(file: string): Block[] {
  const lines = readFileSync(join(repoRoot, file), "utf8").split("\n");
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
