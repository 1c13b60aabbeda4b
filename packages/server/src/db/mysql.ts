/**
 * MySQL and MariaDB as the policy database, through Kysely's MySQL dialect and the `mysql2`
 * driver. What differs from SQLite and PostgreSQL is settled here, once per connection, so that
 * the repository's queries mean the same thing on every database:
 *
 * - **UTC.** `time_zone` is `+00:00` and mysql2 converts with `timezone: "Z"`. The service stores
 *   its timestamps as ISO-8601 text made in Node, so no value depends on it, but nothing the
 *   server computes (`now()`) can depend on the server's zone either.
 * - **utf8mb4, compared byte for byte.** The connection's collation is `utf8mb4_bin`, as are the
 *   tables' (see ./migrations.ts): names are case-sensitive ("Api" and "api" are two policies),
 *   as on SQLite and PostgreSQL, whatever the server's default (often `latin1` or a `_ci`
 *   collation).
 * - **Strict.** `sql_mode` is `TRADITIONAL`: a value that does not fit is an error, never
 *   silently truncated or zeroed.
 * - **READ COMMITTED**, PostgreSQL's default, which the repository's transactions are written
 *   for: each statement sees what committed before it, and no gap locks (InnoDB's default,
 *   REPEATABLE READ, takes them, adding lock waits and deadlock risks to concurrent writes that
 *   the other databases do not have).
 * - **Big integers as strings** (`bigNumberStrings`), as pg returns `bigint`: the repository
 *   reads counters with `Number()` and checks integer columns accepting either.
 * - **JSON is text.** The JSON columns are `mediumtext` (MariaDB's `JSON` is `LONGTEXT`, and
 *   mysql2 parses real `JSON` columns differently across versions); the repository parses and
 *   checks them itself, as on SQLite.
 */
import {
  CompiledQuery,
  Kysely,
  MysqlDialect,
  type MysqlPool,
  type MysqlPoolConnection,
  type MysqlQueryResult,
} from "kysely";
import { type Pool, type PoolConnection, createPool } from "mysql2";
import type { Tables } from "./schema.js";

/** `mysql://…` or `mariadb://…`: the URLs that select this database. */
export const MYSQL_URL = /^(mysql|mariadb):\/\//i;

/** The settings each new connection gets before its first query (see the module comment). */
const SESSION = [
  "set time_zone = '+00:00'",
  "set session sql_mode = 'TRADITIONAL'",
  "set session transaction isolation level read committed",
].map((statement) => CompiledQuery.raw(statement));

/**
 * A Kysely over a pool of mysql2 connections to `url` (`mysql://user:pass@host:3306/db` or
 * `mariadb://…`; query parameters are mysql2 connection options, e.g. `?ssl={}`). `timeoutMs`
 * bounds each connection attempt and each query (see {@link withQueryDeadline}).
 */
export function openMysql(url: string, timeoutMs = 5000): Kysely<Tables> {
  const pool = createPool({
    // mysql2 reads the URL itself (user, password, host, port, database, options); the options
    // given here win over the URL's.
    uri: url.replace(MYSQL_URL, "mysql://"),
    connectionLimit: 10,
    // The deadline of a connection attempt (databaseTimeoutMs).
    connectTimeout: timeoutMs,
    charset: "UTF8MB4_BIN",
    timezone: "Z",
    supportBigNumbers: true,
    bigNumberStrings: true,
    dateStrings: true,
  });
  // A connection losing the server (MariaDB restarting) must not crash the process: mysql2
  // drops it from the pool, and the next query reports the outage.
  pool.on("connection", (connection) => {
    connection.on("error", () => {});
  });
  return new Kysely<Tables>({
    dialect: new MysqlDialect({
      pool: withQueryDeadline(pool, timeoutMs),
      async onCreateConnection(connection) {
        for (const statement of SESSION) await connection.executeQuery(statement);
      },
    }),
  });
}

/**
 * The pool as Kysely sees it, with a deadline on every query: a query the server has not
 * answered within `timeoutMs` fails with mysql2's `PROTOCOL_SEQUENCE_TIMEOUT` (a database
 * outage to the service), and its connection is destroyed. mysql2 only gives up waiting on the
 * query; the connection would still be waiting for the answer, and every later query on it
 * would queue behind that one with no deadline of its own (mysql2 starts a query's timer when
 * the query starts). So a hung server (SIGSTOP, a network black hole) costs each request
 * `timeoutMs` at most, and the pool opens fresh connections (within `connectTimeout`) once the
 * server answers again.
 */
function withQueryDeadline(pool: Pool, timeoutMs: number): MysqlPool {
  // Kysely keys its connection objects by the raw connection: one wrapper per connection.
  const wrappers = new WeakMap<PoolConnection, MysqlPoolConnection>();
  const wrap = (raw: PoolConnection): MysqlPoolConnection => {
    let w = wrappers.get(raw);
    if (w !== undefined) return w;
    const query = (
      sql: string,
      values: unknown[],
      callback?: (error: unknown, result: MysqlQueryResult) => void,
    ) => {
      if (callback === undefined) return raw.query({ sql, values, timeout: timeoutMs });
      raw.query({ sql, values, timeout: timeoutMs }, (error, result) => {
        if ((error as { code?: unknown } | null)?.code === "PROTOCOL_SEQUENCE_TIMEOUT")
          raw.destroy();
        callback(error, result as MysqlQueryResult);
      });
      return undefined;
    };
    w = { query, release: () => raw.release() } as MysqlPoolConnection;
    wrappers.set(raw, w);
    return w;
  };
  return {
    getConnection(callback) {
      pool.getConnection((error, raw) => {
        if (error) callback(error, undefined as unknown as MysqlPoolConnection);
        else callback(null, wrap(raw));
      });
    },
    end(callback) {
      pool.end(callback);
    },
  };
}
