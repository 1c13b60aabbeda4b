#!/usr/bin/env node
// sluice benchmarks against its peers, measured in one run on one machine.
//
//   npm run bench          full run (≈ 8 min); writes bench/RESULTS.md
//   npm run bench:quick    tiny counts (< 1 min): checks that every case runs; writes nothing
//
// Options: --quick, --only=memory,heap,redis,ceiling,redis-memory,hot-key,service,
//          --out=PATH (where to write the results; default bench/RESULTS.md, none in quick mode).
// Every case runs in its own Node process (lib/child.mjs); the bench starts its own
// redis-server on a free loopback port and stops it at the end.
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { ensureBuilt } from "./lib/children.mjs";
import { ensureRedisInstalled, startRedis } from "./lib/redis.mjs";
import { renderReport } from "./lib/report.mjs";
import { SECTIONS, planFor } from "./lib/plan.mjs";
import { BENCH_DIR, SLUICE_DIST } from "./lib/util.mjs";

/** A fingerprint of the built library, to tell whether it was rebuilt during the run. */
function distHash() {
  if (!existsSync(SLUICE_DIST)) return "missing";
  const dir = dirname(SLUICE_DIST);
  const hash = createHash("sha1");
  for (const f of readdirSync(dir)
    .filter((f) => f.endsWith(".js"))
    .sort()) {
    hash.update(f).update(readFileSync(join(dir, f)));
  }
  return hash.digest("hex").slice(0, 12);
}

const argv = process.argv.slice(2);
const quick = argv.includes("--quick");
const only = argv
  .find((a) => a.startsWith("--only="))
  ?.slice(7)
  .split(",");
const outArg = argv.find((a) => a.startsWith("--out="))?.slice(6);
const out = outArg ?? (quick ? undefined : join(BENCH_DIR, "RESULTS.md"));
const unknown = argv.filter((a) => a !== "--quick" && !/^--(only|out)=/.test(a));
if (unknown.length > 0 || (only ?? []).some((s) => !SECTIONS.includes(s))) {
  console.error(`usage: node bench/run.mjs [--quick] [--only=${SECTIONS.join(",")}] [--out=PATH]`);
  process.exit(2);
}

const started = new Date();
const t0 = Date.now();
const log = (msg) => console.error(msg);

await ensureBuilt(log);
const distAtStart = distHash();
await ensureRedisInstalled(log);
const redis = await startRedis();
log(
  `bench: redis-server ${redis.version} on 127.0.0.1:${redis.port}${quick ? " (quick mode)" : ""}`,
);

let exitCode = 0;
const stop = async () => {
  await redis.stop();
};
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    log(`bench: ${signal}: stopping redis-server`);
    void stop().then(() => process.exit(130));
  });
}

try {
  const plan = planFor({ quick, only, port: redis.port, log });
  const results = await plan.run();
  const report = renderReport({
    results,
    quick,
    started,
    seconds: (Date.now() - t0) / 1000,
    redisVersion: redis.version,
    command: `npm run ${quick ? "bench:quick" : "bench"}${argv
      .filter((a) => a !== "--quick")
      .map((a) => ` -- ${a}`)
      .join("")}`,
    config: plan.config,
    dist: { start: distAtStart, end: distHash() },
  });
  console.log(`\n${report.console}`);
  if (out) {
    writeFileSync(out, report.markdown);
    log(`bench: wrote ${out}`);
  }
  if (results.failures.length > 0) {
    log(`bench: ${results.failures.length} case(s) failed:`);
    for (const f of results.failures) log(`  - ${f}`);
    exitCode = 1;
  }
} catch (err) {
  log(`bench: ${err?.stack ?? err}`);
  exitCode = 1;
} finally {
  await stop();
}
log(`bench: done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
process.exit(exitCode);
