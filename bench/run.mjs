#!/usr/bin/env node
// sluice benchmarks against its peers, measured in one run on one machine.
//
//   npm run bench          full run (≈ 10 min); writes bench/RESULTS.md
//   npm run bench:quick    tiny counts (< 1 min): checks that every case runs; writes nothing
//
// Options: --quick, --only=memory,memory-hot,memory-sync,memory-flood,heap,redis,redis-policies,
//          ceiling,redis-memory,hot-key,service,compat,leases,grpc,telemetry,adaptive,
//          multi-region (a subset, comma-separated; adaptive is a simulation in virtual time that
//          needs no Redis, writes only its own section of RESULTS.md and docs/adaptive-plot.svg;
//          multi-region starts its own three redis-servers and writes only its own section),
//          --out=PATH (where to write the results; default bench/RESULTS.md, none in quick mode),
//          --render=bench/RESULTS.md (render a saved run again, e.g. after changing lib/report.mjs).
// Every case runs in its own Node process (lib/child.mjs); the bench starts its own
// redis-server on a free loopback port and stops it at the end.
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { adaptiveSection } from "./cases/adaptive.mjs";
import { multiRegionSection } from "./cases/multi-region.mjs";
import { distIsStale, ensureBuilt } from "./lib/children.mjs";
import { ensureRedisInstalled, startRedis } from "./lib/redis.mjs";
import { environment, loadNow, renderReport } from "./lib/report.mjs";
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
const renderArg = argv.find((a) => a.startsWith("--render="))?.slice(9);
const out = outArg ?? (quick ? undefined : join(BENCH_DIR, "RESULTS.md"));
const unknown = argv.filter((a) => a !== "--quick" && !/^--(only|out|render)=/.test(a));
if (unknown.length > 0 || (only ?? []).some((s) => !SECTIONS.includes(s))) {
  console.error(
    `usage: node bench/run.mjs [--quick] [--only=${SECTIONS.join(",")}] [--out=PATH]\n` +
      `       node bench/run.mjs --render=bench/RESULTS.md [--out=PATH]   (render a saved run again)`,
  );
  process.exit(2);
}

/** Writes the report; the raw results go at its end, in a comment, for `--render`. */
function write(report, saved) {
  console.log(`\n${report.console}`);
  if (!out) return;
  const raw = `\n<!-- bench-results ${JSON.stringify(saved).replace(/--/g, "\\u002d\\u002d")} -->\n`;
  writeFileSync(out, report.markdown + raw);
  console.error(`bench: wrote ${out}`);
}

if (renderArg) {
  const m = /<!-- bench-results (.*) -->/.exec(readFileSync(renderArg, "utf8"));
  if (!m) throw new Error(`${renderArg} holds no bench results`);
  const saved = JSON.parse(m[1]);
  write(renderReport(saved), saved);
  process.exit(0);
}

const started = new Date();
const t0 = Date.now();
const log = (msg) => console.error(msg);

await ensureBuilt(log);
const wantsAdaptive = only === undefined || only.includes("adaptive");
const adaptiveCommand = `node bench/run.mjs --only=adaptive${quick ? " --quick" : ""}`;
// Three regions: ~40 s in a full run, ~17 s in a quick one (three windows, five cold keys).
const wantsMultiRegion = only === undefined || only.includes("multi-region");
const multiRegionCommand = `node bench/run.mjs --only=multi-region${quick ? " --quick" : ""}`;
if (only !== undefined && only.every((s) => s === "adaptive" || s === "multi-region")) {
  // Sections that write only their own part of the results and need no shared redis-server.
  if (wantsAdaptive) await adaptiveSection({ quick, out, command: adaptiveCommand, log });
  if (wantsMultiRegion) {
    await ensureRedisInstalled(log);
    await multiRegionSection({ quick, out, command: multiRegionCommand, log });
  }
  log(`bench: done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  process.exit(0);
}
const distAtStart = distHash();
const stale = distIsStale();
if (stale)
  log("bench: warning: packages/sluice/src is newer than its dist; run `npm run build` first");
const loadAtStart = loadNow();
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
  const extra = argv.filter((a) => a !== "--quick");
  const meta = {
    quick,
    started: started.toISOString(),
    seconds: (Date.now() - t0) / 1000,
    command: `npm run ${quick ? "bench:quick" : "bench"}${extra.length ? ` -- ${extra.join(" ")}` : ""}`,
    config: plan.config,
    dist: { start: distAtStart, end: distHash(), stale },
    env: environment({ redisVersion: redis.version, load: { start: loadAtStart, end: loadNow() } }),
  };
  write(renderReport({ results, meta }), { results, meta });
  if (wantsAdaptive) await adaptiveSection({ quick, out, command: adaptiveCommand, log });
  if (wantsMultiRegion) {
    // After the shared redis-server's cases: the section starts its own three.
    await multiRegionSection({ quick, out, command: multiRegionCommand, log });
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
