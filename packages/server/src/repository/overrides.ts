/**
 * Per-key overrides of policies: rules for one key of a policy that replace the policy's rules
 * for that key (a tenant's plan), stored in rows of their own (`policy_overrides`), never in the
 * policy's document — so that writing one of 100,000 moves that one alone: one row, one audit
 * entry, one note in `changes` (kind `policy_override`, name `<policy>/<key>`), from which every
 * node and embedded client applies that one override. A deleted override keeps its row without
 * rules, so that its revision still says when it last changed.
 */
import type { RuleInput } from "sluice";
import { ApiError } from "../errors.js";
import { CorruptRecordError } from "./rows.js";
import { type Db, type Tx, appendAudit, json, now, writeTransaction } from "./common.js";

/** One key's override as stored. */
export interface OverrideRecord {
  readonly policy: string;
  readonly key: string;
  /** The rules that replace the policy's for this key; null once deleted. */
  readonly rules: RuleInput[] | null;
  /** The revision of its last write. */
  readonly revision: number;
  readonly updatedBy: string;
  readonly updatedAt: string;
}

/** A live override (one with rules). */
export type LiveOverrideRecord = OverrideRecord & { readonly rules: RuleInput[] };

/** The name of an override in `changes` and the audit log: `<policy>/<key>` (policy names hold no `/`). */
export function overrideTarget(policy: string, key: string): string {
  return `${policy}/${key}`;
}

/** The policy and key of an {@link overrideTarget}. */
export function parseOverrideTarget(target: string): { policy: string; key: string } {
  const at = target.indexOf("/");
  return { policy: target.slice(0, at), key: target.slice(at + 1) };
}

type Row = {
  policy: unknown;
  ident: unknown;
  rules: unknown;
  revision: unknown;
  updated_by: unknown;
  updated_at: unknown;
};

/**
 * A row read back, checked by hand (a node loads 100,000 of them: no schema per row); throws
 * a {@link CorruptRecordError} naming the field at fault.
 */
function toRecord(row: Row): OverrideRecord {
  const key = { policy: row.policy, ident: row.ident };
  const fail = (path: string, message: string) =>
    new CorruptRecordError("policy_overrides", key, [{ path, message }]);
  if (typeof row.policy !== "string") throw fail("policy", "must be text");
  if (typeof row.ident !== "string") throw fail("ident", "must be text");
  const revision = Number(row.revision);
  if (!Number.isSafeInteger(revision)) throw fail("revision", "must be a whole number");
  if (typeof row.updated_by !== "string") throw fail("updated_by", "must be text");
  if (typeof row.updated_at !== "string") throw fail("updated_at", "must be text");
  let rules: RuleInput[] | null = null;
  if (row.rules !== null) {
    if (typeof row.rules !== "string") throw fail("rules", "must be JSON text");
    try {
      rules = JSON.parse(row.rules) as RuleInput[];
    } catch {
      throw fail("rules", "must be JSON text");
    }
    if (!Array.isArray(rules)) throw fail("rules", "must be a list of rules");
  }
  return {
    policy: row.policy,
    key: row.ident,
    rules,
    revision,
    updatedBy: row.updated_by,
    updatedAt: row.updated_at,
  };
}

/** Reads rows, setting the corrupt ones aside (one bad row must not hold back the others). */
function readAll(rows: readonly Row[]): {
  records: OverrideRecord[];
  corrupt: CorruptRecordError[];
} {
  const records: OverrideRecord[] = [];
  const corrupt: CorruptRecordError[] = [];
  for (const row of rows) {
    try {
      records.push(toRecord(row));
    } catch (err) {
      if (!(err instanceof CorruptRecordError)) throw err;
      corrupt.push(err);
    }
  }
  return { records, corrupt };
}

/**
 * Every override row (deleted ones too: their revisions count), or those `only` names
 * ({@link overrideTarget}s), read inside the snapshot's transaction.
 */
export async function overrideRows(
  trx: Db | Tx,
  only?: readonly string[],
): Promise<{ records: OverrideRecord[]; corrupt: CorruptRecordError[] }> {
  if (only === undefined)
    return readAll(await trx.selectFrom("policy_overrides").selectAll().execute());
  const byPolicy = new Map<string, string[]>();
  for (const target of only) {
    const { policy, key } = parseOverrideTarget(target);
    let keys = byPolicy.get(policy);
    if (keys === undefined) byPolicy.set(policy, (keys = []));
    keys.push(key);
  }
  const out: { records: OverrideRecord[]; corrupt: CorruptRecordError[] } = {
    records: [],
    corrupt: [],
  };
  for (const [policy, keys] of byPolicy) {
    const read = readAll(
      await trx
        .selectFrom("policy_overrides")
        .selectAll()
        .where("policy", "=", policy)
        .where("ident", "in", keys)
        .execute(),
    );
    out.records.push(...read.records);
    out.corrupt.push(...read.corrupt);
  }
  return out;
}

