// The service's baseline: a bare Fastify route answering POST /v1/limit with a fixed
// decision-shaped JSON body (no auth, no limiter). Prints "LISTENING <port>" when ready.
import Fastify from "fastify";

const port = Number(process.argv[2] ?? 0);
const app = Fastify({ logger: false });
const rule = { allowed: true, remaining: 999, resetAfterMs: 60, retryAfterMs: 0 };
app.post("/v1/limit", async (req) => {
  const { policy, key } = req.body ?? {};
  if (typeof policy !== "string" || typeof key !== "string") throw new Error("bad request");
  return {
    allowed: true,
    limit: 1000,
    remaining: 999,
    resetAfterMs: 60,
    retryAfterMs: 0,
    policy,
    rule: 0,
    rules: [{ ...rule, limit: 1000, periodMs: 60000, burst: 1000 }],
    cost: 1,
  };
});
const address = await app.listen({ port, host: "127.0.0.1" });
process.stdout.write(`LISTENING ${new URL(address).port}\n`);
process.on("SIGTERM", () => void app.close().then(() => process.exit(0)));
