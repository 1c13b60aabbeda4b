/**
 * `sluice/node`: rate limiting for a plain node:http server.
 *
 * ```ts
 * import { createServer } from "node:http";
 * import { rateLimit } from "sluice/node";
 * const limit = rateLimit({ limiter });
 * createServer(limit((req, res) => res.end("ok"))).listen(3000);
 * ```
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Decision } from "../../decision.js";
import { RateLimitCore } from "../core.js";
import { nodeRequestInput, settleNodeOutcome } from "../node-io.js";
import type { RateLimitOptions } from "../types.js";

export * from "../index.js";

/** A node:http request handler. */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse) => unknown;

/** The `degrade` fallback for node:http: serves a denied request; rate-limit headers are already set. */
export type NodeFallback = (
  req: IncomingMessage,
  res: ServerResponse,
  decision: Decision,
) => unknown;

/** Options of the node:http middleware (see {@link RateLimitOptions}). */
export type NodeRateLimitOptions = RateLimitOptions<IncomingMessage, NodeFallback>;

/** The middleware: wraps a handler, or checks a request by hand with {@link NodeRateLimit.check}. */
export interface NodeRateLimit {
  /**
   * Wraps `handler`: it runs only for requests that may pass. When a key, cost or skip function
   * throws, the request is answered 500 with a problem+json body (and `onError` hears why).
   */
  (handler: NodeHandler): NodeHandler;
  /**
   * Decides one request: sets the headers and resolves `true` when the caller should go on to
   * handle it; `false` when the middleware already answered (429/503, a 500 when a function of
   * the options failed, the fallback, or the client is gone).
   */
  check(req: IncomingMessage, res: ServerResponse): Promise<boolean>;
}

/** Creates the node:http middleware. Options are validated now; a bad option throws a `ValidationError`. */
export function rateLimit(options: NodeRateLimitOptions): NodeRateLimit {
  const core = new RateLimitCore<IncomingMessage, NodeFallback>(options);
  const check = async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    const outcome = await core.handle(
      nodeRequestInput(core.waits, req, res, req, req.url, undefined),
    );
    return settleNodeOutcome(outcome, req, res);
  };
  const wrap = (handler: NodeHandler): NodeHandler => {
    return async (req, res) => {
      let go: boolean;
      try {
        go = await check(req, res);
      } catch (err) {
        // The degrade fallback threw: a server error, never a pass.
        console.error("sluice: rate limiting failed", err);
        if (!res.headersSent) {
          res.statusCode = 500;
          res.end();
        } else res.destroy();
        return;
      }
      if (go) await handler(req, res);
    };
  };
  return Object.assign(wrap, { check });
}
