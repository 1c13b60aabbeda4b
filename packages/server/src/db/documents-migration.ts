/**
 * Migration 0008's data: policies and Envoy domains, each kept in tables of their own until
 * then (`policies`, `policy_versions`, `policy_drafts` and `draft_stats`; `envoy_domains`,
 * `envoy_domain_versions`, `envoy_domain_drafts` and `envoy_draft_stats`), move into the one
 * set of versioned-document tables (`documents`, `document_versions`, `document_drafts`, and
 * `draft_stats` for every kind). Every row, version, draft and draft count is kept:
 *
 * - versions, drafts and domains are copied as they are stored (their `spec` text unchanged);
 * - a policy row, whose fields were columns, becomes the document its columns say, field by
 *   field as the service read it; a row that did not hold what the service writes stays as
 *   corrupt in its new place as it was in the old (the registry keeps such a record out, and
 *   the admin API names it), never silently mended;
 * - policy drafts keep their ids (embedded clients report counts by id, and a draft's counters
 *   live under `sluice.draft.<id>`); Envoy drafts, whose ids were counted apart, are numbered
 *   after every policy draft id ever issued, their counts with them, and the new id sequence
 *   starts past both.
 *
 * On MySQL each step commits on its own and may run again after a failure: every copy skips
 * the rows already copied.
 */
import { type Kysely, sql } from "kysely";
import type { DialectName } from "./dialect.js";

/** The tables the migration reads, as they were. */
interface LegacyPolicyRow {
  name: string;
  description: string;
  algorithm: string;
  rules: string;
  options: string;
  apps: string;
  enabled: number | string;
  shadow: number | string;
  created_by: string;
  updated_by: string;
  created_at: string;
  updated_at: string;
  version: number | string;
}

/** A row of `documents`. */
interface DocumentRow {
  kind: string;
  name: string;
  spec: string;
  created_by: string;
  updated_by: string;
  created_at: string;
  updated_at: string;
  version: number;
}

interface Tables {
  policies: LegacyPolicyRow;
  documents: DocumentRow;
}

/** The option keys a policy row's `options` column held. */
const OPTION_KEYS = ["blockDuration", "onStoreError", "insuranceInstances"];

