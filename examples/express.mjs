// Express with GitHub-style tiers: 5000 requests/hour per authenticated user,
// 60/hour per IP for anonymous callers; /health is never limited.
// Run: npm run build && PORT=3000 node examples/express.mjs
import express from "express";
import { createLimiter, memoryStore } from "sluice";
import { keys, rateLimit } from "sluice/express";

const store = memoryStore();
const authenticated = createLimiter({
  store,
  policy: { name: "user", algorithm: "fixed-window", rules: [{ limit: 5000, period: "1h" }] },
});
const anonymous = createLimiter({
  store,
  policy: { name: "anon", algorithm: "fixed-window", rules: [{ limit: 60, period: "1h" }] },
});

// A stand-in for real authentication: "Authorization: Bearer <user id>".
const userOf = (req) => req.header("authorization")?.match(/^Bearer (\w+)$/)?.[1];

const app = express();
app.use(
  rateLimit({
    limiter: (req) =>
      userOf(req) ? { limiter: authenticated, key: keys.user(userOf) } : anonymous,
    headers: "github",
    skip: (req) => req.path === "/health",
  }),
);
app.get("/health", (_req, res) => res.send("ok"));
app.get("/", (_req, res) => res.json({ limit: res.locals.rateLimit?.limit }));

const port = Number(process.env.PORT ?? 3000);
const server = app.listen(port, "127.0.0.1", () =>
  console.log(`express example listening on http://127.0.0.1:${port}`),
);
process.on("SIGTERM", () => server.close(() => process.exit(0)));
