/**
 * Is the policy database fit to take writes? For `/readyz` and for every write:
 *
 * - **The SQLite file is still the one we opened.** A `sluice.db` deleted (or replaced) while
 *   the service runs keeps answering through the open file handle, so writes would be
 *   acknowledged and then lost at the next restart. The file's identity (device and inode) is
 *   taken at open and compared before every write; a change fails readiness and refuses the
 *   write with `database_unavailable` rather than acknowledge it.
 * - **The database takes writes.** A read-only file (or a PostgreSQL standby) answers
 *   `select 1` but refuses every change: readiness tries a write in a transaction that is
 *   rolled back.
 */
import { statSync } from "node:fs";
import {
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
} from "kysely";
import type { Database } from "./connect.js";

/**
 * The database cannot be used safely; the message says why, where and what to do (for the log,
 * and for admins in `/readyz`), the `reason` why and what to do without where the data lives
 * (what callers are answered).
 */
export class DatabaseUnavailableError extends Error {
  /** The message without the database's location (no file path, no address). */
  readonly reason: string;
  constructor(message: string, options?: { cause?: unknown; reason?: string }) {
    super(message, options);
    this.name = "DatabaseUnavailableError";
    this.reason = options?.reason ?? message;
  }
}

/** Readiness and write checks of one open database. */
export interface DatabaseHealth {
  /** Throws a {@link DatabaseUnavailableError} when the SQLite file is no longer the one opened (one `stat`). */
  assertSameFile(): void;
  /** For `/readyz`: the file is the one opened, and a write (rolled back) succeeds. */
  check(): Promise<void>;
  /** `database` with every write guarded by {@link DatabaseHealth.assertSameFile}. */
  readonly guarded: Database;
}

const WRITES = new Set(["InsertQueryNode", "UpdateQueryNode", "DeleteQueryNode"]);

/** Thrown inside the readiness transaction to roll the trial write back. */
class RollBack extends Error {}

/** Watches an open database (call right after opening it, so the identity is the opened file's). */
export function databaseHealth(database: Database): DatabaseHealth {
  const file = database.dialect === "sqlite" ? database.location : undefined;
  const identity = file === undefined ? undefined : fileIdentity(file);

  const assertSameFile = (): void => {
    if (file === undefined || identity === undefined) return;
    let now: string | undefined;
    try {
      now = fileIdentity(file);
    } catch {
      now = undefined;
    }
    if (now === identity) return;
    const what = now === undefined ? "deleted" : "replaced";
    const why =
      now === undefined
        ? "writes would be lost at the next restart; restore the file (or restart on a new one)"
        : "this node still holds the old one; restart it to use the new file";
    throw new DatabaseUnavailableError(
      `the database file ${file} was ${what} while the service ran: ${why}`,
      { reason: `the database file was ${what} while the service ran: ${why}` },
    );
  };

  const plugin: KyselyPlugin = {
    transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
      if (WRITES.has(args.node.kind)) assertSameFile();
      return args.node;
    },
    transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
      return Promise.resolve(args.result);
    },
  };
  const guarded: Database = { ...database, db: database.db.withPlugin(plugin) };

  return {
    assertSameFile,
    guarded,
    async check() {
      assertSameFile();
      await database.db
        .transaction()
        .execute(async (trx) => {
          // Built, not written as SQL text: `key` is a reserved word on MySQL, quoted per dialect.
          await trx
            .updateTable("meta")
            .set((eb) => ({ value: eb.ref("value") }))
            .where("key", "=", "revision")
            .execute();
          throw new RollBack();
        })
        .catch((err: unknown) => {
          if (!(err instanceof RollBack)) throw err;
        });
      assertSameFile();
    },
  };
}

/** `dev:ino` of a file (throws when it does not exist). */
function fileIdentity(path: string): string {
  const s = statSync(path, { bigint: true });
  return `${s.dev}:${s.ino}`;
}
