/**
 * The policy store: policies with every version, drafts, apps, users, sessions and the audit
 * log, over SQLite or PostgreSQL through Kysely. Every write is one transaction that also
 * appends to the audit log and bumps the `revision` counter other nodes poll; a rejected
 * change throws before anything is written, and a failure rolls the whole change back.
 */
import type { Kysely, Transaction } from "kysely";
import { ApiError, invalid } from "./errors.js";
import type { Database } from "./db/connect.js";
import type { Tables } from "./db/schema.js";
import { type PolicyDocument, type Role, sameDocument } from "./model.js";
import {
  type IssuedSecret,
  hashPassword,
  issueSecret,
  secretId,
  secretMatches,
  verifyPassword,
} from "./secrets.js";

type Db = Kysely<Tables>;
type Tx = Transaction<Tables>;

/** A policy as stored, with its bookkeeping. */
export interface PolicyRecord {
  readonly doc: PolicyDocument;
  readonly version: number;
  readonly createdBy: string;
  readonly updatedBy: string;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** One kept version of a policy. */
export interface PolicyVersionRecord {
  readonly name: string;
  readonly version: number;
  readonly doc: PolicyDocument;
  readonly action: string;
  readonly createdBy: string;
  readonly createdAt: string;
}

/** A draft, evaluated in shadow beside the enforced version until promoted or discarded. */
export interface DraftRecord {
  readonly id: number;
  readonly name: string;
  readonly doc: PolicyDocument;
  readonly baseVersion: number;
  readonly createdBy: string;
  readonly createdAt: string;
}

/** What a draft would have done on live traffic. */
export interface DraftStats {
  /** Requests evaluated against the draft. */
  evaluated: number;
  /** Requests the draft would have denied. */
  wouldDeny: number;
  /** Of those, how many the enforced version allowed (the change in behaviour). */
  wouldDenyNewly: number;
  /** Requests the draft would have allowed but the enforced version denied. */
  wouldAllowNewly: number;
}

/** An app (its key is never returned, only its public id). */
export interface AppRecord {
  readonly name: string;
  readonly description: string;
  readonly keyId: string;
  readonly createdBy: string;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** What the decision path needs of an app: its name and the hash of its key. */
export interface AppKey {
  readonly name: string;
  readonly keyId: string;
  readonly keyHash: string;
}

/** An admin user (never with its password hash). */
export interface UserRecord {
  readonly username: string;
  readonly role: Role;
  /** For owners: the apps they own. */
  readonly apps: readonly string[];
  readonly createdAt: string;
  readonly updatedAt: string;
}

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

/** Everything a node needs to answer decisions, read in one go. */
export interface Snapshot {
  readonly revision: number;
  readonly policies: readonly PolicyRecord[];
  readonly drafts: readonly DraftRecord[];
  readonly apps: readonly AppKey[];
}

/** One change of an import: what happens to each policy. */
export interface ImportPlan {
  readonly create: string[];
  readonly update: string[];
  readonly unchanged: string[];
  readonly delete: string[];
}

const now = () => new Date().toISOString();
const json = (v: unknown) => JSON.stringify(v);

function parseJson<T>(text: string, what: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new Error(`corrupt ${what} in the database: ${(err as Error).message}`, { cause: err });
  }
}

/** Data access for the service. Construct with an open {@link Database}. */
export class Repository {
  private readonly db: Db;

  constructor(readonly database: Database) {
    this.db = database.db;
  }

  // ---------------------------------------------------------------- reads

  /** The change counter other nodes poll. */
  async revision(): Promise<number> {
    const row = await this.db
      .selectFrom("meta")
      .select("value")
      .where("key", "=", "revision")
      .executeTakeFirst();
    return Number(row?.value ?? 0);
  }

