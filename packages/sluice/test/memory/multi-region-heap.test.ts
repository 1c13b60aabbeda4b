import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { RegionHeapReport } from "./multi-region-heap-worker.js";

const WORKER = fileURLToPath(new URL("./multi-region-heap-worker.ts", import.meta.url));

function measure(cap: number): Promise<RegionHeapReport> {
  return new Promise((resolve, reject) => {
    const child = fork(WORKER, [String(cap)], {
      execArgv: ["--import", "tsx", "--expose-gc", "--max-old-space-size=128"],
      stdio: ["ignore", "inherit", "pipe", "ipc"],
    });
    let report: RegionHeapReport | undefined;
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("message", (m: RegionHeapReport) => (report = m));
    child.on("exit", (code, signal) => {
      if (report !== undefined && code === 0) resolve(report);
      else reject(new Error(`the worker ended (${code ?? signal}): ${stderr.slice(-1500)}`));
    });
  });
}

describe("multiRegionStore's keys at its cap", () => {
  it("holds at most maxKeys keys, at a few hundred bytes each, through a flood of 10× the cap", async () => {
    const cap = 20_000;
    const r = await measure(cap);
    const perKey = (r.atCap - r.base) / cap;
    console.log(
      `multi-region heap: ${perKey.toFixed(0)} B per key held at the cap of ${cap}; ` +
        `after ${10 * cap} more keys ${((r.end - r.base) / 1e6).toFixed(1)} MB (at the cap ${((r.atCap - r.base) / 1e6).toFixed(1)} MB)`,
    );
    expect(r.trackedAtCap).toBe(cap);
    expect(r.trackedAtEnd).toBeLessThanOrEqual(cap);
    expect(perKey).toBeLessThan(450);
    // The flood does not grow the heap past what the cap holds (a fifth for the Map's churn).
    expect(r.end - r.base).toBeLessThan((r.atCap - r.base) * 1.2);
  }, 120_000);
});
