/**
 * Type-checks code as an app would compile it against the installed packages: a tsconfig.json
 * written into `dir` (a folder under the repository's node_modules, so that `sluice`, the
 * frameworks and ioredis resolve as installed packages), run with the repository's TypeScript.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./markdown.js";

/** What tsc said (`""` when the files compile) and its exit status. */
export interface TypecheckResult {
  readonly output: string;
  readonly status: number | null;
}

/** Compiles `files` (paths relative to `dir`, or absolute) with these options and `noEmit`. */
export function typecheck(
  dir: string,
  compilerOptions: Record<string, unknown>,
  files: readonly string[],
): TypecheckResult {
  const config = join(dir, "tsconfig.json");
  writeFileSync(
    config,
    JSON.stringify({ compilerOptions: { ...compilerOptions, noEmit: true }, files }),
  );
  const r = spawnSync(
    process.execPath,
    [join(repoRoot, "node_modules/typescript/bin/tsc"), "-p", config],
    { cwd: repoRoot, encoding: "utf8" },
  );
  return { output: r.stdout + r.stderr, status: r.status };
}
