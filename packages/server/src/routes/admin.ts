/**
 * The admin API under `/v1/admin/`: sign-in, policies (versions, restore, drafts, import and
 * export), apps, users and the audit log. Sessions are bearer tokens from `POST /login`.
 *
 * Roles: `viewer` reads everything; `owner` also changes the policies granted to the apps it
 * owns (and may not grant or revoke apps it does not own) and rotates its apps' keys; `admin`
 * does everything.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import {
  appCreateSchema,
  auditQuerySchema,
  importRequestSchema,
  loginRequestSchema,
  passwordChangeSchema,
  promoteRequestSchema,
  setupRequestSchema,
  userCreateSchema,
  userUpdateSchema,
  versionParamSchema,
} from "../api-schemas.js";
import { ApiError, invalid, parseOr400, zodIssues } from "../errors.js";
import { type PolicyDocument, type Role, validatePolicyDocument } from "../model.js";
import { exportPolicyFile, parsePolicyFile, validatePolicyList } from "../policy-file.js";
import type { PolicyRecord, UserRecord } from "../repository.js";
import { CLIENT_RETENTION_MS } from "../repository/clients.js";
import type { ServiceContext } from "../service.js";
import { consoleRoutes } from "./console.js";
import { bearer, missingBearer } from "./decision.js";
import { envoyAdminRoutes } from "./envoy.js";

/** The signed-in user of a request. */
export interface Session {
  readonly user: UserRecord;
  readonly sessionId: string;
}

const forbidden = (message: string) => new ApiError("forbidden", message);

/** Refuses unless the user may change a policy from `before` to `after` (either may be absent). */
export function assertCanEditPolicy(
  user: Pick<UserRecord, "role" | "apps">,
  before: PolicyDocument | undefined,
  after: PolicyDocument | undefined,
): void {
  if (user.role === "admin") return;
  if (user.role !== "owner") throw forbidden(`role ${user.role} may not change policies`);
  const owned = new Set(user.apps);
  const name = (before ?? after)?.name ?? "";
  if (before && !before.apps.some((a) => owned.has(a)))
    throw forbidden(`policy "${name}" is not granted to an app you own`);
  if (after && !after.apps.some((a) => owned.has(a))) {
    throw forbidden(
      `policy "${name}" must stay granted to at least one app you own (${[...owned].join(", ") || "none"})`,
    );
  }
  const b = new Set(before?.apps ?? []);
  const a = new Set(after?.apps ?? []);
  const changed = [...[...b].filter((x) => !a.has(x)), ...[...a].filter((x) => !b.has(x))].filter(
    (x) => !owned.has(x),
  );
  if (changed.length > 0)
    throw forbidden(`only an admin may grant or revoke apps you do not own: ${changed.join(", ")}`);
}

