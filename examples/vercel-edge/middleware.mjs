/* global Response */
// Vercel Routing Middleware (Edge runtime): 10 requests per 10 seconds per client IP on /api/*,
// counted in Redis over HTTP (Upstash's REST API: UPSTASH_REDIS_REST_URL and
// UPSTASH_REDIS_REST_TOKEN, as the Upstash integration sets them).
// Deploy: put this file at the project's root as middleware.js; npm install sluice @upstash/redis.
import { Redis } from "@upstash/redis";
import { createLimiter } from "sluice";
import { RateLimitCore } from "sluice/http";
import { upstashStore } from "sluice/upstash";

export const config = { matcher: "/api/:path*" };

const limiter = createLimiter({
  store: upstashStore({
    redis: new Redis({
      url: process.env.UPSTASH_REDIS_REST_URL,
      token: process.env.UPSTASH_REDIS_REST_TOKEN,
    }),
  }),
  policy: { name: "api", rules: [{ limit: 10, period: "10s" }] },
});

// sluice/http's framework-free core: keys, headers, problem+json bodies, as the middlewares do.
const core = new RateLimitCore({ limiter });

export default async function middleware(request) {
  const outcome = await core.handle({
    method: request.method,
    path: new URL(request.url).pathname,
    route: undefined,
    header: (name) => request.headers.get(name) ?? undefined,
    // Vercel gives the client's address in x-real-ip.
    peer: request.headers.get("x-real-ip") ?? undefined,
    raw: request,
  });
  if (outcome.kind === "reject" || outcome.kind === "error")
    return new Response(outcome.body, {
      status: outcome.status,
      headers: outcome.headers.map(([name, value]) => [name, value]),
    });
  if (outcome.kind === "pass") outcome.finish(200);
  // Carry on to the route (what @vercel/functions' next() answers).
  return new Response(null, { headers: { "x-middleware-next": "1" } });
}
