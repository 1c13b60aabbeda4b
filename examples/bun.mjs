/* global Bun */
// Bun: a Hono app on Bun.serve, 10 requests a minute per client IP (this process's memory).
// Run from a project with sluice and hono installed (npm install sluice hono, or this repository
// after npm run build): PORT=3000 bun examples/bun.mjs
// Several instances sharing one limit: put redisStore (ioredis runs on Bun) or upstashStore there.
import { Hono } from "hono";
import { getConnInfo } from "hono/bun";
import { createLimiter } from "sluice";
import { rateLimit } from "sluice/hono";

const limiter = createLimiter({ policy: { name: "api", rules: [{ limit: 10, period: "1m" }] } });

const app = new Hono();
// Bun.serve hands Hono its server, which knows each request's client address.
app.use(rateLimit({ limiter, peer: (c) => getConnInfo(c).remote.address }));
app.get("/", (c) => c.text(`hello from Bun, ${c.get("rateLimit").remaining} left\n`));

const port = Number(process.env.PORT ?? 3000);
Bun.serve({ port, hostname: "127.0.0.1", fetch: app.fetch });
console.log(`bun example listening on http://127.0.0.1:${port}`);
