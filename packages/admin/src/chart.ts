/**
 * Inline SVG charts: lines (one polyline per series) or stacked bars, with a y axis of round
 * ticks, a few x labels and a legend. No chart library; the page stays one small bundle.
 */
import { h, s } from "./dom.js";

/** One series of a chart. */
export interface Series {
  /** Legend text; also `data-series` on the drawn element (tests look for it). */
  readonly name: string;
  /** A CSS colour. */
  readonly color: string;
  /** One value per x position. */
  readonly values: readonly number[];
  /** Draw dashed (e.g. what a draft would do, or offered traffic). */
  readonly dashed?: boolean;
  /** `data-series` of the drawn element, when it differs from `name`. */
  readonly id?: string;
}

/** Options of {@link chart}. */
export interface ChartOptions {
  /** `line` (default) or stacked `bar`. */
  readonly kind?: "line" | "bar";
  readonly series: readonly Series[];
  /** Label of x position `i` (a few are shown). */
  readonly xLabel: (i: number) => string;
  /** Unit shown above the y axis, e.g. "requests / 2 s". */
  readonly yUnit: string;
  readonly width?: number;
  readonly height?: number;
  /** Accessible description. */
  readonly title: string;
}

/** Round tick step so that about `count` ticks cover `max`. */
export function niceStep(max: number, count = 4): number {
  if (max <= 0) return 1;
  const raw = max / count;
  const pow = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * pow >= raw) return Math.max(1, m * pow);
  return Math.max(1, 10 * pow);
}

/** Draws a chart: an `<svg>` that scales with its container, and an HTML legend above it. */
export function chart(o: ChartOptions): HTMLElement {
  const width = o.width ?? 720;
  const height = o.height ?? 240;
  const pad = { left: 48, right: 12, top: 22, bottom: 26 };
  const w = width - pad.left - pad.right;
  const ph = height - pad.top - pad.bottom;
  const n = Math.max(1, ...o.series.map((x) => x.values.length));
  const bar = o.kind === "bar";
  let max = 0;
  for (let i = 0; i < n; i++) {
    if (bar)
      max = Math.max(
        max,
        o.series.reduce((acc, x) => acc + (x.values[i] ?? 0), 0),
      );
    else for (const x of o.series) max = Math.max(max, x.values[i] ?? 0);
  }
  const step = niceStep(max);
  const top = Math.max(step, Math.ceil(max / step) * step);
  const y = (v: number) => pad.top + ph - (v / top) * ph;
  const slot = w / n;
  const x = (i: number) =>
    pad.left + (bar ? slot * i + slot / 2 : n === 1 ? w / 2 : (w * i) / (n - 1));

  const grid: SVGElement[] = [];
  for (let v = 0; v <= top + 1e-9; v += step) {
    grid.push(
      s("line", { class: "grid", x1: pad.left, x2: pad.left + w, y1: y(v), y2: y(v) }),
      s("text", { class: "tick", x: pad.left - 6, y: y(v) + 4, "text-anchor": "end" }, fmt(v)),
    );
  }
  const labels: SVGElement[] = [];
  const every = Math.max(1, Math.ceil(n / 6));
  for (let i = 0; i < n; i += every) {
    labels.push(
      s(
        "text",
        { class: "tick", x: x(i), y: pad.top + ph + 16, "text-anchor": "middle" },
        o.xLabel(i),
      ),
    );
  }

  const marks: SVGElement[] = [];
  if (bar) {
    const bw = Math.max(1, slot * 0.7);
    const base = new Array<number>(n).fill(0);
    for (const ser of o.series) {
      const rects: SVGElement[] = [];
      for (let i = 0; i < n; i++) {
        const v = ser.values[i] ?? 0;
        if (v <= 0) continue;
        const b = base[i] ?? 0;
        rects.push(
          s(
            "rect",
            { x: x(i) - bw / 2, y: y(b + v), width: bw, height: y(b) - y(b + v), fill: ser.color },
            s("title", {}, `${ser.name}: ${fmt(v)} (${o.xLabel(i)})`),
          ),
        );
        base[i] = b + v;
      }
      marks.push(
        s(
          "g",
          {
            "data-series": ser.id ?? ser.name,
            "data-total": sum(ser.values),
            "data-last": ser.values.at(-1) ?? 0,
          },
          rects,
        ),
      );
    }
  } else {
    for (const ser of o.series) {
      const pts = ser.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
      marks.push(
        s("polyline", {
          points: pts,
          fill: "none",
          stroke: ser.color,
          "stroke-width": 2,
          "stroke-dasharray": ser.dashed ? "5 4" : undefined,
          "data-series": ser.id ?? ser.name,
          "data-total": sum(ser.values),
          "data-last": ser.values.at(-1) ?? 0,
        }),
      );
    }
  }

  const svg = s(
    "svg",
    {
      class: "chart",
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": o.title,
      preserveAspectRatio: "xMidYMid meet",
    },
    s("title", {}, o.title),
    grid,
    s("text", { class: "unit", x: pad.left, y: pad.top - 8 }, o.yUnit),
    labels,
    s("line", { class: "axis", x1: pad.left, x2: pad.left + w, y1: y(0), y2: y(0) }),
    marks,
  );
  return h("figure", { class: "chart" }, legend(o.series), svg);
}

