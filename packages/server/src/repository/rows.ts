/**
 * Reading stored rows back. Nothing read from the database is trusted: each row is checked
 * against what the writes store (column types, enums, the JSON columns' contents), and a row
 * that does not hold raises a {@link CorruptRecordError} naming its table, its record and the
 * field at fault — never a bare `Error`, never a silently wrong value.
 *
 * The checks are of shape, not of policy semantics: a stored policy that no longer passes
 * `definePolicy` (after a library upgrade, say) is still readable, so that it can be shown and
 * fixed; the registry keeps its last good version in force meanwhile.
 */
import { ALGORITHMS, CALENDARS, type Duration, type RuleInput, type ValidationIssue } from "sluice";
import { z } from "zod";
import { ApiError, zodIssues } from "../errors.js";
import type { Tables } from "../db/schema.js";
import { ROLES } from "@sluice/api";

/** A stored row that does not hold what the service writes (`error.code` `corrupt_record`, 500). */
export class CorruptRecordError extends ApiError {
  /** The table holding the row. */
  readonly table: keyof Tables;
  /** The row's key columns and their values, e.g. `{ name: "api" }`. */
  readonly key: Readonly<Record<string, unknown>>;
  /** Every field at fault, with its path inside the row. */
  readonly problems: readonly ValidationIssue[];

  constructor(
    table: keyof Tables,
    key: Readonly<Record<string, unknown>>,
    problems: readonly ValidationIssue[],
  ) {
    const record = Object.entries(key)
      .map(([k, v]) => `${k} ${JSON.stringify(v)}`)
      .join(", ");
    const detail = problems.map((p) => (p.path ? `${p.path}: ${p.message}` : p.message)).join("; ");
    super(
      "corrupt_record",
      `corrupt record in the database: table "${table}", ${record}: ${detail}`,
    );
    this.name = "CorruptRecordError";
    this.table = table;
    this.key = key;
    this.problems = problems;
  }
}

/**
 * Checks `row` of `table` (identified by its `key` columns in messages) with `schema` and
 * returns the parsed value, or throws a {@link CorruptRecordError}.
 */
export function readRow<S extends z.ZodType>(
  table: keyof Tables,
  key: Readonly<Record<string, unknown>>,
  schema: S,
  row: unknown,
): z.output<S> {
  const r = schema.safeParse(row);
  if (!r.success) throw new CorruptRecordError(table, key, zodIssues(r.error));
  return r.data;
}

/**
 * Maps rows one by one, setting the corrupt ones aside instead of throwing: for the snapshot a
 * node loads, where one bad row must not hold back every other change.
 */
export function readEach<R, T>(
  rows: readonly R[],
  map: (row: R) => T,
): { records: T[]; corrupt: CorruptRecordError[] } {
  const records: T[] = [];
  const corrupt: CorruptRecordError[] = [];
  for (const row of rows) {
    try {
      records.push(map(row));
    } catch (err) {
      if (!(err instanceof CorruptRecordError)) throw err;
      corrupt.push(err);
    }
  }
  return { records, corrupt };
}

/** A JSON text column whose parsed value must match `schema`. */
export function jsonColumn<S extends z.ZodType>(schema: S) {
  return z
    .string({ error: "must be JSON text" })
    .transform((text, ctx): unknown => {
      try {
        return JSON.parse(text);
      } catch (err) {
        ctx.addIssue({ code: "custom", message: `is not JSON (${(err as Error).message})` });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

/** A boolean stored as the integer 0 or 1. */
export const flagColumn = z
  .union([z.literal(0), z.literal(1)], { error: "must be 0 or 1" })
  .transform((v) => v === 1);

/** An integer column (PostgreSQL's `bigint` arrives as a decimal string). */
export const intColumn = z
  .union([z.number().int(), z.string().regex(/^-?\d+$/)], { error: "must be an integer" })
  .transform(Number);

/** Text columns. */
export const text = z.string({ error: "must be text" });

/**
 * A stored duration. Its value (e.g. that `"5 fortnights"` is not one) is checked by
 * `definePolicy` when the registry loads the policy, as explained above.
 */
const duration = z
  .union([z.number(), z.string()], { error: "must be a number or a duration string" })
  .transform((v) => v as Duration);

/** A stored rule. */
export const ruleShape = z
  .strictObject({
    limit: z.number({ error: "must be a number" }),
    period: duration.optional(),
    burst: z.number({ error: "must be a number" }).optional(),
    calendar: z.enum(CALENDARS, { error: `must be one of ${CALENDARS.join(", ")}` }).optional(),
    timeZone: text.optional(),
    anchor: z.union([z.number(), z.string()], { error: "must be a number or text" }).optional(),
  })
  // A period rule or a calendar rule: which one, and their values, `definePolicy` checks.
  .transform((r) => r as RuleInput);

/** The settings of a policy beside its rules (the `options` column): these keys and no others. */
export const policyOptionsShape = z.strictObject({
  blockDuration: duration.optional(),
  onStoreError: z.enum(["allow", "deny", "insurance"]).optional(),
  insuranceInstances: z.number().optional(),
});

/** A list of app names. */
export const appListShape = z.array(z.string({ error: "must be an app name" }), {
  error: "must be a list of app names",
});

/** A whole policy document, as the `spec` column of documents, versions and drafts holds it. */
export const policyDocumentShape = z.strictObject({
  name: text,
  description: text.optional(),
  algorithm: z.enum(ALGORITHMS).optional(),
  rules: z.array(ruleShape, { error: "must be a list of rules" }).min(1, {
    error: "must hold at least one rule",
  }),
  ...policyOptionsShape.shape,
  shadow: z.boolean().optional(),
  resetOnBlock: z.boolean().optional(),
  windowStart: z.enum(["aligned", "first-request"]).optional(),
  refill: z.enum(["continuous", "interval"]).optional(),
  lease: z
    .union([
      z.boolean(),
      z.strictObject({
        maxShare: z.number().optional(),
        ttl: duration.optional(),
        hotAfter: z.number().optional(),
      }),
    ])
    .optional(),
  adaptive: z
    .strictObject({
      algorithm: z.enum(["gradient2", "vegas", "aimd"]).optional(),
      min: z.number().optional(),
      max: z.number().optional(),
      initial: z.number().optional(),
      reserve: z.number().optional(),
    })
    .optional(),
  apps: appListShape,
  enabled: z.boolean(),
});

/** Enums the rows hold. */
export const algorithmColumn = z.enum(ALGORITHMS);
export const roleColumn = z.enum(ROLES);
