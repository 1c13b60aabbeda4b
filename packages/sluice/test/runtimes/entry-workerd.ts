/**
 * Cloudflare Workers (workerd): a Worker module, bundled as wrangler bundles one, without the
 * `nodejs_compat` flag (nothing of Node). A POST with the configuration runs the suite inside
 * the request; the results are the answer.
 */
import { Redis } from "@upstash/redis";
import { createLimiter, definePolicy, memoryStore } from "sluice";
import { rateLimit } from "sluice/hono";
import { upstashStore } from "sluice/upstash";
import { type SuiteConfig, type SuiteResult, runSuite } from "./suite.js";

/**
 * What users write at a module's top level must not do what Workers refuse outside a request
 * (random values, timers, I/O): stores, limiters and middleware are made here, used later.
 */
const topLevel: SuiteResult = (() => {
  const name = "workers/top-level";
  try {
    const policy = definePolicy({ name: "top", rules: [{ limit: 1, period: "1s" }] });
    const redis = new Redis({ url: "http://unused.invalid", token: "t" });
    rateLimit({ limiter: createLimiter({ store: upstashStore({ redis }), policy }) });
    rateLimit({ limiter: createLimiter({ store: memoryStore(), policy }) });
    return { name, ok: true };
  } catch (err) {
    return { name, ok: false, error: String(err) };
  }
})();

export default {
  async fetch(request: Request): Promise<Response> {
    const config = (await request.json()) as SuiteConfig;
    return Response.json([topLevel, ...(await runSuite(config))]);
  },
};