/** JSON text, or undefined when it is not JSON. */
function parsed(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

/** A 0/1 flag column as the document's boolean; anything else as it was (read back as corrupt). */
const flag = (v: number | string): unknown =>
  Number(v) === 1 ? true : Number(v) === 0 ? false : v;

/**
 * The policy document a row of the old `policies` table stood for: the fields in the order the
 * service writes them. A JSON column that is not JSON goes in as its text, which leaves the
 * document not JSON (corrupt, as the row was); an `options` column holding other keys than its
 * own goes in whole under `options`, which no policy document has (corrupt too).
 */
export function legacyPolicySpec(row: LegacyPolicyRow): string {
  const parts: string[] = [];
  const put = (key: string, text: string) => parts.push(`${JSON.stringify(key)}:${text}`);
  const value = (key: string, v: unknown) => put(key, JSON.stringify(v));
  value("name", row.name);
  value("description", row.description);
  value("algorithm", row.algorithm);
  put("rules", parsed(row.rules) ? JSON.stringify(parsed(row.rules)!.value) : row.rules);
  const options = parsed(row.options);
  const o = options?.value;
  if (typeof o === "object" && o !== null && !Array.isArray(o)) {
    const entries = Object.entries(o as Record<string, unknown>);
    for (const k of OPTION_KEYS) {
      const found = entries.find(([key]) => key === k);
      if (found && found[1] !== undefined) value(k, found[1]);
    }
    if (entries.some(([k]) => !OPTION_KEYS.includes(k))) put("options", row.options);
  } else {
    put("options", row.options);
  }
  value("shadow", flag(row.shadow));
  put("apps", parsed(row.apps) ? JSON.stringify(parsed(row.apps)!.value) : row.apps);
  value("enabled", flag(row.enabled));
  return `{${parts.join(",")}}`;
}

/** Copies every row of `policies` into `documents` (kind `policy`), 100 rows a statement. */
export async function copyPolicies(db: Kysely<unknown>, dialect: DialectName): Promise<void> {
  const k = db as unknown as Kysely<Tables>;
  const rows = await k.selectFrom("policies").selectAll().orderBy("name").execute();
  for (let i = 0; i < rows.length; i += 100) {
    const values = rows.slice(i, i + 100).map((r): DocumentRow => ({
      kind: "policy",
      name: r.name,
      spec: legacyPolicySpec(r),
      created_by: r.created_by,
      updated_by: r.updated_by,
      created_at: r.created_at,
      updated_at: r.updated_at,
      version: Number(r.version),
    }));
    const insert = k.insertInto("documents").values(values);
    if (dialect === "mysql")
      await insert.onDuplicateKeyUpdate((eb) => ({ kind: eb.ref("documents.kind") })).execute();
    else await insert.onConflict((oc) => oc.doNothing()).execute();
  }
}

/**
 * `insert into <into> (<columns>) select <select> from <from>`, skipping rows already there (a
 * MySQL step run again). `select` is raw SQL of this module, never input.
 */
export async function copyRows(
  db: Kysely<unknown>,
  dialect: DialectName,
  into: string,
  columns: readonly string[],
  select: ReturnType<typeof sql>,
  from: string,
): Promise<void> {
  const cols = sql.join(columns.map((c) => sql.ref(c)));
  // SQLite reads `on conflict` after a bare `select … from t` as a join's constraint: the
  // `where` ends the select.
  const skip =
    dialect === "mysql"
      ? sql`on duplicate key update ${sql.ref(`${into}.${columns[0]!}`)} = ${sql.ref(`${into}.${columns[0]!}`)}`
      : sql`on conflict do nothing`;
  await sql`insert into ${sql.table(into)} (${cols}) select ${select} from ${sql.table(from)} where 1 = 1 ${skip}`.execute(
    db,
  );
}

/**
 * The highest draft id a table's sequence has issued (or a count refers to): new ids, and the
 * ids given to another table's drafts, start above it.
 */
export async function draftHighWater(
  db: Kysely<unknown>,
  dialect: DialectName,
  drafts: string,
  stats: string,
): Promise<number> {
  const max = await sql<{ n: number | string | null }>`
    select max(n) as n from (
      select max(id) as n from ${sql.table(drafts)}
      union all select max(draft_id) as n from ${sql.table(stats)}
    ) as ids`.execute(db);
  let high = Number(max.rows[0]?.n ?? 0);
  if (dialect === "sqlite") {
    const seq = await sql<{ seq: number | string }>`
      select seq from sqlite_sequence where name = ${drafts}`.execute(db);
    high = Math.max(high, Number(seq.rows[0]?.seq ?? 0));
  } else if (dialect === "postgres") {
    const seq = await sql<{ n: number | string | null }>`
      select pg_sequence_last_value(cast(pg_get_serial_sequence(${drafts}, 'id') as regclass)) as n`.execute(
      db,
    );
    high = Math.max(high, Number(seq.rows[0]?.n ?? 0));
  } else {
    high = Math.max(high, (await nextAutoIncrement(db, drafts)) - 1);
  }
  return high;
}

/** The next id MySQL's counter of `table` gives (read fresh: MySQL 8 caches it otherwise). */
async function nextAutoIncrement(db: Kysely<unknown>, table: string): Promise<number> {
  // MySQL 8 caches table statistics for a day unless told not to; MariaDB has no such cache
  // (nor the variable).
  await sql`set session information_schema_stats_expiry = 0`.execute(db).catch(() => {});
  const r = await sql<{ n: number | string | null }>`
    select auto_increment as n from information_schema.tables
    where table_schema = database() and table_name = ${table}`.execute(db);
  return Number(r.rows[0]?.n ?? 1);
}

/**
 * Moves the id sequence of `document_drafts` to at least `high`, so that new drafts never take
 * an id issued before. MySQL moves its counter past the ids inserted by itself; only when ids
 * were issued past them (drafts discarded since) does it take an `alter table`.
 */
export async function raiseDraftSequence(
  db: Kysely<unknown>,
  dialect: DialectName,
  high: number,
): Promise<void> {
  if (high <= 0) return;
  if (dialect === "postgres") {
    await sql`select setval(pg_get_serial_sequence('document_drafts', 'id'), greatest(${high}, (select coalesce(max(id), 1) from document_drafts)))`.execute(
      db,
    );
  } else if (dialect === "sqlite") {
    await sql`update sqlite_sequence set seq = ${high} where name = 'document_drafts' and seq < ${high}`.execute(
      db,
    );
    await sql`insert into sqlite_sequence (name, seq) select 'document_drafts', ${high}
      where not exists (select 1 from sqlite_sequence where name = 'document_drafts')`.execute(db);
  } else if ((await nextAutoIncrement(db, "document_drafts")) <= high) {
    await sql`alter table document_drafts auto_increment = ${sql.lit(high + 1)}`.execute(db);
  }
}
