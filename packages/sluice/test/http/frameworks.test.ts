/**
 * What only one framework has: Fastify route-level config and plugin registration, Express
 * route middleware with route keys, Hono's route pattern and non-node peers, Koa's ctx.state.
 */
import { type IncomingMessage, createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import express4 from "express4";
import Fastify, { type FastifyInstance } from "fastify";
import { Hono } from "hono";
import Koa from "koa";
import { afterEach, describe, expect, it } from "vitest";
import { serve } from "@hono/node-server";
import { type Limiter, createLimiter, memoryStore, ValidationError } from "sluice";
import {
  type MiddlewareError,
  invalidKeyProblem,
  keys,
  middlewareErrorProblem,
  rateLimit as expressLimit,
} from "sluice/express";
import fastifyRateLimit, { rateLimit as fastifyLimit } from "sluice/fastify";
import { rateLimit as honoLimit } from "sluice/hono";
import { rateLimit as koaLimit } from "sluice/koa";
import { rateLimit as nodeLimit } from "sluice/node";

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
});

/**
 * A key function written the framework's way, and what a throwing one answers, in a real app of
 * each framework: the first argument is that framework's request (with what earlier middleware
 * put on it), the second sluice's view of it.
 */
describe("request functions get the framework's own request", () => {
  interface Seen {
    keys: string[];
    ips: string[];
  }
  interface App {
    readonly name: string;
    /** An app where earlier middleware sets the user `u1`, limited by `limiter` with a key from `?k=`. */
    start(limiter: Limiter, seen: Seen, throwing?: boolean): Promise<string>;
  }
  /** Notes a key read from the framework's request with sluice's IP, and returns it; or throws. */
  const noter = (seen: Seen, throwing: boolean | undefined) => (ip: string, key: string) => {
    if (throwing) throw new Error("identity service down");
    seen.keys.push(key);
    seen.ips.push(ip);
    return key;
  };
  const onError = () => undefined;

  const apps: App[] = [
    {
      name: "express",
      async start(limiter, seen, throwing) {
        const app = express();
        app.use((req, _res, next) => {
          (req as express.Request & { user?: string }).user = "u1";
          next();
        });
        app.use(
          expressLimit({
            limiter,
            onError,
            // As an Express user writes it: Express's req, its query and what middleware set.
            key: (req, http) =>
              noter(seen, throwing)(
                http.ip,
                `${(req as express.Request & { user?: string }).user}:${req.query.k as string}`,
              ),
            skip: (req) => req.get("x-skip") === "1",
          }),
        );
        app.get("/", (_req, res) => void res.send("ok"));
        return listen(createServer(app));
      },
    },
    {
      name: "fastify",
      async start(limiter, seen, throwing) {
        return fastify(async (app) => {
          app.decorateRequest("user", "");
          app.addHook("onRequest", async (request) => {
            (request as typeof request & { user: string }).user = "u1";
          });
          await app.register(
            fastifyLimit({
              limiter,
              onError,
              key: (request, http) =>
                noter(seen, throwing)(
                  http.ip,
                  `${(request as typeof request & { user: string }).user}:${(request.query as { k?: string }).k}`,
                ),
              skip: (request) => request.headers["x-skip"] === "1",
            }),
          );
          app.get("/", async () => "ok");
        });
      },
    },
    {
      name: "koa",
      async start(limiter, seen, throwing) {
        const app = new Koa();
        app.use(async (ctx, next) => {
          ctx.state.user = "u1";
          await next();
        });
        app.use(
          koaLimit({
            limiter,
            onError,
            key: (ctx, http) =>
              noter(seen, throwing)(
                http.ip,
                `${ctx.state.user as string}:${ctx.query.k as string}`,
              ),
            skip: (ctx) => ctx.get("x-skip") === "1",
          }),
        );
        app.use((ctx) => {
          ctx.body = "ok";
        });
        return listen(createServer(app.callback()));
      },
    },
    {
      name: "hono",
      async start(limiter, seen, throwing) {
        const app = new Hono<{ Variables: { user: string } }>();
        app.use(async (c, next) => {
          c.set("user", "u1");
          await next();
        });
        app.use(
          honoLimit({
            limiter,
            onError,
            key: (c, http) =>
              noter(seen, throwing)(http.ip, `${c.get("user") as string}:${c.req.query("k")}`),
            skip: (c) => c.req.header("x-skip") === "1",
          }),
        );
        app.get("/", (c) => c.text("ok"));
        return new Promise((resolve) => {
          const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => {
            closers.push(
              () => new Promise((r) => ((server as Server).closeAllConnections(), server.close(r))),
            );
            resolve(`http://127.0.0.1:${info.port}`);
          });
        });
      },
    },
    {
      name: "node",
      async start(limiter, seen, throwing) {
        const limit = nodeLimit({
          limiter,
          onError,
          key: (req, http) =>
            noter(seen, throwing)(
              http.ip,
              `${(req as IncomingMessage & { user?: string }).user}:${new URL(req.url ?? "/", "http://x").searchParams.get("k")}`,
            ),
          skip: (req) => req.headers["x-skip"] === "1",
        });
        const handler = limit((_req, res) => res.end("ok"));
        return listen(
          createServer((req, res) => {
            (req as IncomingMessage & { user?: string }).user = "u1"; // as earlier middleware would
            return handler(req, res);
          }),
        );
      },
    },
  ];

  it.each(apps)("$name: the key from its own request, the IP from sluice's", async (a) => {
    const seen: Seen = { keys: [], ips: [] };
    const base = await a.start(limiterOf(`native-${a.name}`, 1), seen);
    expect(await status(`${base}/?k=a`)).toBe(200);
    expect(await status(`${base}/?k=a`)).toBe(429);
    expect(await status(`${base}/?k=b`)).toBe(200);
    const skipped = await fetch(`${base}/?k=a`, { headers: { "x-skip": "1" } });
    expect(skipped.status).toBe(200);
    expect(skipped.headers.get("ratelimit")).toBeNull();
    expect(seen).toEqual({
      keys: ["u1:a", "u1:a", "u1:b"],
      ips: ["127.0.0.1", "127.0.0.1", "127.0.0.1"],
    });
  });

  it.each(apps)(
    "$name: a throwing key function answers the documented problem+json 500, no error page",
    async (a) => {
      const base = await a.start(limiterOf(`throwing-${a.name}`, 1), { keys: [], ips: [] }, true);
      const r = await fetch(base, { headers: { accept: "text/html" } });
      expect(r.status).toBe(500);
      expect(r.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(await r.json()).toEqual(middlewareErrorProblem("key"));
    },
  );
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

/**
 * docs/http.md's own key functions (`key: (req) => req.query.k`, and Fastify's and Koa's) in
 * real apps: a client that sends `?k=a&k=b` (an array) or `?k[x]=1` (an object, with Express 4's
 * query parser) gets a 400 problem+json naming what the key function returned, never a 500; the
 * failure reaches `onError` at most once a minute per route (the middleware's clock).
 */
describe("a key function's result that is not a string is the client's doing: 400", () => {
  interface QueryApp {
    readonly name: string;
    /** An app limited with the docs' key function of its framework, on `clock`; `/a` and `/b` are two routes. */
    start(
      limiter: Limiter,
      clock: () => number,
      onError: (e: MiddlewareError) => void,
    ): Promise<string>;
    /** The queries its parser reads as an array or an object, with what the key function returned. */
    readonly bad: ReadonlyArray<readonly [string, unknown]>;
  }
  /** {@link QueryApp.start} of an Express app made by `make` (Express 5, or 4 under its alias). */
  const expressQueryApp =
    (make: typeof express): QueryApp["start"] =>
    async (limiter, clock, onError) => {
      const app = make();
      const limit = expressLimit({
        limiter,
        clock,
        onError,
        key: (req) => req.query.k as string,
      });
      app.get("/a", limit, (_req, res) => void res.send("ok"));
      app.get("/b", limit, (_req, res) => void res.send("ok"));
      return listen(createServer(app));
    };
  const apps: QueryApp[] = [
    { name: "express", bad: [["?k=a&k=b", ["a", "b"]]], start: expressQueryApp(express) },
    {
      name: "express 4",
      bad: [
        ["?k=a&k=b", ["a", "b"]],
        ["?k[x]=1", { x: "1" }],
      ],
      start: expressQueryApp(express4),
    },
    {
      name: "fastify",
      bad: [["?k=a&k=b", ["a", "b"]]],
      async start(limiter, clock, onError) {
        return fastify(async (app) => {
          await app.register(
            fastifyLimit({
              limiter,
              clock,
              onError,
              key: (request) => (request.query as { k?: string }).k,
            }),
          );
          app.get("/a", async () => "ok");
          app.get("/b", async () => "ok");
        });
      },
    },
    {
      name: "koa",
      bad: [["?k=a&k=b", ["a", "b"]]],
      async start(limiter, clock, onError) {
        const app = new Koa();
        // Koa has no router of its own: the route is unknown, and one report a minute covers all.
        app.use(koaLimit({ limiter, clock, onError, key: (ctx) => ctx.query.k as string }));
        app.use((ctx) => {
          ctx.body = "ok";
        });
        return listen(createServer(app.callback()));
      },
    },
  ];

  it.each(apps)("$name: 400 problem+json, reported once a minute per route", async (a) => {
    let now = T0;
    const heard: MiddlewareError[] = [];
    const base = await a.start(
      limiterOf(`query-${a.name.replace(" ", "")}`, 100),
      () => now,
      (e) => heard.push(e),
    );
    for (const [query, result] of a.bad) {
      heard.length = 0;
      now += 60_000;
      for (let i = 0; i < 3; i++) {
        const r = await fetch(`${base}/a${query}`, { headers: { accept: "text/html" } });
        expect(r.status, query).toBe(400);
        expect(r.headers.get("content-type")).toMatch(/^application\/problem\+json/);
        expect(await r.json()).toEqual(invalidKeyProblem(result));
      }
      // The client's plain key still works.
      expect(await status(`${base}/a?k=plain`)).toBe(200);
      expect(heard).toHaveLength(1);
      expect(heard[0]!.stage).toBe("key");
      expect(heard[0]!.status).toBe(400);
      expect(heard[0]!.message).toMatch(/^the key function returned an? (array|object)/);
      // Another route is reported on its own (where the framework knows the route).
      const other = await fetch(`${base}/b${query}`);
      expect(other.status).toBe(400);
      expect(heard).toHaveLength(a.name === "koa" ? 1 : 2);
      // A minute later the next one is reported, with how many were not.
      now += 59_999;
      expect((await fetch(`${base}/a${query}`)).status).toBe(400);
      expect(heard).toHaveLength(a.name === "koa" ? 1 : 2);
      now += 1;
      expect((await fetch(`${base}/a${query}`)).status).toBe(400);
      expect(heard).toHaveLength(a.name === "koa" ? 2 : 3);
      expect(heard.at(-1)!.message).toMatch(
        a.name === "koa" ? /4 more requests/ : /3 more requests/,
      );
    }
  });

  it("without onError: one line on console.warn, no stack, once a minute", async () => {
    let now = T0;
    const app = express();
    app.use(
      expressLimit({
        limiter: limiterOf("query-log", 100),
        clock: () => now,
        key: (req) => req.query.k as string,
      }),
    );
    app.get("/", (_req, res) => void res.send("ok"));
    const base = await listen(createServer(app));
    const warned: unknown[][] = [];
    const errored: unknown[][] = [];
    const [warn, error] = [console.warn, console.error];
    console.warn = (...args: unknown[]) => void warned.push(args);
    console.error = (...args: unknown[]) => void errored.push(args);
    try {
      for (let i = 0; i < 50; i++) expect(await status(`${base}/?k=a&k=b`)).toBe(400);
      now += 60_000;
      expect(await status(`${base}/?k=a&k=b`)).toBe(400);
    } finally {
      [console.warn, console.error] = [warn, error];
    }
    expect(errored).toEqual([]);
    expect(warned).toHaveLength(2);
    for (const args of warned) {
      expect(args).toHaveLength(1);
      expect(args[0]).toBeTypeOf("string");
      expect(args[0] as string).not.toContain("\n");
    }
    expect(warned[0]![0]).toMatch(/^sluice: the key function returned an array \(2 items\)/);
    expect(warned[1]![0]).toMatch(/49 more requests/);
  });

  it("a throwing key function is still a 500 (the server's bug)", async () => {
    const app = express();
    app.use(
      expressLimit({
        limiter: limiterOf("query-throw", 100),
        clock,
        onError: () => undefined,
        key: (req) => (req.query.k as string).toLowerCase(),
      }),
    );
    app.get("/", (_req, res) => void res.send("ok"));
    const base = await listen(createServer(app));
    const r = await fetch(`${base}/?k=a&k=b`);
    expect(r.status).toBe(500);
    expect(await r.json()).toEqual(middlewareErrorProblem("key"));
  });
});
