/**
 * The simulator: plays a traffic pattern (steady, bursts, ramp) against a policy's rules under
 * every algorithm, in the browser, with sluice's own code and a simulated clock — instant and
 * exact — and plots what each algorithm admits over time.
 */
import type { AlgorithmName } from "sluice/algorithms";
import type { PolicyDoc, PolicyRecord } from "../api.js";
import { chart, shortDuration } from "../chart.js";
import { h, mount } from "../dom.js";
import {
  type Pattern,
  PatternError,
  type SimPolicy,
  type Simulation,
  simulate,
} from "../simulate.js";
import { type Ctx, durationOrRaw, field, heading, input, rulesEditor, select } from "../ui.js";

const COLORS: Record<AlgorithmName, string> = {
  gcra: "#1565c0",
  "token-bucket": "#6a1b9a",
  "fixed-window": "#c62828",
  "sliding-window": "#ef6c00",
  "sliding-log": "#2e7d32",
  concurrency: "#00838f",
};

/** A colour square (styled through the CSSOM: the page's CSP forbids inline style attributes). */
function swatch(color: string): HTMLElement {
  const el = h("span", { class: "swatch" });
  el.style.background = color;
  return el;
}

/** Running totals: [1, 2, 3] → [1, 3, 6]. */
function runningSum(values: readonly number[]): number[] {
  let t = 0;
  return values.map((v) => (t += v));
}

const num = (el: HTMLInputElement) => Number(el.value.trim() === "" ? NaN : el.value.trim());

