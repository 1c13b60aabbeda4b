import { defineConfig } from "tsup";

export default defineConfig({
  entry: {
    index: "src/index.ts",
    // The pure algorithms, evaluate() and definePolicy: no stores, timers or Node APIs
    // (browsers, simulators). The admin page's simulator imports it.
    algorithms: "src/algorithms/entry.ts",
    // HTTP middleware: one subpath export per framework (`sluice/express`, …) and the
    // framework-free core (`sluice/http`).
    http: "src/http/adapters/http.ts",
    node: "src/http/adapters/node.ts",
    express: "src/http/adapters/express.ts",
    fastify: "src/http/adapters/fastify.ts",
    koa: "src/http/adapters/koa.ts",
    hono: "src/http/adapters/hono.ts",
    // Stores for runtimes without TCP: Redis over HTTP (Upstash's REST protocol), and
    // Cloudflare Durable Objects.
    upstash: "src/stores/upstash.ts",
    "durable-object": "src/stores/durable-object.ts",
    // Drop-in faces of peer libraries (`sluice/compat/rate-limiter-flexible`, …).
    "compat/rate-limiter-flexible": "src/compat/rate-limiter-flexible.ts",
    "compat/express-rate-limit": "src/compat/express-rate-limit.ts",
    "compat/nestjs-throttler": "src/compat/nestjs-throttler.ts",
    "compat/upstash": "src/compat/upstash.ts",
    // Internal to @sluice/server: what the service and connectPolicies share (src/service.ts).
    service: "src/service.ts",
  },
  format: ["esm", "cjs"],
  dts: true,
  sourcemap: true,
  clean: true,
  target: "node20",
  // Shared chunks, so `sluice` and `sluice/express` share one copy of the core (and of its
  // error classes, for `instanceof`).
  splitting: true,
  // CommonJS has no `import.meta`: telemetry.ts reads `__filename` there instead.
  esbuildOptions(options, context) {
    if (context.format === "cjs")
      options.define = { ...options.define, "import.meta.url": "undefined" };
  },
  // fastify-plugin is tiny and CJS-only: bundle it into `sluice/fastify` so users need not install it.
  noExternal: ["fastify-plugin"],
});
