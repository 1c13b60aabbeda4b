/**
 * Traffic history in SQL: decisions per policy, app and second (or minute), and each node's
 * heavy-hitter summaries per policy and minute. Nodes add their counts every second (one
 * multi-row upsert per table), so every node reads the same totals; a sweep drops what is past
 * its retention, so the tables stay bounded:
 *
 * | table          | rows                                                  | kept       |
 * | -------------- | ----------------------------------------------------- | ---------- |
 * | `traffic`      | per policy × app × second with decisions (`span` 1)   | 65 minutes |
 * | `traffic`      | per policy × app × minute with decisions (`span` 60)  | 25 hours   |
 * | `traffic_keys` | ≤ 3 × capacity per node × policy × minute with traffic | 65 minutes |
 *
 * A summary is kept by slot (`traffic_keys` holds one row per slot of the node's sketch, which a
 * new key takes over from the key it evicted), so it never holds more rows than the sketch has
 * slots, however many keys pass through it.
 *
 * These writes bump no revision and write no audit entry: they are observations, not changes.
 */
import { type Expression, type RawBuilder, sql } from "kysely";
import { z } from "zod";
import type { DialectName } from "../db/migrations.js";
import type { Db, Tx } from "./common.js";
import { intColumn, readRow, text } from "./rows.js";

/** Decisions of one bucket. */
export interface TrafficCounts {
  allowed: number;
  denied: number;
  /** Allowed by a shadow policy that would have denied them. */
  shadow: number;
}

/** Counts to add to one bucket of one policy and app. */
export interface TrafficRow extends TrafficCounts {
  readonly policy: string;
  readonly app: string;
  /** Bucket width in seconds: 1 or 60. */
  readonly span: 1 | 60;
  /** Bucket start, epoch seconds (a multiple of `span`). */
  readonly at: number;
}

/**
 * Which keys a heavy-hitter summary counts: every decision, the denied ones, or the shadow
 * would-denials (allowed only because of shadow mode).
 */
export type KeyKind = "requests" | "denied" | "shadow";

/** One key of one node's summary for a policy, kind and minute. */
export interface KeyRow {
  readonly policy: string;
  readonly kind: KeyKind;
  readonly node: string;
  /** The minute's start, epoch seconds. */
  readonly minute: number;
  /** The key's slot in the node's sketch (see ../traffic/sketch.ts). */
  readonly slot: number;
  readonly key: string;
  readonly hits: number;
  readonly overcount: number;
  /** The summary's floor when this row was written. */
  readonly floor: number;
}

/** How long each kind of row is kept, in seconds. */
export const TRAFFIC_RETENTION = {
  /** Per-second counts: an hour, and a margin for clocks and flushes. */
  seconds: 3600 + 300,
  /** Per-minute counts: a day, and a margin. */
  minutes: 86_400 + 3600,
  /** Heavy-hitter summaries: an hour, and a margin. */
  keys: 3600 + 300,
} as const;

/** Rows per statement (SQLite allows 32,766 parameters; these have at most 9 columns). */
const CHUNK = 500;

const zero = (): TrafficCounts => ({ allowed: 0, denied: 0, shadow: 0 });

const sumRow = z.object({
  allowed: intColumn,
  denied: intColumn,
  shadow: intColumn,
});

const keyRow = z.object({
  node: text,
  minute: intColumn,
  slot: intColumn,
  ident: text,
  hits: intColumn,
  overcount: intColumn,
  floor_hits: intColumn,
});

/** Sorted by their key columns, so concurrent writers lock rows in one order (no deadlocks). */
function byKey<T>(rows: T[], key: (r: T) => string): T[] {
  return rows.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

function chunks<T>(rows: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < rows.length; i += CHUNK) out.push(rows.slice(i, i + CHUNK));
  return out;
}

/** Traffic history; see the module comment. */
export class TrafficRepository {
  constructor(
    private readonly db: Db,
    private readonly dialect: DialectName,
  ) {}

