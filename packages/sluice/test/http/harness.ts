/**
 * One small server per framework, each with the same routes, so one scenario table runs
 * against every adapter through real HTTP on loopback.
 *
 *   GET /            200 "ok"
 *   GET /fail        500 "fail"
 *   GET /hold        200 once `releaseHold()` is called (for concurrency)
 *   GET /users/:id   200 "user"
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import express4 from "express4";
import Fastify from "fastify";
import { Hono } from "hono";
import Koa from "koa";
import type {
  RateLimitOptions,
  RejectStrategy,
  ShadowStrategy,
  WaitStrategy,
} from "../../src/http/index.js";
import { rateLimit as expressLimit } from "sluice/express";
import { rateLimit as fastifyLimit } from "sluice/fastify";
import { rateLimit as honoLimit } from "sluice/hono";
import { rateLimit as koaLimit } from "sluice/koa";
import { rateLimit as nodeLimit } from "sluice/node";

/** Options every adapter accepts; `"degrade"` makes the harness install a fallback answering 200 "degraded". */
export type HarnessOptions = Omit<RateLimitOptions<unknown, never>, "strategy"> & {
  strategy?:
    | "reject"
    | "shadow"
    | "degrade"
    | RejectStrategy<unknown>
    | WaitStrategy
    | ShadowStrategy<unknown>;
  /** Listen address, default 127.0.0.1. */
  host?: string;
};

export interface Running {
  readonly url: string;
  close(): Promise<void>;
}

export interface Harness {
  readonly name: "node" | "express" | "express4" | "fastify" | "koa" | "hono";
  start(options: HarnessOptions): Promise<Running>;
}

let holdGate = deferred();

/** Lets every pending `GET /hold` finish. */
export function releaseHold(): void {
  holdGate.resolve();
  holdGate = deferred();
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

function urlOf(server: Server, host: string): string {
  const { port } = server.address() as AddressInfo;
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

function listen(server: Server, host: string): Promise<Running> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, host, () =>
      resolve({
        url: urlOf(server, host),
        close: () =>
          new Promise<void>((r) => {
            server.closeAllConnections();
            server.close(() => r());
          }),
      }),
    );
  });
}

/** Builds adapter options: turns `"degrade"` into a degrade strategy with the framework's fallback. */
function split<F>(o: HarnessOptions, fallback: F): { opts: RateLimitOptions<unknown, F> } {
  const { host: _host, strategy, ...rest } = o;
  if (strategy === undefined) return { opts: rest };
  return {
    opts: { ...rest, strategy: strategy === "degrade" ? { type: "degrade", fallback } : strategy },
  };
}

/** The Express server of the table, on `make` (Express 5, or Express 4 under its alias). */
function expressHarness(name: "express" | "express4", make: typeof express): Harness {
  return {
    name,
    async start(o) {
      const { opts } = split(o, (_req: express.Request, res: express.Response) => {
        res.set("x-degraded", "1").send("degraded");
      });
      const app = make();
      app.use(expressLimit(opts));
      app.get("/", (_req, res) => void res.send("ok"));
      app.get("/fail", (_req, res) => void res.status(500).send("fail"));
      app.get("/hold", async (_req, res) => {
        await holdGate.promise;
        res.send("held");
      });
      app.get("/users/:id", (_req, res) => void res.send("user"));
      return listen(createServer(app), o.host ?? "127.0.0.1");
    },
  };
}

export const harnesses: Harness[] = [
  {
    name: "node",
    async start(o) {
      const { opts } = split(o, (_req: unknown, res: import("node:http").ServerResponse) => {
        res.setHeader("x-degraded", "1");
        res.end("degraded");
      });
      const limit = nodeLimit(opts);
      const server = createServer(
        limit(async (req, res) => {
          const path = (req.url ?? "/").split("?")[0];
          if (path === "/fail") {
            res.statusCode = 500;
            res.end("fail");
          } else if (path === "/hold") {
            await holdGate.promise;
            res.end("held");
          } else if (path?.startsWith("/users/")) res.end("user");
          else res.end("ok");
        }),
      );
      return listen(server, o.host ?? "127.0.0.1");
    },
  },
  expressHarness("express", express),
  // Express 4 (the npm alias express4): the same adapter, the same table.
  expressHarness("express4", express4),
  {
    name: "fastify",
    async start(o) {
      const { opts } = split(o, (_req: unknown, reply: import("fastify").FastifyReply) =>
        reply.header("x-degraded", "1").send("degraded"),
      );
      // Close even connections a client left open mid-request, as the other harnesses do.
      const app = Fastify({ forceCloseConnections: true });
      await app.register(fastifyLimit(opts));
      app.get("/", async () => "ok");
      app.get("/fail", async (_req, reply) => reply.code(500).send("fail"));
      app.get("/hold", async () => {
        await holdGate.promise;
        return "held";
      });
      app.get("/users/:id", async () => "user");
      await app.listen({ port: 0, host: o.host ?? "127.0.0.1" });
      return { url: urlOf(app.server, o.host ?? "127.0.0.1"), close: () => app.close() };
    },
  },
  {
    name: "koa",
    async start(o) {
      const { opts } = split(o, (ctx: Koa.Context) => {
        ctx.set("x-degraded", "1");
        ctx.body = "degraded";
      });
      const app = new Koa();
      app.use(koaLimit(opts));
      app.use(async (ctx) => {
        if (ctx.path === "/fail") {
          ctx.status = 500;
          ctx.body = "fail";
        } else if (ctx.path === "/hold") {
          await holdGate.promise;
          ctx.body = "held";
        } else if (ctx.path.startsWith("/users/")) ctx.body = "user";
        else ctx.body = "ok";
      });
      return listen(createServer(app.callback()), o.host ?? "127.0.0.1");
    },
  },
  {
    name: "hono",
    async start(o) {
      const { opts } = split(o, (c: import("hono").Context) =>
        c.text("degraded", 200, { "x-degraded": "1" }),
      );
      const app = new Hono();
      app.use(honoLimit(opts));
      app.get("/", (c) => c.text("ok"));
      app.get("/fail", (c) => c.text("fail", 500));
      app.get("/hold", async (c) => {
        await holdGate.promise;
        return c.text("held");
      });
      app.get("/users/:id", (c) => c.text("user"));
      const host = o.host ?? "127.0.0.1";
      return new Promise((resolve) => {
        const server = serve({ fetch: app.fetch, port: 0, hostname: host }, () => {
          resolve({
            url: urlOf(server as Server, host),
            close: () =>
              new Promise<void>((r) => {
                (server as Server).closeAllConnections();
                server.close(() => r());
              }),
          });
        });
      });
    },
  },
];
