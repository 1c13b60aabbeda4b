import { describe, expect, it } from "vitest";
import { TrafficHistory, decisionCounts, deltaCounts, parsePrometheus } from "./metrics.js";

const scrape = (
  a: number,
  d: number,
  extra = "",
) => `# HELP sluice_decisions_total Rate-limit decisions
# TYPE sluice_decisions_total counter
sluice_decisions_total{policy="api",outcome="allowed",reason=""} ${a}
sluice_decisions_total{policy="api",outcome="denied",reason=""} ${d}
sluice_decisions_total{policy="api",outcome="denied",reason="blocked"} 1
sluice_decisions_total{policy="we\\"ird",outcome="allowed"} 2
sluice_draft_decisions_total{policy="api",outcome="denied"} 4
sluice_process_cpu_seconds_total 0.5
${extra}`;

describe("parsePrometheus", () => {
  it("reads names, labels (with escapes) and values; skips comments", () => {
    const s = parsePrometheus(scrape(10, 3));
    expect(s).toHaveLength(6);
    expect(s[3]).toEqual({
      name: "sluice_decisions_total",
      labels: { policy: 'we"ird', outcome: "allowed" },
      value: 2,
    });
    expect(s[5]).toEqual({ name: "sluice_process_cpu_seconds_total", labels: {}, value: 0.5 });
  });
});

describe("decision counts", () => {
  it("sums over reasons, by policy and outcome, drafts apart", () => {
    const c = decisionCounts(parsePrometheus(scrape(10, 3)));
    expect(c.get("api")).toEqual({ allowed: 10, denied: 4, draftAllowed: 0, draftDenied: 4 });
    expect(c.get('we"ird')?.allowed).toBe(2);
  });
  it("deltas between scrapes; a counter that went down restarts from zero", () => {
    const a = decisionCounts(parsePrometheus(scrape(10, 3)));
    const b = decisionCounts(parsePrometheus(scrape(15, 8)));
    expect(deltaCounts(a, b).get("api")).toEqual({
      allowed: 5,
      denied: 5,
      draftAllowed: 0,
      draftDenied: 0,
    });
    expect(deltaCounts(b, a).get("api")?.allowed).toBe(10);
  });
  it("keeps a rolling window of intervals", () => {
    const h = new TrafficHistory(2);
    h.add(1, decisionCounts(parsePrometheus(scrape(0, 0))));
    expect(h.all).toHaveLength(0);
    h.add(2, decisionCounts(parsePrometheus(scrape(5, 1))));
    h.add(3, decisionCounts(parsePrometheus(scrape(7, 1))));
    h.add(4, decisionCounts(parsePrometheus(scrape(10, 4))));
    expect(h.series("api", "allowed")).toEqual([2, 3]);
    expect(h.totals("api")).toMatchObject({ allowed: 5, denied: 3 });
    expect(h.policies()).toEqual(["api", 'we"ird']);
  });
});
