/**
 * A service with memory counters in a process of its own, for memory-flood.test.ts:
 * `node --import tsx --expose-gc --max-old-space-size=… memory-flood-worker.ts <memoryMaxKeys>`,
 * forked with IPC (and TSX_TSCONFIG_PATH=tsconfig.spawn.json, so `sluice` is its sources).
 *
 * Starts the service (SQLite in a temp dir, the counters capped at `memoryMaxKeys`), an app and
 * a policy `api` granted to it (gcra, 10 a day), and sends `{ url, apiKey }`. Then answers
 * `"heap"` with `{ heap }`, heapUsed after full GCs, and `"close"` by closing and exiting.
 */
import { startService } from "./helpers.js";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with --expose-gc");

const service = await startService({ values: { memoryMaxKeys: Number(process.argv[2]) } });
const apiKey = await service.createApp("flood");
await service.createPolicy({
  name: "api",
  algorithm: "gcra",
  rules: [{ limit: 10, period: "1d" }],
  apps: ["flood"],
});

process.on("message", (m: string) => {
  if (m === "heap") {
    for (let i = 0; i < 3; i++) gc();
    process.send!({ heap: process.memoryUsage().heapUsed });
  } else if (m === "close") {
    void service.close().then(() => process.exit(0));
  }
});
process.send!({ url: service.url, apiKey });
