/**
 * The probes: `GET /healthz` (the process answers) and `GET /readyz` (the database and the
 * counter store answer, each within the readiness deadline). A failed dependency's cause goes to
 * the log, and into the answer for an admin only: it says where the data lives (a file's path,
 * an address).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { ServiceContext } from "../context.js";
import { DatabaseUnavailableError } from "../db/health.js";
import { withDeadline } from "../deadline.js";
import { databaseOutageReason, isDatabaseOutage } from "../errors.js";
import { type Session, bearer } from "./auth.js";

/** The dependencies `/readyz` checks, in the order its answer lists them. */
const DEPENDENCIES = ["database", "counters"] as const;

/** Who asks `/readyz`: no one signed in, a session, or a token that is unknown or unchecked. */
type Viewer = Session | "unknown" | "unchecked" | undefined;

/**
 * Why a dependency is not ready, in words: the database's known outages by their meaning, with
 * where (a file's path, an address) — for the log and admins, never an anonymous caller.
 */
export function readinessMessage(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof DatabaseUnavailableError) return message;
  const reason = isDatabaseOutage(err) ? databaseOutageReason(err) : undefined;
  return reason === undefined || reason === message ? message : `${reason} (${message})`;
}

/**
 * What `/readyz` tells the log: a dependency's failure with its cause, at warn, when it starts,
 * when its cause changes and once a minute while it lasts (a balancer probes every few seconds);
 * its recovery once, at info.
 */
function readinessLog(
  logger: Logger,
  now: () => number,
): { record(causes: ReadonlyMap<string, string>): void } {
  const said = new Map<string, { cause: string; at: number }>();
  return {
    record(causes) {
      const t = now();
      for (const [component, cause] of causes) {
        const last = said.get(component);
        if (last && last.cause === cause && t - last.at < 60_000) continue;
        said.set(component, { cause, at: t });
        logger.warn({ component, cause }, `not ready: ${component} unavailable`);
      }
      for (const component of [...said.keys()]) {
        if (causes.has(component)) continue;
        said.delete(component);
        logger.info({ component }, `ready again: ${component} answers`);
      }
    },
  };
}

/**
 * Checks each dependency within the readiness deadline (so the answer comes within it even when
 * one hangs), and the caller's session beside them: the causes of those that failed, by name,
 * and who asked.
 */
async function checkDependencies(
  ctx: ServiceContext,
  req: FastifyRequest,
): Promise<{ causes: Map<string, string>; viewer: Viewer }> {
  const timeoutMs = ctx.config.readinessTimeoutMs;
  const causes = new Map<string, string>();
  const check = (name: string, what: string, work: () => Promise<void>) =>
    withDeadline(work(), timeoutMs, what).then(
      () => undefined,
      (err: unknown) => void causes.set(name, readinessMessage(err)),
    );
  const token = bearer(req);
  const session =
    token === undefined
      ? undefined
      : withDeadline(ctx.repo.authenticateSession(token), timeoutMs, "the database").then(
          (found) => found ?? ("unknown" as const),
          () => "unchecked" as const,
        );
  const [, , viewer] = await Promise.all([
    check("database", "the database", () => ctx.databaseHealth.check()),
    check("counters", "the counter store", () => ctx.counters.ping()),
    session,
  ]);
  return { causes, viewer };
}

/**
 * Why the causes are not in the answer for this viewer (undefined: an admin, who is told them);
 * each note says where they are instead.
 */
function withheldNote(viewer: Viewer): string | undefined {
  const log = "the causes are in the service's log";
  if (viewer === undefined)
    return `${log}, and in this answer for an admin (Authorization: Bearer <session token>)`;
  if (viewer === "unchecked")
    return `your session could not be checked (the database did not answer): ${log}`;
  if (viewer === "unknown")
    return `the session token was not accepted (expired or unknown; sign in again): ${log}`;
  if (viewer.user.role !== "admin")
    return `the causes are shown to admins only (you are ${viewer.user.role}): ${log}`;
  return undefined;
}

/** Registers `GET /healthz` and `GET /readyz`. */
export function readinessRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const readiness = readinessLog(ctx.logger, ctx.now);
  app.get("/healthz", () => ({ status: "ok" }));
  app.get("/readyz", async (req: FastifyRequest, reply: FastifyReply) => {
    const { causes, viewer } = await checkDependencies(ctx, req);
    readiness.record(causes);
    const ok = causes.size === 0;
    const note = ok ? undefined : withheldNote(viewer);
    const checks: Record<string, string> = {};
    for (const name of DEPENDENCIES) {
      const cause = causes.get(name);
      checks[name] =
        cause === undefined ? "ok" : note === undefined ? `unavailable: ${cause}` : "unavailable";
    }
    return reply.status(ok ? 200 : 503).send({
      status: ok ? "ready" : "unavailable",
      checks,
      revision: ctx.registry.currentRevision,
      ...(ctx.worker !== undefined ? { worker: ctx.worker } : {}),
      ...(note !== undefined ? { note } : {}),
    });
  });
}
