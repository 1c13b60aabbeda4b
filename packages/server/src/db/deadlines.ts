/**
 * Deadlines of SQL calls. Every database call of the service ends within `timeoutMs`, also when
 * the server hangs (stopped, or a network that drops packets) rather than refusing:
 *
 * - PostgreSQL: `connectionTimeoutMillis` bounds a new connection, `query_timeout` (client side)
 *   bounds each query even when the server never answers, and `statement_timeout` makes the
 *   server itself give up on a statement (and its locks). A connection whose query timed out is
 *   ended rather than reused: its query may still be running, and a late `BEGIN` would leave the
 *   next user of the connection inside a transaction nobody commits.
 * - SQLite: `busy_timeout` bounds the wait for another process's write lock.
 */
import type pg from "pg";

/** pg pool options for a deadline of `timeoutMs` per connection attempt and per query. */
export function postgresTimeouts(timeoutMs: number): pg.PoolConfig {
  return {
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
    statement_timeout: timeoutMs,
  };
}

/** True for pg's own "the server did not answer in time" error. */
export function isQueryTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === "Query read timeout";
}

/**
 * Ends each pooled client whose query timed out, so the pool replaces it instead of handing out
 * a connection that is still busy with an abandoned query.
 */
export function endClientsOnTimeout(pool: pg.Pool): void {
  pool.on("connect", (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
      const result = query(...args);
      if (result instanceof Promise) {
        result.catch((err: unknown) => {
          if (isQueryTimeout(err)) client.end().catch(() => {});
        });
      }
      return result;
    };
  });
}
