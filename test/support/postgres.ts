import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { freePort, waitFor } from "./ports.js";

/** A PostgreSQL server started for a test (initdb in a temp dir), on 127.0.0.1. */
export interface PostgresServer {
  readonly port: number;
  /** URL of the `postgres` database (superuser `postgres`, trust auth). */
  readonly url: string;
  readonly dir: string;
  readonly process: ChildProcess;
  /** Creates a fresh database and returns its URL (one per test file keeps them apart). */
  createDatabase(name: string): Promise<string>;
  /**
   * Hangs the server (SIGSTOP to the postmaster and every backend): connections stay open and
   * nothing answers, as with a hung host. Always {@link PostgresServer.resume} it (in `finally`).
   */
  pause(): void;
  /** Undoes {@link PostgresServer.pause} (SIGCONT). */
  resume(): void;
  /** Stop it (fast shutdown; SIGKILL after 5 s) and delete its directory. */
  stop(): Promise<void>;
}

/** The postmaster and its children (the backends, one per connection, and the helpers). */
function clusterPids(postmaster: number): number[] {
  let children: number[] = [];
  try {
    children = execFileSync("ps", ["-o", "pid=", "--ppid", String(postmaster)], {
      encoding: "utf8",
    })
      .split("\n")
      .map((l) => Number(l.trim()))
      .filter((n) => Number.isInteger(n) && n > 0);
  } catch {
    // ps exits 1 when there are none
  }
  return [postmaster, ...children];
}

/** The directory of PostgreSQL's server binaries (initdb, postgres): `PG_BIN`, else the newest under /usr/lib/postgresql. */
export function postgresBinDir(): string {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  for (const v of ["17", "16", "15", "14", "13"]) {
    const dir = `/usr/lib/postgresql/${v}/bin`;
    if (existsSync(join(dir, "initdb"))) return dir;
  }
  try {
    const initdb = execFileSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" }).trim();
    if (initdb) return join(initdb, "..");
  } catch {
    // fall through
  }
  throw new Error("PostgreSQL server binaries (initdb, postgres) not found: set PG_BIN");
}

/**
 * initdb and postgres refuse to run as root. As root, run them as the `postgres` system user
 * (created by Debian's packages; Node's spawn sets uid/gid), with the temp dir chowned to it.
 */
function asPostgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid };
}

/** Starts a throw-away PostgreSQL: initdb in a temp dir, a free loopback port, unix socket in the temp dir. */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = postgresBinDir();
  const user = asPostgresUser();
  const dir = mkdtempSync(join(tmpdir(), "sluice-pg-"));
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, "data");
  const initArgs = [
    "-D",
    data,
    "-U",
    "postgres",
    "--auth=trust",
    "-E",
    "UTF8",
    "--no-sync",
    "--no-instructions",
  ];
  try {
    execFileSync(join(bin, "initdb"), initArgs, { stdio: "pipe", cwd: dir, ...(user ?? {}) });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const e = err as { stderr?: Buffer };
    throw new Error(`initdb failed: ${e.stderr?.toString() ?? String(err)}`, { cause: err });
  }
  const port = await freePort();
  const args = [
    "-D",
    data,
    "-p",
    String(port),
    "-k",
    dir,
    "-c",
    "listen_addresses=127.0.0.1",
    "-c",
    "fsync=off",
    "-c",
    "synchronous_commit=off",
    "-c",
    "full_page_writes=off",
    "-c",
    "max_connections=200",
  ];
  const child = spawn(join(bin, "postgres"), args, {
    stdio: ["ignore", "ignore", "pipe"],
    cwd: dir,
    ...(user ?? {}),
  });
  let log = "";
  child.stderr?.on("data", (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
  let exited = false;
  child.on("exit", () => (exited = true));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const query = async (sql: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  try {
    await waitFor(
      async () => {
        if (exited) throw new Error(`postgres exited: ${log}`);
        await query("select 1");
        return true;
      },
      20_000,
      100,
    );
  } catch (err) {
    child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`postgres did not start: ${log}`, { cause: err });
  }
  return {
    port,
    url,
    dir,
    process: child,
    pause() {
      if (exited || child.pid === undefined) return;
      // The postmaster first, so it forks no new backend meanwhile.
      for (const pid of clusterPids(child.pid)) signal(pid, "SIGSTOP");
    },
    resume() {
      if (exited || child.pid === undefined) return;
      for (const pid of clusterPids(child.pid).reverse()) signal(pid, "SIGCONT");
    },
    async createDatabase(name: string) {
      await query(`create database "${name.replace(/"/g, "")}"`);
      return `postgres://postgres@127.0.0.1:${port}/${encodeURIComponent(name)}`;
    },
    async stop() {
      if (!exited) {
        if (child.pid !== undefined)
          for (const pid of clusterPids(child.pid)) signal(pid, "SIGCONT");
        // SIGINT is PostgreSQL's fast shutdown.
        child.kill("SIGINT");
        await Promise.race([
          new Promise((r) => child.once("exit", r)),
          new Promise((r) => setTimeout(r, 5000)),
        ]);
        if (!exited) child.kill("SIGKILL");
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Sends `sig` to `pid`; a process that has exited since it was listed (a backend ending its
 * session between `clusterPids` and the signal) is not an error.
 */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
  }
}