/** A page of a policy's overrides. */
export interface OverridePage {
  readonly overrides: LiveOverrideRecord[];
  /** How many overrides the policy has. */
  readonly total: number;
  /** The key to ask `after` for the next page; absent on the last page. */
  readonly next?: string;
}

/** The overrides of policies: read, listed by page, written and deleted (audited). */
export class OverrideRepository {
  constructor(private readonly db: Db) {}

  /** One key's override, or undefined when it has none. */
  async get(policy: string, key: string): Promise<LiveOverrideRecord | undefined> {
    const row = await this.db
      .selectFrom("policy_overrides")
      .selectAll()
      .where("policy", "=", policy)
      .where("ident", "=", key)
      .executeTakeFirst();
    const record = row === undefined ? undefined : toRecord(row);
    return record?.rules ? (record as LiveOverrideRecord) : undefined;
  }

  /** A page of a policy's overrides by key, after `after` (keys starting with `prefix`). */
  async list(
    policy: string,
    page: { after?: string | undefined; limit: number; prefix?: string | undefined },
  ): Promise<OverridePage> {
    let q = this.db
      .selectFrom("policy_overrides")
      .where("policy", "=", policy)
      .where("rules", "is not", null);
    if (page.prefix)
      q = q.where("ident", ">=", page.prefix).where("ident", "<", `${page.prefix}\uffff`);
    const counted = await q
      .select((eb) => eb.fn.countAll<number | string>().as("n"))
      .executeTakeFirst();
    let rows = q.selectAll();
    if (page.after !== undefined) rows = rows.where("ident", ">", page.after);
    const read = await rows
      .orderBy("ident")
      .limit(page.limit + 1)
      .execute();
    const overrides = read.slice(0, page.limit).map((r) => toRecord(r) as LiveOverrideRecord);
    const more = read.length > page.limit;
    return {
      overrides,
      total: Number(counted?.n ?? 0),
      ...(more ? { next: overrides[overrides.length - 1]!.key } : {}),
    };
  }

  /**
   * Writes `key`'s override of `policy` (checked first by `check`, inside the transaction,
   * against the policy as stored) and audits it (`policy.override.put`, before and after).
   * 404 when the policy does not exist.
   */
  async put(
    policy: string,
    key: string,
    rules: RuleInput[],
    actor: string,
    check: (trx: Tx) => Promise<void>,
  ): Promise<{ record: LiveOverrideRecord; created: boolean }> {
    return writeTransaction(this.db, async (trx) => {
      await check(trx);
      const before = await this.read(trx, policy, key);
      const at = now();
      const revision = await currentRevision(trx);
      const values = { rules: json(rules), revision, updated_by: actor, updated_at: at };
      if (before === undefined)
        await trx
          .insertInto("policy_overrides")
          .values({ policy, ident: key, ...values })
          .execute();
      else
        await trx
          .updateTable("policy_overrides")
          .set(values)
          .where("policy", "=", policy)
          .where("ident", "=", key)
          .execute();
      await appendAudit(
        trx,
        actor,
        "policy.override.put",
        "policy_override",
        overrideTarget(policy, key),
        {
          policy,
          key,
          ...(before?.rules ? { before: before.rules } : {}),
          after: rules,
        },
      );
      const record: LiveOverrideRecord = {
        policy,
        key,
        rules,
        revision,
        updatedBy: actor,
        updatedAt: at,
      };
      return { record, created: !before?.rules };
    });
  }

  /** Deletes `key`'s override of `policy` and audits it; 404 when it has none. */
  async delete(policy: string, key: string, actor: string): Promise<void> {
    await writeTransaction(this.db, async (trx) => {
      const before = await this.read(trx, policy, key);
      if (!before?.rules)
        throw new ApiError("not_found", `policy "${policy}" has no override for key "${key}"`);
      await trx
        .updateTable("policy_overrides")
        .set({
          rules: null,
          revision: await currentRevision(trx),
          updated_by: actor,
          updated_at: now(),
        })
        .where("policy", "=", policy)
        .where("ident", "=", key)
        .execute();
      await appendAudit(
        trx,
        actor,
        "policy.override.delete",
        "policy_override",
        overrideTarget(policy, key),
        {
          policy,
          key,
          before: before.rules,
        },
      );
    });
  }

  private async read(trx: Tx, policy: string, key: string): Promise<OverrideRecord | undefined> {
    const row = await trx
      .selectFrom("policy_overrides")
      .selectAll()
      .where("policy", "=", policy)
      .where("ident", "=", key)
      .executeTakeFirst();
    return row === undefined ? undefined : toRecord(row);
  }
}

/** Drops every override of a policy (with the policy itself, in its delete's transaction). */
export async function dropOverrides(trx: Tx, policy: string): Promise<void> {
  await trx.deleteFrom("policy_overrides").where("policy", "=", policy).execute();
}

/** The revision of the write transaction under way (bumped at its start). */
async function currentRevision(trx: Tx): Promise<number> {
  const row = await trx
    .selectFrom("meta")
    .select("value")
    .where("key", "=", "revision")
    .executeTakeFirst();
  return Number(row?.value ?? 0);
}
