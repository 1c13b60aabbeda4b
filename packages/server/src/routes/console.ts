/**
 * The console's admin routes: traffic history (`/v1/admin/traffic…`, every node's counts from
 * the database) and one key of a policy — what it has left (peek), why it is limited
 * (`/v1/admin/explain`) and unblocking it (reset, audited). Registered beside the other admin routes (./admin.ts), with the same sessions.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { z } from "zod";
import type { Decision } from "sluice";
import { explainLive } from "sluice/service";
import {
  explainQuerySchema,
  keyQuerySchema,
  keyResetRequestSchema,
  topKeysQuerySchema,
  trafficQuerySchema,
} from "@sluice/api";
import { ApiError, parseOr400 } from "../errors.js";
import type { LivePolicy } from "../registry.js";
import { OVERVIEW } from "../traffic/queries.js";
import type { ServiceContext } from "../context.js";
import type { AuthHelpers } from "./auth.js";
import { assertCanEditPolicy } from "./kinds/policies.js";
import { disabledAnswer } from "./decision.js";

const nameParam = z.object({ name: z.string().min(1).max(128) });

/** What an audit entry keeps of a key's state: enough to read before → after. */
function brief(d: Decision) {
  return {
    allowed: d.allowed,
    remaining: d.remaining,
    retryAfterMs: d.retryAfterMs,
    ...(d.reason !== undefined ? { reason: d.reason } : {}),
  };
}

/** Registers the console routes on the admin context. */
export function consoleRoutes(app: FastifyInstance, ctx: ServiceContext, auth: AuthHelpers): void {
  const { repo, registry } = ctx;

  /** This node's latest counts first, so that the answer includes them (as drafts' counts do). */
  const flushed = () => ctx.traffic.flush().catch(() => {});

  app.get("/v1/admin/traffic/overview", async (req) => {
    await auth.session(req);
    await flushed();
    const list = await repo.policies.list();
    const o = await ctx.trafficQueries.overview(
      list.map((p) => ({
        name: p.doc.name,
        enabled: p.doc.enabled,
        shadow: p.doc.shadow ?? false,
        hasDraft: registry.get(p.doc.name)?.draft !== undefined,
        apps: p.doc.apps,
      })),
    );
    return {
      at: o.at,
      recentSec: OVERVIEW.recentSec,
      windowSec: OVERVIEW.windowSec,
      sparkFrom: o.sparkFrom,
      sparkStepSec: OVERVIEW.sparkStepSec,
      policies: o.rows,
    };
  });

  app.get("/v1/admin/traffic", async (req) => {
    await auth.session(req);
    const q = parseOr400(trafficQuerySchema, req.query ?? {}, "Invalid query");
    await flushed();
    const h = await ctx.trafficQueries.history(q);
    return {
      ...(q.policy !== undefined ? { policy: q.policy } : {}),
      ...(q.app !== undefined ? { app: q.app } : {}),
      window: q.window,
      ...h,
    };
  });

  app.get("/v1/admin/traffic/keys", async (req) => {
    await auth.session(req);
    const q = parseOr400(topKeysQuerySchema, req.query ?? {}, "Invalid query");
    await flushed();
    const top = await ctx.trafficQueries.topKeys(q.policy, q.window);
    return { policy: q.policy, window: q.window, ...top };
  });

  /** The live policy named in the path (404 when there is none). */
  const livePolicy = (req: FastifyRequest): LivePolicy => {
    const { name } = parseOr400(nameParam, req.params, "Invalid path");
    const live = registry.get(name);
    if (!live) throw new ApiError("policy_not_found", `policy "${name}" does not exist`);
    return live;
  };

  /** What a cost-1 request for `key` would get now, under the policy and its draft. */
  const state = async (live: LivePolicy, key: string) => {
    const decision = live.doc.enabled
      ? await live.limiter.peek(key)
      : disabledAnswer(live.policy, 1);
    const draft = live.draft ? await live.draft.limiter.peek(key) : undefined;
    return {
      policy: live.policy.name,
      key,
      counters: ctx.counters.kind,
      decision,
      ...(draft ? { draft } : {}),
    };
  };

  app.get("/v1/admin/policies/:name/key", async (req) => {
    await auth.session(req);
    const live = livePolicy(req);
    const { key } = parseOr400(keyQuerySchema, req.query ?? {}, "Invalid query");
    return state(live, key);
  });

  // Why a key is (or is not) limited: the look-up's guard (any session), nothing charged.
  app.get("/v1/admin/explain", async (req) => {
    await auth.session(req);
    const q = parseOr400(explainQuerySchema, req.query ?? {}, "Invalid query");
    const live = registry.get(q.policy);
    if (!live) throw new ApiError("policy_not_found", `policy "${q.policy}" does not exist`);
    return explainLive(live, q.key, q.cost === undefined ? undefined : { cost: q.cost });
  });

  app.post("/v1/admin/policies/:name/key/reset", async (req) => {
    const s = await auth.role(req, "admin", "owner");
    const live = livePolicy(req);
    assertCanEditPolicy(s.user, live.doc, live.doc);
    const { key } = parseOr400(keyResetRequestSchema, req.body, "Invalid reset");
    const before = await state(live, key);
    await live.limiter.reset(key);
    await live.draft?.limiter.reset(key);
    const after = await state(live, key);
    await repo.recordAudit(s.user.username, "key.reset", "policy", live.policy.name, {
      key,
      counters: ctx.counters.kind,
      before: brief(before.decision),
      after: brief(after.decision),
    });
    return { ...after, reset: true as const };
  });
}
