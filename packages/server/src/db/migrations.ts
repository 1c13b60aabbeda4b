/**
 * Schema migrations, in code (no files to ship), run by Kysely's Migrator at start-up. Kysely
 * takes a lock while migrating (an advisory lock on PostgreSQL, `GET_LOCK` on MySQL), so nodes
 * starting together on one server are safe. Never edit a released migration: add a new one.
 *
 * Each migration is a list of **steps**, one SQL statement each (or one copy of rows that skips
 * those already copied). On SQLite and PostgreSQL a
 * migration runs in one transaction: it applies whole or not at all. MySQL and MariaDB commit
 * each DDL statement as it runs, so there a migration that fails part-way leaves its earlier
 * steps applied. There every step is idempotent (`if not exists`, an index created only when
 * missing, an upsert), each step done is recorded in `sluice_migration_step`, the error names
 * the step that failed and what was applied, and the next start says that it resumes a
 * migration left part-way and runs the remaining steps.
 */
import {
  type ColumnDataType,
  type ColumnDefinitionBuilder,
  type CreateTableBuilder,
  type DialectAdapter,
  type Expression,
  type Kysely,
  type Migration,
  type MigrationProvider,
  Migrator,
  SqliteAdapter,
  SqliteDialect,
  sql,
} from "kysely";
import type { DialectName } from "./dialect.js";
import {
  copyPolicies,
  copyRows,
  draftHighWater,
  raiseDraftSequence,
} from "./documents-migration.js";
import type { Tables } from "./schema.js";

export type { DialectName } from "./dialect.js";

/**
 * Kysely's SQLite dialect, but telling Kysely's Migrator that SQLite's DDL is transactional
 * (it is; Kysely's adapter says not). The Migrator then runs the pending migrations and their
 * bookkeeping in one transaction, as on PostgreSQL: a migration that fails applies nothing,
 * instead of leaving tables that make every later start fail with "table already exists".
 */
export class SqliteDialectWithTransactionalDdl extends SqliteDialect {
  override createAdapter(): DialectAdapter {
    return new (class extends SqliteAdapter {
      override get supportsTransactionalDdl(): boolean {
        return true;
      }
    })();
  }
}

/** One statement of a migration; on MySQL, running it again after it succeeded changes nothing. */
interface Step {
  /** What it does, for messages: `create table apps`. */
  readonly name: string;
  run(db: Kysely<unknown>): Promise<void>;
}

/** Where steps are recorded on MySQL (only while their migration is unfinished). */
const STEP_TABLE = "sluice_migration_step";

/** The columns of 0008's tables, in the order its copies select them. */
const DOCUMENT_COLUMNS = [
  "kind",
  "name",
  "spec",
  "created_by",
  "updated_by",
  "created_at",
  "updated_at",
  "version",
] as const;
const VERSION_COLUMNS = ["kind", "name", "version", "spec", "action", "created_by", "created_at"];
const DRAFT_COLUMNS = ["id", "kind", "name", "spec", "base_version", "created_by", "created_at"];

/** Column types per dialect. */
interface Types {
  /** Names and ids: in primary keys, unique constraints and indexes. */
  readonly key: ColumnDataType | Expression<unknown>;
  /** Short text: timestamps, actors, roles, hashes. */
  readonly short: ColumnDataType | Expression<unknown>;
  /** Documents: JSON and descriptions, of any length. */
  readonly doc: ColumnDataType | Expression<unknown>;
  /** An auto-incremented integer key. */
  readonly serial: ColumnDataType;
  /** Short tags and hashes in keys (at most 64 characters). */
  readonly tag: ColumnDataType | Expression<unknown>;
}

