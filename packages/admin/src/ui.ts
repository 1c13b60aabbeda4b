/**
 * Shared pieces of the pages, each written once: the app context; forms that send themselves,
 * and fields that can show the service's validation issues next to the field they name; the
 * rules editor; tables, cards, and copy and confirm buttons.
 */
import { type Api, ApiError, type Issue, type PolicyDoc, type Rule, type Session } from "./api.js";
import { type Child, h } from "./dom.js";

/** What every page gets. */
export interface Ctx {
  readonly api: Api;
  readonly session: Session;
  /** Where the page renders. */
  readonly main: HTMLElement;
  /** Query parameters of the current route (`#/simulator?policy=x`). */
  readonly query: URLSearchParams;
  /**
   * Goes to a route (`/policies/x`); `flash` is shown on the page it leads to (and on no later
   * one). Any other message is left behind with the page it was shown on.
   */
  navigate(path: string, options?: { flash?: string }): void;
  /** Shows a short message at the top of this page (it does not follow you to the next one). */
  flash(message: string, kind?: "ok" | "error"): void;
  /** Registers a cleanup run when the page is left (timers). */
  onLeave(fn: () => void): void;
}

/** True when the user may change anything at all (viewers may not). */
export function canWrite(ctx: Ctx): boolean {
  return ctx.session.user.role !== "viewer";
}

/** True for admins. */
export function isAdmin(ctx: Ctx): boolean {
  return ctx.session.user.role === "admin";
}

/**
 * True when the user may edit this policy: admins always; owners when the policy is granted
 * to one of their apps (the service decides in the end — this only hides buttons).
 */
export function canEditPolicy(ctx: Ctx, doc: PolicyDoc | undefined): boolean {
  const u = ctx.session.user;
  if (u.role === "admin") return true;
  if (u.role !== "owner") return false;
  if (!doc) return true;
  return (doc.apps ?? []).some((a) => u.apps.includes(a));
}

/**
 * True when the user may delete this policy: admins; owners only when they own every app it is
 * granted to (deleting revokes every grant, and only an admin may revoke another team's).
 */
export function canDeletePolicy(ctx: Ctx, doc: PolicyDoc): boolean {
  const u = ctx.session.user;
  if (u.role === "admin") return true;
  if (u.role !== "owner") return false;
  const apps = doc.apps ?? [];
  return apps.length > 0 && apps.every((a) => u.apps.includes(a));
}

/** The message of anything thrown. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * A button that asks for a second click before doing something destructive. Whatever the
 * action's outcome — done or refused — the button is disarmed again.
 */
export function confirmButton(
  label: string,
  action: () => Promise<void>,
  props: Record<string, unknown> = {},
): HTMLButtonElement {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const disarm = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    b.textContent = label;
    b.classList.remove("armed");
  };
  const b: HTMLButtonElement = h(
    "button",
    {
      type: "button",
      class: "danger",
      ...props,
      onclick: async () => {
        if (timer === undefined) {
          b.textContent = `Click again to ${label.toLowerCase()}`;
          b.classList.add("armed");
          timer = setTimeout(disarm, 4000);
          return;
        }
        disarm();
        b.disabled = true;
        try {
          await action();
        } finally {
          b.disabled = false;
        }
      },
    },
    label,
  );
  return b;
}

/** A horizontally scrolling box for a wide table (narrow screens scroll it, not the page). */
export function scroller(table: HTMLElement): HTMLElement {
  return h("div", { class: "scroll" }, table);
}

/**
 * A copy-ready block of text (a command, a snippet) with a Copy button. Where the clipboard is
 * refused, the text is selected instead.
 */
export function copyBlock(text: string, props: Record<string, unknown> = {}): HTMLElement {
  const code = h("code", {}, text);
  return h(
    "div",
    { class: "copy-block", ...props },
    h("pre", {}, code),
    copyButton(text, code, "secondary copy"),
  );
}

