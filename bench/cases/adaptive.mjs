// The adaptive concurrency section (issue 36): the simulation of lib/adaptive-sim.mjs over the
// built library, its table spliced into RESULTS.md between its markers (the other sections
// are left as they are), and the plot of limit and goodput over time written to
// docs/adaptive-plot.svg. Virtual time: CPU-light, and the same figures on any machine.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ADAPTIVE, BACKEND, adaptiveComparison } from "../lib/adaptive-sim.mjs";
import { BENCH_DIR, SLUICE_DIST } from "../lib/util.mjs";

const BEGIN = "<!-- adaptive:begin -->";
const END = "<!-- adaptive:end -->";
export const PLOT = join(BENCH_DIR, "..", "docs", "adaptive-plot.svg");

/** Runs the comparison; `quick`: one load, a short sweep and short runs (checks it runs). */
export async function runAdaptive({ quick = false, seed = 1 } = {}) {
  const sluice = await import(SLUICE_DIST);
  const started = Date.now();
  const r = await adaptiveComparison(
    quick ? { sluice, seed, durationMs: 6000, loads: [4], sweep: [6, 8, 10] } : { sluice, seed },
  );
  return { r, seconds: (Date.now() - started) / 1000 };
}

const n = (x, digits = 0) => (Number.isFinite(x) ? x.toFixed(digits) : "never");
const ratio = (x, of) => `${(x / of).toFixed(2)}×`;

/** The section's markdown (and its console form: the same text). */
export function adaptiveMarkdown({ r, seconds }, command) {
  const lines = [];
  lines.push("### Adaptive concurrency: goodput on a backend with a knee (simulated)", "");
  lines.push(
    `A discrete-event simulation in virtual time (bench/lib/adaptive-sim.mjs, seed 1; the whole section took ${n(seconds, 1)} s) drives the real limiter: ` +
      `${BACKEND.workers} workers, log-normal service time (mean ${BACKEND.serviceMeanMs} ms, σ ${BACKEND.serviceSigma}), each request ${BACKEND.contention * 100}% slower per request in the backend past ${BACKEND.workers}; ` +
      `capacity ${r.capacity} req/s; open-loop Poisson arrivals; client deadline ${BACKEND.deadlineMs} ms; goodput = answers inside it, for requests arriving from second 2 to ${r.durationMs / 1000}. ` +
      `Oracle: the best static limit of a sweep. Adaptive limits start at 1; "limit" is their mean. Command: \`${command}\`.`,
    "",
  );
  lines.push(
    "| load | no limiter | oracle (static) | static 2× too high | static 2× too low | gradient2 (default) | vegas | aimd |",
  );
  lines.push("|---|---|---|---|---|---|---|---|");
  const cell = (f, oracle) =>
    `${n(f.goodput)}/s (${ratio(f.goodput, oracle)}), p99 ${n(f.p99Ms)} ms${f.limit !== undefined ? `, limit ${n(f.limit, 1)}` : ""}`;
  for (const row of r.rows) {
    const o = row.oracle.goodput;
    lines.push(
      `| ${row.load}× (${n(row.load * r.capacity)}/s) | ${cell(row.none, o)} | ${cell(row.oracle, o)} | ${cell(row.tooHigh, o)} | ${cell(row.tooLow, o)} | ${ADAPTIVE.map((a) => cell(row[a], o)).join(" | ")} |`,
    );
  }
  lines.push("");
  const last = r.rows[r.rows.length - 1];
  const g = last.gradient2;
  lines.push(
    `Targets at ${last.load}× (gradient2): goodput ${ratio(g.goodput, last.oracle.goodput)} the oracle's (≥ 0.90×); admitted p99 ${n(g.p99Ms, 1)} ms against an unloaded p99 of ${n(r.unloadedP99Ms, 1)} ms (no limiter, 0.5×): ${ratio(g.p99Ms, r.unloadedP99Ms)} (≤ 2×).`,
    "",
  );
  lines.push(
    `Capacity halved at ${r.drop.atMs / 1000} s (8 → 4 workers; offered ${n(2 * r.capacity)}/s): the new oracle is a static ${r.drop.newOracle.limit} at ${n(r.drop.newOracle.goodput)}/s. ` +
      "Time until a second's goodput is within 5% of it and stays there on average (≤ 5 s), and the goodput from 5 s after the drop:",
    "",
  );
  lines.push("| algorithm | recovery | goodput after | ÷ new oracle |", "|---|---|---|---|");
  for (const a of ADAPTIVE) {
    const d = r.drop.algorithms[a];
    lines.push(
      `| ${a} | ${Number.isFinite(d.recoveryMs) ? `${n(d.recoveryMs / 1000, 2)} s` : "never"} | ${n(d.after)}/s | ${ratio(d.after, r.drop.newOracle.goodput)} |`,
    );
  }
  lines.push("");
  lines.push(
    "Priorities: tier 0 offered a quarter of capacity (waiting up to 50 ms in the priority line) while tier 3 floods at 4× (no wait); target: tier 0's goodput ≥ 0.95× its offered load.",
    "",
  );
  lines.push(
    "| algorithm | tier 0 offered | tier 0 goodput | ÷ offered | tier 3 goodput | tier 3 shed |",
    "|---|---|---|---|---|---|",
  );
  for (const a of ADAPTIVE) {
    const p = r.priority[a];
    lines.push(
      `| ${a} | ${n(p.top.offered)}/s | ${n(p.top.goodput)}/s | ${(p.top.goodput / p.top.offered).toFixed(3)} | ${n(p.lowest.goodput)}/s | ${n(p.lowest.rejected)}/s |`,
    );
  }
  lines.push("", "The plot of limit and goodput over the capacity drop: docs/adaptive-plot.svg.");
  return lines.join("\n");
}

