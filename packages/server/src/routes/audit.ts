/** The audit log: every change, newest first, filtered. */
import type { FastifyInstance } from "fastify";
import { auditQuerySchema } from "@sluice/api";
import type { ServiceContext } from "../context.js";
import { invalid, zodIssues } from "../errors.js";
import type { AuthHelpers } from "./auth.js";

/** Registers `GET /v1/admin/audit` (inside the admin scope). */
export function auditRoutes(app: FastifyInstance, ctx: ServiceContext, auth: AuthHelpers): void {
  const { repo } = ctx;
  const { session } = auth;

  app.get("/v1/admin/audit", async (req) => {
    await session(req);
    const q = auditQuerySchema.safeParse(req.query ?? {});
    if (!q.success) throw invalid("Invalid query", zodIssues(q.error, "", req.query ?? {}));
    return { entries: await repo.listAudit(q.data) };
  });
}