/**
 * A Copy button for `text`. Where the clipboard is refused, `shown` (the text as the page shows
 * it) is selected instead, for Ctrl+C.
 */
export function copyButton(text: string, shown: Node, className: string): HTMLButtonElement {
  return h(
    "button",
    {
      type: "button",
      class: className,
      onclick: async (e: Event) => {
        const button = e.currentTarget as HTMLButtonElement;
        try {
          await navigator.clipboard.writeText(text);
          button.textContent = "Copied";
        } catch {
          getSelection()?.selectAllChildren(shown);
          button.textContent = "Selected — press Ctrl+C";
        }
      },
    },
    "Copy",
  );
}

/**
 * `action`, with what it throws flashed as an error at the top of the page (for buttons, whose
 * refusals have no form to be shown in).
 */
export function flashingErrors(ctx: Ctx, action: () => Promise<void>): () => Promise<void> {
  return async () => {
    try {
      await action();
    } catch (err) {
      ctx.flash(messageOf(err), "error");
    }
  };
}

/**
 * A form that runs `onSubmit` instead of loading a page. `novalidate` unless `props` says
 * otherwise: the service's messages (shown by {@link showIssues}) say what is wrong, not the
 * browser's.
 */
export function submitForm(
  props: Record<string, unknown>,
  onSubmit: (form: HTMLFormElement) => void | Promise<void>,
  ...children: Child[]
): HTMLFormElement {
  const form: HTMLFormElement = h(
    "form",
    {
      ...props,
      novalidate: props.novalidate ?? true,
      onsubmit: (e: Event) => {
        e.preventDefault();
        void onSubmit(form);
      },
    },
    children,
  );
  return form;
}

/**
 * A form that sends itself: on submit its issues are cleared and `send` is awaited; what `send`
 * throws is shown in the form ({@link showIssues}).
 */
export function sendingForm(
  props: Record<string, unknown>,
  send: (form: HTMLFormElement) => Promise<void>,
  ...children: Child[]
): HTMLFormElement {
  return submitForm(
    props,
    async (form) => {
      clearIssues(form);
      try {
        await send(form);
      } catch (err) {
        showIssues(form, err);
      }
    },
    children,
  );
}

/** What a {@link titledForm} shows around its body. */
export interface TitledForm {
  /** The form element's id. */
  readonly id: string;
  /** Its class (`"card"` for a form of its own on a page; none inside a card). */
  readonly class?: string;
  /** Its heading: a string becomes an `h2`; an element (an `h3` inside a card) stands as it is. */
  readonly title: string | HTMLElement;
  /** The submit button's id and label. */
  readonly submit: readonly [id: string, label: string];
}

/**
 * A {@link sendingForm} laid out as the console's forms are: its heading, the form-level error
 * box, `body` (fields), and one submit button.
 */
export function titledForm(
  form: TitledForm,
  send: (form: HTMLFormElement) => Promise<void>,
  ...body: Child[]
): HTMLFormElement {
  return sendingForm(
    { class: form.class, id: form.id },
    send,
    typeof form.title === "string" ? h("h2", {}, form.title) : form.title,
    formError(),
    body,
    submitActions(...form.submit),
  );
}

/** A small select of windows (`5m`, `15m`…) whose change calls `onChange`. */
export function windowSelect<W extends string>(
  id: string,
  choices: readonly (readonly [W, string])[],
  value: W,
  onChange: (w: W) => void,
): HTMLSelectElement {
  const el = select(choices, value, { id, "aria-label": "Window" });
  el.addEventListener("change", () => onChange(el.value as W));
  return el;
}

/**
 * A labelled field. `path` is the dotted path the service uses in its issues (`rules.0.limit`);
 * the wrapper carries it as `data-field`, and {@link showIssues} writes the message into it.
 */