  /** Policies, drafts and app keys, consistent with one revision. */
  async snapshot(): Promise<Snapshot> {
    return this.db.transaction().execute(async (trx) => {
      const rev = await trx
        .selectFrom("meta")
        .select("value")
        .where("key", "=", "revision")
        .executeTakeFirst();
      const policies = await trx.selectFrom("policies").selectAll().orderBy("name").execute();
      const drafts = await trx.selectFrom("policy_drafts").selectAll().execute();
      const apps = await trx.selectFrom("apps").select(["name", "key_id", "key_hash"]).execute();
      return {
        revision: Number(rev?.value ?? 0),
        policies: policies.map(toPolicyRecord),
        drafts: drafts.map(toDraftRecord),
        apps: apps.map((a) => ({ name: a.name, keyId: a.key_id, keyHash: a.key_hash })),
      };
    });
  }

  /** Every policy, by name. */
  async listPolicies(): Promise<PolicyRecord[]> {
    const rows = await this.db.selectFrom("policies").selectAll().orderBy("name").execute();
    return rows.map(toPolicyRecord);
  }

  /** One policy, or undefined. */
  async getPolicy(name: string, db: Db | Tx = this.db): Promise<PolicyRecord | undefined> {
    const row = await db
      .selectFrom("policies")
      .selectAll()
      .where("name", "=", name)
      .executeTakeFirst();
    return row && toPolicyRecord(row);
  }

  /** Every kept version of a policy, newest first. */
  async listVersions(name: string): Promise<PolicyVersionRecord[]> {
    const rows = await this.db
      .selectFrom("policy_versions")
      .selectAll()
      .where("policy_name", "=", name)
      .orderBy("version", "desc")
      .execute();
    return rows.map(toVersionRecord);
  }

  /** One kept version, or undefined. */
  async getVersion(name: string, version: number): Promise<PolicyVersionRecord | undefined> {
    const row = await this.db
      .selectFrom("policy_versions")
      .selectAll()
      .where("policy_name", "=", name)
      .where("version", "=", version)
      .executeTakeFirst();
    return row && toVersionRecord(row);
  }

  /** The policy's draft, or undefined. */
  async getDraft(name: string, db: Db | Tx = this.db): Promise<DraftRecord | undefined> {
    const row = await db
      .selectFrom("policy_drafts")
      .selectAll()
      .where("policy_name", "=", name)
      .executeTakeFirst();
    return row && toDraftRecord(row);
  }

  /** A draft's shadow counts, summed over every node (zeros before any node reported). */
  async getDraftStats(draftId: number): Promise<DraftStats> {
    const r = await this.db
      .selectFrom("draft_stats")
      .selectAll()
      .where("draft_id", "=", draftId)
      .executeTakeFirst();
    return {
      evaluated: Number(r?.evaluated ?? 0),
      wouldDeny: Number(r?.would_deny ?? 0),
      wouldDenyNewly: Number(r?.would_deny_newly ?? 0),
      wouldAllowNewly: Number(r?.would_allow_newly ?? 0),
    };
  }

  /**
   * Adds one node's counts to a draft's totals (an upsert; it does not bump the revision, so
   * it makes no node reload).
   */
  async addDraftStats(draftId: number, d: DraftStats): Promise<void> {
    await this.db
      .insertInto("draft_stats")
      .values({
        draft_id: draftId,
        evaluated: d.evaluated,
        would_deny: d.wouldDeny,
        would_deny_newly: d.wouldDenyNewly,
        would_allow_newly: d.wouldAllowNewly,
      })
      .onConflict((oc) =>
        oc.column("draft_id").doUpdateSet((eb) => ({
          evaluated: eb("draft_stats.evaluated", "+", eb.ref("excluded.evaluated")),
          would_deny: eb("draft_stats.would_deny", "+", eb.ref("excluded.would_deny")),
          would_deny_newly: eb(
            "draft_stats.would_deny_newly",
            "+",
            eb.ref("excluded.would_deny_newly"),
          ),
          would_allow_newly: eb(
            "draft_stats.would_allow_newly",
            "+",
            eb.ref("excluded.would_allow_newly"),
          ),
        })),
      )
      .execute();
  }

