/**
 * The default memory store's memory stays bounded (nestjs/throttler #2629, #2665): 1M distinct
 * clients through the guard of SluiceModule's defaults, in a child process whose heap is
 * bounded (`--max-old-space-size=128`: a store that kept every key would need more and die).
 * Once the store is at its cap, RSS stays flat within 10% to the millionth client.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, it } from "vitest";

interface Usage {
  heapUsed: number;
  rss: number;
}

interface Report {
  keys: number;
  maxKeys: number;
  seconds: number;
  start: Usage;
  filled: Usage;
  end: Usage;
}

const MB = 1024 * 1024;

it("holds RSS flat within 10% across 1M distinct keys at its cap, in a bounded heap", async () => {
  const child = fileURLToPath(new URL("./memory-child.mjs", import.meta.url));
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ["--expose-gc", "--max-old-space-size=128", child],
    { timeout: 120_000 },
  );
  const r = JSON.parse(stdout.trim().split("\n").pop()!) as Report;
  const perKey = (r.filled.heapUsed - r.start.heapUsed) / r.maxKeys;
  const rssGrowth = (r.end.rss - r.filled.rss) / r.filled.rss;
  console.log(
    `1M keys in ${r.seconds.toFixed(1)} s; heap after GC per key held ${perKey.toFixed(0)} B; ` +
      `RSS start ${(r.start.rss / MB).toFixed(1)} MB, after ${r.maxKeys * 2} keys (twice the cap) ` +
      `${(r.filled.rss / MB).toFixed(1)} MB, after 1M ${(r.end.rss / MB).toFixed(1)} MB ` +
      `(${(rssGrowth * 100).toFixed(1)}%); heap ${(r.filled.heapUsed / MB).toFixed(1)} → ` +
      `${(r.end.heapUsed / MB).toFixed(1)} MB`,
  );
  expect(r.keys).toBe(1_000_000);
  expect(Math.abs(rssGrowth)).toBeLessThanOrEqual(0.1);
  // The heap, too, holds the cap's worth of keys and no more.
  expect(r.end.heapUsed - r.filled.heapUsed).toBeLessThan(0.1 * r.filled.heapUsed);
  expect(perKey).toBeGreaterThan(0);
  expect(perKey).toBeLessThan(400);
}, 120_000);
