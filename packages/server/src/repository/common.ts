/**
 * What every part of the repository shares: the Kysely handles, timestamps, the write
 * transaction (which bumps the `revision` counter other nodes poll) and the audit-log append.
 * Each write of the service is one {@link writeTransaction} that appends to the audit log with
 * {@link appendAudit}.
 */
import type { AuditAction } from "../audit-actions.js";
import type { Kysely, Transaction } from "kysely";
import type { Tables } from "../db/schema.js";

/** The database, outside a transaction. */
export type Db = Kysely<Tables>;
/** A transaction. */
export type Tx = Transaction<Tables>;

/** The current time as stored: ISO-8601 text. */
export const now = (): string => new Date().toISOString();

/** A structured value as stored: JSON text. */
export const json = (value: unknown): string => JSON.stringify(value);

/**
 * Runs a change in a transaction that first bumps the revision: other nodes see the change
 * on their next poll, and the row lock (PostgreSQL, MySQL) or write lock (SQLite) serializes
 * writers.
 */
export function writeTransaction<T>(db: Db, fn: (trx: Tx) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (trx) => {
    await trx
      .updateTable("meta")
      .set((eb) => ({ value: eb("value", "+", 1) }))
      .where("key", "=", "revision")
      .execute();
    return fn(trx);
  });
}

/** Appends one entry to the audit log, inside the change's transaction. */
export async function appendAudit(
  trx: Tx,
  actor: string,
  action: AuditAction,
  targetType: string,
  target: string,
  detail: unknown,
): Promise<void> {
  await trx
    .insertInto("audit")
    .values({ at: now(), actor, action, target_type: targetType, target, detail: json(detail) })
    .execute();
}
