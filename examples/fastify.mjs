// Fastify: 100 requests/minute per IP everywhere, a stricter policy on /search,
// and no limit on /health (route-level `config.rateLimit`).
// Run: npm run build && PORT=3000 node examples/fastify.mjs
import Fastify from "fastify";
import { createLimiter } from "sluice";
import { rateLimit } from "sluice/fastify";

const limiter = createLimiter({ policy: { name: "api", rules: [{ limit: 100, period: "1m" }] } });
const search = createLimiter({
  policy: {
    name: "search",
    rules: [
      { limit: 1, period: "1s" },
      { limit: 5, period: "1m" },
    ],
    algorithm: "sliding-log",
  },
});

const app = Fastify();
await app.register(rateLimit({ limiter, headers: "ietf" }));
app.get("/", async () => ({ hello: "world" }));
app.get("/search", { config: { rateLimit: { limiter: search } } }, async (req) => ({
  q: req.query.q ?? "",
}));
app.get("/health", { config: { rateLimit: false } }, async () => "ok");

const port = Number(process.env.PORT ?? 3000);
await app.listen({ port, host: "127.0.0.1" });
console.log(`fastify example listening on http://127.0.0.1:${port}`);
process.on("SIGTERM", () => void app.close().then(() => process.exit(0)));
