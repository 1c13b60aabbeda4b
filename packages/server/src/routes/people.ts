/**
 * Apps (and their API keys), users and their roles, and the embedded clients seen. Roles:
 * `viewer` reads; `owner` rotates the keys of the apps it owns; `admin` does everything.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import { appCreateSchema, userCreateSchema, userUpdateSchema } from "@sluice/api";
import type { ServiceContext } from "../context.js";
import { parseOr400 } from "../errors.js";
import { CLIENT_RETENTION_MS } from "../repository/clients.js";
import { type AuthHelpers, type Session, forbidden } from "./auth.js";

const nameParam = z.object({ name: z.string().min(1).max(128) });

/** Registers the app, user and client routes (inside the admin scope). */
export function peopleRoutes(app: FastifyInstance, ctx: ServiceContext, auth: AuthHelpers): void {
  const { repo, registry } = ctx;
  const { session, role } = auth;
  const actor = (s: Session) => s.user.username;
  const params = (req: FastifyRequest) => parseOr400(nameParam, req.params, "Invalid path");
  const usernameParam = (req: FastifyRequest) =>
    parseOr400(z.object({ username: z.string().min(1).max(64) }), req.params, "Invalid path")
      .username;

  app.get("/v1/admin/apps", async (req) => {
    await session(req);
    const [apps, policies] = await Promise.all([repo.listApps(), repo.policies.list()]);
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

  // Users.

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

  // Embedded clients (connectPolicies).

  app.get("/v1/admin/clients", async (req) => {
    await session(req);
    const since = new Date(Date.now() - CLIENT_RETENTION_MS).toISOString();
    const { clients, corrupt } = await repo.listClients(since);
    for (const err of corrupt) req.log.error({ err }, "stored client record is corrupt; left out");
    return { revision: registry.currentRevision, clients };
  });
}
