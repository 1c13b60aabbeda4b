/**
 * Live traffic: polls the service's `/metrics` every 2 s, turns the decision counters into
 * per-interval deltas, and charts allowed / denied per policy over the last two minutes.
 */
import { chart } from "../chart.js";
import { h, mount } from "../dom.js";
import { TrafficHistory, decisionCounts, parsePrometheus } from "../metrics.js";
import { type Ctx, heading, select } from "../ui.js";

/** How often `/metrics` is read (ms). */
export const POLL_MS = 2000;
/** Intervals kept and drawn: two minutes. */
const SLOTS = 60;

const COLORS = {
  allowed: "#2e7d32",
  denied: "#c62828",
  draftAllowed: "#1565c0",
  draftDenied: "#ef6c00",
};

function padLeft(values: number[], n: number): number[] {
  return values.length >= n
    ? values.slice(-n)
    : [...new Array<number>(n - values.length).fill(0), ...values];
}

/** `#/traffic`: allowed / denied over time, per policy. */
export async function trafficPage(ctx: Ctx): Promise<void> {
  const history = new TrafficHistory(SLOTS);
  let names: string[] = [];
  try {
    names = (await ctx.api.policies()).map((p) => p.name);
  } catch {
    // The charts still work from the metrics alone.
  }
  const wanted = ctx.query.get("policy") ?? "";
  const picker = select([["", "All policies"], ...names.map((n) => [n, n] as const)], wanted, {
    id: "traffic-policy",
  });
  picker.addEventListener("change", () => {
    ctx.navigate(picker.value ? `/traffic?policy=${encodeURIComponent(picker.value)}` : "/traffic");
  });
  const status = h("span", { class: "muted", id: "traffic-status" }, "Reading /metrics…");
  const charts = h("div", { id: "traffic-charts" });
  mount(
    ctx.main,
    heading("Live traffic", h("label", { for: "traffic-policy" }, "Policy "), picker),
    h(
      "p",
      { class: "muted" },
      `Decisions per ${POLL_MS / 1000} s interval, from the service's /metrics (this node), over the last two minutes. `,
      status,
    ),
    charts,
  );

  const render = () => {
    const all = [...new Set([...names, ...history.policies()])].sort();
    const shown = wanted ? [wanted] : all;
    if (shown.length === 0) {
      mount(charts, h("p", { class: "muted" }, "No policies yet."));
      return;
    }
    const n = SLOTS;
    const at = padLeft(
      history.all.map((i) => i.atMs),
      n,
    );
    const label = (i: number) => (at[i] ? new Date(at[i]).toLocaleTimeString() : "");
    mount(
      charts,
      shown.map((policy) => {
        const t = history.totals(policy);
        const cum = history.latest.get(policy);
        const hasDraft = t.draftAllowed + t.draftDenied > 0;
        return h(
          "section",
          { class: "card traffic", "data-policy": policy },
          h("h2", {}, h("a", { href: `#/policies/${encodeURIComponent(policy)}` }, policy)),
          h(
            "p",
            { class: "totals" },
            "Last 2 min: ",
            h("strong", { class: "allowed", "data-allowed": t.allowed }, `allowed ${t.allowed}`),
            " · ",
            h("strong", { class: "denied", "data-denied": t.denied }, `denied ${t.denied}`),
            hasDraft ? ` · draft would allow ${t.draftAllowed} · would deny ${t.draftDenied}` : "",
            cum
              ? h(
                  "span",
                  { class: "muted" },
                  ` · since the service started: allowed ${cum.allowed}, denied ${cum.denied}`,
                )
              : "",
          ),
          chart({
            kind: "bar",
            title: `Allowed and denied decisions of ${policy} per ${POLL_MS / 1000} s`,
            yUnit: `decisions / ${POLL_MS / 1000} s`,
            xLabel: label,
            series: [
              {
                name: "allowed",
                color: COLORS.allowed,
                values: padLeft(history.series(policy, "allowed"), n),
              },
              {
                name: "denied",
                color: COLORS.denied,
                values: padLeft(history.series(policy, "denied"), n),
              },
            ],
          }),
          hasDraft
            ? chart({
                title: `What the draft of ${policy} would decide`,
                yUnit: `draft decisions / ${POLL_MS / 1000} s`,
                xLabel: label,
                height: 160,
                series: [
                  {
                    name: "draft allowed",
                    color: COLORS.draftAllowed,
                    values: padLeft(history.series(policy, "draftAllowed"), n),
                    dashed: true,
                  },
                  {
                    name: "draft denied",
                    color: COLORS.draftDenied,
                    values: padLeft(history.series(policy, "draftDenied"), n),
                    dashed: true,
                  },
                ],
              })
            : null,
        );
      }),
    );
  };

  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const poll = async () => {
    try {
      const text = await ctx.api.metricsText();
      const now = Date.now();
      history.add(now, decisionCounts(parsePrometheus(text)));
      status.textContent = `Updated ${new Date(now).toLocaleTimeString()}.`;
      status.className = "muted";
    } catch (err) {
      status.textContent = `Cannot read /metrics: ${err instanceof Error ? err.message : String(err)}`;
      status.className = "error-text";
    }
    if (stopped) return;
    render();
    timer = setTimeout(() => void poll(), POLL_MS);
  };
  ctx.onLeave(() => {
    stopped = true;
    if (timer) clearTimeout(timer);
  });
  render();
  await poll();
}
