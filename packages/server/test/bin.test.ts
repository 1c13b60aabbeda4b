/**
 * The `sluice` command as npm installs it: a committed bin file (npm links a bin only if its
 * file exists at `npm install` time, before anything is built) that runs the built CLI, or
 * says clearly that it is not built yet. `npm test` builds first, so dist/ is here.
 */
import { execFile } from "node:child_process";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "./helpers.js";

const run = promisify(execFile);
const BIN = join(ROOT, "packages/server/bin/sluice.js");

/** Runs a file with node; resolves with its exit code and output, whatever the code. */
async function node(file: string, args: string[]) {
  try {
    const { stdout, stderr } = await run(process.execPath, [file, ...args]);
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("the sluice bin", () => {
  it("is the committed file, and npm links it as node_modules/.bin/sluice", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "packages/server/package.json"), "utf8"));
    // Written as npm normalizes it (a "./" prefix makes `npm publish` warn that it corrected it).
    expect(pkg.bin).toEqual({ sluice: "bin/sluice.js" });
    expect(pkg.files).toContain("bin");
    expect(realpathSync(join(ROOT, "node_modules/.bin/sluice"))).toBe(realpathSync(BIN));
  });

  it("runs the built CLI", async () => {
    const r = await node(BIN, ["--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: sluice /);
    expect(r.stdout).toContain("serve");
  });

  it("says that the CLI is not built yet, and how to build it", async () => {
    // The same file in a package whose dist/ was never built.
    const pkg = mkdtempSync(join(tmpdir(), "sluice-bin-"));
    dirs.push(pkg);
    mkdirSync(join(pkg, "bin"));
    writeFileSync(join(pkg, "package.json"), JSON.stringify({ type: "module" }));
    copyFileSync(BIN, join(pkg, "bin/sluice.js"));
    const r = await node(join(pkg, "bin/sluice.js"), ["--help"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      "sluice is not built yet: run `npm run build` (or `npm start`) first\n",
    );
    expect(r.stderr).toContain(join(pkg, "dist/cli.js"));
  });
});