  /** Every app. */
  async listApps(): Promise<AppRecord[]> {
    const rows = await this.db.selectFrom("apps").selectAll().orderBy("name").execute();
    return rows.map(toAppRecord);
  }

  /** One app, or undefined. */
  async getApp(name: string): Promise<AppRecord | undefined> {
    const row = await this.db
      .selectFrom("apps")
      .selectAll()
      .where("name", "=", name)
      .executeTakeFirst();
    return row && toAppRecord(row);
  }

  /** Every user. */
  async listUsers(): Promise<UserRecord[]> {
    const rows = await this.db.selectFrom("users").selectAll().orderBy("username").execute();
    return rows.map(toUserRecord);
  }

  /** One user, or undefined. */
  async getUser(username: string): Promise<UserRecord | undefined> {
    const row = await this.db
      .selectFrom("users")
      .selectAll()
      .where("username", "=", username)
      .executeTakeFirst();
    return row && toUserRecord(row);
  }

  /** How many admins exist. */
  async countAdmins(): Promise<number> {
    const row = await this.db
      .selectFrom("users")
      .select((eb) => eb.fn.countAll().as("n"))
      .where("role", "=", "admin")
      .executeTakeFirst();
    return Number(row?.n ?? 0);
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

  // ---------------------------------------------------------------- policy writes

  /**
   * Creates or replaces a policy with a validated document: a new version, unless the document
   * is the stored one (then nothing is written and the stored record is returned).
   * `expectVersion` (optimistic concurrency) fails with 409 when the stored version differs;
   * `mustNotExist` gives 409 when the policy exists. `check` runs inside the transaction with
   * the stored record, to refuse (throw) before anything is written.
   */
  async putPolicy(
    doc: PolicyDocument,
    actor: string,
    options: {
      expectVersion?: number | undefined;
      mustNotExist?: boolean;
      check?: (before: PolicyRecord | undefined) => void;
    } = {},
  ): Promise<PolicyRecord> {
    return this.write(async (trx) => {
      await this.checkAppsExist(trx, doc.apps, "apps");
      const before = await this.getPolicy(doc.name, trx);
      options.check?.(before);
      if (options.mustNotExist && before) {
        throw new ApiError("conflict", `policy "${doc.name}" already exists`);
      }
      if (options.expectVersion !== undefined && before?.version !== options.expectVersion) {
        throw new ApiError(
          "conflict",
          `policy "${doc.name}" is at version ${before?.version ?? "none"}, not ${options.expectVersion}: reload and retry`,
        );
      }
      if (before && sameDocument(before.doc, doc)) return before;
      return this.writePolicy(trx, doc, before, actor, before ? "update" : "create");
    });
  }

  /** Deletes a policy (its versions are kept, so it can be restored). */
  async deletePolicy(
    name: string,
    actor: string,
    check?: (before: PolicyRecord) => void,
  ): Promise<void> {
    await this.write(async (trx) => {
      const before = await this.getPolicy(name, trx);
      if (!before) throw new ApiError("policy_not_found", `policy "${name}" does not exist`);
      check?.(before);
      await trx.deleteFrom("policies").where("name", "=", name).execute();
      await this.dropDraft(trx, name);
      await this.audit(trx, actor, "policy.delete", "policy", name, {
        version: before.version,
        before: before.doc,
      });
    });
  }

  /** Makes an earlier version the enforced one again (as a new version). Works for deleted policies too. */
  async restoreVersion(
    name: string,
    version: number,
    actor: string,
    check?: (before: PolicyRecord | undefined, restored: PolicyDocument) => void,
  ): Promise<PolicyRecord> {
    return this.write(async (trx) => {
      const row = await trx
        .selectFrom("policy_versions")
        .selectAll()
        .where("policy_name", "=", name)
        .where("version", "=", version)
        .executeTakeFirst();
      if (!row) throw new ApiError("not_found", `policy "${name}" has no version ${version}`);
      const doc = toVersionRecord(row).doc;
      const before = await this.getPolicy(name, trx);
      check?.(before, doc);
      const missing = await this.missingApps(trx, doc.apps);
      if (missing.length > 0) {
        throw invalid(`Cannot restore version ${version}`, [
          { path: "apps", message: `unknown app(s): ${missing.join(", ")}` },
        ]);
      }
      return this.writePolicy(trx, doc, before, actor, "restore", { restoredFrom: version });
    });
  }

  /** Writes (replaces) the policy's draft. */
  async putDraft(
    doc: PolicyDocument,
    actor: string,
    check?: (before: PolicyRecord) => void,
  ): Promise<DraftRecord> {
    return this.write(async (trx) => {
      const live = await this.getPolicy(doc.name, trx);
      if (!live)
        throw new ApiError(
          "policy_not_found",
          `policy "${doc.name}" does not exist; create it before drafting a change`,
        );
      check?.(live);
      await this.checkAppsExist(trx, doc.apps, "apps");
      await this.dropDraft(trx, doc.name);
      await trx
        .insertInto("policy_drafts")
        .values({
          policy_name: doc.name,
          spec: json(doc),
          base_version: live.version,
          created_by: actor,
          created_at: now(),
        })
        .execute();
      await this.audit(trx, actor, "policy.draft", "policy", doc.name, {
        baseVersion: live.version,
        draft: doc,
      });
      const draft = await this.getDraft(doc.name, trx);
      return draft!;
    });
  }

  /** Discards the policy's draft. */
  async deleteDraft(
    name: string,
    actor: string,
    check?: (before: PolicyRecord) => void,
  ): Promise<void> {
    await this.write(async (trx) => {
      const live = await this.getPolicy(name, trx);
      const draft = await this.getDraft(name, trx);
      if (!live || !draft) throw new ApiError("not_found", `policy "${name}" has no draft`);
      check?.(live);
      await this.dropDraft(trx, name);
      await this.audit(trx, actor, "policy.draft.discard", "policy", name, { draftId: draft.id });
    });
  }

  /** Makes the draft the enforced version (a new version) and removes it. */
  async promoteDraft(
    name: string,
    actor: string,
    check?: (before: PolicyRecord, draft: PolicyDocument) => void,
  ): Promise<PolicyRecord> {
    return this.write(async (trx) => {
      const live = await this.getPolicy(name, trx);
      const draft = await this.getDraft(name, trx);
      if (!live || !draft) throw new ApiError("not_found", `policy "${name}" has no draft`);
      check?.(live, draft.doc);
      await this.checkAppsExist(trx, draft.doc.apps, "apps");
      await this.dropDraft(trx, name);
      return this.writePolicy(trx, draft.doc, live, actor, "promote", {
        draftId: draft.id,
        baseVersion: draft.baseVersion,
      });
    });
  }

  /** What importing `docs` would do (with `prune`, policies absent from `docs` are deleted). */
  async planImport(docs: readonly PolicyDocument[], prune: boolean): Promise<ImportPlan> {
    const current = new Map((await this.listPolicies()).map((p) => [p.doc.name, p]));
    return planFor(current, docs, prune);
  }

  /**
   * Imports validated documents in one transaction: creates, updates (only what changed) and,
   * with `prune`, deletes the rest. Any failure (an unknown app, say) writes nothing.
   */
  async importPolicies(
    docs: readonly PolicyDocument[],
    actor: string,
    options: { prune?: boolean } = {},
  ): Promise<ImportPlan> {
    return this.write(async (trx) => {
      const issues = [];
      for (const [i, d] of docs.entries()) {
        const missing = await this.missingApps(trx, d.apps);
        if (missing.length > 0)
          issues.push({
            path: `policies.${i}.apps`,
            message: `unknown app(s): ${missing.join(", ")}`,
          });
      }
      if (issues.length > 0) throw invalid("Import refused, nothing was changed", issues);
      const rows = await trx.selectFrom("policies").selectAll().execute();
      const current = new Map(rows.map((r) => [r.name, toPolicyRecord(r)]));
      const plan = planFor(current, docs, options.prune ?? false);
      for (const d of docs) {
        const before = current.get(d.name);
        if (before && sameDocument(before.doc, d)) continue;
        await this.writePolicy(trx, d, before, actor, "import");
      }
      for (const name of plan.delete) {
        await trx.deleteFrom("policies").where("name", "=", name).execute();
        await this.dropDraft(trx, name);
        await this.audit(trx, actor, "policy.delete", "policy", name, {
          via: "import",
          version: current.get(name)?.version,
        });
      }
      return plan;
    });
  }

  // ---------------------------------------------------------------- apps

  /** Creates an app; the returned key is shown once and never stored. */
  async createApp(
    name: string,
    description: string,
    actor: string,
  ): Promise<{ app: AppRecord; apiKey: string }> {
    const key = issueSecret("sk");
    const app = await this.write(async (trx) => {
      const exists = await trx
        .selectFrom("apps")
        .select("name")
        .where("name", "=", name)
        .executeTakeFirst();
      if (exists) throw new ApiError("conflict", `app "${name}" already exists`);
      const at = now();
      await trx
        .insertInto("apps")
        .values({
          name,
          description,
          key_id: key.id,
          key_hash: key.hash,
          created_by: actor,
          created_at: at,
          updated_at: at,
        })
        .execute();
      await this.audit(trx, actor, "app.create", "app", name, { keyId: key.id });
      return { name, description, keyId: key.id, createdBy: actor, createdAt: at, updatedAt: at };
    });
    return { app, apiKey: key.secret };
  }

  /** Replaces an app's key (the old one stops working on every node within the poll interval). */
  async rotateAppKey(name: string, actor: string): Promise<{ app: AppRecord; apiKey: string }> {
    const key: IssuedSecret = issueSecret("sk");
    const app = await this.write(async (trx) => {
      const row = await trx
        .selectFrom("apps")
        .selectAll()
        .where("name", "=", name)
        .executeTakeFirst();
      if (!row) throw new ApiError("not_found", `app "${name}" does not exist`);
      const at = now();
      await trx
        .updateTable("apps")
        .set({ key_id: key.id, key_hash: key.hash, updated_at: at })
        .where("name", "=", name)
        .execute();
      await this.audit(trx, actor, "app.rotate-key", "app", name, {
        keyId: key.id,
        previousKeyId: row.key_id,
      });
      return { ...toAppRecord(row), keyId: key.id, updatedAt: at };
    });
    return { app, apiKey: key.secret };
  }

  /** Deletes an app; refused (409) while policies are granted to it. */
  async deleteApp(name: string, actor: string): Promise<void> {
    await this.write(async (trx) => {
      const row = await trx
        .selectFrom("apps")
        .select("name")
        .where("name", "=", name)
        .executeTakeFirst();
      if (!row) throw new ApiError("not_found", `app "${name}" does not exist`);
      const granted = (await trx.selectFrom("policies").select(["name", "apps"]).execute()).filter(
        (p) => parseJson<string[]>(p.apps, "policy apps").includes(name),
      );
      if (granted.length > 0) {
        throw new ApiError(
          "conflict",
          `app "${name}" is granted policies ${granted.map((p) => `"${p.name}"`).join(", ")}: revoke them first`,
        );
      }
      await trx.deleteFrom("apps").where("name", "=", name).execute();
      await this.audit(trx, actor, "app.delete", "app", name, {});
    });
  }

  // ---------------------------------------------------------------- users and sessions

  /** Creates a user (password hashed with scrypt). */
  async createUser(
    input: { username: string; password: string; role: Role; apps: string[] },
    actor: string,
  ): Promise<UserRecord> {
    const hash = await hashPassword(input.password);
    return this.write(async (trx) => {
      const exists = await trx
        .selectFrom("users")
        .select("username")
        .where("username", "=", input.username)
        .executeTakeFirst();
      if (exists) throw new ApiError("conflict", `user "${input.username}" already exists`);
      await this.checkAppsExist(trx, input.apps, "apps");
      const at = now();
      await trx
        .insertInto("users")
        .values({
          username: input.username,
          password_hash: hash,
          role: input.role,
          apps: json(input.apps),
          created_at: at,
          updated_at: at,
        })
        .execute();
      await this.audit(trx, actor, "user.create", "user", input.username, {
        role: input.role,
        apps: input.apps,
      });
      return {
        username: input.username,
        role: input.role,
        apps: input.apps,
        createdAt: at,
        updatedAt: at,
      };
    });
  }

  /** Changes a user's role, apps or password; their sessions end when role or password change. */
  async updateUser(
    username: string,
    change: { role?: Role | undefined; apps?: string[] | undefined; password?: string | undefined },
    actor: string,
  ): Promise<UserRecord> {
    const hash = change.password !== undefined ? await hashPassword(change.password) : undefined;
    return this.write(async (trx) => {
      const row = await trx
        .selectFrom("users")
        .selectAll()
        .where("username", "=", username)
        .executeTakeFirst();
      if (!row) throw new ApiError("not_found", `user "${username}" does not exist`);
      if (change.apps) await this.checkAppsExist(trx, change.apps, "apps");
      if (row.role === "admin" && change.role !== undefined && change.role !== "admin")
        await this.keepOneAdmin(trx);
      const at = now();
      await trx
        .updateTable("users")
        .set({
          ...(change.role !== undefined ? { role: change.role } : {}),
          ...(change.apps !== undefined ? { apps: json(change.apps) } : {}),
          ...(hash !== undefined ? { password_hash: hash } : {}),
          updated_at: at,
        })
        .where("username", "=", username)
        .execute();
      if (hash !== undefined || change.role !== undefined)
        await trx.deleteFrom("sessions").where("username", "=", username).execute();
      await this.audit(trx, actor, "user.update", "user", username, {
        ...(change.role !== undefined ? { role: change.role } : {}),
        ...(change.apps !== undefined ? { apps: change.apps } : {}),
        ...(hash !== undefined ? { password: "changed" } : {}),
      });
      const after = await trx
        .selectFrom("users")
        .selectAll()
        .where("username", "=", username)
        .executeTakeFirstOrThrow();
      return toUserRecord(after);
    });
  }

  /** Deletes a user and their sessions; the last admin cannot be deleted. */
  async deleteUser(username: string, actor: string): Promise<void> {
    await this.write(async (trx) => {
      const row = await trx
        .selectFrom("users")
        .select(["username", "role"])
        .where("username", "=", username)
        .executeTakeFirst();
      if (!row) throw new ApiError("not_found", `user "${username}" does not exist`);
      if (row.role === "admin") await this.keepOneAdmin(trx);
      await trx.deleteFrom("sessions").where("username", "=", username).execute();
      await trx.deleteFrom("users").where("username", "=", username).execute();
      await this.audit(trx, actor, "user.delete", "user", username, {});
    });
  }

  /** Checks a username and password (constant time, also for unknown users). */
  async checkPassword(username: string, password: string): Promise<UserRecord | undefined> {
    const row = await this.db
      .selectFrom("users")
      .selectAll()
      .where("username", "=", username)
      .executeTakeFirst();
    const ok = await verifyPassword(password, row?.password_hash);
    return ok && row ? toUserRecord(row) : undefined;
  }

  /** Starts a session; the token is returned once and stored hashed. */
  async createSession(
    username: string,
    ttlMs: number,
  ): Promise<{ token: string; expiresAt: string }> {
    const t = issueSecret("st");
    const at = new Date();
    const expiresAt = new Date(at.getTime() + ttlMs).toISOString();
    await this.db.transaction().execute(async (trx) => {
      await trx.deleteFrom("sessions").where("expires_at", "<", at.toISOString()).execute();
      await trx
        .insertInto("sessions")
        .values({
          id: t.id,
          token_hash: t.hash,
          username,
          created_at: at.toISOString(),
          expires_at: expiresAt,
        })
        .execute();
      await this.audit(trx, username, "session.login", "user", username, { sessionId: t.id });
    });
    return { token: t.secret, expiresAt };
  }

  /** The user behind a session token, or undefined (unknown, wrong or expired token). */
  async authenticateSession(
    token: string,
  ): Promise<{ user: UserRecord; sessionId: string } | undefined> {
    const id = secretId("st", token);
    if (!id) return undefined;
    const row = await this.db
      .selectFrom("sessions")
      .innerJoin("users", "users.username", "sessions.username")
      .select([
        "sessions.token_hash",
        "sessions.expires_at",
        "users.username",
        "users.role",
        "users.apps",
        "users.created_at",
        "users.updated_at",
        "users.password_hash",
      ])
      .where("sessions.id", "=", id)
      .executeTakeFirst();
    if (!row || !secretMatches(token, row.token_hash) || row.expires_at <= now()) return undefined;
    return { user: toUserRecord(row), sessionId: id };
  }

  /** Ends a session. */
  async deleteSession(sessionId: string, username: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx.deleteFrom("sessions").where("id", "=", sessionId).execute();
      await this.audit(trx, username, "session.logout", "user", username, { sessionId });
    });
  }

