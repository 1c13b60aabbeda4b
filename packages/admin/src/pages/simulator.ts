/**
 * The simulator: plays a traffic pattern (steady, bursts, ramp) against a policy's rules under
 * every algorithm, in the browser, with sluice's own code and a simulated clock — instant and
 * exact — and plots what each algorithm admits over time.
 */
import { type AlgorithmName, ValidationError } from "sluice/algorithms";
import type { Issue, PolicyDoc, PolicyRecord } from "../api.js";
import { chart, shortDuration } from "../chart.js";
import { type Child, h, mount } from "../dom.js";
import {
  type AlgorithmRun,
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
  checkLabel,
  clearIssues,
  counted,
  durationOrRaw,
  field,
  heading,
  input,
  listTable,
  placeIssues,
  rulesEditor,
  select,
  submitActions,
  submitForm,
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

/** A number field of the traffic pattern: the patterns it belongs to, its label and its checks. */
interface PatternField {
  /** The patterns it belongs to (every one when left out): it is hidden under the others. */
  readonly kinds?: readonly string[];
  readonly id: string;
  readonly name: string;
  /** What it holds when the page opens. */
  readonly value: string;
  readonly inputmode: "decimal" | "numeric";
  /** Its label on the form. */
  readonly label: string;
  /** The issue path its messages go to. */
  readonly path: string;
  /** Its name in messages: "Burst size must be …". */
  readonly says: string;
  readonly min: number;
  readonly integer?: boolean;
}

/** The pattern's fields, in the order the form shows them. */
const PATTERN_FIELDS: readonly PatternField[] = [
  {
    kinds: ["steady"],
    id: "sim-rate",
    name: "ratePerSec",
    value: "10",
    inputmode: "decimal",
    label: "Requests per second",
    path: "ratePerSec",
    says: "Requests per second",
    min: 0,
  },
  {
    kinds: ["burst"],
    id: "sim-size",
    name: "size",
    value: "100",
    inputmode: "numeric",
    label: "Burst size",
    path: "size",
    says: "Burst size",
    min: 1,
    integer: true,
  },
  {
    kinds: ["burst"],
    id: "sim-every",
    name: "everySec",
    value: "0",
    inputmode: "decimal",
    label: "Every (seconds, 0 = once)",
    path: "everyMs",
    says: "Every",
    min: 0,
  },
  {
    kinds: ["ramp"],
    id: "sim-from",
    name: "fromPerSec",
    value: "0",
    inputmode: "decimal",
    label: "From (requests/s)",
    path: "fromPerSec",
    says: "From",
    min: 0,
  },
  {
    kinds: ["ramp"],
    id: "sim-to",
    name: "toPerSec",
    value: "50",
    inputmode: "decimal",
    label: "To (requests/s)",
    path: "toPerSec",
    says: "To",
    min: 0,
  },
  {
    id: "sim-duration",
    name: "durationSec",
    value: "60",
    inputmode: "decimal",
    label: "Duration (seconds)",
    path: "durationMs",
    says: "Duration",
    min: 0.001,
  },
];

/** A pattern field on the form: its input and the field around it. */
type PatternInput = PatternField & { readonly el: HTMLInputElement; readonly wrapper: HTMLElement };

/**
 * Reads the visible pattern fields, each checked in the words of its label, every problem at
 * once: `{ values }` when all hold, else `{ issues }` naming each field.
 */
function readNumbers(fields: readonly PatternInput[]): {
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
    if (problem) issues.push({ path: f.path, message: `${f.says} ${problem}` });
    else values.set(f.path, n);
  }
  return { values, issues };
}

/** The pattern of kind `kind` from its fields' values, by issue path (seconds made milliseconds). */
function patternOf(kind: string, v: (path: string) => number): Pattern {
  const durationMs = Math.round(v("durationMs") * 1000);
  return kind === "steady"
    ? { kind: "steady", ratePerSec: v("ratePerSec"), durationMs }
    : kind === "ramp"
      ? { kind: "ramp", fromPerSec: v("fromPerSec"), toPerSec: v("toPerSec"), durationMs }
      : {
          kind: "burst",
          size: v("size"),
          everyMs: Math.round(v("everyMs") * 1000),
          durationMs,
        };
}

/** The issues of the rules, found as the service would find them (every one at once). */
function ruleIssues(policy: SimPolicy): Issue[] {
  try {
    policyFor(policy, "gcra");
    return [];
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    return err.issues.map((i) => ({ path: i.path, message: i.message }));
  }
}

/** A pattern the simulator refuses, as an issue of the whole form. */
function patternIssue(err: PatternError): Issue {
  return {
    path: "",
    message:
      err.field === "pattern"
        ? `the pattern makes more than ${MAX_REQUESTS.toLocaleString("en-US")} requests: lower the rate, the burst size or the duration`
        : err.message,
  };
}

/** A fieldset of the form, under its legend. */
function fieldset(legend: string, ...children: Child[]): HTMLElement {
  return h("fieldset", {}, h("legend", {}, legend), children);
}

