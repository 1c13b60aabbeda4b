/**
 * Worker processes of the suites: TypeScript modules forked through tsx that talk to the test
 * over IPC, and the wait for each one's first word that it is ready.
 */
import { type ChildProcess, fork } from "node:child_process";

/**
 * Forks the TypeScript module `file` through tsx, with `args` and `env` (over this process's
 * environment); its stdout and stderr are this process's.
 */
export function forkWorker(
  file: string,
  args: string[] = [],
  env: Record<string, string> = {},
): ChildProcess {
  return fork(file, args, {
    execArgv: ["--import", "tsx"],
    env: { ...process.env, ...env },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
}

/**
 * Resolves once `child` sends a message that `isReady` accepts (by default its first), within
 * 30 s; rejects if it exits first or the 30 s pass.
 */
export function untilReady(
  child: ChildProcess,
  isReady: (message: unknown) => boolean = () => true,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("worker did not start in 30 s")), 30_000);
    child.on("message", function ready(message: unknown) {
      if (!isReady(message)) return;
      clearTimeout(timer);
      child.off("message", ready);
      resolve();
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`worker exited (${String(code)})`));
    });
  });
}

/**
 * {@link untilReady} for each of `children`; if one of them fails to start, kills them all
 * (SIGKILL) before rejecting, so that none is left behind.
 */
export async function allReady(
  children: readonly ChildProcess[],
  isReady?: (message: unknown) => boolean,
): Promise<void> {
  try {
    await Promise.all(children.map((c) => untilReady(c, isReady)));
  } catch (err) {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    throw err;
  }
}
