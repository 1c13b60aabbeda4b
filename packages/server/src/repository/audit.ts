/**
 * The record of what changed: the `revision` counter every write bumps (nodes poll it to
 * know when to reload) and the audit log, one entry per change with actor, time and detail.
 * Entries are appended by the writes themselves ({@link appendAudit} in ./common.ts).
 */
import { sql } from "kysely";
import { z } from "zod";
import { type AuditEntry, type Db, appendAudit, readMeta } from "./common.js";
import { intColumn, jsonColumn, readRow, text } from "./rows.js";

/** One audit entry. */
export interface AuditRecord {
  readonly id: number;
  readonly at: string;
  readonly actor: string;
  readonly action: string;
  readonly targetType: string;
  readonly target: string;
  readonly detail: unknown;
}

/** Filters of {@link AuditRepository.listAudit}. */
export interface AuditQuery {
  readonly limit: number;
  readonly before?: number | undefined;
  readonly target?: string | undefined;
  readonly actor?: string | undefined;
  readonly action?: string | undefined;
  readonly object?: string | undefined;
  /** ISO 8601 UTC, inclusive. */
  readonly since?: string | undefined;
  /** ISO 8601 UTC, exclusive. */
  readonly until?: string | undefined;
}

/** Escapes LIKE's wildcards with `!` (the escape character every query here names). */
function likeEscape(text: string): string {
  return text.replace(/[!%_]/g, (c) => `!${c}`);
}

const metaRow = z.object({ value: intColumn });

const auditRow = z.object({
  id: intColumn,
  at: text,
  actor: text,
  action: text,
  target_type: text,
  target: text,
  detail: jsonColumn(z.unknown()),
});

/** The revision counter and the audit log. */
export class AuditRepository {
  constructor(private readonly db: Db) {}

  /** The change counter other nodes poll. */
  async revision(db: Db = this.db): Promise<number> {
    const row = await readMeta(db, "revision");
    return row ? readRow("meta", { key: "revision" }, metaRow, row).value : 0;
  }

  /**
   * The audit log, newest first; `before` pages by id. Filters: `target` (exact), `actor`
   * (exact), `action` (exact, or a prefix ending at a dot: `policy` matches `policy.update`),
   * `object` (a case-insensitive substring of the target's name), and the time range
   * [`since`, `until`) as ISO 8601 UTC times.
   */
  async listAudit(options: AuditQuery): Promise<AuditRecord[]> {
    let q = this.db.selectFrom("audit").selectAll().orderBy("id", "desc").limit(options.limit);
    if (options.before !== undefined) q = q.where("id", "<", options.before);
    if (options.target !== undefined) q = q.where("target", "=", options.target);
    if (options.actor !== undefined) q = q.where("actor", "=", options.actor);
    if (options.action !== undefined) {
      const prefix = `${likeEscape(options.action)}.%`;
      q = q.where(
        sql<boolean>`(${sql.ref("action")} = ${options.action} or ${sql.ref("action")} like ${prefix} escape '!')`,
      );
    }
    if (options.object !== undefined) {
      const pattern = `%${likeEscape(options.object.toLowerCase())}%`;
      q = q.where(sql<boolean>`lower(${sql.ref("target")}) like ${pattern} escape '!'`);
    }
    if (options.since !== undefined) q = q.where("at", ">=", options.since);
    if (options.until !== undefined) q = q.where("at", "<", options.until);
    const rows = await q.execute();
    return rows.map((row) => {
      const r = readRow("audit", { id: row.id }, auditRow, row);
      return {
        id: r.id,
        at: r.at,
        actor: r.actor,
        action: r.action,
        targetType: r.target_type,
        target: r.target,
        detail: r.detail,
      };
    });
  }

  /**
   * Records an action that changes nothing in the database (a counter reset, say): one entry,
   * in a transaction of its own, without bumping the revision.
   */
  async record(...entry: AuditEntry): Promise<void> {
    await this.db.transaction().execute((trx) => appendAudit(trx, ...entry));
  }
}
