/**
 * What every part of the repository shares: the Kysely handles, timestamps, the write
 * transaction (which bumps the `revision` counter other nodes poll) and the audit-log append.
 * Each write of the service is one {@link writeTransaction} that appends to the audit log with
 * {@link appendAudit}.
 */
import type { AuditAction } from "@sluice/api";
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
 * Audit target types of the objects nodes load: policies with their drafts, apps, Envoy domains
 * with theirs, and policies' per-key overrides (named `<policy>/<key>`). (Changes to other objects, users say, are noted too: a revision with no note at
 * all was changed by hand, and nodes then reload everything.)
 */
export const LOADED_KINDS = ["policy", "app", "envoy_domain", "policy_override"] as const;
/** One of {@link LOADED_KINDS}. */
export type LoadedKind = (typeof LOADED_KINDS)[number];

/**
 * How many revisions the `changes` table covers: a node further behind (one that was stopped
 * or cut off) reloads everything instead. Pruned every {@link PRUNE_EVERY} revisions.
 */
export const CHANGES_KEPT = 1000;
const PRUNE_EVERY = 100;

/** A counter of the `meta` table (`revision`, `changes_from`) as stored; undefined when absent. */
export function readMeta(db: Db | Tx, key: string): Promise<{ value: number } | undefined> {
  return db.selectFrom("meta").select("value").where("key", "=", key).executeTakeFirst();
}

/** The revision of each write transaction under way, and the objects it has noted as changed. */
const writes = new WeakMap<Tx, { readonly revision: number; readonly noted: Set<string> }>();

/**
 * Runs a change in a transaction that first bumps the revision: other nodes see the change
 * on their next poll, and the row lock (PostgreSQL, MySQL) or write lock (SQLite) serializes
 * writers. What the change touches is noted, for those nodes, by its audit entries
 * ({@link appendAudit}).
 */
export function writeTransaction<T>(db: Db, fn: (trx: Tx) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (trx) => {
    await trx
      .updateTable("meta")
      .set((eb) => ({ value: eb("value", "+", 1) }))
      .where("key", "=", "revision")
      .execute();
    const row = await readMeta(trx, "revision");
    if (row === undefined) throw new Error('the meta table has no "revision" row');
    const revision = Number(row.value);
    writes.set(trx, { revision, noted: new Set() });
    const result = await fn(trx);
    if (revision % PRUNE_EVERY === 0) await pruneChanges(trx, revision - CHANGES_KEPT);
    return result;
  });
}

/** Drops the notes of revisions up to `upTo`, and says that the log starts after it. */
async function pruneChanges(trx: Tx, upTo: number): Promise<void> {
  if (upTo <= 0) return;
  await trx.deleteFrom("changes").where("revision", "<=", upTo).execute();
  await trx
    .updateTable("meta")
    .set({ value: upTo })
    .where("key", "=", "changes_from")
    .where("value", "<", upTo)
    .execute();
}

/**
 * One audit-log entry, as {@link appendAudit} and the audit repository's `record` take it: who
 * did what (`action`) to which object (`targetType`, `target`), and the change's detail.
 */
export type AuditEntry = [
  actor: string,
  action: AuditAction,
  targetType: string,
  target: string,
  detail: unknown,
];

/**
 * Appends one entry to the audit log, inside the change's transaction. Every write audits each
 * object it changes, by name; the entry also notes the change in `changes` (once per object
 * and revision), so that nodes reload that object alone.
 */
export async function appendAudit(
  trx: Tx,
  ...[actor, action, targetType, target, detail]: AuditEntry
): Promise<void> {
  await trx
    .insertInto("audit")
    .values({ at: now(), actor, action, target_type: targetType, target, detail: json(detail) })
    .execute();
  const write = writes.get(trx);
  const id = `${targetType}\u0000${target}`;
  if (write === undefined || write.noted.has(id)) return;
  write.noted.add(id);
  await trx
    .insertInto("changes")
    .values({ revision: write.revision, kind: targetType, name: target })
    .execute();
}
