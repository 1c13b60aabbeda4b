/**
 * Per-key overrides of a policy (`/v1/admin/policies/{name}/overrides…`): rules for one key
 * that replace the policy's for that key — a tenant's plan — written, read, listed by page and
 * deleted. Each write is audited (`policy.override.put`, `policy.override.delete`) and noted in
 * `changes` as that one override, so every node and embedded client applies that one alone
 * (repository/overrides.ts). Who may write: as for the policy itself (an admin, or the owner of
 * an app the policy is granted to).
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { definePolicy } from "sluice";
import { policyInputOf, policyWithRules } from "sluice/service";
import { overrideListQuerySchema, overrideParamsSchema, overrideWriteSchema } from "@sluice/api";
import { z } from "zod";
import type { ServiceContext } from "../context.js";
import { ApiError, parseOr400 } from "../errors.js";
import type { LiveOverrideRecord } from "../repository.js";
import type { AuthHelpers } from "./auth.js";
import { assertCanEditPolicy } from "./kinds/policies.js";

const nameParam = z.strictObject({ name: overrideParamsSchema.shape.name });

/** An override as the API answers it. */
const view = (r: LiveOverrideRecord) => ({
  policy: r.policy,
  key: r.key,
  rules: r.rules,
  revision: r.revision,
  updatedBy: r.updatedBy,
  updatedAt: r.updatedAt,
});

/** Registers the override routes (inside the admin scope). */
export function overrideRoutes(app: FastifyInstance, ctx: ServiceContext, auth: AuthHelpers): void {
  const { repo } = ctx;
  const params = (req: FastifyRequest) =>
    parseOr400(overrideParamsSchema, req.params, "Invalid path");
  const policyOf = async (name: string) => {
    const record = await repo.policies.get(name);
    if (!record) throw new ApiError("policy_not_found", `policy "${name}" does not exist`);
    return record;
  };

  app.get("/v1/admin/policies/:name/overrides", async (req) => {
    await auth.session(req);
    const { name } = parseOr400(nameParam, req.params, "Invalid path");
    const q = parseOr400(overrideListQuerySchema, req.query ?? {}, "Invalid query");
    await policyOf(name);
    const page = await repo.overrides.list(name, q);
    return {
      overrides: page.overrides.map(view),
      total: page.total,
      ...(page.next !== undefined ? { next: page.next } : {}),
    };
  });

  app.get("/v1/admin/policies/:name/overrides/:key", async (req) => {
    await auth.session(req);
    const { name, key } = params(req);
    await policyOf(name);
    const record = await repo.overrides.get(name, key);
    if (!record)
      throw new ApiError("not_found", `policy "${name}" has no override for key "${key}"`);
    return view(record);
  });

  app.put("/v1/admin/policies/:name/overrides/:key", async (req, reply) => {
    const s = await auth.role(req, "admin", "owner");
    const { name, key } = params(req);
    const body = parseOr400(
      overrideWriteSchema.extend({ rules: z.unknown() }),
      req.body,
      "Invalid override",
    );
    const { record, created } = await repo.overrides.put(
      name,
      key,
      body.rules as LiveOverrideRecord["rules"],
      s.user.username,
      async (trx) => {
        // Checked against the policy as stored, in the write's transaction.
        const stored = await repo.policies.get(name, trx);
        if (!stored) throw new ApiError("policy_not_found", `policy "${name}" does not exist`);
        assertCanEditPolicy(s.user, stored.doc, stored.doc);
        // As the policy with these rules would be validated; errors name `rules.0.limit`.
        policyWithRules(definePolicy(policyInputOf(stored.doc)), body.rules, "");
      },
    );
    return reply.status(created ? 201 : 200).send(view(record));
  });

  app.delete("/v1/admin/policies/:name/overrides/:key", async (req, reply) => {
    const s = await auth.role(req, "admin", "owner");
    const { name, key } = params(req);
    const stored = await policyOf(name);
    assertCanEditPolicy(s.user, stored.doc, stored.doc);
    await repo.overrides.delete(name, key, s.user.username);
    return reply.status(204).send();
  });
}
