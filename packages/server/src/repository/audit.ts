/**
 * The record of what changed: the `revision` counter every write bumps (nodes poll it to
 * know when to reload) and the audit log, one entry per change with actor, time and detail.
 * Entries are appended by the writes themselves ({@link appendAudit} in ./common.ts).
 */
import type { Db } from "./common.js";
import { parseJson } from "./rows.js";

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
    return Number(row?.value ?? 0);
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
    return rows.map((r) => ({
      id: Number(r.id),
      at: r.at,
      actor: r.actor,
      action: r.action,
      targetType: r.target_type,
      target: r.target,
      detail: parseJson<unknown>(r.detail, "audit detail"),
    }));
  }
}
