/**
 * Embedded policy clients (`connectPolicies`): one row per client process, written by each of
 * its reports (an upsert that bumps no revision and writes no audit entry: it is a heartbeat,
 * not a change). Every node reads the same rows, so the admin's list of clients is whole
 * whichever node a client reports to. Rows not seen for {@link CLIENT_RETENTION_MS} are dropped.
 */
import { z } from "zod";
import type { DialectName } from "../db/migrations.js";
import type { Db, Tx } from "./common.js";
import { type CorruptRecordError, intColumn, readEach, readRow, text } from "./rows.js";

/** How long a client that stopped reporting stays listed. */
export const CLIENT_RETENTION_MS = 24 * 60 * 60 * 1000;

/** How often a node drops clients past retention (at most). */
const PRUNE_EVERY_MS = 10 * 60 * 1000;

/** One client process, as its last report described it. */
export interface ClientRecord {
  readonly app: string;
  /** The process's own random id. */
  readonly instance: string;
  readonly host: string;
  /** The client library and its version (`sluice/0.1.0`). */
  readonly version: string;
  /** The policy revision the client runs. */
  readonly revision: number;
  readonly firstSeen: string;
  readonly lastSeen: string;
}

/** What a report says about its client. */
export interface ClientHeartbeat {
  readonly app: string;
  readonly instance: string;
  readonly host: string;
  readonly version: string;
  readonly revision: number;
}

const clientRow = z.object({
  app: text,
  instance: text,
  host: text,
  client_version: text,
  revision: intColumn,
  first_seen: text,
  last_seen: text,
});

/** The list of clients. */
export class ClientRepository {
  private lastPrune = 0;

  constructor(
    private readonly db: Db,
    private readonly dialect: DialectName,
  ) {}

  /**
   * Records a client's report (`seen`: now, ISO-8601), inside the report's transaction when
   * `db` is one.
   */
  async recordClient(c: ClientHeartbeat, seen: string, db: Db | Tx = this.db): Promise<void> {
    const insert = db.insertInto("policy_clients").values({
      app: c.app,
      instance: c.instance,
      host: c.host,
      client_version: c.version,
      revision: c.revision,
      first_seen: seen,
      last_seen: seen,
    });
    const update = {
      host: c.host,
      client_version: c.version,
      revision: c.revision,
      last_seen: seen,
    };
    // The same upsert in each dialect's words: MySQL has no ON CONFLICT.
    if (this.dialect === "mysql") await insert.onDuplicateKeyUpdate(update).execute();
    else
      await insert
        .onConflict((oc) => oc.columns(["app", "instance"]).doUpdateSet(update))
        .execute();
  }

  /** Drops clients not seen for {@link CLIENT_RETENTION_MS}, at most every ten minutes per node. */
  async prune(nowMs: number): Promise<void> {
    if (nowMs - this.lastPrune < PRUNE_EVERY_MS) return;
    this.lastPrune = nowMs;
    await this.db
      .deleteFrom("policy_clients")
      .where("last_seen", "<", new Date(nowMs - CLIENT_RETENTION_MS).toISOString())
      .execute();
  }

  /**
   * Clients seen since `since` (ISO-8601), by app, host and instance; rows that cannot be read
   * are set aside in `corrupt`.
   */
  async listClients(
    since: string,
  ): Promise<{ clients: ClientRecord[]; corrupt: CorruptRecordError[] }> {
    const rows = await this.db
      .selectFrom("policy_clients")
      .selectAll()
      .where("last_seen", ">=", since)
      .orderBy("app")
      .orderBy("host")
      .orderBy("instance")
      .execute();
    const { records, corrupt } = readEach(rows, (row) => {
      const r = readRow("policy_clients", { app: row.app, instance: row.instance }, clientRow, row);
      return {
        app: r.app,
        instance: r.instance,
        host: r.host,
        version: r.client_version,
        revision: r.revision,
        firstSeen: r.first_seen,
        lastSeen: r.last_seen,
      };
    });
    return { clients: records, corrupt };
  }
}
