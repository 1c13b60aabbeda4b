/**
 * The record of what changed: the `revision` counter every write bumps (nodes poll it to
 * know when to reload) and the audit log, one entry per change with actor, time and detail.
 * Entries are appended by the writes themselves ({@link appendAudit} in ./common.ts).
 */
import { type Db, json, now } from "./common.js";
import { z } from "zod";
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
    const row = await db
      .selectFrom("meta")
      .select("value")
      .where("key", "=", "revision")
      .executeTakeFirst();
    return row ? readRow("meta", { key: "revision" }, metaRow, row).value : 0;
  }

  /**
   * Records an action that changes no stored configuration (a counter reset, say): one audit
   * entry, and no revision bump (no node has anything to reload).
   */
  async record(
    actor: string,
    action: string,
    targetType: string,
    target: string,
    detail: unknown,
  ): Promise<void> {
    await this.db
      .insertInto("audit")
      .values({ at: now(), actor, action, target_type: targetType, target, detail: json(detail) })
      .execute();
  }

  /** The audit log, newest first; `before` pages by id. */
  async listAudit(options: {
    limit: number;
    before?: number | undefined;
    target?: string | undefined;
  }): Promise<AuditRecord[]> {
    let q = this.db.selectFrom("audit").selectAll().orderBy("id", "desc").limit(options.limit);
    if (options.before !== undefined) q = q.where("id", "<", options.before);
    if (options.target !== undefined) q = q.where("target", "=", options.target);
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
}
