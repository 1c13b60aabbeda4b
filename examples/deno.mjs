/* global Deno */
// Deno: a Hono app on Deno.serve, 10 requests a minute per client IP (this process's memory).
// Run from a project with sluice and hono installed (npm install sluice hono, or this repository
// after npm run build): PORT=3000 deno run --allow-net --allow-env examples/deno.mjs
// Several instances sharing one limit: put upstashStore (sluice/upstash) or redisStore there.
import { Hono } from "hono";
import { getConnInfo } from "hono/deno";
import { createLimiter } from "sluice";
import { rateLimit } from "sluice/hono";

const limiter = createLimiter({ policy: { name: "api", rules: [{ limit: 10, period: "1m" }] } });

const app = new Hono();
// Deno.serve hands Hono the connection's info: the client address, for the default key.
app.use(rateLimit({ limiter, peer: (c) => getConnInfo(c).remote.address }));
app.get("/", (c) => c.text(`hello from Deno, ${c.get("rateLimit").remaining} left\n`));

const port = Number(Deno.env.get("PORT") ?? 3000);
Deno.serve({
  port,
  hostname: "127.0.0.1",
  onListen: () => console.log(`deno example listening on http://127.0.0.1:${port}`),
  handler: app.fetch,
});
