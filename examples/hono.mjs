// Hono on @hono/node-server: 20 requests/minute per API key (header x-api-key),
// falling back to the client IP; over the limit, a cached answer is served instead (degrade).
// Run: npm run build && PORT=3000 node examples/hono.mjs
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { createLimiter } from "sluice";
import { keys, rateLimit } from "sluice/hono";

const limiter = createLimiter({ policy: { name: "api", rules: [{ limit: 20, period: "1m" }] } });

const app = new Hono();
app.use(
  "/quotes/*",
  rateLimit({
    limiter,
    key: keys.apiKey("x-api-key"),
    strategy: { type: "degrade", fallback: (c) => c.json({ quote: "cached", stale: true }) },
  }),
);
app.get("/quotes/latest", (c) => c.json({ quote: "fresh", stale: false }));
app.get("/", (c) => c.text("try /quotes/latest"));

const port = Number(process.env.PORT ?? 3000);
const server = serve({ fetch: app.fetch, port, hostname: "127.0.0.1" }, () =>
  console.log(`hono example listening on http://127.0.0.1:${port}`),
);
process.on("SIGTERM", () => server.close(() => process.exit(0)));