export function field(
  label: string,
  path: string,
  control: HTMLElement,
  hint?: string,
): HTMLElement {
  const id = `f-${path.replace(/[^A-Za-z0-9_-]/g, "-")}`;
  if (!control.id) control.id = id;
  return h(
    "div",
    { class: "field", "data-field": path },
    h("label", { for: control.id }, label),
    control,
    hint ? h("small", { class: "hint" }, hint) : null,
    h("div", { class: "field-error", role: "alert", "aria-live": "polite" }),
  );
}

/**
 * A field of several controls (or a control inside its label): `label`, then `content`, under
 * the issue path `path`, with the box {@link showIssues} writes its messages into.
 */
export function fieldGroup(
  path: string,
  label: HTMLElement,
  content: Child,
  className = "field",
): HTMLElement {
  return h(
    "div",
    { class: className, "data-field": path },
    label,
    content,
    h("div", { class: "field-error", role: "alert" }),
  );
}

/** A checkbox with its text, in one label. */
export function checkLabel(box: HTMLInputElement, text: string): HTMLLabelElement {
  return h("label", { class: "check" }, box, text);
}

/**
 * A checkbox per app (`name="apps"`), ticked where `checked` says; those `disabled` says are
 * shown but cannot be changed. {@link checkedApps} reads them back.
 */
export function appBoxes(
  names: readonly string[],
  checked: (name: string) => boolean,
  disabled: (name: string) => boolean = () => false,
): HTMLLabelElement[] {
  return names.map((a) =>
    checkLabel(
      h("input", {
        type: "checkbox",
        name: "apps",
        value: a,
        checked: checked(a),
        disabled: disabled(a),
      }),
      ` ${a}`,
    ),
  );
}

/** The apps ticked among the {@link appBoxes} in `el`. */
export function checkedApps(el: HTMLElement): string[] {
  return [...el.querySelectorAll<HTMLInputElement>('input[name="apps"]:checked')].map(
    (x) => x.value,
  );
}

/** Clears every issue shown in `form`. */
export function clearIssues(form: HTMLElement): void {
  for (const el of form.querySelectorAll<HTMLElement>(".field-error")) el.textContent = "";
  for (const el of form.querySelectorAll<HTMLElement>("[data-field].invalid")) {
    el.classList.remove("invalid");
  }
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
  const top = form.querySelector<HTMLElement>(".form-error");
  if (top) {
    top.textContent = "";
    top.hidden = true;
  }
}

/**
 * Shows an error in `form`: each issue next to the field it names (or the nearest enclosing
 * field: `rules.0` for `rules.0.period.x`), the rest — and the message of a non-validation
 * error — in the form's `.form-error` box.
 */
export function showIssues(form: HTMLElement, err: unknown): void {
  clearIssues(form);
  const issues: readonly Issue[] = err instanceof ApiError ? err.issues : [];
  const rest = placeIssues(form, issues);
  const top = form.querySelector<HTMLElement>(".form-error");
  const message =
    issues.length === 0
      ? err instanceof Error
        ? err.message
        : String(err)
      : rest.length > 0
        ? `Not saved: ${rest.join("; ")}`
        : "Not saved: fix the fields marked below.";
  if (top) {
    top.textContent = message;
    top.hidden = false;
  }
  form.querySelector<HTMLElement>(".invalid input, .invalid select, .invalid textarea")?.focus();
}

/**
 * Writes each issue next to the field it names (or the nearest enclosing field) in `form`, and
 * returns those that name no field there, as `path: message` text.
 */
export function placeIssues(form: HTMLElement, issues: readonly Issue[]): string[] {
  const rest: string[] = [];
  for (const issue of issues) {
    let path = issue.path;
    let target: HTMLElement | null = null;
    for (;;) {
      target = form.querySelector<HTMLElement>(`[data-field="${CSS.escape(path)}"]`);
      if (target || !path.includes(".")) break;
      path = path.slice(0, path.lastIndexOf("."));
    }
    if (target) {
      const box =
        target.querySelector<HTMLElement>(":scope > .field-error") ??
        target.querySelector<HTMLElement>(".field-error");
      const extra = path === issue.path ? "" : `${issue.path.slice(path.length + 1)}: `;
      if (box)
        box.textContent = [box.textContent, `${extra}${issue.message}`].filter(Boolean).join("; ");
      target.classList.add("invalid");
      target.querySelector("input, select, textarea")?.setAttribute("aria-invalid", "true");
    } else {
      rest.push(issue.path ? `${issue.path}: ${issue.message}` : issue.message);
    }
  }
  return rest;
}

