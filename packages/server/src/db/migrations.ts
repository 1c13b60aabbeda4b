/**
 * Schema migrations, in code (no files to ship), run by Kysely's Migrator at start-up. Kysely
 * takes a lock while migrating, so nodes starting together on one PostgreSQL are safe.
 * Never edit a released migration: add a new one.
 */
import {
  type ColumnDefinitionBuilder,
  type Kysely,
  type Migration,
  type MigrationProvider,
  Migrator,
  sql,
} from "kysely";
import type { Tables } from "./schema.js";

/** Which SQL dialect a database speaks. */
export type DialectName = "sqlite" | "postgres";

function migrations(dialect: DialectName): Record<string, Migration> {
  return {
    "0001_initial": {
      async up(db: Kysely<unknown>): Promise<void> {
        const serial = dialect === "postgres" ? "serial" : "integer";
        const autoId = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder =>
          dialect === "postgres" ? c.primaryKey() : c.primaryKey().autoIncrement();

        await db.schema
          .createTable("policies")
          .addColumn("name", "text", (c) => c.primaryKey())
          .addColumn("description", "text", (c) => c.notNull().defaultTo(""))
          .addColumn("algorithm", "text", (c) => c.notNull())
          .addColumn("rules", "text", (c) => c.notNull())
          .addColumn("options", "text", (c) => c.notNull().defaultTo("{}"))
          .addColumn("apps", "text", (c) => c.notNull().defaultTo("[]"))
          .addColumn("enabled", "integer", (c) => c.notNull().defaultTo(1))
          .addColumn("shadow", "integer", (c) => c.notNull().defaultTo(0))
          .addColumn("created_by", "text", (c) => c.notNull())
          .addColumn("updated_by", "text", (c) => c.notNull())
          .addColumn("created_at", "text", (c) => c.notNull())
          .addColumn("updated_at", "text", (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull())
          .execute();

        await db.schema
          .createTable("policy_versions")
          .addColumn("policy_name", "text", (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull())
          .addColumn("spec", "text", (c) => c.notNull())
          .addColumn("action", "text", (c) => c.notNull())
          .addColumn("created_by", "text", (c) => c.notNull())
          .addColumn("created_at", "text", (c) => c.notNull())
          .addPrimaryKeyConstraint("policy_versions_pk", ["policy_name", "version"])
          .execute();

        await db.schema
          .createTable("policy_drafts")
          .addColumn("id", serial, autoId)
          .addColumn("policy_name", "text", (c) => c.notNull().unique())
          .addColumn("spec", "text", (c) => c.notNull())
          .addColumn("base_version", "integer", (c) => c.notNull())
          .addColumn("created_by", "text", (c) => c.notNull())
          .addColumn("created_at", "text", (c) => c.notNull())
          .execute();

        await db.schema
          .createTable("apps")
          .addColumn("name", "text", (c) => c.primaryKey())
          .addColumn("description", "text", (c) => c.notNull().defaultTo(""))
          .addColumn("key_id", "text", (c) => c.notNull().unique())
          .addColumn("key_hash", "text", (c) => c.notNull())
          .addColumn("created_by", "text", (c) => c.notNull())
          .addColumn("created_at", "text", (c) => c.notNull())
          .addColumn("updated_at", "text", (c) => c.notNull())
          .execute();

        await db.schema
          .createTable("users")
          .addColumn("username", "text", (c) => c.primaryKey())
          .addColumn("password_hash", "text", (c) => c.notNull())
          .addColumn("role", "text", (c) => c.notNull())
          .addColumn("apps", "text", (c) => c.notNull().defaultTo("[]"))
          .addColumn("created_at", "text", (c) => c.notNull())
          .addColumn("updated_at", "text", (c) => c.notNull())
          .execute();

        await db.schema
          .createTable("sessions")
          .addColumn("id", "text", (c) => c.primaryKey())
          .addColumn("token_hash", "text", (c) => c.notNull())
          .addColumn("username", "text", (c) => c.notNull())
          .addColumn("created_at", "text", (c) => c.notNull())
          .addColumn("expires_at", "text", (c) => c.notNull())
          .execute();
        await db.schema
          .createIndex("sessions_username")
          .on("sessions")
          .column("username")
          .execute();

        await db.schema
          .createTable("audit")
          .addColumn("id", serial, autoId)
          .addColumn("at", "text", (c) => c.notNull())
          .addColumn("actor", "text", (c) => c.notNull())
          .addColumn("action", "text", (c) => c.notNull())
          .addColumn("target_type", "text", (c) => c.notNull())
          .addColumn("target", "text", (c) => c.notNull())
          .addColumn("detail", "text", (c) => c.notNull().defaultTo("{}"))
          .execute();

        await db.schema
          .createTable("meta")
          .addColumn("key", "text", (c) => c.primaryKey())
          .addColumn("value", "integer", (c) => c.notNull())
          .execute();
        await sql`insert into meta (key, value) values ('revision', 0)`.execute(db);
      },
    },
    "0002_draft_stats": {
      async up(db: Kysely<unknown>): Promise<void> {
        const counter = (c: ColumnDefinitionBuilder) => c.notNull().defaultTo(0);
        await db.schema
          .createTable("draft_stats")
          .addColumn("draft_id", "integer", (c) => c.primaryKey())
          .addColumn("evaluated", "bigint", counter)
          .addColumn("would_deny", "bigint", counter)
          .addColumn("would_deny_newly", "bigint", counter)
          .addColumn("would_allow_newly", "bigint", counter)
          .execute();
      },
    },
    "0003_only_owners_own_apps": {
      // The first release let a viewer or admin be given apps (which it could not use); the
      // repository now refuses that, and this clears what was stored.
      async up(db: Kysely<unknown>): Promise<void> {
        await sql`update users set apps = '[]' where role <> 'owner' and apps <> '[]'`.execute(db);
      },
    },
  };
}

/**
 * Brings the schema up to date; throws with the failing migration's error.
 *
 * Kysely's migration lock serializes nodes that start together on PostgreSQL, but SQLite has no
 * such lock across processes, and creating Kysely's own bookkeeping tables can race on both: two
 * processes migrating a new database at once can collide ("table already exists"). The loser's
 * transaction rolls back and it retries, finding the schema done.
 */
export async function migrate(db: Kysely<Tables>, dialect: DialectName): Promise<void> {
  const provider: MigrationProvider = { getMigrations: () => Promise.resolve(migrations(dialect)) };
  const migrator = new Migrator({ db, provider });
  for (let attempt = 1; ; attempt++) {
    const { error, results } = await migrator.migrateToLatest();
    if (!error) return;
    if (attempt < 5) {
      await new Promise((r) => setTimeout(r, 100 * attempt));
      continue;
    }
    const failed = results?.find((r) => r.status === "Error");
    throw new Error(
      `database migration${failed ? ` ${failed.migrationName}` : ""} failed: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
}
