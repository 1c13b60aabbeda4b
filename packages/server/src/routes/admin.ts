/**
 * The admin API under `/v1/admin/`, registered in one scope: this is the one place that lists
 * its route modules. The scope has one hook, **read your writes**: after a change succeeds, the
 * answer waits until this node has loaded it (one revision read and the reload), so the caller's
 * next request to this node — a decision with the new policy or key — sees it. Other nodes pick
 * the change up on their next poll. Sessions are bearer tokens from `POST /v1/admin/login`
 * (./auth.ts).
 */
import type { FastifyInstance } from "fastify";
import type { ServiceContext } from "../context.js";
import { accountRoutes } from "./account.js";
import { auditRoutes } from "./audit.js";
import { authHelpers } from "./auth.js";
import { consoleRoutes } from "./console.js";
import { documentRoutes } from "./documents.js";
import { envoyCounterRoutes } from "./envoy.js";
import { envoyDomainAdmin } from "./kinds/envoy-domains.js";
import { policyAdmin } from "./kinds/policies.js";
import { overrideRoutes } from "./overrides.js";
import { peopleRoutes } from "./people.js";

/** Registers every admin route, in a scope of their own (see the module comment). */
export function adminRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  void app.register(async (admin) => {
    admin.addHook("onSend", async (req, reply, payload) => {
      if (req.method !== "GET" && req.method !== "HEAD" && reply.statusCode < 400)
        await ctx.registry.poll();
      return payload;
    });
    const auth = authHelpers(ctx);
    // The versioned documents: one set of routes, once per kind.
    documentRoutes(admin, ctx, auth, policyAdmin);
    documentRoutes(admin, ctx, auth, envoyDomainAdmin);
    for (const routes of [
      accountRoutes,
      peopleRoutes,
      auditRoutes,
      consoleRoutes,
      envoyCounterRoutes,
      overrideRoutes,
    ])
      routes(admin, ctx, auth);
  });
}
