// A TypeScript consumer importing the built package as CommonJS. Type-checked, never run.
/* eslint-disable @typescript-eslint/no-require-imports -- this file checks the CommonJS form on purpose */
import sluice = require("sluice");
import expressAdapter = require("sluice/express");
import koaAdapter = require("sluice/koa");

const limiter = sluice.createLimiter({
  policy: { name: "api", rules: [{ limit: 10, period: "1m" }] },
});
export const middleware = expressAdapter.rateLimit({ limiter, headers: "both" });
export const koaMiddleware = koaAdapter.rateLimit({ limiter, key: koaAdapter.keys.ip() });
