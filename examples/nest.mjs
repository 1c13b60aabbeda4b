// A Nest app limited by @sluice/nest: every route by "per-ip" (60 requests a minute per client
// IP) unless it says otherwise; /search also by an inline policy per user, all or nothing;
// /health never. Plain JavaScript, so the decorators are called as functions (in TypeScript:
// `@RateLimit("search")` above the method).
// Run: npm run build && PORT=3000 node examples/nest.mjs
import "reflect-metadata";
import { Controller, Get, Module } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { RateLimit, SkipRateLimit, SluiceModule } from "@sluice/nest";

/** Applies method decorators to `Class.prototype[name]`, as TypeScript's `@` would. */
function decorate(Class, name, ...decorators) {
  const descriptor = Object.getOwnPropertyDescriptor(Class.prototype, name);
  for (const d of decorators.reverse()) d(Class.prototype, name, descriptor);
}

// A stand-in for real authentication: "Authorization: Bearer <user id>".
const userOf = (ctx) =>
  ctx
    .switchToHttp()
    .getRequest()
    .headers.authorization?.match(/^Bearer (\w+)$/)?.[1];

class AppController {
  health() {
    return "ok";
  }
  items() {
    return [{ id: 1 }];
  }
  search() {
    return { results: [] };
  }
}
decorate(AppController, "health", Get("health"), SkipRateLimit());
decorate(AppController, "items", Get("items"));
decorate(
  AppController,
  "search",
  Get("search"),
  // Its own key: "per-ip" still counts this route by the client's IP (a `@RateLimitKey` would
  // name the key of every policy of the handler).
  RateLimit(
    { name: "search", algorithm: "gcra", rules: [{ limit: 5, period: "1m", burst: 5 }] },
    { key: userOf },
  ),
);
Controller()(AppController);

class AppModule {}
Module({
  imports: [
    SluiceModule.forRoot({
      // Counters in this process (a memory store capped at 100,000 keys); for several
      // instances: `store: redisStore({ client: new Redis(process.env.REDIS_URL) })`.
      policies: [
        { name: "per-ip", algorithm: "sliding-window", rules: [{ limit: 60, period: "1m" }] },
      ],
      defaultPolicies: ["per-ip"],
    }),
  ],
  controllers: [AppController],
})(AppModule);

const app = await NestFactory.create(AppModule, { logger: ["error", "warn"] });
const port = Number(process.env.PORT ?? 3000);
await app.listen(port, "127.0.0.1");
console.log(`listening on http://127.0.0.1:${port}`);

// Close on SIGTERM and SIGINT, so the process exits cleanly.
for (const signal of ["SIGTERM", "SIGINT"]) process.once(signal, () => void app.close());
