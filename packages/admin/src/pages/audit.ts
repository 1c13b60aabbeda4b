/**
 * The audit log: every change, newest first, each shown as what it changed — a before → after
 * table of the fields that differ (policies, drafts, users, keys) and its other facts (version,
 * key, via). Filters: who, which action (or kind of action), which object (part of its name)
 * and a time range; they live in the address (`#/audit?actor=ada&action=policy`), so a
 * filtered view can be reloaded and shared. "Older" pages back 50 entries at a time.
 */
import type { AuditAction } from "@sluice/api";
import type { AuditQuery, AuditRecord } from "../api.js";
import { diff, show } from "../diff.js";
import { h, mount, when } from "../dom.js";
import {
  type Ctx,
  counted,
  field,
  formError,
  heading,
  input,
  listTable,
  loading,
  scroller,
  showIssues,
  submitActions,
  submitForm,
} from "../ui.js";
import { diffTable } from "../document-view.js";

const PAGE = 50;

/** Actions offered in the filter's list (any other can be typed). */
/**
 * The filter's suggestions: every action the service records (its own list), each kind before
 * its actions (`policy`, then `policy.create`…), and the kinds with more below (`envoy.draft`).
 */
// Every action of the service's list (AUDIT_ACTIONS of @sluice/api), once: the type refuses
// one missing or one it does not record (only types of the contract reach the browser).
const RECORDED: Record<AuditAction, true> = {
  "policy.create": true,
  "policy.update": true,
  "policy.restore": true,
  "policy.promote": true,
  "policy.import": true,
  "policy.delete": true,
  "policy.draft": true,
  "policy.draft.discard": true,
  "policy.override.put": true,
  "policy.override.delete": true,
  "key.reset": true,
  "envoy.create": true,
  "envoy.update": true,
  "envoy.restore": true,
  "envoy.promote": true,
  "envoy.import": true,
  "envoy.delete": true,
  "envoy.draft": true,
  "envoy.draft.discard": true,
  "envoy.counters.reset": true,
  "app.create": true,
  "app.rotate-key": true,
  "app.delete": true,
  "user.create": true,
  "user.update": true,
  "user.delete": true,
  "session.login": true,
  "session.logout": true,
};
const ACTIONS: readonly string[] = (() => {
  const out = new Set<string>();
  for (const a of Object.keys(RECORDED)) {
    const parts = a.split(".");
    for (let i = 1; i < parts.length; i++) out.add(parts.slice(0, i).join("."));
    out.add(a);
  }
  return [...out];
})();

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** What an entry changed: its before → after (or what it created or removed), and the rest. */
export function auditChange(e: AuditRecord): HTMLElement {
  const d = isObject(e.detail) ? e.detail : {};
  // Entries written before both sides were kept name the draft `draft`.
  const before = d.before;
  const after = d.after ?? d.draft;
  const facts = Object.entries(d).filter(([k]) => !["before", "after", "draft"].includes(k));
  // A created or removed object is shown field by field, like a change from or to nothing.
  const side = (v: unknown, other: unknown) => (v === undefined && isObject(other) ? {} : v);
  const changes = diff(side(before, after), side(after, before));
  return h(
    "div",
    { class: "change" },
    facts.length > 0
      ? h(
          "p",
          { class: "facts" },
          facts.map(([k, v]) =>
            h("span", { class: "fact" }, `${k}: ${typeof v === "string" ? v : show(v)}`),
          ),
        )
      : null,
    before !== undefined || after !== undefined
      ? diffTable(changes, { class: "list compact diff" })
      : null,
  );
}

/** The filters in the address (`#/audit?actor=ada&action=policy`). */
function fromQuery(q: URLSearchParams): AuditQuery {
  const out: AuditQuery = {};
  for (const k of ["actor", "action", "object", "since", "until", "target"] as const) {
    const v = q.get(k);
    if (v) out[k] = v;
  }
  return out;
}

/** A `datetime-local` value (local time) as ISO UTC, or undefined. */
function isoOf(local: string): string | undefined {
  if (!local) return undefined;
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? local : d.toISOString();
}

