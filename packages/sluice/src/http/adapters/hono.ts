/**
 * `sluice/hono`: rate-limiting middleware for Hono 4.
 *
 * ```ts
 * import { Hono } from "hono";
 * import { rateLimit } from "sluice/hono";
 * const app = new Hono();
 * app.use(rateLimit({ limiter }));
 * ```
 *
 * The client's socket address comes from @hono/node-server (`c.env.incoming`). On other
 * runtimes pass `peer: (c) => …` (e.g. `getConnInfo(c).remote.address` from Hono's helpers).
 * The route pattern is the matched handler's path (`/users/:id`).
 */
import type { Context, MiddlewareHandler } from "hono";
import type { Decision } from "../../decision.js";
import { RateLimitCore } from "../core.js";
import type { HeaderList } from "../headers.js";
import type { RateLimitOptions } from "../types.js";

export * from "../index.js";

declare module "hono" {
  interface ContextVariableMap {
    /** The rate-limit decision for this request (set by sluice's middleware). */
    rateLimit: Decision;
  }
}

/** The `degrade` fallback for Hono: returns the response for a denied request; rate-limit headers are added to it. */
export type HonoFallback = (c: Context, decision: Decision) => Response | Promise<Response>;

/** Options of the Hono middleware (see {@link RateLimitOptions}), plus where to find the peer address. */
export interface HonoRateLimitOptions extends RateLimitOptions<Context, HonoFallback> {
  /** The socket peer address of a request. Default: @hono/node-server's `c.env.incoming.socket.remoteAddress`. */
  peer?: (c: Context) => string | undefined;
}

interface NodeBindings {
  incoming?: { socket?: { remoteAddress?: string } };
}

function nodePeer(c: Context): string | undefined {
  const env = c.env as NodeBindings | undefined;
  return env?.incoming?.socket?.remoteAddress;
}

function routeOf(c: Context): string | undefined {
  try {
    const routes = c.req.matchedRoutes;
    for (let i = routes.length - 1; i >= 0; i--)
      if (routes[i]!.method !== "ALL") return routes[i]!.path;
  } catch {
    // Older or newer Hono without matchedRoutes: no route pattern.
  }
  return undefined;
}

/** Sets headers on a response, copying it first when its headers are immutable (e.g. a fetched response). */
function withHeaders(res: Response, headers: HeaderList): Response {
  let out = res;
  try {
    for (const [name, value] of headers) out.headers.set(name, value);
  } catch {
    out = new Response(res.body, res);
    for (const [name, value] of headers) out.headers.set(name, value);
  }
  return out;
}

/**
 * Creates the Hono middleware. Options are validated now. The decision is available as
 * `c.get("rateLimit")`. A concurrency slot is released when the handler has returned its
 * response (a streamed body may still be flowing).
 */
export function rateLimit(options: HonoRateLimitOptions): MiddlewareHandler {
  const { peer, ...rest } = options;
  const core = new RateLimitCore<Context, HonoFallback>(rest);
  const getPeer = peer ?? nodePeer;
  return async (c, next) => {
    const outcome = await core.handle({
      method: c.req.method,
      path: c.req.path,
      route: routeOf(c),
      header: (name) => c.req.header(name),
      peer: getPeer(c),
      raw: c,
      signal: c.req.raw.signal,
    });
    switch (outcome.kind) {
      case "skip":
        await next();
        return;
      case "pass": {
        c.set("rateLimit", outcome.decision);
        try {
          await next();
        } catch (err) {
          outcome.finish(500);
          throw err;
        }
        // c.header() after next() re-creates the response when needed, so this works for any handler.
        for (const [name, value] of outcome.headers) c.header(name, value);
        outcome.finish(c.res.status);
        return;
      }
      case "reject":
      case "error":
        return new Response(outcome.body, {
          status: outcome.status,
          headers: outcome.headers.map(([n, v]) => [n, v]),
        });
      case "degrade":
        c.set("rateLimit", outcome.decision);
        return withHeaders(await outcome.fallback(c, outcome.decision), outcome.headers);
      case "aborted":
        return new Response(null, { status: 499 });
    }
  };
}