/** A form's buttons: its submit button (`id`, `label`) first, then `more`. */
export function submitActions(id: string, label: string, ...more: Child[]): HTMLElement {
  return h("div", { class: "actions" }, h("button", { type: "submit", id }, label), more);
}

/** A box for form-level errors; {@link showIssues} fills it. */
export function formError(): HTMLElement {
  return h("div", { class: "form-error", role: "alert", hidden: true });
}

/** A text input. */
export function input(props: Record<string, unknown> = {}): HTMLInputElement {
  return h("input", { type: "text", autocomplete: "off", ...props });
}

/** A select with `options` (value, label). */
export function select(
  options: readonly (readonly [string, string])[],
  value: string,
  props: Record<string, unknown> = {},
): HTMLSelectElement {
  const el = h(
    "select",
    props,
    options.map(([v, label]) => h("option", { value: v }, label)),
  );
  el.value = value;
  return el;
}

/**
 * Reads a number field as the service should see it: digits become a number, an empty field
 * is left out, anything else is sent as written so the service's message names it.
 */
export function numberOrRaw(text: string): number | string | undefined {
  const t = text.trim();
  if (t === "") return undefined;
  return /^-?\d+(\.\d+)?$/.test(t) ? Number(t) : t;
}

/** A period as the service takes it: whole milliseconds when only digits, else a string like "1m". */
export function durationOrRaw(text: string): number | string | undefined {
  const t = text.trim();
  if (t === "") return undefined;
  return /^\d+$/.test(t) ? Number(t) : t;
}

/** The calendar windows a rule's period may name instead of a duration (sluice's CALENDARS). */
const CALENDAR_WORDS: readonly string[] = ["day", "week", "month", "year"];

/**
 * The rules editor: one row per rule (limit, period, burst), add and remove. A period that is a
 * calendar word (`day`, `week`, `month`, `year`) makes a calendar rule, and shows its time zone
 * and anchor.
 */
export interface RulesEditor {
  readonly element: HTMLElement;
  /** The rules as written (numbers where they parse, raw text otherwise). */
  read(): Rule[];
  /** Shows or hides the burst column (gcra and token-bucket only). */
  setBurst(visible: boolean): void;
}

/** One field of a rule's row (`data-part` names the rule's field its issues land on). */
function rulePart(
  name: keyof Rule,
  label: string,
  value: unknown,
  placeholder: string,
  disabled: boolean | undefined,
): HTMLElement {
  const el = input({
    name,
    value: value === undefined ? "" : String(value),
    placeholder,
    disabled,
    inputmode: name === "limit" || name === "burst" ? "numeric" : undefined,
  });
  return h(
    "div",
    { class: `field rule-${name}`, "data-part": name },
    h("label", {}, label),
    el,
    h("div", { class: "field-error", role: "alert" }),
  );
}

/** A rule as its row is written: a calendar rule when the period is a calendar word. */
function readRule(row: Element, burstVisible: boolean): Rule {
  const val = (n: string) => row.querySelector<HTMLInputElement>(`input[name="${n}"]`)?.value ?? "";
  const limit = numberOrRaw(val("limit"));
  const calendar = val("period").trim();
  if (CALENDAR_WORDS.includes(calendar)) {
    const timeZone = val("timeZone").trim();
    const anchor = numberOrRaw(val("anchor"));
    return {
      ...(limit !== undefined ? { limit } : {}),
      calendar,
      ...(timeZone !== "" ? { timeZone } : {}),
      ...(anchor !== undefined ? { anchor } : {}),
    } as Rule;
  }
  const period = durationOrRaw(val("period"));
  const burst = burstVisible ? numberOrRaw(val("burst")) : undefined;
  return {
    ...(limit !== undefined ? { limit } : {}),
    ...(period !== undefined ? { period } : {}),
    ...(burst !== undefined ? { burst } : {}),
  } as Rule;
}

