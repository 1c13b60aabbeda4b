/**
 * Cloudflare Workers (workerd): a Worker module, bundled as wrangler bundles one, without the
 * `nodejs_compat` flag (nothing of Node). A POST to /suite with the configuration runs the
 * suite inside the request (with the Durable Object store beside the others); /app/<name> is a
 * Hono app limited through Durable Objects (37 per hour per client), for the tests from outside
 * (concurrency across requests, restarts); /sweep/* show the objects' sweep.
 */
import { Redis } from "@upstash/redis";
import { Hono } from "hono";
import { type Limiter, createLimiter, definePolicy, memoryStore } from "sluice";
import {
  type DurableObjectNamespaceLike,
  type DurableObjectStateLike,
  type DurableObjectStorageLike,
  SluiceDurableObject,
  durableObjectStore,
} from "sluice/durable-object";
import { rateLimit } from "sluice/hono";
import { upstashStore } from "sluice/upstash";
import { type StoreUnderTest, type SuiteConfig, type SuiteResult, runSuite } from "./suite.js";

export { SluiceDurableObject };

/** A Durable Object namespace binding, as much of it as this Worker uses. */
interface Namespace extends DurableObjectNamespaceLike {
  get(id: unknown): { fetch(input: string, init?: RequestInit): Promise<Response> };
}

interface Env {
  /** SluiceDurableObject, as users bind it. */
  readonly SLUICE: Namespace;
  /** InspectedDurableObject: the same, with a look at its keys. */
  readonly INSPECT: Namespace;
}

/** The object as users export it, answering GET with the keys it stores (the sweep test). */
export class InspectedDurableObject extends SluiceDurableObject {
  private readonly keys: DurableObjectStorageLike;
  constructor(state: DurableObjectStateLike, env: unknown) {
    super(state, env);
    this.keys = state.storage;
  }
  override async fetch(request: Request): Promise<Response> {
    if (request.method !== "GET") return super.fetch(request);
    return Response.json([...(await this.keys.list({ limit: 10_000 })).keys()]);
  }
}

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

function durableObjects(env: Env): StoreUnderTest {
  return {
    label: "durable-object",
    make: (now) => durableObjectStore({ namespace: env.SLUICE, now }),
    shared: (n) =>
      Array.from({ length: n }, () =>
        durableObjectStore({ namespace: env.SLUICE, timeoutMs: 5000 }),
      ),
  };
}

/** One limiter for every request of this isolate: a shared store is safe across requests. */
const limiters = new Map<string, Limiter>();
const app = new Hono<{ Bindings: Env }>();
app.use(
  "/app/:name",
  rateLimit({
    limiter: (c) => {
      const name = c.req.param("name") ?? "app";
      let l = limiters.get(name);
      if (l === undefined) {
        const store = durableObjectStore({ namespace: c.env.SLUICE, timeoutMs: 10_000 });
        l = createLimiter({ store, policy: { name, rules: [{ limit: 37, period: "1h" }] } });
        limiters.set(name, l);
      }
      return l;
    },
    peer: (c) => c.req.header("x-test-peer"),
  }),
);
app.get("/app/:name", (c) => c.text("ok"));

// The sweep: keys of a 1-second policy in one object, then what that object still stores.
const sweepPolicy = definePolicy({
  name: "sweep",
  algorithm: "fixed-window",
  rules: [{ limit: 5, period: "1s" }],
});
app.post("/sweep/write", async (c) => {
  const store = durableObjectStore({ namespace: c.env.INSPECT, shards: 1, name: "sweep" });
  const l = createLimiter({ store, policy: sweepPolicy });
  await Promise.all(["a", "b", "c"].map((k) => l.limit(k)));
  return c.text("written");
});
app.get("/sweep/keys", (c) =>
  c.env.INSPECT.get(c.env.INSPECT.idFromName("sweep:1:0")).fetch("https://inspect/"),
);

app.post("/suite", async (c) => {
  const config = await c.req.json<SuiteConfig>();
  return c.json([topLevel, ...(await runSuite(config, [durableObjects(c.env)]))]);
});

export default app;