/** The Policy fieldset: the policy started from (or custom rules), its rules and block. */
interface PolicySection {
  readonly element: HTMLElement;
  /** The algorithm of the policy started from ("" for custom rules): its row is marked. */
  readonly algorithm: string;
  /** The policy as written: rules may hold raw text, which definePolicy names. */
  read(): SimPolicy;
}

/** Builds the {@link PolicySection}, starting from `wanted` (or the first policy). */
function policySection(
  policies: readonly PolicyRecord[],
  wanted: string,
  onChange: () => void,
): PolicySection {
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
  let algorithm: string = initial?.algorithm ?? "gcra";
  // A policy with allotments admits what it would without them (docs/leases.md): say so.
  const allotmentNote = h(
    "p",
    { class: "muted", id: "sim-lease-note" },
    "This policy takes allotments (lease): with Redis counters, hot keys are decided in memory from capacity taken ahead — where a decision is made changes, what is admitted does not (an allotment never goes over the limit). The simulation is the same.",
  );
  const syncAllotmentNote = (p: PolicyDoc | undefined) => {
    allotmentNote.hidden = p?.lease === undefined || p.lease === false;
  };
  syncAllotmentNote(initial);
  source.addEventListener("change", () => {
    const p = policies.find((x) => x.name === source.value);
    if (p) {
      rules = rulesEditor(p.rules);
      mount(rulesHost, rules.element);
      block.value = p.blockDuration === undefined ? "" : String(p.blockDuration);
      algorithm = p.algorithm ?? "gcra";
    } else {
      algorithm = "";
    }
    syncAllotmentNote(p);
    onChange();
  });
  return {
    element: fieldset(
      "Policy",
      field("Start from", "policy", source),
      allotmentNote,
      rulesHost,
      field("Block after a denial", "blockDuration", block),
    ),
    get algorithm() {
      return algorithm;
    },
    read() {
      const blockValue = durationOrRaw(block.value);
      return {
        rules: rules.read() as unknown as SimPolicy["rules"],
        ...(blockValue !== undefined
          ? { blockDuration: blockValue as SimPolicy["blockDuration"] }
          : {}),
      };
    },
  };
}

/** The Traffic fieldset: the pattern, and the fields of the pattern chosen. */
interface TrafficSection {
  readonly element: HTMLElement;
  /** The pattern as written, or the issues of its fields (each in the words of its label). */
  read(): { pattern?: Pattern; issues: Issue[] };
}

/** Builds the {@link TrafficSection} for pattern `kindValue` (`burst`, `steady` or `ramp`). */
function trafficSection(kindValue: string, onChange: () => void): TrafficSection {
  const kind = select(
    [
      ["burst", "Bursts"],
      ["steady", "Steady rate"],
      ["ramp", "Ramp"],
    ],
    kindValue,
    { id: "sim-kind", name: "kind" },
  );
  const fields: PatternInput[] = PATTERN_FIELDS.map((f) => {
    const el = input({ id: f.id, name: f.name, value: f.value, inputmode: f.inputmode });
    return { ...f, el, wrapper: field(f.label, f.path, el) };
  });
  const shown = (f: PatternField) => f.kinds === undefined || f.kinds.includes(kind.value);
  const syncKind = () => {
    for (const f of fields) if (f.kinds) f.wrapper.hidden = !shown(f);
  };
  kind.addEventListener("change", () => {
    syncKind();
    onChange();
  });
  syncKind();
  return {
    element: fieldset(
      "Traffic (one key)",
      field("Pattern", "kind", kind),
      fields.map((f) => f.wrapper),
    ),
    read() {
      const { values, issues } = readNumbers(fields.filter(shown));
      if (issues.length > 0) return { issues };
      return { pattern: patternOf(kind.value, (k) => values.get(k) ?? 0), issues };
    },
  };
}

/** How the results are drawn: cumulative or per interval, with the offered traffic or not. */
interface ResultsControls {
  /** The controls, shown between the table and the chart. */
  readonly element: HTMLElement;
  readonly cumulative: boolean;
  /** Whether to draw the offered traffic: as the user chose, else unless it flattens the rest. */
  showOffered(sim: Simulation): boolean;
}

/** Builds the {@link ResultsControls}; `onChange` hears of every change the user makes. */
function resultsControls(onChange: () => void): ResultsControls {
  const view = select(
    [
      ["cumulative", "Admitted so far (cumulative)"],
      ["bucket", "Admitted per interval"],
    ],
    "cumulative",
    { id: "sim-view", name: "view" },
  );
  view.addEventListener("change", () => onChange());
  // Offered traffic can dwarf what is admitted; it is drawn unless it would flatten the rest,
  // until the user decides.
  const offeredBox = h("input", { type: "checkbox", id: "sim-offered" });
  let offeredChosen = false;
  offeredBox.addEventListener("change", () => {
    offeredChosen = true;
    onChange();
  });
  return {
    element: h(
      "div",
      { class: "field inline view" },
      h("label", { for: "sim-view" }, "Show "),
      view,
      checkLabel(offeredBox, " offered requests"),
    ),
    get cumulative() {
      return view.value === "cumulative";
    },
    showOffered(sim) {
      if (!offeredChosen) {
        const most = Math.max(0, ...sim.runs.map((r) => r.admitted));
        offeredBox.checked = (sim.runs[0]?.offered ?? 0) <= 4 * most;
      }
      return offeredBox.checked;
    },
  };
}

