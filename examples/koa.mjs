// Koa with the `wait` strategy: bursts are smoothed to 5 requests/second per IP;
// a request that would wait more than 2 s gets a 429 instead.
// Run: npm run build && PORT=3000 node examples/koa.mjs
import { createServer } from "node:http";
import Koa from "koa";
import { createLimiter } from "sluice";
import { rateLimit } from "sluice/koa";

const limiter = createLimiter({
  policy: { name: "smooth", rules: [{ limit: 5, period: "1s", burst: 5 }] },
});

const app = new Koa();
app.use(rateLimit({ limiter, strategy: { type: "wait", maxWaitMs: 2000 } }));
app.use((ctx) => {
  ctx.body = { hello: "world", remaining: ctx.state.rateLimit?.remaining };
});

const port = Number(process.env.PORT ?? 3000);
const server = createServer(app.callback()).listen(port, "127.0.0.1", () =>
  console.log(`koa example listening on http://127.0.0.1:${port}`),
);
process.on("SIGTERM", () => server.close(() => process.exit(0)));
