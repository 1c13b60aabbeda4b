/**
 * Who may do what: apps (the callers of the decision API, with their hashed API keys), admin
 * users (roles, owned apps, scrypt password hashes) and their sessions (hashed bearer tokens).
 * Secrets are shown once when issued and stored only as hashes (see ../secrets.ts).
 */
import { z } from "zod";
import { ApiError, invalid } from "../errors.js";
import type { Tables } from "../db/schema.js";
import type { Role } from "@sluice/api";
import {
  type IssuedSecret,
  SCRYPT_PARAMS,
  type ScryptParams,
  hashPassword,
  issueSecret,
  needsRehash,
  secretId,
  secretMatches,
  verifyPassword,
} from "../secrets.js";
import { type Db, type Tx, appendAudit, json, now, writeTransaction } from "./common.js";
import { checkAppsExist, policiesGrantedTo } from "./grants.js";
import {
  type CorruptRecordError,
  appListShape,
  jsonColumn,
  readEach,
  readRow,
  roleColumn,
  text,
} from "./rows.js";

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

/**
 * Every app's key, or those of the apps `only` names, for the decision path (read inside the
 * snapshot's transaction); corrupt rows are set aside in `corrupt` rather than thrown.
 */
export async function appKeys(
  trx: Db | Tx,
  only?: readonly string[],
): Promise<{ apps: AppKey[]; corrupt: CorruptRecordError[] }> {
  if (only?.length === 0) return { apps: [], corrupt: [] };
  let query = trx.selectFrom("apps").select(["name", "key_id", "key_hash"]);
  if (only) query = query.where("name", "in", only);
  const rows = await query.execute();
  const { records, corrupt } = readEach(rows, toAppKey);
  return { apps: records, corrupt };
}

/** Apps, users and sessions. */
export class IdentityRepository {
  /**
   * @param scrypt - the cost of new password hashes (default {@link SCRYPT_PARAMS}); stored
   *   hashes made with less are replaced at the next successful sign-in.
   */
  constructor(
    private readonly db: Db,
    private readonly scrypt: ScryptParams = SCRYPT_PARAMS,
  ) {}

  // ---------------------------------------------------------------- apps

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

  /** Creates an app; the returned key is shown once and never stored. */
  async createApp(
    name: string,
    description: string,
    actor: string,
  ): Promise<{ app: AppRecord; apiKey: string }> {
    const key = issueSecret("sk");
    const app = await writeTransaction(this.db, async (trx) => {
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
      await appendAudit(trx, actor, "app.create", "app", name, {
        after: { description, keyId: key.id },
      });
      return { name, description, keyId: key.id, createdBy: actor, createdAt: at, updatedAt: at };
    });
    return { app, apiKey: key.secret };
  }

  /** Replaces an app's key (the old one stops working on every node within the poll interval). */
  async rotateAppKey(name: string, actor: string): Promise<{ app: AppRecord; apiKey: string }> {
    const key: IssuedSecret = issueSecret("sk");
    const app = await writeTransaction(this.db, async (trx) => {
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
      await appendAudit(trx, actor, "app.rotate-key", "app", name, {
        before: { keyId: row.key_id },
        after: { keyId: key.id },
      });
      return { ...toAppRecord(row), keyId: key.id, updatedAt: at };
    });
    return { app, apiKey: key.secret };
  }

  /** Deletes an app; refused (409) while policies are granted to it. */
  async deleteApp(name: string, actor: string): Promise<void> {
    await writeTransaction(this.db, async (trx) => {
      const row = await trx
        .selectFrom("apps")
        .select("name")
        .where("name", "=", name)
        .executeTakeFirst();
      if (!row) throw new ApiError("not_found", `app "${name}" does not exist`);
      const granted = await policiesGrantedTo(trx, name);
      if (granted.length > 0) {
        throw new ApiError(
          "conflict",
          `app "${name}" is granted policies ${granted.map((p) => `"${p}"`).join(", ")}: revoke them first`,
        );
      }
      const gone = await trx
        .selectFrom("apps")
        .selectAll()
        .where("name", "=", name)
        .executeTakeFirstOrThrow();
      await trx.deleteFrom("apps").where("name", "=", name).execute();
      await appendAudit(trx, actor, "app.delete", "app", name, {
        before: { description: gone.description, keyId: gone.key_id },
      });
    });
  }

  // ---------------------------------------------------------------- users

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

