// The multi-region section (issue 34): lib/multi-region.mjs's three real regions (a
// redis-server and a process each, 40 ms apart through delay proxies) for sluice's
// multiRegionStore in strict and bounded mode, and @upstash/ratelimit's MultiRegionRatelimit as
// the baseline; the same demand and the same cut. Its table is spliced into RESULTS.md between
// its markers (the other sections are left as they are).
import {
  DEFAULTS,
  POLICY,
  REGIONS,
  runContestant,
  startRegions,
  summaryLine,
} from "../lib/multi-region.mjs";
import { packageVersion } from "../lib/util.mjs";
import { spliceResults } from "./adaptive.mjs";

const BEGIN = "<!-- multi-region:begin -->";
const END = "<!-- multi-region:end -->";
export const BORROW = 30;

/** The contestants, in table order. */
export const CONTESTANTS = [
  { kind: "sluice", mode: "strict" },
  { kind: "sluice", mode: "bounded", borrow: BORROW },
  // At the full limit and demand (and at a tenth of both) its processes fell seconds behind on
  // this machine and a third of its decisions were allowed by its 5 s timeout (each decision
  // calls every region, then syncs every request id it saw to every region, an HSET each); at a
  // twentieth of both (the same 10× the limit) it keeps up: no timeouts.
  { kind: "upstash", scale: 0.05 },
];

/** Runs every contestant on the same three regions; `quick`: three windows, a few cold keys. */
export async function runMultiRegion({ quick = false, log = () => {} } = {}) {
  const scenario = quick
    ? { windows: 3, cutWindow: 1, coldKeys: 5 }
    : { windows: 7, cutWindow: 4, coldKeys: 50 };
  const started = Date.now();
  const regions = await startRegions();
  const results = [];
  try {
    for (const c of CONTESTANTS) {
      const r = await runContestant(regions, { ...c, ...scenario, log });
      log(`bench: ${summaryLine(r)}`);
      results.push(r);
    }
  } finally {
    await regions.stop();
  }
  return { results, seconds: (Date.now() - started) / 1000 };
}

const n = (x, digits = 0) => (x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(digits));