/**
 * Puts a section into RESULTS.md between its markers (appended, before the raw results, the
 * first time); `markers` default to this section's.
 */
export function spliceResults(path, markdown, { begin = BEGIN, end = END } = {}) {
  const block = `${begin}\n${markdown}\n${end}`;
  const text = existsSync(path) ? readFileSync(path, "utf8") : "";
  let next;
  if (text.includes(begin) && text.includes(end)) {
    next = text.slice(0, text.indexOf(begin)) + block + text.slice(text.indexOf(end) + end.length);
  } else {
    const raw = text.indexOf("<!-- bench-results");
    next =
      raw >= 0
        ? `${text.slice(0, raw).trimEnd()}\n\n${block}\n\n${text.slice(raw)}`
        : `${text.trimEnd()}\n\n${block}\n`;
  }
  writeFileSync(path, next);
}

/** The plot: each algorithm's limit and goodput over the capacity drop, as an SVG. */
export function adaptivePlot(r) {
  const W = 760;
  const H = 420;
  const left = 56;
  const right = 56;
  const top = 40;
  const bottom = 48;
  const series = r.drop.algorithms;
  const endMs = series.gradient2.series[series.gradient2.series.length - 1].tMs;
  const maxGood = Math.ceil((r.capacity * 1.1) / 100) * 100;
  const maxLimit = 20;
  const x = (t) => left + ((W - left - right) * t) / endMs;
  const yGood = (g) => top + (H - top - bottom) * (1 - Math.min(g, maxGood) / maxGood);
  const yLimit = (l) => top + (H - top - bottom) * (1 - Math.min(l, maxLimit) / maxLimit);
  const colors = { gradient2: "#1f77b4", vegas: "#2ca02c", aimd: "#d62728" };
  const out = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">Adaptive limit and goodput; capacity halves at ${r.drop.atMs / 1000} s (8 → 4 workers, ${2 * r.capacity} req/s offered)</text>`,
  );
  // Axes and grid.
  for (let g = 0; g <= maxGood; g += 200) {
    out.push(
      `<line x1="${left}" x2="${W - right}" y1="${yGood(g)}" y2="${yGood(g)}" stroke="#eee"/>`,
      `<text x="${left - 6}" y="${yGood(g) + 4}" text-anchor="end">${g}</text>`,
    );
  }
  for (let l = 0; l <= maxLimit; l += 4)
    out.push(`<text x="${W - right + 6}" y="${yLimit(l) + 4}">${l}</text>`);
  for (let t = 0; t <= endMs; t += 5000)
    out.push(`<text x="${x(t)}" y="${H - bottom + 16}" text-anchor="middle">${t / 1000}</text>`);
  out.push(
    `<text x="${W / 2}" y="${H - 10}" text-anchor="middle">time (s)</text>`,
    `<text x="14" y="${H / 2}" transform="rotate(-90 14 ${H / 2})" text-anchor="middle">goodput (req/s, solid)</text>`,
    `<text x="${W - 12}" y="${H / 2}" transform="rotate(90 ${W - 12} ${H / 2})" text-anchor="middle">limit (permits, dashed)</text>`,
    `<line x1="${x(r.drop.atMs)}" x2="${x(r.drop.atMs)}" y1="${top}" y2="${H - bottom}" stroke="#999" stroke-dasharray="2 3"/>`,
    `<line x1="${x(r.drop.atMs)}" x2="${x(endMs)}" y1="${yGood(r.drop.newOracle.goodput)}" y2="${yGood(r.drop.newOracle.goodput)}" stroke="#000" stroke-dasharray="6 3" stroke-width="0.8"/>`,
    `<text x="${x(endMs) - 4}" y="${yGood(r.drop.newOracle.goodput) - 4}" text-anchor="end">new oracle</text>`,
  );
  let legendY = top + 6;
  for (const a of ADAPTIVE) {
    const s = series[a].series;
    const points = (f, y) => s.map((b) => `${x(b.tMs).toFixed(1)},${y(f(b)).toFixed(1)}`).join(" ");
    out.push(
      `<polyline fill="none" stroke="${colors[a]}" stroke-width="1.5" points="${points((b) => b.goodput, yGood)}"/>`,
      `<polyline fill="none" stroke="${colors[a]}" stroke-width="1.2" stroke-dasharray="4 3" points="${points((b) => b.limit, yLimit)}"/>`,
      `<line x1="${left + 10}" x2="${left + 30}" y1="${legendY}" y2="${legendY}" stroke="${colors[a]}" stroke-width="2"/>`,
      `<text x="${left + 36}" y="${legendY + 4}">${a}</text>`,
    );
    legendY += 16;
  }
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}

/** The section of a bench run: prints the table; unless `quick`, writes RESULTS.md's section and the plot. */
export async function adaptiveSection({ quick, out, command, log }) {
  log(`bench: adaptive: simulating${quick ? " (quick)" : ""}…`);
  const result = await runAdaptive({ quick });
  const markdown = adaptiveMarkdown(result, command);
  console.log(`\n${markdown}`);
  if (!quick && out) {
    spliceResults(out, markdown);
    writeFileSync(PLOT, adaptivePlot(result.r));
    log(`bench: adaptive: wrote its section of ${out} and ${PLOT}`);
  }
  return result;
}