/** Creates a {@link RulesEditor} under the issue path `rules`. */
export function rulesEditor(
  rules: readonly Rule[],
  options: { disabled?: boolean } = {},
): RulesEditor {
  const rows = h("div", { class: "rules" });
  const wrapper = fieldGroup("rules", h("label", {}, "Rules (all must pass)"), rows);
  let burstVisible = true;
  const renumber = () => {
    [...rows.children].forEach((row, i) => {
      row.setAttribute("data-field", `rules.${i}`);
      for (const f of row.querySelectorAll<HTMLElement>("[data-part]")) {
        f.setAttribute("data-field", `rules.${i}.${f.dataset.part ?? ""}`);
      }
      for (const el of row.querySelectorAll<HTMLInputElement>("input")) {
        el.id = `f-rules-${i}-${el.name}`;
        el.closest(".field")?.querySelector("label")?.setAttribute("for", el.id);
      }
      // A policy has at least one rule: no Remove on the last one.
      const remove = row.querySelector<HTMLElement>(".remove-rule");
      if (remove) remove.hidden = rows.children.length === 1;
    });
  };
  const addRow = (r: Partial<Rule>) => {
    const part = (name: keyof Rule, label: string, value: unknown, placeholder: string) =>
      rulePart(name, label, value, placeholder, options.disabled);
    const row = h(
      "div",
      { class: "rule-row" },
      part("limit", "Limit", r.limit, "100"),
      h("span", { class: "per" }, "per"),
      part("period", "Period", r.period ?? r.calendar, "1m, or month"),
      part("burst", "Burst", r.burst, "= limit"),
      part("timeZone", "Time zone", r.timeZone, "UTC"),
      part("anchor", "Anchor", r.anchor, "1"),
      options.disabled
        ? null
        : h(
            "button",
            {
              type: "button",
              class: "link remove-rule",
              title: "Remove this rule",
              onclick: () => {
                if (rows.children.length > 1) {
                  row.remove();
                  renumber();
                }
              },
            },
            "Remove",
          ),
    );
    // A calendar period: the field answers for `calendar` (its issues land there), the time
    // zone and anchor show, burst does not apply.
    const periodField = row.querySelector<HTMLElement>(".rule-period")!;
    const periodInput = periodField.querySelector("input")!;
    const showCalendar = () => {
      const calendar = CALENDAR_WORDS.includes(periodInput.value.trim());
      periodField.dataset.part = calendar ? "calendar" : "period";
      (row.querySelector(".rule-burst") as HTMLElement).hidden = !burstVisible || calendar;
      for (const f of row.querySelectorAll<HTMLElement>(".rule-timeZone, .rule-anchor"))
        f.hidden = !calendar;
      renumber();
    };
    periodInput.addEventListener("input", showCalendar);
    rows.appendChild(row);
    showCalendar();
  };
  for (const r of rules.length > 0 ? rules : [{ limit: 100, period: "1m" }]) addRow(r);
  if (!options.disabled) {
    wrapper.insertBefore(
      h(
        "button",
        { type: "button", class: "secondary add-rule", onclick: () => addRow({}) },
        "Add rule",
      ),
      wrapper.querySelector(":scope > .field-error"),
    );
  }
  return {
    element: wrapper,
    read() {
      return [...rows.children].map((row) => readRule(row, burstVisible));
    },
    setBurst(visible) {
      burstVisible = visible;
      for (const row of rows.querySelectorAll<HTMLElement>(".rule-row")) {
        const calendar =
          row.querySelector<HTMLElement>(".rule-period")?.dataset.part === "calendar";
        (row.querySelector(".rule-burst") as HTMLElement).hidden = !visible || calendar;
      }
    },
  };
}

