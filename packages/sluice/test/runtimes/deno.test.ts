/**
 * Deno, from npm (`deno`): the suite imports `sluice`, `sluice/hono`, `sluice/upstash`, `hono`
 * and `@upstash/redis` as a Deno app with a package.json does, from node_modules, with no
 * permission but the network to the local fixture and reading the environment (which
 * `@upstash/redis` does for its settings).
 */
import { bundle, declareRuntimeSuite, PACKAGES, runtimeBin } from "./harness.js";
import { runProcess } from "./process.js";

declareRuntimeSuite("deno", async (backend) => {
  const file = await bundle("entry-deno.ts", "deno.mjs", {
    platform: "neutral",
    external: PACKAGES,
  });
  return runProcess(runtimeBin("deno"), [
    "run",
    "--no-prompt",
    `--allow-net=${new URL(backend.rest.url).host}`,
    "--allow-env",
    file,
    JSON.stringify(backend.config("deno")),
  ]);
});
