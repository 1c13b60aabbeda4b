/**
 * A tiny DOM helper: `h("div", { class: "x", onclick }, child, …)`. Strings become text nodes
 * (never HTML), so nothing a user or the API supplies is ever parsed as markup.
 */

/** A child: a node, text, or nothing (skipped). Arrays are flattened. */
export type Child = Node | string | number | null | undefined | false | Child[];

/** Attributes and properties: `on*` functions become listeners, booleans toggle attributes. */
export type Props = Record<string, unknown>;

function append(parent: Node, child: Child): void {
  if (child === null || child === undefined || child === false) return;
  if (Array.isArray(child)) {
    for (const c of child) append(parent, c);
    return;
  }
  parent.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
}

function apply(el: Element, props: Props): void {
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2).toLowerCase(), v as EventListener);
    } else if (k === "value" && "value" in el) {
      (el as HTMLInputElement).value = String(v);
    } else if (k === "checked" && el instanceof HTMLInputElement) {
      el.checked = Boolean(v);
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
}

/** Creates an HTML element. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  apply(el, props);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** Creates an SVG element. */
export function s(tag: string, props: Props = {}, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, props);
  append(el, children);
  return el;
}

/** Replaces the children of `el`. */
export function mount(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

const two = (n: number) => String(n).padStart(2, "0");

/** A local time of day, 24-hour like the charts' axes: `14:05:09`. */
export function clock(d: Date = new Date()): string {
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/**
 * Formats an ISO timestamp in the reader's time zone, to the second, 24-hour (one format in the
 * whole console, the charts' own): `2026-11-23 14:05:09`.
 */
export function when(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${clock(d)}`;
}