/** `#/simulator`: play a pattern against a policy. */
export async function simulatorPage(ctx: Ctx): Promise<void> {
  let policies: PolicyRecord[] = [];
  try {
    policies = await ctx.api.policies();
  } catch {
    // A custom policy still works.
  }
  const wanted = ctx.query.get("policy") ?? "";
  const initial: PolicyDoc | undefined = policies.find((p) => p.name === wanted) ?? policies[0];
  const source = select(
    [...policies.map((p) => [p.name, p.name] as const), ["", "Custom rules"] as const],
    initial?.name ?? "",
    { id: "sim-policy", name: "policy" },
  );
  const rulesHost = h("div", {});
  let rules = rulesEditor(initial?.rules ?? [{ limit: 20, period: "1m" }]);
  mount(rulesHost, rules.element);
  const block = input({
    name: "blockDuration",
    value: initial?.blockDuration ?? "",
    placeholder: "off",
  });
  let policyAlgorithm: string = initial?.algorithm ?? "gcra";

  const kind = select(
    [
      ["burst", "Bursts"],
      ["steady", "Steady rate"],
      ["ramp", "Ramp"],
    ],
    ctx.query.get("pattern") ?? "burst",
    { id: "sim-kind", name: "kind" },
  );
  const rate = input({ id: "sim-rate", name: "ratePerSec", value: "10", inputmode: "decimal" });
  const size = input({ id: "sim-size", name: "size", value: "100", inputmode: "numeric" });
  const every = input({ id: "sim-every", name: "everySec", value: "0", inputmode: "decimal" });
  const from = input({ id: "sim-from", name: "fromPerSec", value: "0", inputmode: "decimal" });
  const to = input({ id: "sim-to", name: "toPerSec", value: "50", inputmode: "decimal" });
  const duration = input({
    id: "sim-duration",
    name: "durationSec",
    value: "60",
    inputmode: "decimal",
  });
  const fRate = field("Requests per second", "ratePerSec", rate);
  const fSize = field("Burst size", "size", size);
  const fEvery = field("Every (seconds, 0 = once)", "everyMs", every);
  const fFrom = field("From (requests/s)", "fromPerSec", from);
  const fTo = field("To (requests/s)", "toPerSec", to);
  const fDuration = field("Duration (seconds)", "durationMs", duration);
  const syncKind = () => {
    fRate.hidden = kind.value !== "steady";
    fSize.hidden = fEvery.hidden = kind.value !== "burst";
    fFrom.hidden = fTo.hidden = kind.value !== "ramp";
  };
  kind.addEventListener("change", () => {
    syncKind();
    run();
  });
  syncKind();

  source.addEventListener("change", () => {
    const p = policies.find((x) => x.name === source.value);
    if (p) {
      rules = rulesEditor(p.rules);
      mount(rulesHost, rules.element);
      block.value = p.blockDuration === undefined ? "" : String(p.blockDuration);
      policyAlgorithm = p.algorithm ?? "gcra";
    } else {
      policyAlgorithm = "";
    }
    run();
  });

  const view = select(
    [
      ["cumulative", "Admitted so far (cumulative)"],
      ["bucket", "Admitted per interval"],
    ],
    "cumulative",
    { id: "sim-view", name: "view" },
  );
  view.addEventListener("change", () => run());
  // Offered traffic can dwarf what is admitted; it is drawn unless it would flatten the rest,
  // until the user decides.
  const offeredBox = h("input", { type: "checkbox", id: "sim-offered" });
  let offeredChosen = false;
  offeredBox.addEventListener("change", () => {
    offeredChosen = true;
    run();
  });

  const errorBox = h("div", { class: "form-error", role: "alert", hidden: true, id: "sim-error" });
  const results = h("div", { id: "sim-results" });

  const pattern = (): Pattern => {
    const durationMs = Math.round(num(duration) * 1000);
    switch (kind.value) {
      case "steady":
        return { kind: "steady", ratePerSec: num(rate), durationMs };
      case "ramp":
        return { kind: "ramp", fromPerSec: num(from), toPerSec: num(to), durationMs };
      default:
        return {
          kind: "burst",
          size: num(size),
          everyMs: Math.round(num(every) * 1000),
          durationMs,
        };
    }
  };

  const show = (sim: Simulation) => {
    if (!offeredChosen) {
      const most = Math.max(0, ...sim.runs.map((r) => r.admitted));
      offeredBox.checked = (sim.runs[0]?.offered ?? 0) <= 4 * most;
    }
    const cumulative = view.value === "cumulative";
    // Cumulative points are at the end of each bucket; per-interval ones at its start.
    const label = (i: number) => shortDuration((cumulative ? i + 1 : i) * sim.bucketMs);
    const shape = (values: readonly number[]) => (cumulative ? runningSum(values) : [...values]);
    mount(
      results,
      h(
        "table",
        { class: "list sim", id: "sim-table" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Algorithm", "Admitted", "Share", ""].map((t) => h("th", {}, t)),
          ),
        ),
        h(
          "tbody",
          {},
          sim.runs.map((r) =>
            h(
              "tr",
              {
                "data-algorithm": r.algorithm,
                class: r.algorithm === policyAlgorithm ? "current" : undefined,
              },
              h(
                "td",
                {},
                swatch(COLORS[r.algorithm]),
                ` ${r.algorithm}`,
                r.algorithm === policyAlgorithm ? h("span", { class: "tag" }, "this policy") : null,
              ),
              r.error
                ? h("td", { colspan: 3, class: "error-text" }, r.error)
                : [
                    h(
                      "td",
                      { class: "admitted", "data-admitted": r.admitted, "data-offered": r.offered },
                      `admitted ${r.admitted} of ${r.offered}`,
                    ),
                    h(
                      "td",
                      { class: "num" },
                      r.offered > 0 ? `${((100 * r.admitted) / r.offered).toFixed(1)}%` : "—",
                    ),
                    h(
                      "td",
                      { class: "muted" },
                      r.algorithm === "concurrency" ? "leases held until they expire (period)" : "",
                    ),
                  ],
            ),
          ),
        ),
      ),
      h(
        "div",
        { class: "field inline view" },
        h("label", { for: "sim-view" }, "Show "),
        view,
        h("label", { class: "check" }, offeredBox, " offered requests"),
      ),
      chart({
        title: "Requests admitted over time by each algorithm",
        yUnit: cumulative
          ? "requests admitted so far"
          : `requests / ${shortDuration(sim.bucketMs)}`,
        xLabel: label,
        height: 280,
        series: [
          ...(offeredBox.checked
            ? [{ name: "offered", color: "#9e9e9e", values: shape(sim.offered), dashed: true }]
            : []),
          ...sim.runs
            .filter((r) => !r.error)
            .map((r) => ({
              name: r.algorithm,
              color: COLORS[r.algorithm],
              values: shape(r.series),
            })),
        ],
      }),
      h(
        "p",
        { class: "muted" },
        `One key, ${sim.runs[0]?.offered ?? 0} requests over ${shortDuration(sim.durationMs)}, in buckets of ${shortDuration(sim.bucketMs)}. Computed with sluice's own algorithm code and a simulated clock; fixed windows start with the run.`,
      ),
    );
  };

  const run = () => {
    errorBox.hidden = true;
    errorBox.textContent = "";
    for (const f of form.querySelectorAll(".field.invalid")) f.classList.remove("invalid");
    for (const f of form.querySelectorAll<HTMLElement>(".field-error")) f.textContent = "";
    const blockValue = durationOrRaw(block.value);
    // Written rules may hold raw text; definePolicy reports what is wrong with them.
    const input: SimPolicy = {
      rules: rules.read() as unknown as SimPolicy["rules"],
      ...(blockValue !== undefined
        ? { blockDuration: blockValue as SimPolicy["blockDuration"] }
        : {}),
    };
    try {
      show(simulate(input, pattern()));
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      if (err instanceof PatternError) {
        const f = form.querySelector<HTMLElement>(`[data-field="${err.field}"]`);
        if (f) {
          f.classList.add("invalid");
          const box = f.querySelector(".field-error");
          if (box) box.textContent = msg;
        }
      }
      errorBox.textContent = msg;
      errorBox.hidden = false;
      mount(results);
    }
  };

  const form: HTMLFormElement = h(
    "form",
    {
      class: "card sim-form",
      id: "sim-form",
      novalidate: true,
      onsubmit: (e: Event) => {
        e.preventDefault();
        run();
      },
    },
    h(
      "div",
      { class: "cols" },
      h(
        "fieldset",
        {},
        h("legend", {}, "Policy"),
        field("Start from", "policy", source),
        rulesHost,
        field("Block after a denial", "blockDuration", block),
      ),
      h(
        "fieldset",
        {},
        h("legend", {}, "Traffic (one key)"),
        field("Pattern", "kind", kind),
        fRate,
        fSize,
        fEvery,
        fFrom,
        fTo,
        fDuration,
      ),
    ),
    errorBox,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", id: "sim-run" }, "Run simulation"),
    ),
  );

  mount(
    ctx.main,
    heading("Simulator"),
    h(
      "p",
      { class: "muted" },
      "Play a traffic pattern against a policy's rules and see what each algorithm would admit. Nothing is sent to the service.",
    ),
    form,
    results,
  );
  run();
}
