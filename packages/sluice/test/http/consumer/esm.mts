// A TypeScript consumer importing the built package as users do (ESM). Type-checked by
// examples.test.ts with `tsc -p`; never run.
import { createServer } from "node:http";
import { serve } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import Koa from "koa";
import { createLimiter, type Decision } from "sluice";
import { keys, rateLimit as expressLimit, type ExpressRateLimitOptions } from "sluice/express";
import fastifyRateLimit, { rateLimit as fastifyLimit } from "sluice/fastify";
import { rateLimit as honoLimit } from "sluice/hono";
import { githubHeaders, type HeaderList } from "sluice/http";
import { rateLimit as koaLimit } from "sluice/koa";
import { rateLimit as nodeLimit } from "sluice/node";

const limiter = createLimiter({ policy: { name: "api", rules: [{ limit: 10, period: "1m" }] } });

const options: ExpressRateLimitOptions = {
  limiter,
  key: keys.first(keys.apiKey(), keys.ip()),
  strategy: {
    type: "degrade",
    fallback: (_req, res, d: Decision) => void res.json({ retry: d.retryAfterMs }),
  },
};
express().use(expressLimit(options));

const f = Fastify();
await f.register(fastifyLimit({ limiter, headers: "ietf" }));
await f.register(fastifyRateLimit, { limiter, global: false });
f.get("/", { config: { rateLimit: false } }, async (req) => req.rateLimit?.remaining);

const h = new Hono();
h.use(honoLimit({ limiter, strategy: { type: "wait", maxWaitMs: 500 } }));
h.get("/", (c) => c.json({ remaining: c.get("rateLimit").remaining }));
serve({ fetch: h.fetch, port: 0 });

new Koa().use(koaLimit({ limiter, strategy: "shadow" }));

const limit = nodeLimit({
  limiter,
  trustProxy: ["loopback"],
  onDecision: (e) => console.log(e.action, e.key),
});
createServer(limit((_req, res) => res.end("ok")));

const list: HeaderList = githubHeaders(await limiter.limit("k"), { nowMs: Date.now() });
console.log(list);

// @ts-expect-error headers must be one of the known formats
nodeLimit({ limiter, headers: "draft-7" });

// Each adapter's request functions get that framework's request, typed as it types it, and
// sluice's framework-free view second.
expressLimit({
  key: (req) => (typeof req.query.k === "string" ? req.query.k : undefined),
  skip: (req, http) => req.get("x-skip") === "1" || http.ip === "127.0.0.1",
  cost: (req) => (req.method === "POST" ? 2 : 1),
  limiter: (req) => (req.path.startsWith("/admin") ? undefined : limiter),
  strategy: { type: "reject", body: (d, req) => ({ retry: d.retryAfterMs, path: req.path }) },
  onError: (error, req) => console.error(error.stage, req.originalUrl),
});
fastifyLimit({ limiter, key: (request, http) => request.routeOptions.url ?? http.path });
koaLimit({
  limiter,
  key: (ctx) => ctx.get("x-user") || undefined,
  skip: (ctx) => ctx.path === "/",
});
honoLimit({
  limiter,
  key: (c) => c.req.query("k"),
  cost: (c) => (c.req.method === "POST" ? 2 : 1),
});
nodeLimit({ limiter, key: (req) => req.headers["x-user"]?.toString(), skip: (req) => !req.url });
expressLimit({ limiter, key: keys.user((req) => req.get("x-user-id")) });
// @ts-expect-error Koa's middleware gets a Koa ctx, not an Express req
koaLimit({ limiter, key: (req: express.Request) => req.get("x-user") });
// @ts-expect-error Express's req has no Koa `state`
expressLimit({ limiter, key: (req) => req.state.user });
// @ts-expect-error a key is a string (or undefined), not a number
honoLimit({ limiter, key: () => 42 });