/** The chart's legend: a key in each series' colour (dashed as its line) and its name. */
function legend(series: ChartOptions["series"]): HTMLElement {
  return h(
    "div",
    { class: "legend" },
    series.map((ser) => {
      const key = h("span", { class: ser.dashed ? "key dashed" : "key" });
      // Through the CSSOM: the page's CSP forbids inline style attributes.
      key.style.borderColor = ser.color;
      return h("span", { class: "item" }, key, ser.name);
    }),
  );
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

function fmt(v: number): string {
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (v >= 1e4) return `${+(v / 1e3).toFixed(1)}k`;
  return String(+v.toFixed(2));
}

/** A duration in ms as a short label: `250ms`, `2s`, `1.5m`, `2h`. */
export function shortDuration(ms: number): string {
  if (ms === 0) return "0s";
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60_000) return `${+(ms / 1000).toFixed(1)}s`;
  if (ms < 3_600_000) return `${+(ms / 60_000).toFixed(1)}m`;
  return `${+(ms / 3_600_000).toFixed(1)}h`;
}

/** The colours of decisions, everywhere in the console. */
export const OUTCOME_COLORS = {
  allowed: "#2e7d32",
  shadow: "#ef8f00",
  denied: "#c62828",
} as const;

/** One point of a sparkline: decisions by outcome. */
export interface SparkPoint {
  readonly allowed: number;
  readonly denied: number;
  readonly shadow: number;
}

/**
 * A sparkline: tiny stacked bars (allowed, shadow would-deny, denied) with no axes, for a table
 * cell. Its `data-total` and `data-denied` attributes hold the sums (tests read them).
 */
export function sparkline(points: readonly SparkPoint[], title: string): SVGElement {
  const width = 120;
  const height = 28;
  const n = Math.max(1, points.length);
  const max = Math.max(1, ...points.map((p) => p.allowed + p.denied + p.shadow));
  const slot = width / n;
  const bars: SVGElement[] = [];
  let total = 0;
  let denied = 0;
  points.forEach((p, i) => {
    let base = 0;
    total += p.allowed + p.denied + p.shadow;
    denied += p.denied + p.shadow;
    for (const k of ["allowed", "shadow", "denied"] as const) {
      const v = p[k];
      if (v <= 0) continue;
      const hgt = Math.max(1, (v / max) * (height - 2));
      bars.push(
        s("rect", {
          x: (i * slot + 0.5).toFixed(1),
          y: (height - base - hgt).toFixed(1),
          width: Math.max(1, slot - 1).toFixed(1),
          height: hgt.toFixed(1),
          fill: OUTCOME_COLORS[k],
        }),
      );
      base += hgt;
    }
  });
  return s(
    "svg",
    {
      class: "spark",
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "img",
      "aria-label": title,
      "data-total": total,
      "data-denied": denied,
    },
    s("title", {}, title),
    s("line", { x1: 0, x2: width, y1: height - 0.5, y2: height - 0.5, class: "base" }),
    bars,
  );
}

/** A time (epoch seconds) as a short label: `14:05` for whole minutes, `14:05:30` otherwise. */
export function clockLabel(epochSec: number): string {
  const d = new Date(epochSec * 1000);
  const hh = String(d.getHours()).padStart(2, "0");
  const mm = String(d.getMinutes()).padStart(2, "0");
  const ss = d.getSeconds();
  return ss === 0 ? `${hh}:${mm}` : `${hh}:${mm}:${String(ss).padStart(2, "0")}`;
}
