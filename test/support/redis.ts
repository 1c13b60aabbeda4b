import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { freePort, waitFor } from "./ports.js";

/** A redis-server started for a test, on 127.0.0.1. */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  readonly dir: string;
  readonly process: ChildProcess;
  /** Stop it (SIGKILL if it does not exit in 2 s) and delete its directory. */
  stop(): Promise<void>;
  /** Kill it abruptly (simulates a crash); `stop` still cleans up. */
  kill(): void;
  /** Hang it (SIGSTOP): connections stay open, nothing answers. Always `resume` it (in `finally`). */
  pause(): void;
  /** Undoes {@link RedisServer.pause} (SIGCONT). */
  resume(): void;
}

/** Path of redis-server; the test command installs Debian's package when missing. */
export function redisServerBin(): string {
  try {
    return execFileSync("sh", ["-c", "command -v redis-server"], { encoding: "utf8" }).trim();
  } catch {
    throw new Error(
      "redis-server not found: run the tests with `npm test`, which installs it (apt-get install redis-server)",
    );
  }
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.setTimeout(500);
    s.on("connect", () => s.write("PING\r\n"));
    s.on("data", (d) => {
      resolve(d.toString().startsWith("+PONG"));
      s.destroy();
    });
    s.on("error", () => resolve(false));
    s.on("timeout", () => {
      resolve(false);
      s.destroy();
    });
  });
}

/** Start a redis-server on a free loopback port with no persistence. Extra args are appended. */
export async function startRedis(extraArgs: string[] = [], port?: number): Promise<RedisServer> {
  const p = port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), "sluice-redis-"));
  const child = spawn(
    redisServerBin(),
    [
      "--port",
      String(p),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir,
      // A replica syncs at once (Redis waits 5 s by default, gathering replicas for one sync).
      "--repl-diskless-sync-delay",
      "0",
      ...extraArgs,
    ],
    { stdio: "ignore" },
  );
  let exited = false;
  child.on("exit", () => (exited = true));
  await waitFor(() => ping(p), 10_000);
  return {
    port: p,
    url: `redis://127.0.0.1:${p}`,
    dir,
    process: child,
    kill() {
      if (!exited) child.kill("SIGKILL");
    },
    pause() {
      if (!exited) child.kill("SIGSTOP");
    },
    resume() {
      if (!exited) child.kill("SIGCONT");
    },
    async stop() {
      if (!exited) {
        child.kill("SIGCONT");
        child.kill("SIGTERM");
        await Promise.race([
          new Promise((r) => child.once("exit", r)),
          new Promise((r) => setTimeout(r, 2000)),
        ]);
        if (!exited) child.kill("SIGKILL");
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * An ioredis client to nothing (port 1, never connected, no offline queue): every command fails
 * at once, as with Redis down. Its `error` events are ignored. Disconnect it when done.
 */
export function deadRedisClient(): Redis {
  const dead = new Redis({
    port: 1,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
  });
  dead.on("error", () => undefined);
  return dead;
}
