/** Runs a runtime's process to its end and reads the suite's results from its last line. */
import { type ChildProcess, execFile } from "node:child_process";
import type { SuiteResult } from "./suite.js";
import { root } from "./harness.js";

export function runProcess(bin: string, args: string[]): Promise<SuiteResult[]> {
  return new Promise((resolve, reject) => {
    execFile(
      bin,
      args,
      { cwd: root, timeout: 240_000, maxBuffer: 64 << 20, env: { ...process.env, NO_COLOR: "1" } },
      (err, stdout, stderr) => {
        if (err) {
          reject(new Error(`${bin} failed: ${err.message}\n${stderr}`));
          return;
        }
        const last = stdout.trim().split("\n").at(-1) ?? "";
        try {
          resolve(JSON.parse(last) as SuiteResult[]);
        } catch {
          reject(new Error(`${bin} printed no results:\n${stdout}\n${stderr}`));
        }
      },
    );
  });
}

/** Ends a process this test started (SIGTERM) and waits for it; nothing when it has ended. */
export async function stopProcess(proc: ChildProcess | undefined): Promise<void> {
  if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once("exit", r));
  proc.kill();
  await exited;
}
