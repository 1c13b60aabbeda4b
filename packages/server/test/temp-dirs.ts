/**
 * Temporary directories of one test file. Apart from helpers.ts because it registers a vitest
 * hook: helpers.ts is also imported by processes the tests fork (memory-flood-worker.ts), where
 * importing vitest fails.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";

/** Temporary directories of one test file, removed after its tests ({@link tempDirs}). */
export interface TempDirs {
  /** A new, empty directory. */
  dir(): string;
  /** A new directory holding the file `name` with `content`: both paths. */
  file(name: string, content: string): { dir: string; file: string };
}

/** Temporary directories named `<prefix>…` for the calling test file; removed after it. */
export function tempDirs(prefix: string): TempDirs {
  const made: string[] = [];
  afterAll(() => {
    for (const d of made) rmSync(d, { recursive: true, force: true });
  });
  const dir = () => {
    const d = mkdtempSync(join(tmpdir(), prefix));
    made.push(d);
    return d;
  };
  return {
    dir,
    file(name, content) {
      const d = dir();
      const file = join(d, name);
      writeFileSync(file, content);
      return { dir: d, file };
    },
  };
}
