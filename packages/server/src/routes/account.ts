/**
 * Signing in and out, the signed-in user and their own password, and the first run (the first
 * admin, made with the setup token `sluice serve` printed). Sessions are bearer tokens from
 * `POST /v1/admin/login`.
 */
import type { FastifyInstance } from "fastify";
import { loginRequestSchema, passwordChangeSchema, setupRequestSchema } from "@sluice/api";
import type { ServiceContext } from "../context.js";
import { ApiError, invalid, parseOr400 } from "../errors.js";
import type { UserRecord } from "../repository.js";
import type { AuthHelpers } from "./auth.js";

/** Registers the session and first-run routes (inside the admin scope). */
export function accountRoutes(app: FastifyInstance, ctx: ServiceContext, auth: AuthHelpers): void {
  const { repo } = ctx;
  const { session } = auth;

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

  // The first run.

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
}
