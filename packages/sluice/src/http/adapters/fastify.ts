/**
 * `sluice/fastify`: a Fastify 5 plugin, with per-route settings in the route's config.
 *
 * ```ts
 * import Fastify from "fastify";
 * import { rateLimit } from "sluice/fastify";
 * const app = Fastify();
 * await app.register(rateLimit({ limiter }));
 * app.get("/search", { config: { rateLimit: { limiter: searchLimiter } } }, handler);
 * app.get("/health", { config: { rateLimit: false } }, handler);
 * ```
 *
 * Fastify's own `trustProxy` setting is not consulted: pass `trustProxy` here.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import type { Decision } from "../../decision.js";
import { RateLimitCore } from "../core.js";
import { nodeRequestInput, whenDone } from "../node-io.js";
import type { HeaderList } from "../headers.js";
import type { RateLimitOptions } from "../types.js";

export * from "../index.js";

/** The `degrade` fallback for Fastify: sends the response for a denied request; rate-limit headers are already set. */
export type FastifyFallback = (
  request: FastifyRequest,
  reply: FastifyReply,
  decision: Decision,
) => unknown;

/** Options of the Fastify plugin (see {@link RateLimitOptions}). */
export interface FastifyRateLimitOptions extends Omit<
  RateLimitOptions<FastifyRequest, FastifyFallback>,
  "limiter"
> {
  /** The limiter, or a function choosing one per request. May be left out when `global` is false and routes set their own. */
  limiter?: RateLimitOptions<FastifyRequest, FastifyFallback>["limiter"];
  /** Limit every route (default `true`). With `false` only routes whose `config.rateLimit` is set are limited. */
  global?: boolean;
}

/** A route's `config.rateLimit`: options merged over the plugin's, or `false` to leave the route unlimited. */
export type RouteRateLimitConfig = Omit<FastifyRateLimitOptions, "global"> | false;

declare module "fastify" {
  interface FastifyContextConfig {
    /** sluice: this route's rate-limit options (merged over the plugin's), or `false` for none. */
    rateLimit?: RouteRateLimitConfig;
  }
  interface FastifyRequest {
    /** sluice: the rate-limit decision for this request, when one was made. */
    rateLimit?: Decision;
  }
}

type Core = RateLimitCore<FastifyRequest, FastifyFallback>;

function headerObject(headers: HeaderList): Record<string, string> {
  return Object.fromEntries(headers);
}

const plugin: FastifyPluginAsync<FastifyRateLimitOptions> = async (fastify, options) => {
  const { global = true, ...base } = options;
  const compile = (o: Omit<FastifyRateLimitOptions, "global">): Core => {
    const { limiter, ...others } = o;
    return new RateLimitCore<FastifyRequest, FastifyFallback>({
      ...others,
      limiter: limiter as RateLimitOptions<FastifyRequest, FastifyFallback>["limiter"],
    });
  };
  const globalCore = global ? compile(base) : undefined;
  const routeCores = new WeakMap<object, Core>();
  const coreFor = (cfg: Omit<FastifyRateLimitOptions, "global">): Core => {
    let core = routeCores.get(cfg);
    if (!core) routeCores.set(cfg, (core = compile({ ...base, ...cfg })));
    return core;
  };

  if (!fastify.hasRequestDecorator("rateLimit")) fastify.decorateRequest("rateLimit", undefined);
  // Validate route settings when routes are declared, so a bad option fails at startup.
  fastify.addHook("onRoute", (route) => {
    const cfg = (route.config as { rateLimit?: RouteRateLimitConfig } | undefined)?.rateLimit;
    if (cfg) coreFor(cfg);
  });

  fastify.addHook("onRequest", async (request, reply) => {
    const cfg = request.routeOptions.config?.rateLimit;
    if (cfg === false) return;
    const core = cfg ? coreFor(cfg) : globalCore;
    if (!core) return;
    const outcome = await core.handle(
      nodeRequestInput(
        core.waits,
        request.raw,
        reply.raw,
        request,
        request.url,
        request.routeOptions.url,
      ),
    );
    switch (outcome.kind) {
      case "skip":
        return;
      case "pass":
        reply.headers(headerObject(outcome.headers));
        request.rateLimit = outcome.decision;
        whenDone(reply.raw, outcome.finish);
        return;
      case "reject":
      case "error":
        return reply.code(outcome.status).headers(headerObject(outcome.headers)).send(outcome.body);
      case "degrade":
        reply.headers(headerObject(outcome.headers));
        request.rateLimit = outcome.decision;
        await outcome.fallback(request, reply, outcome.decision);
        return reply;
      case "aborted":
        reply.hijack();
        reply.raw.destroy();
        return reply;
    }
  });
};

/**
 * The plugin, registered with its options: `app.register(fastifyRateLimit, { limiter })`.
 * Encapsulation is skipped (fastify-plugin), so the hook applies to every route of the instance.
 */
export const fastifyRateLimit = fp(plugin, { fastify: "5.x", name: "sluice" });

/** The plugin with its options bound: `app.register(rateLimit({ limiter }))`. Options are validated now. */
export function rateLimit(options: FastifyRateLimitOptions): FastifyPluginAsync {
  const { global = true, ...base } = options;
  if (global || base.limiter !== undefined) {
    // Fail at the call site, not at registration, for a bad option.
    const { limiter, ...others } = base;
    new RateLimitCore<FastifyRequest, FastifyFallback>({
      ...others,
      limiter: limiter as RateLimitOptions<FastifyRequest, FastifyFallback>["limiter"],
    });
  }
  return fp(async (fastify) => plugin(fastify, options), { fastify: "5.x", name: "sluice" });
}

export default fastifyRateLimit;
