/**
 * What only one framework has: Fastify route-level config and plugin registration, Express
 * route middleware with route keys, Hono's route pattern and non-node peers, Koa's ctx.state.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import Fastify, { type FastifyInstance } from "fastify";
import { Hono } from "hono";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { createLimiter, memoryStore, ValidationError } from "sluice";
import { keys, rateLimit as expressLimit } from "sluice/express";
import fastifyRateLimit, { rateLimit as fastifyLimit } from "sluice/fastify";
import { rateLimit as honoLimit } from "sluice/hono";
import { rateLimit as koaLimit } from "sluice/koa";

const T0 = 1_700_000_000_000;
const clock = () => T0;
const limiterOf = (name: string, limit: number) =>
  createLimiter({
    store: memoryStore({ now: clock }),
    policy: { name, rules: [{ limit, period: "1m" }] },
  });

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  closers.push(() => new Promise((r) => (server.closeAllConnections(), server.close(r))));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function fastify(setup: (app: FastifyInstance) => Promise<void> | void): Promise<string> {
  const app = Fastify();
  await setup(app);
  await app.listen({ port: 0, host: "127.0.0.1" });
  closers.push(() => app.close());
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

const status = async (url: string) => (await fetch(url)).status;

describe("fastify", () => {
  it("applies route-level config over the plugin's, and false turns limiting off", async () => {
    const global = limiterOf("global", 2);
    const strict = limiterOf("strict", 1);
    const base = await fastify(async (app) => {
      await app.register(fastifyLimit({ limiter: global, clock }));
      app.get("/", async () => "ok");
      app.get(
        "/strict",
        { config: { rateLimit: { limiter: strict, headers: "ietf" } } },
        async () => "ok",
      );
      app.get("/free", { config: { rateLimit: false } }, async () => "ok");
      app.get("/decision", async (req) => ({ policy: req.rateLimit?.policy }));
    });
    const s = await fetch(`${base}/strict`);
    expect(s.headers.get("ratelimit-policy")).toBe('"strict";q=1;w=60');
    expect(s.headers.get("x-ratelimit-limit")).toBeNull();
    expect(await status(`${base}/strict`)).toBe(429);
    for (let i = 0; i < 5; i++) expect(await status(`${base}/free`)).toBe(200);
    expect(await (await fetch(`${base}/decision`)).json()).toEqual({ policy: "global" });
    expect(await status(base)).toBe(200);
    expect(await status(base)).toBe(429);
  });

  it("global: false limits only routes that ask for it; the plugin registers with options too", async () => {
    const strict = limiterOf("strict", 1);
    const base = await fastify(async (app) => {
      await app.register(fastifyRateLimit, { global: false, limiter: strict, clock });
      app.get("/", async () => "ok");
      app.get("/limited", { config: { rateLimit: {} } }, async () => "ok");
    });
    for (let i = 0; i < 3; i++) expect(await status(base)).toBe(200);
    expect(await status(`${base}/limited`)).toBe(200);
    expect(await status(`${base}/limited`)).toBe(429);
  });

  it("rejects a bad route option when the route is declared", async () => {
    const app = Fastify();
    await app.register(fastifyLimit({ limiter: limiterOf("g", 1) }));
    expect(() =>
      app.get("/x", { config: { rateLimit: { headers: "nope" as "ietf" } } }, async () => "ok"),
    ).toThrow(ValidationError);
    await app.close();
  });
});

describe("express", () => {
  it("as route middleware, keys.route() keys by the route pattern", async () => {
    const limiter = limiterOf("per-route", 1);
    const seen: string[] = [];
    const app = express();
    const limit = expressLimit({
      limiter,
      key: keys.route(),
      clock,
      onDecision: (e) => seen.push(e.key),
    });
    app.get("/users/:id", limit, (_req, res) => void res.send("user"));
    app.get("/posts/:id", limit, (_req, res) => void res.send("post"));
    const base = await listen(createServer(app));
    expect(await status(`${base}/users/1`)).toBe(200);
    expect(await status(`${base}/users/2`)).toBe(429); // same route pattern, same client
    expect(await status(`${base}/posts/1`)).toBe(200);
    expect(seen).toEqual([
      "route:GET /users/:id|ip:127.0.0.1",
      "route:GET /users/:id|ip:127.0.0.1",
      "route:GET /posts/:id|ip:127.0.0.1",
    ]);
  });

  it("passes errors from key functions to the error handlers", async () => {
    const app = express();
    app.use(
      expressLimit({
        limiter: limiterOf("x", 1),
        key: async () => {
          throw new Error("no identity service");
        },
      }),
    );
    app.get("/", (_req, res) => void res.send("ok"));
    app.use(
      (err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) =>
        void res.status(503).send(err.message),
    );
    const base = await listen(createServer(app));
    const r = await fetch(base);
    expect(r.status).toBe(503);
    expect(await r.text()).toBe("no identity service");
  });
});

describe("hono", () => {
  it("keys by the matched route pattern", async () => {
    const seen: string[] = [];
    const app = new Hono();
    app.use(
      honoLimit({
        limiter: limiterOf("r", 5),
        key: keys.route(),
        clock,
        peer: () => "203.0.113.1",
        onDecision: (e) => seen.push(e.key),
      }),
    );
    app.get("/items/:id", (c) => c.text(c.get("rateLimit").policy));
    const res = await app.request("/items/42");
    expect(await res.text()).toBe("r");
    expect(seen).toEqual(["route:GET /items/:id|ip:203.0.113.1"]);
  });

  it("takes the peer from a `peer` function off node (fetch-style app.request)", async () => {
    const app = new Hono();
    app.use(
      honoLimit({ limiter: limiterOf("p", 1), clock, peer: (c) => c.req.header("x-test-peer") }),
    );
    app.get("/", (c) => c.text("ok"));
    expect((await app.request("/", { headers: { "x-test-peer": "2001:db8:1:1::1" } })).status).toBe(
      200,
    );
    expect((await app.request("/", { headers: { "x-test-peer": "2001:db8:1:1::2" } })).status).toBe(
      429,
    );
    expect((await app.request("/", { headers: { "x-test-peer": "2001:db8:1:2::1" } })).status).toBe(
      200,
    );
    // Without a peer the request counts against "unknown": limited, never unlimited.
    expect((await app.request("/")).status).toBe(200);
    expect((await app.request("/")).status).toBe(429);
  });
});

describe("koa", () => {
  it("exposes the decision in ctx.state.rateLimit", async () => {
    const app = new Koa();
    app.use(koaLimit({ limiter: limiterOf("k", 3), clock }));
    app.use((ctx) => {
      ctx.body = { remaining: (ctx.state.rateLimit as { remaining: number }).remaining };
    });
    const base = await listen(createServer(app.callback()));
    expect(await (await fetch(base)).json()).toEqual({ remaining: 2 });
  });
});
