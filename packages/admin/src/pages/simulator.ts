/**
 * The simulator: plays a traffic pattern (steady, bursts, ramp) against a policy's rules under
 * every algorithm, in the browser, with sluice's own code and a simulated clock — instant and
 * exact — and plots what each algorithm admits over time.
 */
import { type AlgorithmName, ValidationError } from "sluice/algorithms";
import type { Issue, PolicyDoc, PolicyRecord } from "../api.js";
import { chart, shortDuration } from "../chart.js";
import { h, mount } from "../dom.js";
import {
  MAX_REQUESTS,
  type Pattern,
  PatternError,
  type SimPolicy,
  type Simulation,
  policyFor,
  simulate,
} from "../simulate.js";
import {
  type Ctx,
  clearIssues,
  counted,
  durationOrRaw,
  field,
  heading,
  input,
  placeIssues,
  rulesEditor,
  select,
} from "../ui.js";

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

/** The runs without errors, grouped where their series are the same, in algorithm order. */
function sameLines(sim: Simulation): Simulation["runs"][] {
  const groups = new Map<string, Simulation["runs"]>();
  for (const r of sim.runs) {
    if (r.error) continue;
    const key = r.series.join(",");
    const g = groups.get(key);
    if (g) g.push(r);
    else groups.set(key, [r]);
  }
  return [...groups.values()];
}

/** A pattern field: its input, label (for messages) and limits. */
interface NumberField {
  readonly el: HTMLInputElement;
  readonly path: string;
  readonly label: string;
  readonly min: number;
  readonly integer?: boolean;
}

/**
 * Reads the visible pattern fields, each checked in the words of its label, every problem at
 * once: `{ values }` when all hold, else `{ issues }` naming each field.
 */
function readNumbers(fields: readonly NumberField[]): {
  values: Map<string, number>;
  issues: Issue[];
} {
  const values = new Map<string, number>();
  const issues: Issue[] = [];
  for (const f of fields) {
    const text = f.el.value.trim();
    const n = Number(text);
    const kind = f.integer ? "a whole number" : "a number";
    let problem: string | undefined;
    if (text === "") problem = `is required: ${kind} of at least ${f.min}`;
    else if (!Number.isFinite(n)) problem = `must be ${kind} (got "${text}")`;
    else if (f.integer && !Number.isInteger(n)) problem = `must be a whole number (got ${text})`;
    else if (n < f.min) problem = `must be at least ${f.min} (got ${text})`;
    if (problem) issues.push({ path: f.path, message: `${f.label} ${problem}` });
    else values.set(f.path, n);
  }
  return { values, issues };
}

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
  // A policy with leases admits what it would without them (docs/leases.md): say so.
  const leaseNote = h(
    "p",
    { class: "muted", id: "sim-lease-note" },
    "This policy takes leases: with Redis counters, hot keys are decided in memory from capacity taken ahead — where a decision is made changes, what is admitted does not (a lease never goes over the limit). The simulation is the same.",
  );
  const syncLease = (p: PolicyDoc | undefined) => {
    leaseNote.hidden = p?.lease === undefined || p.lease === false;
  };
  syncLease(initial);

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
    syncLease(p);
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

  const show = (sim: Simulation) => {
    const lines = sameLines(sim);
    const sameAs = (a: AlgorithmName) => {
      const g = lines.find((l) => l.some((r) => r.algorithm === a));
      return g && g[0]!.algorithm !== a ? g[0]!.algorithm : undefined;
    };
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
                      [
                        r.algorithm === "concurrency"
                          ? "leases held until they expire (period)"
                          : "",
                        sameAs(r.algorithm) ? `same line as ${sameAs(r.algorithm)}` : "",
                      ]
                        .filter(Boolean)
                        .join("; "),
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
          // Algorithms that admitted exactly alike share one line (named after all of them),
          // so no line hides another.
          ...sameLines(sim).map((group) => ({
            name: group.map((r) => r.algorithm).join(" = "),
            id: group[0]!.algorithm,
            color: COLORS[group[0]!.algorithm],
            values: shape(group[0]!.series),
          })),
        ],
      }),
      h(
        "p",
        { class: "muted" },
        `One key, ${counted(sim.runs[0]?.offered ?? 0, "request", "requests")} over ${shortDuration(sim.durationMs)}, in buckets of ${shortDuration(sim.bucketMs)}. Computed with sluice's own algorithm code and a simulated clock; fixed windows start with the run.`,
      ),
    );
  };

  const run = () => {
    clearIssues(form);
    errorBox.hidden = true;
    errorBox.textContent = "";
    const blockValue = durationOrRaw(block.value);
    // Written rules may hold raw text; definePolicy reports what is wrong with them.
    const input: SimPolicy = {
      rules: rules.read() as unknown as SimPolicy["rules"],
      ...(blockValue !== undefined
        ? { blockDuration: blockValue as SimPolicy["blockDuration"] }
        : {}),
    };
    const visible: NumberField[] = [
      ...(kind.value === "steady"
        ? [{ el: rate, path: "ratePerSec", label: "Requests per second", min: 0 }]
        : []),
      ...(kind.value === "burst"
        ? [
            { el: size, path: "size", label: "Burst size", min: 1, integer: true },
            { el: every, path: "everyMs", label: "Every", min: 0 },
          ]
        : []),
      ...(kind.value === "ramp"
        ? [
            { el: from, path: "fromPerSec", label: "From", min: 0 },
            { el: to, path: "toPerSec", label: "To", min: 0 },
          ]
        : []),
      { el: duration, path: "durationMs", label: "Duration", min: 0.001 },
    ];
    const { values, issues } = readNumbers(visible);
    // The rules, checked as the service would (every issue at once, next to its field).
    try {
      policyFor(input, "gcra");
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      issues.push(...err.issues.map((i) => ({ path: i.path, message: i.message })));
    }
    const fail = (messages: Issue[]) => {
      const rest = placeIssues(form, messages);
      errorBox.textContent =
        rest.length > 0
          ? `Cannot simulate: ${rest.join("; ")}`
          : "Cannot simulate: fix the fields marked above.";
      errorBox.hidden = false;
      mount(results);
    };
    if (issues.length > 0) return fail(issues);
    const v = (k: string) => values.get(k) ?? 0;
    const durationMs = Math.round(v("durationMs") * 1000);
    const pattern: Pattern =
      kind.value === "steady"
        ? { kind: "steady", ratePerSec: v("ratePerSec"), durationMs }
        : kind.value === "ramp"
          ? { kind: "ramp", fromPerSec: v("fromPerSec"), toPerSec: v("toPerSec"), durationMs }
          : {
              kind: "burst",
              size: v("size"),
              everyMs: Math.round(v("everyMs") * 1000),
              durationMs,
            };
    try {
      show(simulate(input, pattern));
    } catch (err) {
      if (!(err instanceof PatternError)) throw err;
      fail([
        {
          path: "",
          message:
            err.field === "pattern"
              ? `the pattern makes more than ${MAX_REQUESTS.toLocaleString("en-US")} requests: lower the rate, the burst size or the duration`
              : err.message,
        },
      ]);
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
        leaseNote,
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
