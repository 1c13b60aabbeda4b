/**
 * Opens the policy database: SQLite (better-sqlite3) under the data directory by default,
 * PostgreSQL (pg) when a `postgres://` URL is given, MySQL or MariaDB (mysql2, see ./mysql.ts)
 * for a `mysql://` or `mariadb://` URL. One Kysely query layer over all three.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import SQLite from "better-sqlite3";
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { redactUrl } from "../config.js";
import { endClientsOnTimeout, postgresTimeouts } from "./deadlines.js";
import { type DialectName, SqliteDialectWithTransactionalDdl, migrate } from "./migrations.js";
import { MYSQL_URL, openMysql } from "./mysql.js";
import type { Tables } from "./schema.js";

/** An open database with its dialect. */
export interface Database {
  readonly db: Kysely<Tables>;
  readonly dialect: DialectName;
  /** Where it is, for logs (password redacted). */
  readonly location: string;
  /** Cheap reachability check (for `/readyz`). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Where the policy database is. */
export interface DatabaseOptions {
  /** `postgres://…`, `mysql://…` or `mariadb://…`; when unset, SQLite at `<dataDir>/sluice.db`. */
  databaseUrl?: string | undefined;
  /** The data directory for SQLite; created when missing. */
  dataDir: string;
  /** Run migrations (default true). */
  migrate?: boolean;
  /**
   * Run the migrations up to this one (its name, `0007_changes`) and no later: a database as an
   * earlier release left it, for tests of what the later migrations do to its rows.
   */
  migrateUntil?: string | undefined;
  /**
   * Deadline of each statement, connection attempt and SQLite lock wait, in ms (default 5000);
   * see ./deadlines.ts.
   */
  timeoutMs?: number;
  /**
   * Told what start-up should say aloud: on MySQL, that a migration an earlier start left
   * part-way is being resumed (see ./migrations.ts). Default: nothing is said.
   */
  notice?: ((message: string) => void) | undefined;
}

/** Opens (and by default migrates) the policy database. */
export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  let db: Kysely<Tables>;
  let dialect: DialectName;
  let location: string;
  const timeoutMs = options.timeoutMs ?? 5000;
  if (options.databaseUrl && MYSQL_URL.test(options.databaseUrl)) {
    dialect = "mysql";
    location = redactUrl(options.databaseUrl);
    db = openMysql(options.databaseUrl, timeoutMs);
  } else if (options.databaseUrl) {
    dialect = "postgres";
    location = options.databaseUrl.replace(/(\/\/[^:/@]*:)[^@/]*@/, "$1***@");
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: 10,
      ...postgresTimeouts(timeoutMs),
    });
    endClientsOnTimeout(pool);
    // A client losing its connection (PostgreSQL restarting, "terminating connection due to
    // administrator command") must not crash the process; the next query reports it. The pool
    // listens on idle clients only, so checked-out clients get a listener of their own too.
    pool.on("error", () => {});
    pool.on("connect", (client) => {
      client.on("error", () => {});
    });
    db = new Kysely<Tables>({ dialect: new PostgresDialect({ pool }) });
  } else {
    dialect = "sqlite";
    mkdirSync(options.dataDir, { recursive: true });
    location = join(options.dataDir, "sluice.db");
    const file = new SQLite(location);
    // WAL lets the CLI write while a server reads; busy_timeout waits out the other's lock.
    file.pragma("journal_mode = WAL");
    file.pragma(`busy_timeout = ${Math.round(timeoutMs)}`);
    file.pragma("foreign_keys = ON");
    db = new Kysely<Tables>({ dialect: new SqliteDialectWithTransactionalDdl({ database: file }) });
  }
  try {
    if (options.migrate !== false)
      await migrate(db, dialect, { notice: options.notice, until: options.migrateUntil });
  } catch (err) {
    await db.destroy();
    throw err;
  }
  return {
    db,
    dialect,
    location,
    async ping() {
      await sql`select 1`.execute(db);
    },
    close: () => db.destroy(),
  };
}
