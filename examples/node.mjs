// A plain node:http server limited to 10 requests per minute per client IP.
// Run: npm run build && PORT=3000 node examples/node.mjs
import { createServer } from "node:http";
import { createLimiter } from "sluice";
import { rateLimit } from "sluice/node";

const limiter = createLimiter({
  policy: { name: "api", algorithm: "gcra", rules: [{ limit: 10, period: "1m" }] },
});
const limit = rateLimit({ limiter, headers: "both" });

const server = createServer(
  limit((req, res) => {
    res.setHeader("Content-Type", "application/json");
    res.end(JSON.stringify({ hello: "world" }));
  }),
);

const port = Number(process.env.PORT ?? 3000);
server.listen(port, "127.0.0.1", () =>
  console.log(`node example listening on http://127.0.0.1:${port}`),
);
process.on("SIGTERM", () => server.close(() => process.exit(0)));