/** One algorithm's row: what it admitted and its share, or why it could not run. */
function resultRow(
  r: AlgorithmRun,
  policyAlgorithm: string,
  sameAs: AlgorithmName | undefined,
): HTMLElement {
  return h(
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
              r.algorithm === "concurrency" ? "permits held until they expire (period)" : "",
              sameAs ? `same line as ${sameAs}` : "",
            ]
              .filter(Boolean)
              .join("; "),
          ),
        ],
  );
}

/** The table of every algorithm's run, the policy's own algorithm marked. */
function resultsTable(sim: Simulation, policyAlgorithm: string): HTMLElement {
  const lines = sameLines(sim);
  const sameAs = (a: AlgorithmName) => {
    const g = lines.find((l) => l.some((r) => r.algorithm === a));
    return g && g[0]!.algorithm !== a ? g[0]!.algorithm : undefined;
  };
  return listTable(
    { class: "list sim", id: "sim-table" },
    ["Algorithm", "Admitted", "Share", ""],
    h(
      "tbody",
      {},
      sim.runs.map((r) => resultRow(r, policyAlgorithm, sameAs(r.algorithm))),
    ),
  );
}

/** The chart of what each algorithm admitted over time, and what was offered when `offered`. */
function resultsChart(sim: Simulation, cumulative: boolean, offered: boolean): HTMLElement {
  // Cumulative points are at the end of each bucket; per-interval ones at its start.
  const label = (i: number) => shortDuration((cumulative ? i + 1 : i) * sim.bucketMs);
  const shape = (values: readonly number[]) => (cumulative ? runningSum(values) : [...values]);
  return chart({
    title: "Requests admitted over time by each algorithm",
    yUnit: cumulative ? "requests admitted so far" : `requests / ${shortDuration(sim.bucketMs)}`,
    xLabel: label,
    height: 280,
    series: [
      ...(offered
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
  });
}

/** What the run was, under the chart. */
function resultsNote(sim: Simulation): HTMLElement {
  return h(
    "p",
    { class: "muted" },
    `One key, ${counted(sim.runs[0]?.offered ?? 0, "request", "requests")} over ${shortDuration(sim.durationMs)}, in buckets of ${shortDuration(sim.bucketMs)}. Computed with sluice's own algorithm code and a simulated clock; fixed windows start with the run.`,
  );
}

/**
 * Shows why nothing was simulated: each issue next to the field it names in `form`, the rest in
 * `errorBox`; the last results go.
 */
function showFailure(
  form: HTMLElement,
  errorBox: HTMLElement,
  results: HTMLElement,
  issues: readonly Issue[],
): void {
  const rest = placeIssues(form, issues);
  errorBox.textContent =
    rest.length > 0
      ? `Cannot simulate: ${rest.join("; ")}`
      : "Cannot simulate: fix the fields marked above.";
  errorBox.hidden = false;
  mount(results);
}

/** `#/simulator`: play a pattern against a policy. */
export async function simulatorPage(ctx: Ctx): Promise<void> {
  let policies: PolicyRecord[] = [];
  try {
    policies = await ctx.api.policies();
  } catch {
    // A custom policy still works.
  }
  const policy = policySection(policies, ctx.query.get("policy") ?? "", () => run());
  const traffic = trafficSection(ctx.query.get("pattern") ?? "burst", () => run());
  const controls = resultsControls(() => run());
  const errorBox = h("div", { class: "form-error", role: "alert", hidden: true, id: "sim-error" });
  const results = h("div", { id: "sim-results" });

  const run = () => {
    clearIssues(form);
    errorBox.hidden = true;
    errorBox.textContent = "";
    // Written rules may hold raw text; definePolicy reports what is wrong with them.
    const written = policy.read();
    const { pattern, issues } = traffic.read();
    // The rules, checked as the service would (every issue at once, next to its field).
    issues.push(...ruleIssues(written));
    if (!pattern || issues.length > 0) return showFailure(form, errorBox, results, issues);
    try {
      const sim = simulate(written, pattern);
      mount(
        results,
        resultsTable(sim, policy.algorithm),
        controls.element,
        resultsChart(sim, controls.cumulative, controls.showOffered(sim)),
        resultsNote(sim),
      );
    } catch (err) {
      if (!(err instanceof PatternError)) throw err;
      showFailure(form, errorBox, results, [patternIssue(err)]);
    }
  };

  const form = submitForm(
    { class: "card sim-form", id: "sim-form" },
    () => run(),
    h("div", { class: "cols" }, policy.element, traffic.element),
    errorBox,
    submitActions("sim-run", "Run simulation"),
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
