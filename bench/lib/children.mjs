// Runs one case in a child process and reads its result.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { BENCH_DIR, ROOT, SLUICE_DIST, runVisible, sleep } from "./util.mjs";

const CHILD = join(BENCH_DIR, "lib/child.mjs");

/**
 * Runs `cases/<file>.mjs` export `fn` with `params` in a fresh Node process (so that no JIT or
 * heap state carries from one contestant to the next). Resolves the case's result; rejects
 * with the child's stderr when it fails.
 */
export function runCase(file, fn, params, { nodeArgs = [], timeoutMs = 300_000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, CHILD, file, fn, JSON.stringify(params)], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      const line = out.split("\n").find((l) => l.startsWith("RESULT "));
      if (code === 0 && line) return resolve(JSON.parse(line.slice(7)));
      const why = signal ? `killed (${signal})` : `exit ${code}`;
      const detail = (err || out).trim().split("\n").slice(-6).join("\n");
      reject(new Error(`${file}.${fn} ${why}: ${detail}`));
    });
  });
}

/**
 * {@link runCase}, retried once when the built library was missing (another process may be
 * rebuilding packages/sluice/dist, which tsup deletes first).
 */
export async function runCaseRetry(file, fn, params, options) {
  try {
    return await runCase(file, fn, params, options);
  } catch (err) {
    if (!/ERR_MODULE_NOT_FOUND|Cannot find (module|package)/.test(String(err.message))) throw err;
    await ensureBuilt();
    return runCase(file, fn, params, options);
  }
}

/** Builds packages/sluice when its dist is missing (waiting a little first for a build in progress). */
export async function ensureBuilt(log = console.error) {
  for (let i = 0; i < 40 && !existsSync(SLUICE_DIST); i++) await sleep(250);
  if (existsSync(SLUICE_DIST)) return;
  log("bench: packages/sluice/dist is missing: building it (npm run build -w packages/sluice)…");
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const code = await runVisible(npm, ["run", "build", "-w", "packages/sluice"], { cwd: ROOT });
  if (code !== 0 || !existsSync(SLUICE_DIST)) throw new Error("building packages/sluice failed");
}

/** Newest modification time (ms) of the files under `dir`, recursively. */
function newest(dir) {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

/** True when packages/sluice/src changed after dist was built (rebuild with `npm run build`). */
export function distIsStale() {
  if (!existsSync(SLUICE_DIST)) return false;
  return newest(join(ROOT, "packages/sluice/src")) > statSync(SLUICE_DIST).mtimeMs;
}