function typesOf(dialect: DialectName): Types {
  if (dialect === "mysql")
    return {
      // MySQL indexes no TEXT column whole. 191 characters of utf8mb4 (764 bytes) fit the
      // smallest index prefix InnoDB allows (767 bytes); names are at most 128.
      key: "varchar(191)",
      short: "varchar(255)",
      // Up to 16 MiB (TEXT holds 64 KiB); JSON is kept as text, as on SQLite.
      doc: sql`mediumtext`,
      serial: "integer",
      tag: "varchar(64)",
    };
  return {
    key: "text",
    short: "text",
    doc: "text",
    serial: dialect === "postgres" ? "serial" : "integer",
    tag: "text",
  };
}

function migrations(dialect: DialectName): Record<string, Step[]> {
  const t = typesOf(dialect);
  const mysql = dialect === "mysql";
  const autoId = (c: ColumnDefinitionBuilder): ColumnDefinitionBuilder =>
    dialect === "postgres" ? c.primaryKey() : c.primaryKey().autoIncrement();
  /**
   * A text default. MySQL 8 takes a default on TEXT columns only as an expression (`('')`),
   * which MariaDB (10.2+) accepts too.
   */
  const textDefault = (value: string) => (mysql ? sql`(${sql.lit(value)})` : value);
  /**
   * `create table`; on MySQL `if not exists` (a step may run again), in utf8mb4 with a binary
   * collation (names are case-sensitive, as on SQLite and PostgreSQL) whatever the server's
   * defaults, and InnoDB.
   */
  const table = (db: Kysely<unknown>, name: string) =>
    mysql
      ? db.schema
          .createTable(name)
          .ifNotExists()
          .modifyEnd(sql`engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin`)
      : db.schema.createTable(name);
  const createTable = (
    name: string,
    build: (b: CreateTableBuilder<string, never>) => { execute(): Promise<void> },
  ): Step => ({
    name: `create table ${name}`,
    run: (db) => build(table(db, name)).execute(),
  });
  /** On MySQL only when missing: MySQL has no `create index if not exists` (MariaDB has). */
  const createIndex = (name: string, on: string, column: string | string[]): Step => ({
    name: `create index ${name}`,
    async run(db) {
      if (mysql) {
        const found = await sql<{ n: number | string }>`
          select count(*) as n from information_schema.statistics
          where table_schema = database() and table_name = ${on} and index_name = ${name}`.execute(
          db,
        );
        if (Number(found.rows[0]?.n ?? 0) > 0) return;
      }
      await db.schema
        .createIndex(name)
        .on(on)
        .columns(typeof column === "string" ? [column] : column)
        .execute();
    },
  });

  /** 0008: copies the rows of `from` into `into` (`select`: the columns, in order). */
  const copy = (
    what: string,
    into: string,
    columns: readonly string[],
    from: string,
    select: ReturnType<typeof sql>,
  ): Step => ({
    name: `copy ${what}`,
    run: (db) => copyRows(db, dialect, into, columns, select, from),
  });

  return {
    "0001_initial": [
      createTable("policies", (b) =>
        b
          .addColumn("name", t.key, (c) => c.primaryKey())
          .addColumn("description", t.doc, (c) => c.notNull().defaultTo(textDefault("")))
          .addColumn("algorithm", t.short, (c) => c.notNull())
          .addColumn("rules", t.doc, (c) => c.notNull())
          .addColumn("options", t.doc, (c) => c.notNull().defaultTo(textDefault("{}")))
          .addColumn("apps", t.doc, (c) => c.notNull().defaultTo(textDefault("[]")))
          .addColumn("enabled", "integer", (c) => c.notNull().defaultTo(1))
          .addColumn("shadow", "integer", (c) => c.notNull().defaultTo(0))
          .addColumn("created_by", t.short, (c) => c.notNull())
          .addColumn("updated_by", t.short, (c) => c.notNull())
          .addColumn("created_at", t.short, (c) => c.notNull())
          .addColumn("updated_at", t.short, (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull()),
      ),
      createTable("policy_versions", (b) =>
        b
          .addColumn("policy_name", t.key, (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull())
          .addColumn("spec", t.doc, (c) => c.notNull())
          .addColumn("action", t.short, (c) => c.notNull())
          .addColumn("created_by", t.short, (c) => c.notNull())
          .addColumn("created_at", t.short, (c) => c.notNull())
          .addPrimaryKeyConstraint("policy_versions_pk", ["policy_name", "version"]),
      ),
      createTable("policy_drafts", (b) =>
        b
          .addColumn("id", t.serial, autoId)
          .addColumn("policy_name", t.key, (c) => c.notNull().unique())
          .addColumn("spec", t.doc, (c) => c.notNull())
          .addColumn("base_version", "integer", (c) => c.notNull())
          .addColumn("created_by", t.short, (c) => c.notNull())
          .addColumn("created_at", t.short, (c) => c.notNull()),
      ),
      createTable("apps", (b) =>
        b
          .addColumn("name", t.key, (c) => c.primaryKey())
          .addColumn("description", t.doc, (c) => c.notNull().defaultTo(textDefault("")))
          .addColumn("key_id", t.key, (c) => c.notNull().unique())
          .addColumn("key_hash", t.short, (c) => c.notNull())
          .addColumn("created_by", t.short, (c) => c.notNull())
          .addColumn("created_at", t.short, (c) => c.notNull())
          .addColumn("updated_at", t.short, (c) => c.notNull()),
      ),
      createTable("users", (b) =>
        b
          .addColumn("username", t.key, (c) => c.primaryKey())
          .addColumn("password_hash", t.short, (c) => c.notNull())
          .addColumn("role", t.short, (c) => c.notNull())
          .addColumn("apps", t.doc, (c) => c.notNull().defaultTo(textDefault("[]")))
          .addColumn("created_at", t.short, (c) => c.notNull())
          .addColumn("updated_at", t.short, (c) => c.notNull()),
      ),
      createTable("sessions", (b) =>
        b
          .addColumn("id", t.key, (c) => c.primaryKey())
          .addColumn("token_hash", t.short, (c) => c.notNull())
          .addColumn("username", t.key, (c) => c.notNull())
          .addColumn("created_at", t.short, (c) => c.notNull())
          .addColumn("expires_at", t.short, (c) => c.notNull()),
      ),
      createIndex("sessions_username", "sessions", "username"),
      createTable("audit", (b) =>
        b
          .addColumn("id", t.serial, autoId)
          .addColumn("at", t.short, (c) => c.notNull())
          .addColumn("actor", t.short, (c) => c.notNull())
          .addColumn("action", t.short, (c) => c.notNull())
          .addColumn("target_type", t.short, (c) => c.notNull())
          .addColumn("target", t.short, (c) => c.notNull())
          .addColumn("detail", t.doc, (c) => c.notNull().defaultTo(textDefault("{}"))),
      ),
      createTable("meta", (b) =>
        b
          .addColumn("key", t.key, (c) => c.primaryKey())
          .addColumn("value", "integer", (c) => c.notNull()),
      ),
      {
        name: "insert the revision counter",
        async run(db) {
          const [key, value] = [sql.ref("key"), sql.ref("value")];
          const again = mysql ? sql`on duplicate key update ${value} = ${value}` : sql``;
          await sql`insert into meta (${key}, ${value}) values ('revision', 0) ${again}`.execute(
            db,
          );
        },
      },
    ],
    "0002_draft_stats": [
      createTable("draft_stats", (b) => {
        const counter = (c: ColumnDefinitionBuilder) => c.notNull().defaultTo(0);
        return b
          .addColumn("draft_id", "integer", (c) => c.primaryKey())
          .addColumn("evaluated", "bigint", counter)
          .addColumn("would_deny", "bigint", counter)
          .addColumn("would_deny_newly", "bigint", counter)
          .addColumn("would_allow_newly", "bigint", counter);
      }),
    ],
    "0003_only_owners_own_apps": [
      // The first release let a viewer or admin be given apps (which it could not use); the
      // repository now refuses that, and this clears what was stored.
      {
        name: "clear the apps of users who are not owners",
        async run(db) {
          await sql`update users set apps = '[]' where role <> 'owner' and apps <> '[]'`.execute(
            db,
          );
        },
      },
    ],
    "0004_policy_clients": [
      // Embedded policy clients (connectPolicies) and their last report: the admin's list of
      // clients, the same on every node.
      createTable("policy_clients", (b) =>
        b
          .addColumn("app", t.key, (c) => c.notNull())
          .addColumn("instance", t.key, (c) => c.notNull())
          .addColumn("host", t.short, (c) => c.notNull())
          .addColumn("client_version", t.short, (c) => c.notNull())
          .addColumn("revision", "bigint", (c) => c.notNull())
          .addColumn("first_seen", t.key, (c) => c.notNull())
          .addColumn("last_seen", t.key, (c) => c.notNull())
          .addPrimaryKeyConstraint("policy_clients_pk", ["app", "instance"]),
      ),
      createIndex("policy_clients_last_seen", "policy_clients", "last_seen"),
    ],
    // Envoy's descriptor limits: one versioned document per domain, with drafts and their
    // shadow counts, beside the policies (docs/envoy.md).
    "0005_envoy_domains": [
      createTable("envoy_domains", (b) =>
        b
          .addColumn("domain", t.key, (c) => c.primaryKey())
          .addColumn("spec", t.doc, (c) => c.notNull())
          .addColumn("created_by", t.short, (c) => c.notNull())
          .addColumn("updated_by", t.short, (c) => c.notNull())
          .addColumn("created_at", t.short, (c) => c.notNull())
          .addColumn("updated_at", t.short, (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull()),
      ),
      createTable("envoy_domain_versions", (b) =>
        b
          .addColumn("domain", t.key, (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull())
          .addColumn("spec", t.doc, (c) => c.notNull())
          .addColumn("action", t.short, (c) => c.notNull())
          .addColumn("created_by", t.short, (c) => c.notNull())
          .addColumn("created_at", t.short, (c) => c.notNull())
          .addPrimaryKeyConstraint("envoy_domain_versions_pk", ["domain", "version"]),
      ),
      createTable("envoy_domain_drafts", (b) =>
        b
          .addColumn("id", t.serial, autoId)
          .addColumn("domain", t.key, (c) => c.notNull().unique())
          .addColumn("spec", t.doc, (c) => c.notNull())
          .addColumn("base_version", "integer", (c) => c.notNull())
          .addColumn("created_by", t.short, (c) => c.notNull())
          .addColumn("created_at", t.short, (c) => c.notNull()),
      ),
      createTable("envoy_draft_stats", (b) => {
        const counter = (c: ColumnDefinitionBuilder) => c.notNull().defaultTo(0);
        return b
          .addColumn("draft_id", "integer", (c) => c.primaryKey())
          .addColumn("evaluated", "bigint", counter)
          .addColumn("would_deny", "bigint", counter)
          .addColumn("would_deny_newly", "bigint", counter)
          .addColumn("would_allow_newly", "bigint", counter);
      }),
    ],
    "0006_traffic": [
      // Decisions per policy, app and second (span 1) or minute (span 60); see repository/traffic.ts.
      createTable("traffic", (b) => {
        const counter = (c: ColumnDefinitionBuilder) => c.notNull().defaultTo(0);
        return b
          .addColumn("policy", t.key, (c) => c.notNull())
          .addColumn("app", t.key, (c) => c.notNull())
          .addColumn("span", "integer", (c) => c.notNull())
          .addColumn("at", "bigint", (c) => c.notNull())
          .addColumn("allowed", "bigint", counter)
          .addColumn("denied", "bigint", counter)
          .addColumn("shadow", "bigint", counter)
          .addPrimaryKeyConstraint("traffic_pk", ["policy", "app", "span", "at"]);
      }),
      createIndex("traffic_span_at", "traffic", ["span", "at"]),
      // Each node's heavy-hitter summary per policy, kind and minute.
      createTable("traffic_keys", (b) =>
        b
          .addColumn("policy", t.key, (c) => c.notNull())
          .addColumn("kind", t.tag, (c) => c.notNull())
          .addColumn("node", t.tag, (c) => c.notNull())
          .addColumn("minute", "bigint", (c) => c.notNull())
          .addColumn("ident_hash", t.tag, (c) => c.notNull())
          .addColumn("ident", t.doc, (c) => c.notNull())
          .addColumn("hits", "bigint", (c) => c.notNull())
          .addColumn("overcount", "bigint", (c) => c.notNull())
          .addColumn("floor_hits", "bigint", (c) => c.notNull())
          .addPrimaryKeyConstraint("traffic_keys_pk", [
            "policy",
            "kind",
            "node",
            "minute",
            "ident_hash",
          ]),
      ),
      createIndex("traffic_keys_minute", "traffic_keys", "minute"),
    ],
    // What each revision changed, so that a node reloads only that (repository/common.ts).
    "0007_changes": [
      createTable("changes", (b) =>
        b
          .addColumn("revision", "bigint", (c) => c.notNull())
          .addColumn("kind", t.tag, (c) => c.notNull())
          .addColumn("name", t.key, (c) => c.notNull())
          .addPrimaryKeyConstraint("changes_pk", ["revision", "kind", "name"]),
      ),
      {
        // The log starts now: a node running an older revision reloads everything once.
        name: "insert the start of the change log",
        async run(db) {
          const [key, value] = [sql.ref("key"), sql.ref("value")];
          const again = mysql ? sql`on duplicate key update ${value} = ${value}` : sql``;
          const current = await sql<{
            value: number | string;
          }>`select ${value} from meta where ${key} = 'revision'`.execute(db);
          const revision = Number(current.rows[0]?.value ?? 0);
          await sql`insert into meta (${key}, ${value}) values ('changes_from', ${revision}) ${again}`.execute(
            db,
          );
        },
      },
    ],
    // One set of tables for every versioned document (repository/documents.ts): policies and
    // Envoy domains move in, every row, version, draft and count with them (see
    // ./documents-migration.ts), and their own tables go.
    "0008_documents": [
      createTable("documents", (b) =>
        b
          .addColumn("kind", t.tag, (c) => c.notNull())
          .addColumn("name", t.key, (c) => c.notNull())
          .addColumn("spec", t.doc, (c) => c.notNull())
          .addColumn("created_by", t.short, (c) => c.notNull())
          .addColumn("updated_by", t.short, (c) => c.notNull())
          .addColumn("created_at", t.short, (c) => c.notNull())
          .addColumn("updated_at", t.short, (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull())
          .addPrimaryKeyConstraint("documents_pk", ["kind", "name"]),
      ),
      createTable("document_versions", (b) =>
        b
          .addColumn("kind", t.tag, (c) => c.notNull())
          .addColumn("name", t.key, (c) => c.notNull())
          .addColumn("version", "integer", (c) => c.notNull())
          .addColumn("spec", t.doc, (c) => c.notNull())
          .addColumn("action", t.short, (c) => c.notNull())
          .addColumn("created_by", t.short, (c) => c.notNull())
          .addColumn("created_at", t.short, (c) => c.notNull())
          .addPrimaryKeyConstraint("document_versions_pk", ["kind", "name", "version"]),
      ),
      createTable("document_drafts", (b) =>
        b
          .addColumn("id", t.serial, autoId)
          .addColumn("kind", t.tag, (c) => c.notNull())
          .addColumn("name", t.key, (c) => c.notNull())
          .addColumn("spec", t.doc, (c) => c.notNull())
          .addColumn("base_version", "integer", (c) => c.notNull())
          .addColumn("created_by", t.short, (c) => c.notNull())
          .addColumn("created_at", t.short, (c) => c.notNull())
          .addUniqueConstraint("document_drafts_name", ["kind", "name"]),
      ),
      { name: "copy policies", run: (db) => copyPolicies(db, dialect) },
      copy(
        "policy versions",
        "document_versions",
        VERSION_COLUMNS,
        "policy_versions",
        sql`'policy', policy_name, version, spec, action, created_by, created_at`,
      ),
      copy(
        "policy drafts",
        "document_drafts",
        DRAFT_COLUMNS,
        "policy_drafts",
        sql`id, 'policy', policy_name, spec, base_version, created_by, created_at`,
      ),
      copy(
        "Envoy domains",
        "documents",
        DOCUMENT_COLUMNS,
        "envoy_domains",
        sql`'envoy_domain', domain, spec, created_by, updated_by, created_at, updated_at, version`,
      ),
      copy(
        "Envoy domain versions",
        "document_versions",
        VERSION_COLUMNS,
        "envoy_domain_versions",
        sql`'envoy_domain', domain, version, spec, action, created_by, created_at`,
      ),
      {
        // Numbered after every policy draft id issued: the two were counted apart.
        name: "copy Envoy domain drafts",
        async run(db) {
          const after = await draftHighWater(db, dialect, "policy_drafts", "draft_stats");
          await copyRows(
            db,
            dialect,
            "document_drafts",
            DRAFT_COLUMNS,
            sql`id + ${after}, 'envoy_domain', domain, spec, base_version, created_by, created_at`,
            "envoy_domain_drafts",
          );
        },
      },
      {
        name: "copy Envoy domain draft counts",
        async run(db) {
          const after = await draftHighWater(db, dialect, "policy_drafts", "draft_stats");
          await copyRows(
            db,
            dialect,
            "draft_stats",
            ["draft_id", "evaluated", "would_deny", "would_deny_newly", "would_allow_newly"],
            sql`draft_id + ${after}, evaluated, would_deny, would_deny_newly, would_allow_newly`,
            "envoy_draft_stats",
          );
        },
      },
      {
        name: "start the draft ids past every id issued",
        async run(db) {
          const policies = await draftHighWater(db, dialect, "policy_drafts", "draft_stats");
          const envoy = await draftHighWater(
            db,
            dialect,
            "envoy_domain_drafts",
            "envoy_draft_stats",
          );
          await raiseDraftSequence(db, dialect, policies + envoy);
        },
      },
      ...[
        "policies",
        "policy_versions",
        "policy_drafts",
        "envoy_domains",
        "envoy_domain_versions",
        "envoy_domain_drafts",
        "envoy_draft_stats",
      ].map((name): Step => ({
        name: `drop table ${name}`,
        run: (db) => db.schema.dropTable(name).ifExists().execute(),
      })),
    ],
    // Top keys kept by slot of each node's sketch, not by key: a key evicted from the sketch
    // left its row behind, so a busy minute held far more rows than the sketch has slots. The
    // rows are an hour of observations at most: the table is made anew, not converted.
    "0009_traffic_key_slots": [
      {
        name: "drop table traffic_keys",
        run: (db) => db.schema.dropTable("traffic_keys").ifExists().execute(),
      },
      createTable("traffic_keys", (b) =>
        b
          .addColumn("policy", t.key, (c) => c.notNull())
          .addColumn("kind", t.tag, (c) => c.notNull())
          .addColumn("node", t.tag, (c) => c.notNull())
          .addColumn("minute", "bigint", (c) => c.notNull())
          .addColumn("slot", "integer", (c) => c.notNull())
          .addColumn("ident", t.doc, (c) => c.notNull())
          .addColumn("hits", "bigint", (c) => c.notNull())
          .addColumn("overcount", "bigint", (c) => c.notNull())
          .addColumn("floor_hits", "bigint", (c) => c.notNull())
          .addPrimaryKeyConstraint("traffic_keys_pk", ["policy", "kind", "node", "minute", "slot"]),
      ),
      createIndex("traffic_keys_minute", "traffic_keys", "minute"),
    ],
    // Per-key overrides of a policy (repository/overrides.ts): rows of their own, not part of
    // the policy's document, so that changing one of 100,000 moves that one alone. A deleted
    // override stays as a row without rules (its revision tells clients that it changed).
    "0010_policy_overrides": [
      createTable("policy_overrides", (b) =>
        b
          .addColumn("policy", t.key, (c) => c.notNull())
          .addColumn("ident", t.key, (c) => c.notNull())
          .addColumn("rules", t.doc)
          .addColumn("revision", "bigint", (c) => c.notNull())
          .addColumn("updated_by", t.short, (c) => c.notNull())
          .addColumn("updated_at", t.short, (c) => c.notNull())
          .addPrimaryKeyConstraint("policy_overrides_pk", ["policy", "ident"]),
      ),
    ],
  };
}

/** A step that failed, with its place in its migration. */
class StepError extends Error {
  constructor(
    readonly migration: string,
    readonly step: number,
    readonly steps: number,
    readonly stepName: string,
    cause: unknown,
  ) {
    super(
      `step ${step} of ${steps} (${stepName}): ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.name = "StepError";
  }
}

/** "step 1 is", "steps 1–3 are": the steps before step `next`. */
const stepsBefore = (next: number) => (next === 2 ? "step 1 is" : `steps 1–${next - 1} are`);

/**
 * The migration as Kysely runs it. On MySQL each step done is recorded, steps recorded by an
 * earlier start are skipped (after `notice` says so), and the records go when the migration
 * completes (Kysely then records the migration itself).
 */
function toMigration(
  name: string,
  steps: readonly Step[],
  dialect: DialectName,
  notice: (message: string) => void,
): Migration {
  const mysql = dialect === "mysql";
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      const records = db as unknown as Kysely<StepTables>;
      const done = new Set<number>();
      if (mysql) {
        const rows = await records
          .selectFrom(STEP_TABLE)
          .select("step")
          .where("migration", "=", name)
          .execute();
        for (const r of rows) done.add(Number(r.step));
        if (done.size > 0) notice(resumeNotice(name, steps, done));
      }
      for (const [i, step] of steps.entries()) {
        const n = i + 1;
        if (done.has(n)) continue;
        try {
          await step.run(db);
        } catch (err) {
          throw new StepError(name, n, steps.length, step.name, err);
        }
        if (mysql) {
          const at = new Date().toISOString();
          await records
            .insertInto(STEP_TABLE)
            .values({ migration: name, step: n, name: step.name, at })
            .onDuplicateKeyUpdate({ at })
            .execute();
        }
      }
      if (mysql) await records.deleteFrom(STEP_TABLE).where("migration", "=", name).execute();
    },
  };
}

function resumeNotice(name: string, steps: readonly Step[], done: ReadonlySet<number>): string {
  const next = steps.findIndex((_, i) => !done.has(i + 1)) + 1;
  const left =
    next === 0
      ? `all ${steps.length} steps were applied; finishing it`
      : `${done.size} of ${steps.length} steps were applied; resuming at step ${next} (${steps[next - 1]!.name})`;
  return `database migration ${name} was left part-way by an earlier start: ${left}`;
}

/** The step records' table, as Kysely sees it. */
interface StepTables {
  [STEP_TABLE]: { migration: string; step: number | string; name: string; at: string };
}

/**
 * Creates the step records' table (MySQL), before the migrations run; only when missing, so that
 * a user without the CREATE privilege can run an up-to-date database.
 */
async function ensureStepTable(db: Kysely<Tables>): Promise<void> {
  const found = await sql<{ n: number | string }>`
    select count(*) as n from information_schema.tables
    where table_schema = database() and table_name = ${STEP_TABLE}`.execute(db);
  if (Number(found.rows[0]?.n ?? 0) > 0) return;
  await db.schema
    .createTable(STEP_TABLE)
    .ifNotExists()
    .addColumn("migration", "varchar(191)", (c) => c.notNull())
    .addColumn("step", "integer", (c) => c.notNull())
    .addColumn("name", "varchar(255)", (c) => c.notNull())
    .addColumn("at", "varchar(255)", (c) => c.notNull())
    .addPrimaryKeyConstraint(`${STEP_TABLE}_pk`, ["migration", "step"])
    .modifyEnd(sql`engine = InnoDB default charset = utf8mb4 collate = utf8mb4_bin`)
    .execute();
}

/** How {@link migrate} reports. */
export interface MigrateOptions {
  /**
   * Told when a migration left part-way by an earlier start (MySQL) is resumed. Default: none.
   */
  notice?: ((message: string) => void) | undefined;
  /** Migrate up to this migration (its name) and no later. Default: every migration. */
  until?: string | undefined;
}

/**
 * Brings the schema up to date (or up to `options.until`); throws with the failing migration's error, naming the step
 * that failed and (on MySQL, where DDL is not transactional) which steps were applied.
 *
 * Kysely's migration lock serializes nodes that start together on PostgreSQL and MySQL, but
 * SQLite has no such lock across processes, and creating Kysely's own bookkeeping tables can
 * race: two processes migrating a new database at once can collide ("table already exists",
 * "database is locked"). The loser's transaction rolls back and it retries, finding the schema
 * done.
 */
export async function migrate(
  db: Kysely<Tables>,
  dialect: DialectName,
  options: MigrateOptions = {},
): Promise<void> {
  let notice = options.notice ?? (() => {});
  const all = migrations(dialect);
  const provider: MigrationProvider = {
    getMigrations: () =>
      Promise.resolve(
        Object.fromEntries(
          Object.entries(all).map(([name, steps]) => [
            name,
            toMigration(name, steps, dialect, (m) => notice(m)),
          ]),
        ),
      ),
  };
  // Migrations are numbered by the order they were planned, not the order they ship in: a
  // database may have run 0006 before 0004 exists (one built from a branch, or a test that
  // re-runs an earlier migration). Each migration is independent of those numbered after it,
  // so the ones missing run, whatever their place.
  const migrator = new Migrator({ db, provider, allowUnorderedMigrations: true });
  for (let attempt = 1; ; attempt++) {
    let error: unknown;
    try {
      if (dialect === "mysql") await ensureStepTable(db);
      ({ error } = await (options.until === undefined
        ? migrator.migrateToLatest()
        : migrator.migrateTo(options.until)));
    } catch (err) {
      error = err;
    }
    if (!error) return;
    // Said once: a retry resuming what this start's own first attempt left is no news.
    notice = () => {};
    if (attempt < 5) {
      await new Promise((r) => setTimeout(r, 100 * attempt));
      continue;
    }
    throw migrationError(error, dialect);
  }
}

function migrationError(error: unknown, dialect: DialectName): Error {
  if (error instanceof StepError) {
    const applied =
      dialect === "mysql"
        ? error.step === 1
          ? "nothing of it was applied"
          : `MySQL commits each step on its own: ${stepsBefore(error.step)} applied, the rest not; every step can run again, so the next start resumes at step ${error.step}`
        : "it ran in one transaction, so nothing of it was applied";
    return new Error(
      `database migration ${error.migration} failed at ${error.message}; ${applied}`,
      { cause: error.cause },
    );
  }
  return new Error(
    `database migration failed: ${error instanceof Error ? error.message : String(error)}`,
    { cause: error },
  );
}
