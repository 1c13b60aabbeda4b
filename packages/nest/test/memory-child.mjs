// The memory measurement's child process (memory.test.ts runs it with a bounded heap): a Nest
// application context with SluiceModule's default memory store, whose guard decides for 1M
// distinct clients (an address each), as HTTP requests hand it them. Prints one JSON line:
// heap and RSS after a full GC at the start, once the store is at its cap, and at the end.
// Runs the built package (npm run build first, as `npm test` does).
import "reflect-metadata";
import { performance } from "node:perf_hooks";
import { Controller, Module } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { ExecutionContextHost } from "@nestjs/core/helpers/execution-context-host.js";
import { DEFAULT_MAX_KEYS, RateLimit, SluiceGuard, SluiceModule } from "@sluice/nest";

const TOTAL = Number(process.env.KEYS ?? 1_000_000);
const FILLED = 2 * DEFAULT_MAX_KEYS;

class ItemsController {
  list() {
    return [];
  }
}
RateLimit("api")(
  ItemsController.prototype,
  "list",
  Object.getOwnPropertyDescriptor(ItemsController.prototype, "list"),
);
Controller("items")(ItemsController);

class AppModule {}
Module({
  imports: [
    SluiceModule.forRoot({
      policies: [{ name: "api", algorithm: "gcra", rules: [{ limit: 100, period: "1m" }] }],
      // Time stands still: no key ever expires, so only the cap bounds the store (as in #2629,
      // where every key lives for its TTL).
      clock: () => 1_700_000_000_000,
    }),
  ],
  controllers: [ItemsController],
})(AppModule);

const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
const guard = app.get(SluiceGuard);
const response = { setHeader() {} };
const handler = ItemsController.prototype.list;

function measure() {
  globalThis.gc();
  const m = process.memoryUsage();
  return { heapUsed: m.heapUsed, rss: m.rss };
}

/** Client `i`'s address: 10.x.y.z, distinct for 16M clients. */
function address(i) {
  return `10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`;
}

const start = measure();
const began = performance.now();
let filled;
for (let i = 0; i < TOTAL; i++) {
  const context = new ExecutionContextHost(
    [{ ip: address(i) }, response],
    ItemsController,
    handler,
  );
  context.setType("http");
  if (!(await guard.canActivate(context))) throw new Error(`client ${i} was refused`);
  if (i + 1 === FILLED) filled = measure();
}
const end = measure();
await app.close();
process.stdout.write(
  JSON.stringify({
    keys: TOTAL,
    maxKeys: DEFAULT_MAX_KEYS,
    seconds: (performance.now() - began) / 1000,
    start,
    filled,
    end,
  }) + "\n",
);