  // ---------------------------------------------------------------- internals

  /** Runs a change in a transaction that first bumps the revision (which also serializes writers). */
  private write<T>(fn: (trx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(async (trx) => {
      await trx
        .updateTable("meta")
        .set((eb) => ({ value: eb("value", "+", 1) }))
        .where("key", "=", "revision")
        .execute();
      return fn(trx);
    });
  }

  private async writePolicy(
    trx: Tx,
    doc: PolicyDocument,
    before: PolicyRecord | undefined,
    actor: string,
    action: string,
    extra: Record<string, unknown> = {},
  ): Promise<PolicyRecord> {
    const at = now();
    const last = await trx
      .selectFrom("policy_versions")
      .select((eb) => eb.fn.max("version").as("v"))
      .where("policy_name", "=", doc.name)
      .executeTakeFirst();
    const version = Number(last?.v ?? 0) + 1;
    const row = {
      name: doc.name,
      description: doc.description ?? "",
      algorithm: doc.algorithm ?? "gcra",
      rules: json(doc.rules),
      options: json({
        ...(doc.blockDuration !== undefined ? { blockDuration: doc.blockDuration } : {}),
        ...(doc.onStoreError !== undefined ? { onStoreError: doc.onStoreError } : {}),
        ...(doc.insuranceInstances !== undefined
          ? { insuranceInstances: doc.insuranceInstances }
          : {}),
      }),
      apps: json(doc.apps),
      enabled: doc.enabled ? 1 : 0,
      shadow: doc.shadow ? 1 : 0,
      updated_by: actor,
      updated_at: at,
      version,
    };
    if (before) {
      await trx.updateTable("policies").set(row).where("name", "=", doc.name).execute();
    } else {
      await trx
        .insertInto("policies")
        .values({ ...row, created_by: actor, created_at: at })
        .execute();
    }
    await trx
      .insertInto("policy_versions")
      .values({
        policy_name: doc.name,
        version,
        spec: json(doc),
        action,
        created_by: actor,
        created_at: at,
      })
      .execute();
    await this.audit(trx, actor, `policy.${action}`, "policy", doc.name, {
      version,
      ...extra,
      ...(before ? { before: before.doc } : {}),
      after: doc,
    });
    return {
      doc,
      version,
      createdBy: before?.createdBy ?? actor,
      createdAt: before?.createdAt ?? at,
      updatedBy: actor,
      updatedAt: at,
    };
  }

  /** Removes a policy's draft and its shadow counts. */
  private async dropDraft(trx: Tx, name: string): Promise<void> {
    const ids = trx.selectFrom("policy_drafts").select("id").where("policy_name", "=", name);
    await trx.deleteFrom("draft_stats").where("draft_id", "in", ids).execute();
    await trx.deleteFrom("policy_drafts").where("policy_name", "=", name).execute();
  }

  private async missingApps(trx: Tx, apps: readonly string[]): Promise<string[]> {
    if (apps.length === 0) return [];
    const rows = await trx
      .selectFrom("apps")
      .select("name")
      .where("name", "in", [...apps])
      .execute();
    const found = new Set(rows.map((r) => r.name));
    return apps.filter((a) => !found.has(a));
  }

  private async checkAppsExist(trx: Tx, apps: readonly string[], path: string): Promise<void> {
    const missing = await this.missingApps(trx, apps);
    if (missing.length > 0) {
      throw invalid(
        "Unknown app",
        missing.map((a) => ({
          path: `${path}.${apps.indexOf(a)}`,
          message: `unknown app "${a}" (create it first)`,
        })),
      );
    }
  }

  private async keepOneAdmin(trx: Tx): Promise<void> {
    const row = await trx
      .selectFrom("users")
      .select((eb) => eb.fn.countAll().as("n"))
      .where("role", "=", "admin")
      .executeTakeFirst();
    if (Number(row?.n ?? 0) <= 1)
      throw new ApiError("conflict", "the last admin cannot be removed or demoted");
  }

  private async audit(
    trx: Tx,
    actor: string,
    action: string,
    targetType: string,
    target: string,
    detail: unknown,
  ): Promise<void> {
    await trx
      .insertInto("audit")
      .values({ at: now(), actor, action, target_type: targetType, target, detail: json(detail) })
      .execute();
  }
}

function planFor(
  current: Map<string, PolicyRecord>,
  docs: readonly PolicyDocument[],
  prune: boolean,
): ImportPlan {
  const plan: ImportPlan = { create: [], update: [], unchanged: [], delete: [] };
  const names = new Set(docs.map((d) => d.name));
  for (const d of docs) {
    const before = current.get(d.name);
    if (!before) plan.create.push(d.name);
    else if (sameDocument(before.doc, d)) plan.unchanged.push(d.name);
    else plan.update.push(d.name);
  }
  if (prune) for (const name of current.keys()) if (!names.has(name)) plan.delete.push(name);
  return plan;
}

function toPolicyRecord(r: Tables["policies"]): PolicyRecord {
  const options = parseJson<Partial<PolicyDocument>>(r.options, `options of policy "${r.name}"`);
  const doc: PolicyDocument = {
    name: r.name,
    description: r.description,
    algorithm: r.algorithm as PolicyDocument["algorithm"],
    rules: parseJson<PolicyDocument["rules"]>(r.rules, `rules of policy "${r.name}"`),
    ...options,
    shadow: Boolean(Number(r.shadow)),
    apps: parseJson<string[]>(r.apps, `apps of policy "${r.name}"`),
    enabled: Boolean(Number(r.enabled)),
  };
  return {
    doc,
    version: Number(r.version),
    createdBy: r.created_by,
    updatedBy: r.updated_by,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

function toVersionRecord(r: Tables["policy_versions"]): PolicyVersionRecord {
  return {
    name: r.policy_name,
    version: Number(r.version),
    doc: parseJson<PolicyDocument>(r.spec, `version ${r.version} of policy "${r.policy_name}"`),
    action: r.action,
    createdBy: r.created_by,
    createdAt: r.created_at,
  };
}

function toDraftRecord(r: {
  id: number;
  policy_name: string;
  spec: string;
  base_version: number;
  created_by: string;
  created_at: string;
}): DraftRecord {
  return {
    id: Number(r.id),
    name: r.policy_name,
    doc: parseJson<PolicyDocument>(r.spec, `draft of policy "${r.policy_name}"`),
    baseVersion: Number(r.base_version),
    createdBy: r.created_by,
    createdAt: r.created_at,
  };
}

function toAppRecord(r: Tables["apps"]): AppRecord {
  return {
    name: r.name,
    description: r.description,
    keyId: r.key_id,
    createdBy: r.created_by,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

function toUserRecord(r: Omit<Tables["users"], "password_hash">): UserRecord {
  return {
    username: r.username,
    role: r.role as Role,
    apps: parseJson<string[]>(r.apps, `apps of user "${r.username}"`),
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}
