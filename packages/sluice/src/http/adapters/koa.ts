/**
 * `sluice/koa`: rate-limiting middleware for Koa 2 and 3.
 *
 * ```ts
 * import Koa from "koa";
 * import { rateLimit } from "sluice/koa";
 * const app = new Koa();
 * app.use(rateLimit({ limiter }));
 * ```
 *
 * Koa's `app.proxy` setting is not consulted: pass `trustProxy` here. With @koa/router, the
 * matched route pattern (`ctx._matchedRoute`) is used by `keys.route()` when the middleware runs
 * after routing.
 */
import type { Context, Middleware, Next } from "koa";
import type { Decision } from "../../decision.js";
import { RateLimitCore } from "../core.js";
import { disconnectSignal, nodeHeader, whenDone } from "../node-io.js";
import type { RateLimitOptions } from "../types.js";

export * from "../index.js";

/** The `degrade` fallback for Koa: serves a denied request (set `ctx.body`); rate-limit headers are already set. */
export type KoaFallback = (ctx: Context, decision: Decision) => unknown;

/** Options of the Koa middleware (see {@link RateLimitOptions}). */
export type KoaRateLimitOptions = RateLimitOptions<Context, KoaFallback>;

/** Creates the Koa middleware. Options are validated now. The decision is in `ctx.state.rateLimit`. */
export function rateLimit(options: KoaRateLimitOptions): Middleware {
  const core = new RateLimitCore<Context, KoaFallback>(options);
  return async (ctx: Context, next: Next): Promise<void> => {
    const matched = (ctx as unknown as { _matchedRoute?: unknown })._matchedRoute;
    const outcome = await core.handle({
      method: ctx.method,
      path: ctx.path,
      route: typeof matched === "string" ? matched : undefined,
      header: nodeHeader(ctx.req),
      peer: ctx.req.socket.remoteAddress,
      raw: ctx,
      signal: core.waits ? disconnectSignal(ctx.res) : undefined,
    });
    switch (outcome.kind) {
      case "skip":
        await next();
        return;
      case "pass":
        for (const [name, value] of outcome.headers) ctx.set(name, value);
        ctx.state.rateLimit = outcome.decision;
        whenDone(ctx.res, outcome.finish);
        await next();
        return;
      case "reject":
      case "error": {
        const type = outcome.headers.find(([n]) => n === "Content-Type")?.[1];
        for (const [name, value] of outcome.headers)
          if (name !== "Content-Type") ctx.set(name, value);
        ctx.status = outcome.status;
        ctx.body = outcome.body;
        if (type) ctx.type = type;
        return;
      }
      case "degrade":
        for (const [name, value] of outcome.headers) ctx.set(name, value);
        ctx.state.rateLimit = outcome.decision;
        await outcome.fallback(ctx, outcome.decision);
        return;
      case "aborted":
        ctx.respond = false;
        ctx.res.destroy();
        return;
    }
  };
}