  /** Creates a user (password hashed with scrypt). */
  async createUser(
    input: { username: string; password: string; role: Role; apps: string[] },
    actor: string,
  ): Promise<UserRecord> {
    checkOwnership(input.role, input.apps);
    const hash = await hashPassword(input.password, this.scrypt);
    return writeTransaction(this.db, async (trx) => {
      const exists = await trx
        .selectFrom("users")
        .select("username")
        .where("username", "=", input.username)
        .executeTakeFirst();
      if (exists) throw new ApiError("conflict", `user "${input.username}" already exists`);
      await checkAppsExist(trx, input.apps, "apps");
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
      await appendAudit(trx, actor, "user.create", "user", input.username, {
        after: { role: input.role, apps: input.apps },
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

  /**
   * Creates the first admin (the setup of a new installation); refused (409) when any admin
   * exists, checked in the transaction that writes it, so two setups racing make one admin.
   */
  async createFirstAdmin(username: string, password: string): Promise<UserRecord> {
    const hash = await hashPassword(password, this.scrypt);
    return writeTransaction(this.db, async (trx) => {
      const admins = await trx
        .selectFrom("users")
        .select((eb) => eb.fn.countAll().as("n"))
        .where("role", "=", "admin")
        .executeTakeFirst();
      if (Number(admins?.n ?? 0) > 0)
        throw new ApiError("conflict", "an admin already exists: sign in instead");
      const exists = await trx
        .selectFrom("users")
        .select("username")
        .where("username", "=", username)
        .executeTakeFirst();
      if (exists)
        throw invalid("Invalid user", [
          { path: "username", message: `user "${username}" already exists; choose another name` },
        ]);
      const at = now();
      await trx
        .insertInto("users")
        .values({
          username,
          password_hash: hash,
          role: "admin",
          apps: "[]",
          created_at: at,
          updated_at: at,
        })
        .execute();
      await appendAudit(trx, username, "user.create", "user", username, {
        via: "setup",
        after: { role: "admin", apps: [] },
      });
      return { username, role: "admin", apps: [], createdAt: at, updatedAt: at };
    });
  }

  /**
   * Changes a user's role, apps or password; their sessions end when role or password change
   * (all but `keepSession`, the session of a user changing their own password).
   */
  async updateUser(
    username: string,
    change: { role?: Role | undefined; apps?: string[] | undefined; password?: string | undefined },
    actor: string,
    options: { keepSession?: string; via?: string } = {},
  ): Promise<UserRecord> {
    const hash =
      change.password !== undefined ? await hashPassword(change.password, this.scrypt) : undefined;
    return writeTransaction(this.db, async (trx) => {
      const row = await trx
        .selectFrom("users")
        .selectAll()
        .where("username", "=", username)
        .executeTakeFirst();
      if (!row) throw new ApiError("not_found", `user "${username}" does not exist`);
      const before = toUserRecord(row);
      checkOwnership(change.role ?? before.role, change.apps ?? before.apps, change.role);
      if (change.apps) await checkAppsExist(trx, change.apps, "apps");
      if (row.role === "admin" && change.role !== undefined && change.role !== "admin")
        await keepOneAdmin(trx);
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
      if (hash !== undefined || change.role !== undefined) {
        let ended = trx.deleteFrom("sessions").where("username", "=", username);
        if (options.keepSession !== undefined) ended = ended.where("id", "<>", options.keepSession);
        await ended.execute();
      }
      // What changed, both sides: role and apps as they were and are (never a password).
      await appendAudit(trx, actor, "user.update", "user", username, {
        ...(options.via !== undefined ? { via: options.via } : {}),
        ...(hash !== undefined ? { password: "changed" } : {}),
        before: { role: before.role, apps: before.apps },
        after: { role: change.role ?? before.role, apps: change.apps ?? before.apps },
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
    await writeTransaction(this.db, async (trx) => {
      const row = await trx
        .selectFrom("users")
        .select(["username", "role"])
        .where("username", "=", username)
        .executeTakeFirst();
      if (!row) throw new ApiError("not_found", `user "${username}" does not exist`);
      if (row.role === "admin") await keepOneAdmin(trx);
      const before = await trx
        .selectFrom("users")
        .selectAll()
        .where("username", "=", username)
        .executeTakeFirstOrThrow();
      const b = toUserRecord(before);
      await trx.deleteFrom("sessions").where("username", "=", username).execute();
      await trx.deleteFrom("users").where("username", "=", username).execute();
      await appendAudit(trx, actor, "user.delete", "user", username, {
        before: { role: b.role, apps: b.apps },
      });
    });
  }

  /**
   * Checks a username and password (constant time, also for unknown users). After a success, a
   * hash made with less work than the current parameters is replaced by a new one (unless the
   * password changed meanwhile); a failed rewrite does not fail the sign-in.
   */
  async checkPassword(username: string, password: string): Promise<UserRecord | undefined> {
    const row = await this.db
      .selectFrom("users")
      .selectAll()
      .where("username", "=", username)
      .executeTakeFirst();
    const hash = row && readRow("users", { username }, passwordRow, row).password_hash;
    const ok = await verifyPassword(password, hash, this.scrypt);
    if (!ok || !row || hash === undefined) return undefined;
    if (needsRehash(hash, this.scrypt)) await this.rehash(username, hash, password);
    return toUserRecord(row);
  }

  /** Replaces `oldHash` with one at the current parameters, if it is still the stored one. */
  private async rehash(username: string, oldHash: string, password: string): Promise<void> {
    try {
      const hash = await hashPassword(password, this.scrypt);
      await this.db
        .updateTable("users")
        .set({ password_hash: hash })
        .where("username", "=", username)
        .where("password_hash", "=", oldHash)
        .execute();
    } catch {
      // The old hash still works; the next sign-in tries again.
    }
  }

  // ---------------------------------------------------------------- sessions

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
      await appendAudit(trx, username, "session.login", "user", username, { sessionId: t.id });
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
      ])
      .where("sessions.id", "=", id)
      .executeTakeFirst();
    if (!row) return undefined;
    const r = readRow("sessions", { id }, sessionRow, row);
    if (!secretMatches(token, r.token_hash) || r.expires_at <= now()) return undefined;
    return { user: toUserRecord(row), sessionId: id };
  }

  /** Ends a session. */
  async deleteSession(sessionId: string, username: string): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      await trx.deleteFrom("sessions").where("id", "=", sessionId).execute();
      await appendAudit(trx, username, "session.logout", "user", username, { sessionId });
    });
  }
}

/**
 * Only owners own apps: refuses (400 naming `apps`) a viewer or admin that would own any, for
 * every way a user is written (admin API, CLI). `newRole` is the role being set, if any.
 */
function checkOwnership(role: Role, apps: readonly string[], newRole?: Role): void {
  if (role === "owner" || apps.length === 0) return;
  throw invalid("Invalid user", [
    {
      path: "apps",
      message:
        newRole !== undefined
          ? `only owners own apps: a ${role} must own none (send "apps": [] with "role": "${role}")`
          : `only owners own apps: a ${role} must own none`,
    },
  ]);
}

async function keepOneAdmin(trx: Tx): Promise<void> {
  const row = await trx
    .selectFrom("users")
    .select((eb) => eb.fn.countAll().as("n"))
    .where("role", "=", "admin")
    .executeTakeFirst();
  if (Number(row?.n ?? 0) <= 1)
    throw new ApiError("conflict", "the last admin cannot be removed or demoted");
}

const appRow = z.object({
  name: text,
  description: text,
  key_id: text.regex(/^[0-9a-f]{16}$/, { error: "must be a key id (16 hex digits)" }),
  key_hash: text.regex(/^[0-9a-f]{64}$/, { error: "must be a SHA-256 (hex)" }),
  created_by: text,
  created_at: text,
  updated_at: text,
});

function toAppRecord(row: Tables["apps"]): AppRecord {
  const r = readRow("apps", { name: row.name }, appRow, row);
  return {
    name: r.name,
    description: r.description,
    keyId: r.key_id,
    createdBy: r.created_by,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

const appKeyRow = appRow.pick({ name: true, key_id: true, key_hash: true });

function toAppKey(row: Pick<Tables["apps"], "name" | "key_id" | "key_hash">): AppKey {
  const r = readRow("apps", { name: row.name }, appKeyRow, row);
  return { name: r.name, keyId: r.key_id, keyHash: r.key_hash };
}

const userRow = z.object({
  username: text,
  role: roleColumn,
  apps: jsonColumn(appListShape),
  created_at: text,
  updated_at: text,
});

/** A password hash as ../secrets.ts writes it (a wrong shape would make scrypt throw). */
const passwordRow = z.object({
  password_hash: text.regex(/^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/]+=*\$[A-Za-z0-9+/]+=*$/, {
    error: "must be an scrypt hash",
  }),
});

const sessionRow = z.object({
  token_hash: text.regex(/^[0-9a-f]{64}$/, { error: "must be a SHA-256 (hex)" }),
  expires_at: text,
});

function toUserRecord(row: Omit<Tables["users"], "password_hash">): UserRecord {
  const r = readRow("users", { username: row.username }, userRow, row);
  return {
    username: r.username,
    role: r.role,
    apps: r.apps,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}
