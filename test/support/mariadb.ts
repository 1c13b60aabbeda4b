import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createConnection } from "mysql2/promise";
import { freePort, waitFor } from "./ports.js";

/** A MariaDB server started for a test (a fresh data directory in a temp dir), on 127.0.0.1. */
export interface MariaDbServer {
  readonly port: number;
  readonly dir: string;
  readonly process: ChildProcess;
  /** The account test databases are made for: all privileges, a password that needs escaping. */
  readonly user: string;
  readonly password: string;
  /** `mariadb://` URL of database `name` for {@link user} (the database is not created). */
  urlOf(name: string, user?: string, password?: string): string;
  /** Creates a fresh database and returns its URL (one per service keeps them apart). */
  createDatabase(name: string): Promise<string>;
  /** Runs one statement as root (over the unix socket) and returns its rows. */
  query(statement: string, values?: unknown[]): Promise<unknown>;
  /** Stop it (SIGTERM; SIGKILL after 10 s) and delete its directory. */
  stop(): Promise<void>;
}

/** The MariaDB programs this needs: the server and the data directory initializer. */
function binaries(): { server: string; installDb: string } {
  const find = (names: string[]) => {
    for (const name of names) {
      for (const dir of [process.env.MARIADB_BIN, "/usr/sbin", "/usr/bin"]) {
        if (dir && existsSync(join(dir, name))) return join(dir, name);
      }
    }
    return undefined;
  };
  const server = find(["mariadbd", "mysqld"]);
  const installDb = find(["mariadb-install-db", "mysql_install_db"]);
  return server && installDb ? { server, installDb } : { server: "", installDb: "" };
}

/**
 * Finds mariadbd, installing Debian's `mariadb-server` when it is missing (the test command's
 * scripts/install-test-deps.sh does it; running one test file alone does it here).
 */
export function mariadbBinaries(): { server: string; installDb: string } {
  let found = binaries();
  if (found.server) return found;
  const script = fileURLToPath(new URL("../../scripts/install-test-deps.sh", import.meta.url));
  try {
    execFileSync("bash", [script], { stdio: "pipe" });
  } catch (err) {
    const e = err as { stderr?: Buffer };
    throw new Error(
      `mariadbd not found, and installing it failed (apt-get install mariadb-server): ${e.stderr?.toString() ?? String(err)}`,
      { cause: err },
    );
  }
  found = binaries();
  if (!found.server)
    throw new Error("mariadbd not found: install Debian's mariadb-server (or set MARIADB_BIN)");
  return found;
}

const USER = "sluice";
// Characters a URL must escape, so that every test also checks the URL is decoded.
const PASSWORD = "pa:ss/w@rd?";

/**
 * Starts a throw-away MariaDB: a data directory initialized in a temp dir, a free loopback port,
 * its socket in the temp dir, run as the current user (as root: `--user=root`). Started with no
 * option files, so the server's defaults are the compiled-in ones (`latin1`, a `_ci` collation):
 * the service must not depend on what Debian's configuration would set.
 */
export async function startMariaDb(): Promise<MariaDbServer> {
  const bin = mariadbBinaries();
  const asRoot = process.getuid?.() === 0 ? ["--user=root"] : [];
  const dir = mkdtempSync(join(tmpdir(), "sluice-mariadb-"));
  const data = join(dir, "data");
  const socket = join(dir, "mysqld.sock");
  try {
    execFileSync(
      bin.installDb,
      [
        "--no-defaults",
        `--datadir=${data}`,
        ...asRoot,
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
      ],
      { stdio: "pipe", cwd: dir },
    );
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const e = err as { stderr?: Buffer; stdout?: Buffer };
    throw new Error(
      `mariadb-install-db failed: ${e.stderr?.toString() ?? ""}${e.stdout?.toString() ?? String(err)}`,
      { cause: err },
    );
  }
  const port = await freePort();
  const errorLog = join(dir, "error.log");
  const child = spawn(
    bin.server,
    [
      "--no-defaults",
      `--datadir=${data}`,
      ...asRoot,
      "--bind-address=127.0.0.1",
      `--port=${port}`,
      `--socket=${socket}`,
      `--pid-file=${join(dir, "mariadbd.pid")}`,
      `--log-error=${errorLog}`,
      "--skip-log-bin",
      "--skip-name-resolve",
      "--max-connections=300",
      // A test server: small, and no waiting for the disk.
      "--innodb-buffer-pool-size=64M",
      "--innodb-log-file-size=16M",
      "--innodb-flush-log-at-trx-commit=0",
      "--innodb-doublewrite=0",
    ],
    { stdio: "ignore", cwd: dir },
  );
  let exited = false;
  child.on("exit", () => (exited = true));
  const log = () => {
    try {
      return readFileSync(errorLog, "utf8").slice(-4000);
    } catch {
      return "(no error log)";
    }
  };
  const query = async (statement: string, values: unknown[] = []) => {
    const c = await createConnection({ socketPath: socket, user: "root" });
    try {
      const [rows] = await c.query(statement, values);
      return rows;
    } finally {
      await c.end();
    }
  };
  try {
    await waitFor(
      async () => {
        if (exited) throw new Error("mariadbd exited");
        await query("select 1");
        return true;
      },
      30_000,
      100,
    );
  } catch (err) {
    child.kill("SIGKILL");
    const text = log();
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`mariadbd did not start: ${text}`, { cause: err });
  }
  await query(`create user ?@'%' identified by ?`, [USER, PASSWORD]);
  await query(`grant all privileges on *.* to ?@'%'`, [USER]);
  const urlOf = (name: string, user = USER, password = PASSWORD) =>
    `mariadb://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(name)}`;
  return {
    port,
    dir,
    process: child,
    user: USER,
    password: PASSWORD,
    urlOf,
    query,
    async createDatabase(name: string) {
      await query(`create database \`${name.replace(/`/g, "")}\``);
      return urlOf(name);
    },
    async stop() {
      if (!exited) {
        child.kill("SIGTERM");
        await Promise.race([
          new Promise((r) => child.once("exit", r)),
          new Promise((r) => setTimeout(r, 10_000)),
        ]);
        if (!exited) child.kill("SIGKILL");
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