  /** `values(col)` (MySQL's upsert) or `excluded.col` (PostgreSQL and SQLite). */
  private incoming<T = number>(column: string): RawBuilder<T> {
    return this.dialect === "mysql"
      ? sql<T>`values(${sql.ref(column)})`
      : sql<T>`${sql.ref(`excluded.${column}`)}`;
  }

  /** Adds counts to their buckets (rows must be distinct by policy, app, span, at). */
  async addCounts(rows: readonly TrafficRow[]): Promise<void> {
    const sorted = byKey([...rows], (r) => `${r.policy}\0${r.app}\0${r.span}\0${r.at}`);
    for (const chunk of chunks(sorted)) {
      const insert = this.db.insertInto("traffic").values(
        chunk.map((r) => ({
          policy: r.policy,
          app: r.app,
          span: r.span,
          at: r.at,
          allowed: r.allowed,
          denied: r.denied,
          shadow: r.shadow,
        })),
      );
      const add = (column: "allowed" | "denied" | "shadow"): Expression<number> =>
        sql<number>`${sql.ref(`traffic.${column}`)} + ${this.incoming(column)}`;
      const sums = { allowed: add("allowed"), denied: add("denied"), shadow: add("shadow") };
      if (this.dialect === "mysql") await insert.onDuplicateKeyUpdate(sums).execute();
      else
        await insert
          .onConflict((oc) => oc.columns(["policy", "app", "span", "at"]).doUpdateSet(sums))
          .execute();
    }
  }

  /**
   * Writes slots of node summaries: a slot already written for its node, minute and kind is
   * replaced, with the key that holds it now.
   */
  async putKeys(rows: readonly KeyRow[]): Promise<void> {
    const values = byKey(
      rows.map((r) => ({
        policy: r.policy,
        kind: r.kind,
        node: r.node,
        minute: r.minute,
        slot: r.slot,
        ident: r.key,
        hits: r.hits,
        overcount: r.overcount,
        floor_hits: r.floor,
      })),
      // Fixed-width slot numbers sort as numbers do.
      (r) => `${r.policy}\0${r.kind}\0${r.node}\0${r.minute}\0${String(r.slot).padStart(10, "0")}`,
    );
    const replace = {
      ident: this.incoming<string>("ident"),
      hits: this.incoming("hits"),
      overcount: this.incoming("overcount"),
      floor_hits: this.incoming("floor_hits"),
    };
    const write = async (db: Db | Tx, chunk: typeof values) => {
      const insert = db.insertInto("traffic_keys").values(chunk);
      if (this.dialect === "mysql") await insert.onDuplicateKeyUpdate(replace).execute();
      else
        await insert
          .onConflict((oc) =>
            oc.columns(["policy", "kind", "node", "minute", "slot"]).doUpdateSet(replace),
          )
          .execute();
    };
    const parts = chunks(values);
    if (parts.length === 1) await write(this.db, parts[0]!);
    // One transaction: a reader never sees a key moved to a new slot beside its old one while
    // the slot it left still holds it, nor a newcomer's slot not yet written.
    else if (parts.length > 1)
      await this.db.transaction().execute(async (trx) => {
        for (const chunk of parts) await write(trx, chunk);
      });
  }

  /** Deletes what is past its retention ({@link TRAFFIC_RETENTION}); `nowSec` is epoch seconds. */
  async sweep(nowSec: number): Promise<void> {
    await this.db
      .deleteFrom("traffic")
      .where("span", "=", 1)
      .where("at", "<", nowSec - TRAFFIC_RETENTION.seconds)
      .execute();
    await this.db
      .deleteFrom("traffic")
      .where("span", "=", 60)
      .where("at", "<", nowSec - TRAFFIC_RETENTION.minutes)
      .execute();
    await this.db
      .deleteFrom("traffic_keys")
      .where("minute", "<", nowSec - TRAFFIC_RETENTION.keys)
      .execute();
  }