/** The section's markdown (and its console form: the same text). */
export function multiRegionMarkdown({ results, seconds }, command) {
  const [first] = results;
  const { windows, cutWindow, demand, delayMs, limit } = first;
  const lines = [];
  lines.push("### Multi-region: one limit across three regions, the home cut off for a window", "");
  lines.push(
    `Three regions (${REGIONS.join(", ")}), each its own redis-server and its own Node process, on one machine; a process reaches its own Redis directly and the others' through a TCP proxy adding ${delayMs} ms each way (bench/lib/multi-region.mjs). ` +
      `One policy, \`${POLICY.algorithm}\` ${limit} per second with leases, one hot key homed in ${DEFAULTS.home}; demand ${REGIONS.map((r) => demand[r]).join(" / ")} decisions a second (${REGIONS.join(" / ")}), in 5 ms batches, for ${windows} one-second windows aligned to the clock; ` +
      `in window ${cutWindow} ${DEFAULTS.home} is cut off from the other two (every link to and from it). ` +
      `sluice: \`multiRegionStore\` over a \`redisStore\` per region, strict, and bounded with borrow ${BORROW} (bound ${limit + 2 * BORROW}). ` +
      `Baseline: @upstash/ratelimit ${packageVersion("@upstash/ratelimit")} \`MultiRegionRatelimit.fixedWindow(limit, "1 s")\` with its defaults (ephemeral cache; a decision not answered in 5 s is allowed), each region's process serving the REST fixture (test/support/upstash-rest.ts) in front of its region's Redis; ` +
      "its cross-region calls are the HTTP requests it sends to other regions' REST (a pipeline counts once); " +
      "at the full limit and demand it fell seconds behind on this machine and its timeout allowed a third of its decisions, so it runs at a twentieth of both (the same 10× demand over the limit): compare the ratios. " +
      `Admitted per window, all regions (sluice: counted when answered; Upstash: in the window it was asked in, which picks its counter). The section took ${n(seconds)} s. Command: \`${command}\`.`,
    "",
  );
  const head = [
    "window",
    ...results.map(
      (r) =>
        r.label +
        (r.borrow !== undefined ? ` (borrow ${r.borrow})` : "") +
        (r.scale !== 1
          ? ` (limit ${r.limit}, demand ${REGIONS.map((g) => r.demand[g]).join("/")})`
          : ""),
    ),
  ];
  lines.push(`| ${head.join(" | ")} |`, `|${head.map(() => "---").join("|")}|`);
  for (let w = 0; w < windows; w++) {
    const cells = results.map((r) => {
      const a = r.admitted[w];
      const late = r.storeErrorsPerWindow[w];
      return `${a}/${r.limit} (${(a / r.limit).toFixed(2)}×${late > 0 ? `; ${late} allowed by a store error or timeout` : ""})`;
    });
    lines.push(`| ${w}${w === cutWindow ? " (home cut off)" : ""} | ${cells.join(" | ")} |`);
  }
  const row = (name, f) => lines.push(`| ${name} | ${results.map(f).join(" | ")} |`);
  row(
    "hot decisions p50 / p99 (from window 1)",
    (r) => `${n(r.hot.p50, 2)} / ${n(r.hot.p99, 2)} ms`,
  );
  row(
    "first window p50 / p99 (the key is new)",
    (r) => `${n(r.first.p50, 2)} / ${n(r.first.p99, 2)} ms`,
  );
  row("cross-region calls per 1,000 decisions", (r) =>
    r.crossRegionPer1000 !== undefined
      ? `${n(r.crossRegionPer1000, 2)} (${r.crossRegionCalls} for ${r.decisions})`
      : "–",
  );
  row(
    `cold keys p50 / p99 (${first.cold.keys} new keys from ${first.cold.region}, one at a time)`,
    (r) => `${n(r.cold.p50, 1)} / ${n(r.cold.p99, 1)} ms`,
  );
  // Max-min fairness: with every region's demand above a third of the limit, each should get
  // about a third of what is admitted where all reach the home.
  row(`share by region, ${REGIONS.join(" / ")} (windows the home was reachable)`, (r) => {
    const reach = (xs) => xs.slice(0, windows).filter((_, w) => w !== cutWindow);
    const by = REGIONS.map((g) => reach(r.admittedByRegion[g]).reduce((a, b) => a + b, 0));
    const all = by.reduce((a, b) => a + b, 0);
    return all > 0 ? by.map((x) => `${Math.round((100 * x) / all)}%`).join(" / ") : "–";
  });
  row("under-admitted units (counted by the store)", (r) =>
    r.underAdmitted !== undefined ? String(r.underAdmitted) : "–",
  );
  row("borrowed units", (r) => (r.borrowed !== undefined ? String(r.borrowed) : "–"));
  row(
    "decisions (failed; decided by a store error or timeout)",
    (r) => `${r.decisions} (${r.failed}; ${r.storeErrors})`,
  );
  lines.push(
    "",
    "Asserted in CI on the same harness (packages/sluice/test/redis/multi-region.test.ts, six windows, cut in window 3): strict ≤ the limit in every window and ≥ 90% of it where every region reaches the home, hot p99 ≤ 25 ms, ≤ 5 cross-region calls per 1,000 decisions; bounded ≤ limit + 2 × borrow; cold keys strict p50 ≥ 80 ms, bounded local.",
  );
  return lines.join("\n");
}

/** The section of a bench run: prints the table; unless `quick`, writes its part of RESULTS.md. */
export async function multiRegionSection({ quick, out, command, log }) {
  log(`bench: multi-region: three regions${quick ? " (quick)" : ""}…`);
  const result = await runMultiRegion({ quick, log });
  const markdown = multiRegionMarkdown(result, command);
  console.log(`\n${markdown}`);
  if (!quick && out) {
    spliceResults(out, markdown, { begin: BEGIN, end: END });
    log(`bench: multi-region: wrote its section of ${out}`);
  }
  return result;
}