function recordView(r: PolicyRecord) {
  return {
    ...r.doc,
    version: r.version,
    createdBy: r.createdBy,
    updatedBy: r.updatedBy,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

const nameParam = z.object({ name: z.string().min(1).max(128) });

/** Absent, or a positive integer (a version or an id). */
const isPositiveInt = (v: unknown): boolean =>
  v === undefined || (typeof v === "number" && Number.isInteger(v) && v >= 1);

/**
 * Registers the admin routes, in a context of their own with one hook: **read your writes**.
 * After a change succeeds, the answer waits until this node has loaded it (one revision read
 * and the reload), so the caller's next request to this node — a decision with the new policy
 * or key — sees it. Other nodes pick the change up on their next poll.
 */
export function adminRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  void app.register(async (admin) => {
    admin.addHook("onSend", async (req, reply, payload) => {
      if (req.method !== "GET" && req.method !== "HEAD" && reply.statusCode < 400)
        await ctx.registry.poll();
      return payload;
    });
    const auth = authHelpers(ctx);
    routes(admin, ctx, auth);
    consoleRoutes(admin, ctx, auth);
    envoyAdminRoutes(admin, ctx);
  });
}

/** How admin routes find the signed-in user and check their role. */
export interface AuthHelpers {
  /** The session of a request; 401 without a valid one. */
  session(req: FastifyRequest): Promise<Session>;
  /** The session, if its role is one of `allowed`; 403 otherwise. */
  role(req: FastifyRequest, ...allowed: Role[]): Promise<Session>;
  /**
   * Runs a password check counted like a sign-in (failures only, per username and client IP,
   * and per client IP): 429 when too many failed; `check` resolves to whether it succeeded.
   */
  passwordAttempt(
    req: FastifyRequest,
    username: string,
    check: () => Promise<boolean>,
  ): Promise<boolean>;
}

/** Builds the {@link AuthHelpers} of a service. */
export function authHelpers(ctx: ServiceContext): AuthHelpers {
  const { repo } = ctx;
  const session = async (req: FastifyRequest): Promise<Session> => {
    const token = bearer(req);
    const s = token === undefined ? undefined : await repo.authenticateSession(token);
    if (!s) {
      throw new ApiError(
        "unauthorized",
        token === undefined
          ? req.headers.authorization === undefined
            ? "sign in first: POST /v1/admin/login, then send Authorization: Bearer <token>"
            : `${missingBearer(req, "session token")} (from POST /v1/admin/login)`
          : "session expired or unknown; sign in again",
        {
          headers: { "WWW-Authenticate": 'Bearer realm="sluice-admin"' },
        },
      );
    }
    return s;
  };
  const role = async (req: FastifyRequest, ...allowed: Role[]): Promise<Session> => {
    const s = await session(req);
    if (!allowed.includes(s.user.role))
      throw forbidden(`this needs role ${allowed.join(" or ")}; you are ${s.user.role}`);
    return s;
  };
  const passwordAttempt = async (
    req: FastifyRequest,
    username: string,
    check: () => Promise<boolean>,
  ): Promise<boolean> => {
    // Counted by sluice itself, failures only: per username from one client IP (so nobody can
    // lock a user out from elsewhere), and per client IP. Each attempt is charged first — so
    // concurrent guesses cannot slip past the limit — and given back unless it fails.
    const ip = ctx.clientIp.identity(req.raw);
    const { user: perUser, ip: perIp } = ctx.loginLimiters;
    const userKey = `${ip}|${username.toLowerCase()}`;
    const [byUser, byIp] = await Promise.all([perUser.limit(userKey), perIp.limit(ip)]);
    // Only a charge made on the shared store is given back: an insurance decision (the store
    // is down) counted on this node, and the store would refund what it never charged.
    const giveBack = async () => {
      await Promise.all([
        byUser.allowed && byUser.reason === undefined ? perUser.refund(userKey) : undefined,
        byIp.allowed && byIp.reason === undefined ? perIp.refund(ip) : undefined,
      ]).catch((err: unknown) =>
        req.log.warn({ err }, "could not give back a sign-in attempt to the counter store"),
      );
    };
    if (!byUser.allowed || !byIp.allowed) {
      await giveBack();
      const retry = Math.max(
        byUser.allowed ? 0 : byUser.retryAfterMs,
        byIp.allowed ? 0 : byIp.retryAfterMs,
      );
      throw new ApiError("too_many_requests", "too many failed sign-in attempts; retry later", {
        headers: { "Retry-After": String(Math.max(1, Math.ceil(retry / 1000))) },
      });
    }
    let ok: boolean;
    try {
      ok = await check();
    } catch (err) {
      await giveBack(); // not the caller's failure
      throw err;
    }
    if (ok) await giveBack();
    else req.log.warn({ username, ip }, "failed sign-in");
    return ok;
  };
  return { session, role, passwordAttempt };
}

function routes(app: FastifyInstance, ctx: ServiceContext, auth: AuthHelpers): void {
  const { repo, registry } = ctx;
  const { session, role } = auth;
  const actor = (s: Session) => s.user.username;
  const params = (req: FastifyRequest) => parseOr400(nameParam, req.params, "Invalid path");
  const versionParam = (req: FastifyRequest) =>
    parseOr400(
      versionParamSchema,
      (req.params as { version?: unknown }).version,
      "Invalid path",
      "version",
    );
  const usernameParam = (req: FastifyRequest) =>
    parseOr400(z.object({ username: z.string().min(1).max(64) }), req.params, "Invalid path")
      .username;

  /**
   * A validated document from a write body, named by the URL, with the optimistic-concurrency
   * fields: `expectVersion` and, for drafts, `draftId` (the draft being replaced).
   */
  const documentFrom = (
    body: unknown,
    name: string,
    options: { draft?: boolean } = {},
  ): { doc: PolicyDocument; expectVersion: number | undefined; draftId: number | undefined } => {
    if (typeof body !== "object" || body === null || Array.isArray(body))
      throw invalid("Invalid policy", [
        { path: "", message: "body must be a JSON object (a policy document)" },
      ]);
    const { expectVersion, ...withDraftId } = body as Record<string, unknown>;
    // `draftId` belongs to drafts only; elsewhere it is an unknown field of the document.
    let rest = withDraftId;
    let draftId: unknown;
    if (options.draft) ({ draftId, ...rest } = withDraftId);
    const issues = [];
    if (!isPositiveInt(expectVersion)) {
      issues.push({
        path: "expectVersion",
        message: "must be a positive integer (the version you edited)",
      });
    }
    if (!isPositiveInt(draftId)) {
      issues.push({
        path: "draftId",
        message: "must be a positive integer (the id of the draft you are replacing)",
      });
    }
    if (rest.name !== undefined && rest.name !== name)
      issues.push({ path: "name", message: `must match the URL ("${name}") or be left out` });
    const r = validatePolicyDocument({ ...rest, name });
    if ("issues" in r) issues.push(...r.issues);
    if (issues.length > 0 || "issues" in r) throw invalid(`Invalid policy "${name}"`, issues);
    return {
      doc: r.doc,
      expectVersion: expectVersion as number | undefined,
      draftId: draftId as number | undefined,
    };
  };

  // ------------------------------------------------------------ sessions

  app.post("/v1/admin/login", async (req, reply) => {
    const body = parseOr400(loginRequestSchema, req.body, "Invalid sign-in");
    let user: UserRecord | undefined;
    await auth.passwordAttempt(req, body.username, async () => {
      user = await repo.checkPassword(body.username, body.password);
      return user !== undefined;
    });
    if (!user) throw new ApiError("unauthorized", "wrong username or password");
    const { token, expiresAt } = await repo.createSession(user.username, ctx.config.sessionTtlMs);
    return reply.status(200).send({
      token,
      expiresAt,
      user: { username: user.username, role: user.role, apps: user.apps },
    });
  });

  app.post("/v1/admin/logout", async (req, reply) => {
    const s = await session(req);
    await repo.deleteSession(s.sessionId, s.user.username);
    return reply.status(204).send();
  });

  app.get("/v1/admin/me", async (req) => {
    const s = await session(req);
    return { username: s.user.username, role: s.user.role, apps: s.user.apps };
  });

  // Your own password: the current one is checked (counted like a sign-in), and every other
  // session of yours ends; this one stays.
  app.post("/v1/admin/me/password", async (req, reply) => {
    const s = await session(req);
    const body = parseOr400(passwordChangeSchema, req.body, "Invalid password change");
    const ok = await auth.passwordAttempt(req, s.user.username, async () =>
      Boolean(await repo.checkPassword(s.user.username, body.currentPassword)),
    );
    if (!ok)
      throw invalid("Password not changed", [
        { path: "currentPassword", message: "is not your current password" },
      ]);
    await repo.updateUser(s.user.username, { password: body.newPassword }, s.user.username, {
      keepSession: s.sessionId,
      via: "self-service",
    });
    return reply.status(204).send();
  });

  // ------------------------------------------------------------ first run

  app.get("/v1/admin/setup", async () => ({
    needed: (await repo.countAdmins()) === 0,
    tokenActive: ctx.setup.active,
  }));

  app.post("/v1/admin/setup", async (req) => {
    const body = parseOr400(setupRequestSchema, req.body, "Invalid setup");
    if ((await repo.countAdmins()) > 0) {
      ctx.setup.revoke();
      throw new ApiError("conflict", "an admin already exists: sign in instead");
    }
    const check = ctx.setup.check(body.token);
    if (check !== "ok") {
      const fallback =
        "create the first admin with `npx sluice admin create-user --role admin` instead";
      throw new ApiError(
        "unauthorized",
        check === "none"
          ? `this node issued no setup token (only the node whose start printed it accepts it): restart sluice serve for one, or ${fallback}`
          : check === "expired"
            ? `the setup token has expired: restart sluice serve for a new one, or ${fallback}`
            : "wrong setup token: copy it from the lines sluice serve printed",
      );
    }
    const user = await repo.createFirstAdmin(body.username, body.password);
    ctx.setup.revoke();
    const { token, expiresAt } = await repo.createSession(user.username, ctx.config.sessionTtlMs);
    return { token, expiresAt, user: { username: user.username, role: user.role, apps: [] } };
  });

  // ------------------------------------------------------------ policies

  app.get("/v1/admin/policies", async (req) => {
    await session(req);
    const list = await repo.listPolicies();
    return {
      revision: registry.currentRevision,
      policies: list.map((r) => ({
        ...recordView(r),
        hasDraft: registry.get(r.doc.name)?.draft !== undefined,
      })),
    };
  });

  app.get("/v1/admin/policies/export", async (req, reply) => {
    await session(req);
    const q = parseOr400(
      z.strictObject({
        format: z.enum(["yaml", "json"], { error: "must be yaml or json" }).default("yaml"),
      }),
      req.query,
      "Invalid query",
    );
    const list = await repo.listPolicies();
    if (q.format === "json") return { version: 1, policies: list.map((r) => r.doc) };
    return reply.type("application/yaml; charset=utf-8").send(exportPolicyFile(list));
  });

  app.post("/v1/admin/policies/import", async (req) => {
    const s = await role(req, "admin");
    let docs: PolicyDocument[];
    let prune = false;
    let dryRun = false;
    if (typeof req.body === "string") {
      const r = parsePolicyFile(req.body);
      if ("issues" in r) throw invalid("Import refused, nothing was changed", r.issues);
      docs = r.docs;
      const q = parseOr400(
        z.strictObject({
          prune: z.enum(["true", "false"]).optional(),
          dryRun: z.enum(["true", "false"]).optional(),
        }),
        req.query,
        "Invalid query",
      );
      prune = q.prune === "true";
      dryRun = q.dryRun === "true";
    } else {
      const b = parseOr400(importRequestSchema, req.body, "Invalid import");
      const r = validatePolicyList(b.policies);
      if ("issues" in r) throw invalid("Import refused, nothing was changed", r.issues);
      docs = r.docs;
      prune = b.prune ?? false;
      dryRun = b.dryRun ?? false;
    }
    if (dryRun) return { dryRun: true, plan: await repo.planImport(docs, prune) };
    const plan = await repo.importPolicies(docs, actor(s), { prune });
    return { dryRun: false, plan };
  });

  app.get("/v1/admin/policies/:name", async (req) => {
    await session(req);
    const { name } = params(req);
    const [r, draft] = await Promise.all([repo.getPolicy(name), repo.getDraft(name)]);
    if (!r) throw new ApiError("policy_not_found", `policy "${name}" does not exist`);
    return { ...recordView(r), hasDraft: draft !== undefined };
  });

  app.post("/v1/admin/policies", async (req, reply) => {
    const s = await role(req, "admin", "owner");
    const name =
      typeof (req.body as { name?: unknown } | null)?.name === "string"
        ? (req.body as { name: string }).name
        : "";
    if (!name) throw invalid("Invalid policy", [{ path: "name", message: "is required" }]);
    const { doc } = documentFrom(req.body, name);
    const rec = await repo.putPolicy(doc, actor(s), {
      mustNotExist: true,
      check: () => assertCanEditPolicy(s.user, undefined, doc),
    });
    return reply.status(201).send(recordView(rec));
  });

  app.put("/v1/admin/policies/:name", async (req) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    const { doc, expectVersion } = documentFrom(req.body, name);
    const rec = await repo.putPolicy(doc, actor(s), {
      expectVersion,
      check: (before) => assertCanEditPolicy(s.user, before?.doc, doc),
    });
    return recordView(rec);
  });

  app.delete("/v1/admin/policies/:name", async (req, reply) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    await repo.deletePolicy(name, actor(s), (before) =>
      assertCanEditPolicy(s.user, before.doc, undefined),
    );
    return reply.status(204).send();
  });

  app.get("/v1/admin/policies/:name/versions", async (req) => {
    await session(req);
    const { name } = params(req);
    const versions = await repo.listVersions(name);
    if (versions.length === 0)
      throw new ApiError("policy_not_found", `policy "${name}" has no versions`);
    return { versions };
  });

  app.get("/v1/admin/policies/:name/versions/:version", async (req) => {
    await session(req);
    const { name } = params(req);
    const version = versionParam(req);
    const v = await repo.getVersion(name, version);
    if (!v) throw new ApiError("not_found", `policy "${name}" has no version ${version}`);
    return v;
  });

  app.post("/v1/admin/policies/:name/versions/:version/restore", async (req) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    const version = versionParam(req);
    const rec = await repo.restoreVersion(name, version, actor(s), (before, restored) =>
      assertCanEditPolicy(s.user, before?.doc, restored),
    );
    return recordView(rec);
  });

  app.get("/v1/admin/policies/:name/draft", async (req) => {
    await session(req);
    const { name } = params(req);
    const d = await repo.getDraft(name);
    if (!d) throw new ApiError("not_found", `policy "${name}" has no draft`);
    // Totals over every node; this node's latest counts are added first.
    await registry.flushDraftStats();
    const stats = await repo.getDraftStats(d.id);
    return { ...d, stats };
  });

  app.put("/v1/admin/policies/:name/draft", async (req) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    const { doc, expectVersion, draftId } = documentFrom(req.body, name, { draft: true });
    return repo.putDraft(doc, actor(s), {
      expectVersion,
      draftId,
      check: (before) => assertCanEditPolicy(s.user, before.doc, doc),
    });
  });

  app.delete("/v1/admin/policies/:name/draft", async (req, reply) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    await repo.deleteDraft(name, actor(s), (before) =>
      assertCanEditPolicy(s.user, before.doc, before.doc),
    );
    return reply.status(204).send();
  });

  app.post("/v1/admin/policies/:name/draft/promote", async (req) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    const body = parseOr400(promoteRequestSchema, req.body ?? {}, "Invalid promote request");
    const rec = await repo.promoteDraft(name, actor(s), {
      expectVersion: body.expectVersion,
      draftId: body.draftId,
      check: (before, draft) => assertCanEditPolicy(s.user, before.doc, draft),
    });
    return recordView(rec);
  });

  // ------------------------------------------------------------ apps

  app.get("/v1/admin/apps", async (req) => {
    await session(req);
    const [apps, policies] = await Promise.all([repo.listApps(), repo.listPolicies()]);
    return {
      apps: apps.map((a) => ({
        ...a,
        policies: policies.filter((p) => p.doc.apps.includes(a.name)).map((p) => p.doc.name),
      })),
    };
  });

  app.post("/v1/admin/apps", async (req, reply) => {
    const s = await role(req, "admin");
    const body = parseOr400(appCreateSchema, req.body, "Invalid app");
    const { app: created, apiKey } = await repo.createApp(
      body.name,
      body.description ?? "",
      actor(s),
    );
    return reply
      .status(201)
      .send({ ...created, apiKey, note: "store the apiKey now: it is shown only once" });
  });

  app.post("/v1/admin/apps/:name/rotate-key", async (req) => {
    const s = await role(req, "admin", "owner");
    const { name } = params(req);
    if (s.user.role === "owner" && !s.user.apps.includes(name))
      throw forbidden(`you do not own app "${name}"`);
    const { app: rotated, apiKey } = await repo.rotateAppKey(name, actor(s));
    return {
      ...rotated,
      apiKey,
      note: "store the apiKey now: it is shown only once; the old key stops working",
    };
  });

  app.delete("/v1/admin/apps/:name", async (req, reply) => {
    const s = await role(req, "admin");
    const { name } = params(req);
    await repo.deleteApp(name, actor(s));
    return reply.status(204).send();
  });

  // ------------------------------------------------------------ users

  app.get("/v1/admin/users", async (req) => {
    await session(req);
    return { users: await repo.listUsers() };
  });

  app.post("/v1/admin/users", async (req, reply) => {
    const s = await role(req, "admin");
    const body = parseOr400(userCreateSchema, req.body, "Invalid user");
    const user = await repo.createUser(
      { username: body.username, password: body.password, role: body.role, apps: body.apps ?? [] },
      actor(s),
    );
    return reply.status(201).send(user);
  });

  app.patch("/v1/admin/users/:username", async (req) => {
    const s = await role(req, "admin");
    const username = usernameParam(req);
    const body = parseOr400(userUpdateSchema, req.body, "Invalid user change");
    return repo.updateUser(username, body, actor(s));
  });

  app.delete("/v1/admin/users/:username", async (req, reply) => {
    const s = await role(req, "admin");
    const username = usernameParam(req);
    await repo.deleteUser(username, actor(s));
    return reply.status(204).send();
  });

  // ------------------------------------------------------------ embedded clients

  app.get("/v1/admin/clients", async (req) => {
    await session(req);
    const since = new Date(Date.now() - CLIENT_RETENTION_MS).toISOString();
    const { clients, corrupt } = await repo.listClients(since);
    for (const err of corrupt) req.log.error({ err }, "stored client record is corrupt; left out");
    return { revision: registry.currentRevision, clients };
  });

  // ------------------------------------------------------------ audit

  app.get("/v1/admin/audit", async (req) => {
    await session(req);
    const q = auditQuerySchema.safeParse(req.query ?? {});
    if (!q.success) throw invalid("Invalid query", zodIssues(q.error, "", req.query ?? {}));
    return { entries: await repo.listAudit(q.data) };
  });
}
