/**
 * Traffic as the console shows it: a policy's (or an app's) allowed / shadow would-deny /
 * denied decisions over a window, summed over every node by the service, as stacked bars —
 * or, when there were none, one line saying so (an idle policy takes no full-size chart).
 */
import type { Counts, TrafficHistory, TrafficWindow } from "./api.js";
import { OUTCOME_COLORS, chart, clockLabel } from "./chart.js";
import { type Child, clock, h, mount } from "./dom.js";
import {
  type Ctx,
  count,
  headedCard,
  listTable,
  messageOf,
  percent,
  scroller,
  windowSelect,
} from "./ui.js";

/** How often an open page reads the traffic again (ms). */
export const REFRESH_MS = 5000;

/** The history windows, as the selects offer them. */
export const WINDOWS: readonly (readonly [TrafficWindow, string])[] = [
  ["5m", "last 5 minutes"],
  ["15m", "last 15 minutes"],
  ["1h", "last hour"],
  ["6h", "last 6 hours"],
  ["24h", "last 24 hours"],
];

/**
 * Runs `fn` now and every `ms` until the page is left — or, with `watch`, until that element
 * is no longer in the document (its part of the page was drawn again) — one run at a time.
 */
export function every(ctx: Ctx, ms: number, fn: () => Promise<void>, watch?: Element): void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  let first = true;
  const tick = async () => {
    if (!first && watch && !watch.isConnected) {
      stopped = true;
      return;
    }
    first = false;
    try {
      await fn();
    } finally {
      if (!stopped) timer = setTimeout(() => void tick(), ms);
    }
  };
  ctx.onLeave(() => {
    stopped = true;
    if (timer) clearTimeout(timer);
  });
  void tick();
}

const sum = (c: Counts) => c.allowed + c.denied + c.shadow;

/**
 * `allowed 4 · denied 6 · 60% denied`, and `shadow would-deny 2 · 67% would deny (shadow)` when
 * there are would-denials (never counted as denied), with the numbers as data attributes.
 */
export function totalsLine(c: Counts, props: Record<string, unknown> = {}): HTMLElement {
  return h(
    "p",
    {
      class: "totals",
      "data-allowed": c.allowed,
      "data-denied": c.denied,
      "data-shadow": c.shadow,
      ...props,
    },
    h("strong", { class: "allowed" }, `allowed ${count(c.allowed)}`),
    " · ",
    h("strong", { class: "denied" }, `denied ${count(c.denied)}`),
    c.shadow > 0
      ? [" · ", h("strong", { class: "shadow" }, `shadow would-deny ${count(c.shadow)}`)]
      : null,
    h("span", { class: "muted" }, ` · ${percent(c.denied, sum(c))} denied`),
    c.shadow > 0
      ? h("span", { class: "muted" }, ` · ${percent(c.shadow, sum(c))} would deny (shadow)`)
      : null,
  );
}

/** The stacked-bar chart of a history. */
export function historyChart(t: TrafficHistory, title: string): HTMLElement {
  const series = (k: keyof Counts) => t.points.map((p) => p[k]);
  return chart({
    kind: "bar",
    title,
    yUnit: `decisions / ${t.stepSec >= 60 ? `${t.stepSec / 60} min` : `${t.stepSec} s`}`,
    xLabel: (i) => {
      const p = t.points[i];
      return p ? clockLabel(p.at) : "";
    },
    height: 200,
    series: [
      { name: "allowed", color: OUTCOME_COLORS.allowed, values: series("allowed") },
      { name: "shadow would-deny", color: OUTCOME_COLORS.shadow, values: series("shadow") },
      { name: "denied", color: OUTCOME_COLORS.denied, values: series("denied") },
    ],
  });
}

/**
 * The traffic card of a policy or an app: a window select, the totals, the chart (or a line
 * when idle, with `idleHint` under it), and the totals per app (of a policy) or per policy (of
 * an app), each a link to its page — or, with `byLabel`, as that says (an Envoy domain's
 * limits, which have no page of their own). Refreshed every {@link REFRESH_MS} while the page
 * is open.
 */
export function trafficCard(
  ctx: Ctx,
  of: { policy: string } | { app: string },
  idleHint?: () => Child,
  byLabel?: (name: string) => Child,
): HTMLElement {
  const param = ctx.query.get("window");
  let window: TrafficWindow = WINDOWS.some(([w]) => w === param) ? (param as TrafficWindow) : "15m";
  const body = h("div", { class: "traffic-body" }, h("p", { class: "muted" }, "Loading…"));
  const status = h("span", { class: "muted small", id: "traffic-status" });
  const picker = windowSelect("traffic-window", WINDOWS, window, (w) => {
    window = w;
    void load();
  });
  const what = "policy" in of ? "app" : "policy";
  const load = async () => {
    try {
      const t = await ctx.api.traffic({ ...of, window });
      const label = WINDOWS.find(([w]) => w === window)?.[1] ?? window;
      const idle = sum(t.totals) === 0;
      mount(
        body,
        totalsLine(t.totals, { id: "traffic-totals" }),
        idle
          ? h(
              "div",
              { class: "idle", id: "traffic-idle" },
              h("p", { class: "muted" }, `No decisions in the ${label}.`),
              idleHint?.(),
            )
          : [
              historyChart(
                t,
                `Decisions of ${"policy" in of ? of.policy : of.app} per ${t.stepSec} s, ${label}`,
              ),
              t.by.length > 1 || (("policy" in of || byLabel) && t.by.length > 0)
                ? scroller(
                    listTable(
                      { class: "list compact", id: "traffic-by" },
                      [
                        what === "app" ? "App" : "Policy",
                        "Allowed",
                        "Denied",
                        "Shadow would-deny",
                        "Denied %",
                      ],
                      h(
                        "tbody",
                        {},
                        t.by.map((b) =>
                          h(
                            "tr",
                            { [`data-${what}`]: b.name },
                            h(
                              "td",
                              {},
                              byLabel
                                ? byLabel(b.name)
                                : h(
                                    "a",
                                    {
                                      href: `#/${what === "app" ? "apps" : "policies"}/${encodeURIComponent(b.name)}`,
                                    },
                                    b.name,
                                  ),
                            ),
                            h("td", { class: "num" }, count(b.counts.allowed)),
                            h("td", { class: "num" }, count(b.counts.denied)),
                            h("td", { class: "num" }, count(b.counts.shadow)),
                            h("td", { class: "num" }, percent(b.counts.denied, sum(b.counts))),
                          ),
                        ),
                      ),
                    ),
                  )
                : null,
            ],
      );
      status.textContent = `Every node, updated ${clock()}`;
      status.className = "muted small";
    } catch (err) {
      status.textContent = `Cannot read the traffic: ${messageOf(err)}`;
      status.className = "error-text small";
    }
  };
  every(ctx, REFRESH_MS, load, body);
  return headedCard("traffic", "Traffic", [status, picker], body);
}