  /**
   * Counts in buckets of `stepSec` (a multiple of `span`) over [fromSec, toSec), summed over
   * nodes and — unless `app` is given — apps, and grouped by `by` (`policy`, `app`, or nothing).
   * Keyed by the group (`""` when ungrouped) and the bucket's start.
   */
  async buckets(q: {
    span: 1 | 60;
    stepSec: number;
    fromSec: number;
    toSec: number;
    policy?: string | undefined;
    app?: string | undefined;
    by?: "policy" | "app" | undefined;
  }): Promise<Map<string, Map<number, TrafficCounts>>> {
    if (!Number.isInteger(q.stepSec) || q.stepSec < q.span || q.stepSec % q.span !== 0)
      throw new RangeError(`stepSec must be a multiple of ${q.span} (got ${q.stepSec})`);
    // The step is a literal (an integer checked above), so the select and the group by hold the
    // same expression on PostgreSQL, which compares parameters by position.
    const step = sql.lit(q.stepSec);
    const bucket = sql<number>`(${sql.ref("at")} - (${sql.ref("at")} % ${step}))`;
    let query = this.db
      .selectFrom("traffic")
      .select((eb) => [
        bucket.as("b"),
        eb.fn.sum<number>("allowed").as("allowed"),
        eb.fn.sum<number>("denied").as("denied"),
        eb.fn.sum<number>("shadow").as("shadow"),
      ])
      .where("span", "=", q.span)
      .where("at", ">=", q.fromSec)
      .where("at", "<", q.toSec);
    if (q.policy !== undefined) query = query.where("policy", "=", q.policy);
    if (q.app !== undefined) query = query.where("app", "=", q.app);
    const grouped =
      q.by === undefined
        ? query.select(sql<string>`''`.as("g")).groupBy(bucket)
        : query.select(sql<string>`${sql.ref(q.by)}`.as("g")).groupBy([bucket, sql.ref(q.by)]);
    const rows = await grouped.execute();
    const out = new Map<string, Map<number, TrafficCounts>>();
    for (const row of rows) {
      const r = readRow(
        "traffic",
        { bucket: row.b },
        sumRow.extend({ b: intColumn, g: text }),
        row,
      );
      let m = out.get(r.g);
      if (!m) out.set(r.g, (m = new Map()));
      m.set(r.b, { allowed: r.allowed, denied: r.denied, shadow: r.shadow });
    }
    return out;
  }

  /** Totals over [fromSec, toSec) per policy (span-1 rows). */
  async totalsBy(
    by: "policy" | "app",
    fromSec: number,
    toSec: number,
    policy?: string,
  ): Promise<Map<string, TrafficCounts>> {
    const span = toSec - fromSec;
    const grouped = await this.buckets({
      span: 1,
      stepSec: Math.max(1, span),
      fromSec,
      toSec,
      policy,
      by,
    });
    const out = new Map<string, TrafficCounts>();
    for (const [g, m] of grouped) {
      const t = zero();
      for (const c of m.values()) {
        t.allowed += c.allowed;
        t.denied += c.denied;
        t.shadow += c.shadow;
      }
      out.set(g, t);
    }
    return out;
  }

  /** Every node's summary rows of one policy and kind from `fromMinute` on. */
  async keyRows(policy: string, kind: KeyKind, fromMinute: number): Promise<KeyRow[]> {
    const rows = await this.db
      .selectFrom("traffic_keys")
      .select(["node", "minute", "slot", "ident", "hits", "overcount", "floor_hits"])
      .where("policy", "=", policy)
      .where("kind", "=", kind)
      .where("minute", ">=", fromMinute)
      .execute();
    return rows.map((row) => {
      const r = readRow("traffic_keys", { policy, kind, node: row.node }, keyRow, row);
      return {
        policy,
        kind,
        node: r.node,
        minute: r.minute,
        slot: r.slot,
        key: r.ident,
        hits: r.hits,
        overcount: r.overcount,
        floor: r.floor_hits,
      };
    });
  }
}