/** ISO UTC as a `datetime-local` value (local time). */
function localOf(iso: string | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** The filter's fields, filled from the address. */
interface AuditFilters {
  /** The row of fields. */
  readonly element: HTMLElement;
  /** The filters as written (times as ISO UTC). */
  read(): AuditQuery;
  /** Empties every field. */
  clear(): void;
}

/** Builds the {@link AuditFilters} filled from `current`. */
function auditFilters(current: AuditQuery): AuditFilters {
  const actor = input({
    name: "actor",
    id: "audit-actor",
    value: current.actor ?? "",
    placeholder: "ada",
  });
  const action = input({
    name: "action",
    id: "audit-action",
    value: current.action ?? "",
    placeholder: "policy, policy.update…",
    list: "audit-actions",
  });
  const object = input({
    name: "object",
    id: "audit-object",
    value: current.object ?? current.target ?? "",
    placeholder: "part of a policy, app or user name",
  });
  const since = input({
    name: "since",
    id: "audit-since",
    type: "datetime-local",
    value: localOf(current.since),
  });
  const until = input({
    name: "until",
    id: "audit-until",
    type: "datetime-local",
    value: localOf(current.until),
  });
  return {
    element: h(
      "div",
      { class: "row" },
      field("Who", "actor", actor),
      field("Action", "action", action, "A kind (policy) or one action (policy.update)."),
      field("Object", "object", object),
      field("From", "since", since),
      field("Until", "until", until),
    ),
    read() {
      const q: AuditQuery = {};
      if (actor.value.trim()) q.actor = actor.value.trim();
      if (action.value.trim()) q.action = action.value.trim();
      if (object.value.trim()) q.object = object.value.trim();
      const s = isoOf(since.value);
      const u = isoOf(until.value);
      if (s) q.since = s;
      if (u) q.until = u;
      return q;
    },
    clear() {
      for (const el of [actor, action, object, since, until]) el.value = "";
    },
  };
}

/** One entry: when, who, what it did to which object, and what it changed. */
function auditRow(e: AuditRecord): HTMLElement {
  return h(
    "tr",
    { "data-audit": e.id, "data-action": e.action },
    h("td", { class: "when", "data-label": "When" }, when(e.at)),
    h("td", { "data-label": "Who" }, e.actor),
    h("td", { "data-label": "Action" }, h("code", {}, e.action)),
    h("td", { "data-label": "Object" }, `${e.targetType} `, h("strong", {}, e.target)),
    h("td", { class: "detail", "data-label": "Change" }, auditChange(e)),
  );
}

/** The log's table, loaded a page at a time (newest first), with its Older button and count. */
interface AuditLog {
  readonly table: HTMLElement;
  readonly more: HTMLElement;
  readonly count: HTMLElement;
  /** Loads the next page of entries, or (`reset`) the first one again. */
  load(reset: boolean): Promise<void>;
}

/** Builds the {@link AuditLog} of the entries `filters` let through. */
function auditLog(ctx: Ctx, filters: () => AuditQuery): AuditLog {
  const body = h("tbody", {});
  const more = h("button", { type: "button", class: "secondary", id: "older" }, "Older");
  const count = h("p", { class: "muted small", id: "audit-count" });
  let oldest: number | undefined;
  let shown = 0;
  const load = async (reset: boolean) => {
    const q = filters();
    if (reset) {
      body.replaceChildren();
      oldest = undefined;
      shown = 0;
    }
    const entries = await ctx.api.audit({
      ...q,
      limit: PAGE,
      ...(oldest ? { before: oldest } : {}),
    });
    for (const e of entries) body.appendChild(auditRow(e));
    shown += entries.length;
    if (entries.length > 0) oldest = entries[entries.length - 1]!.id;
    more.hidden = entries.length < PAGE;
    count.textContent =
      shown === 0 ? "" : `${counted(shown, "entry", "entries")}${more.hidden ? "" : " so far"}`;
    if (reset && entries.length === 0) {
      body.appendChild(
        h(
          "tr",
          {},
          h("td", { colspan: 5, class: "muted", id: "audit-empty" }, "No entries match."),
        ),
      );
    }
  };
  more.addEventListener("click", () => void load(false));
  return {
    // On a phone each entry is stacked (one labelled line per cell): see app.css.
    table: listTable(
      { class: "list stack", id: "audit" },
      ["When", "Who", "Action", "Object", "Change"],
      body,
    ),
    more,
    count,
    load,
  };
}

/**
 * The filter form: Filter puts the filters in the address (the view can be reloaded and shared)
 * and loads the log again; Clear empties them.
 */
function auditForm(filters: AuditFilters, log: AuditLog): HTMLFormElement {
  const form = submitForm(
    { class: "card audit-filters", id: "audit-filters" },
    async () => {
      const q = filters.read();
      const qs = new URLSearchParams(Object.entries(q) as [string, string][]).toString();
      // In the address, so the view can be reloaded and shared; the list loads here.
      history.replaceState(null, "", `#/audit${qs ? `?${qs}` : ""}`);
      try {
        await log.load(true);
        form.querySelector<HTMLElement>(".form-error")!.hidden = true;
      } catch (err) {
        showIssues(form, err);
      }
    },
    formError(),
    filters.element,
    h(
      "datalist",
      { id: "audit-actions" },
      ACTIONS.map((a) => h("option", { value: a })),
    ),
    submitActions(
      "audit-filter",
      "Filter",
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          id: "audit-clear",
          onclick: () => {
            filters.clear();
            form.requestSubmit();
          },
        },
        "Clear",
      ),
    ),
  );
  return form;
}

/** `#/audit`: the audit log. */
export async function auditPage(ctx: Ctx): Promise<void> {
  mount(ctx.main, heading("Audit log"), loading());
  const filters = auditFilters(fromQuery(ctx.query));
  const log = auditLog(ctx, () => filters.read());
  const form = auditForm(filters, log);
  mount(ctx.main, heading("Audit log"), form, log.count, scroller(log.table), log.more);
  try {
    await log.load(true);
  } catch (err) {
    showIssues(form, err);
  }
}
