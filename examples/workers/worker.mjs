// Cloudflare Workers: a Hono app limited through Durable Objects — exact across every Worker
// in the world, with no Redis. 20 requests a minute per client IP on /api/*.
// Deploy: npm install sluice hono && npx wrangler deploy (wrangler.toml beside this file).
import { Hono } from "hono";
import { getConnInfo } from "hono/cloudflare-workers";
import { createLimiter, definePolicy } from "sluice";
import { durableObjectStore } from "sluice/durable-object";
import { rateLimit } from "sluice/hono";

// The Durable Object class the store talks to; wrangler.toml binds it as LIMITER.
export { SluiceDurableObject } from "sluice/durable-object";

const policy = definePolicy({ name: "api", rules: [{ limit: 20, period: "1m" }] });

// One limiter per isolate, made on the first request (bindings come with requests).
let limiter;

const app = new Hono();
app.use(
  "/api/*",
  rateLimit({
    limiter: (c) =>
      (limiter ??= createLimiter({
        store: durableObjectStore({ namespace: c.env.LIMITER }),
        policy,
      })),
    // Cloudflare puts the client's address in cf-connecting-ip.
    peer: (c) => getConnInfo(c).remote.address,
  }),
);
app.get("/api/hello", (c) => c.json({ hello: "world", remaining: c.get("rateLimit").remaining }));
app.get("/", (c) => c.text("try /api/hello"));

export default app;
