/**
 * `sluice/express`: rate-limiting middleware for Express 4 and 5.
 *
 * ```ts
 * import express from "express";
 * import { rateLimit } from "sluice/express";
 * const app = express();
 * app.use(rateLimit({ limiter, headers: "both" }));
 * ```
 *
 * Express's own `trust proxy` setting is not consulted: pass `trustProxy` here.
 * Used as route middleware (`app.get("/x/:id", rateLimit(...), handler)`), `req.route` is known
 * and `keys.route()` keys by the route pattern.
 */
import type { NextFunction, Request, Response } from "express";
import type { Decision } from "../../decision.js";
import { RateLimitCore } from "../core.js";
import { nodeRequestInput, settleNodeOutcome } from "../node-io.js";
import type { RateLimitOptions } from "../types.js";

export * from "../index.js";

/** The `degrade` fallback for Express: serves a denied request; rate-limit headers are already set. */
export type ExpressFallback = (req: Request, res: Response, decision: Decision) => unknown;

/** Options of the Express middleware (see {@link RateLimitOptions}). */
export type ExpressRateLimitOptions = RateLimitOptions<Request, ExpressFallback>;

/** An Express middleware (works with Express 4, which ignores returned promises, and 5). */
export type ExpressMiddleware = (req: Request, res: Response, next: NextFunction) => void;

/**
 * Creates the Express middleware. Options are validated now; a bad option throws a
 * `ValidationError`. The decision is available to later handlers as `res.locals.rateLimit`.
 */
export function rateLimit(options: ExpressRateLimitOptions): ExpressMiddleware {
  const core = new RateLimitCore<Request, ExpressFallback>(options);
  const run = async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    const route = req.route as { path?: unknown } | undefined;
    const outcome = await core.handle(
      nodeRequestInput(
        core.waits,
        req,
        res,
        req,
        req.originalUrl ?? req.url,
        typeof route?.path === "string" ? `${req.baseUrl ?? ""}${route.path}` : undefined,
      ),
    );
    // Only a fallback answers with a promise: the other outcomes go on without another await.
    const go = settleNodeOutcome(outcome, req, res, exposeDecision);
    if (go === true || (go !== false && (await go))) next();
  };
  return (req, res, next) => {
    // Express 4 ignores a returned promise: route every failure to the error handlers ourselves.
    run(req, res, next).catch(next);
  };
}

/** Hands the decision of a pass or a fallback to later handlers as `res.locals.rateLimit`. */
function exposeDecision(res: Response, decision: Decision): void {
  res.locals.rateLimit = decision;
}
