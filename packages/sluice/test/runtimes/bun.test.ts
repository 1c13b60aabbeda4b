/**
 * Bun, from npm (`bun`): the suite imports `sluice`, `sluice/hono`, `sluice/upstash`, `hono`
 * and `@upstash/redis` from node_modules, as a Bun app does.
 */
import { bundle, declareRuntimeSuite, PACKAGES, runtimeBin } from "./harness.js";
import { runProcess } from "./process.js";

declareRuntimeSuite("bun", async (backend) => {
  const file = await bundle("entry-bun.ts", "bun.mjs", { platform: "neutral", external: PACKAGES });
  return runProcess(runtimeBin("bun"), [file, JSON.stringify(backend.config("bun"))]);
});