/**
 * A rule as short text: `100 / 1m (burst 20)`, or for a calendar rule
 * `5000 / month (Europe/Berlin, anchor 15)`.
 */
export function ruleText(r: Rule): string {
  if (r.calendar !== undefined) {
    const where = [r.timeZone ?? "UTC", ...(r.anchor !== undefined ? [`anchor ${r.anchor}`] : [])];
    return `${r.limit} / ${r.calendar} (${where.join(", ")})`;
  }
  const period = typeof r.period === "number" ? `${r.period}ms` : r.period;
  return `${r.limit} / ${period}${r.burst !== undefined ? ` (burst ${r.burst})` : ""}`;
}

/** A loading placeholder. */
export function loading(): HTMLElement {
  return h("p", { class: "muted" }, "Loading…");
}

/** A page heading with optional actions on the right. */
export function heading(title: string, ...actions: Child[]): HTMLElement {
  return h(
    "div",
    { class: "page-head" },
    h("h1", {}, title),
    h("div", { class: "actions" }, actions),
  );
}

/** A table with one head row of `heads` over `body` (its rows, or a `tbody` filled later). */
export function listTable(
  props: Record<string, unknown>,
  heads: readonly string[],
  body: HTMLElement,
): HTMLTableElement {
  return h(
    "table",
    props,
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        heads.map((t) => h("th", {}, t)),
      ),
    ),
    body,
  );
}

/** The card shown where a list has nothing yet: what the things are, and how to make one. */
export function emptyCard(id: string, title: string, ...body: Child[]): HTMLElement {
  return h("div", { class: "card empty", id }, h("h2", {}, title), body);
}

/**
 * A Delete button (a second click confirms) that runs `remove`, then flashes `done` and runs
 * `after` (the page's reload); a refusal is flashed as an error.
 */
export function deleteButton(
  ctx: Ctx,
  remove: () => Promise<unknown>,
  done: string,
  after: () => Promise<void>,
): HTMLButtonElement {
  return confirmButton(
    "Delete",
    flashingErrors(ctx, async () => {
      await remove();
      ctx.flash(done);
      await after();
    }),
  );
}

/** A card whose head holds its title and, on the right, its controls (`actions`). */
export function headedCard(
  id: string,
  title: string,
  actions: Child,
  ...body: Child[]
): HTMLElement {
  return h(
    "section",
    { class: "card", id },
    h("div", { class: "card-head" }, h("h2", {}, title), h("div", { class: "actions" }, actions)),
    body,
  );
}

/** Shows an error in place of a page. */
export function failed(err: unknown): HTMLElement {
  const msg = messageOf(err);
  const forbidden = err instanceof ApiError && err.status === 403;
  return h(
    "div",
    { class: "notice error", role: "alert" },
    forbidden ? `You do not have access to this page: ${msg}` : msg,
  );
}

/** Formats a count with thousands separators. */
export function count(n: number): string {
  return n.toLocaleString("en-US");
}

/** The noun for `n` things: `noun(1, "policy", "policies")` is "policy", any other count "policies". */
export function noun(n: number, one: string, many: string): string {
  return n === 1 ? one : many;
}

/** A count with its noun: `counted(1, "policy", "policies")` is "1 policy", `counted(1200, …)` "1,200 policies". */
export function counted(n: number, one: string, many: string): string {
  return `${count(n)} ${noun(n, one, many)}`;
}

/** A share as a percentage (`12.5%`, `0%`, `—` for nothing at all). */
export function percent(part: number, whole: number): string {
  if (whole === 0) return "—";
  const p = (100 * part) / whole;
  return `${p >= 10 || p === 0 ? Math.round(p) : p.toFixed(1)}%`;
}
