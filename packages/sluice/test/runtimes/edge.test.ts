/**
 * Vercel's Edge runtime, from npm (`edge-runtime`: the runtime `vercel dev` and `next dev` run
 * Edge functions in: web APIs only, no Node). The suite is bundled as an Edge function is —
 * everything in one script — and answers one fetch event.
 */
import { readFileSync } from "node:fs";
import { EdgeRuntime } from "edge-runtime";
import type { SuiteResult } from "./suite.js";
import { EDGE_BUILD, bundle, declareRuntimeSuite } from "./harness.js";

declareRuntimeSuite("edge", async (backend) => {
  const file = await bundle("entry-edge.ts", "edge.js", EDGE_BUILD);
  const runtime = new EdgeRuntime({ initialCode: readFileSync(file, "utf8") });
  // Nothing of Node is there (the suite would find node:crypto through process otherwise).
  if (runtime.evaluate<string>("typeof process") !== "undefined")
    throw new Error("the Edge runtime has a process global");
  const res = await runtime.dispatchFetch("http://edge.test/", {
    method: "POST",
    body: JSON.stringify(backend.config("edge")),
  });
  return (await res.json()) as SuiteResult[];
});
