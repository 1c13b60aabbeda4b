/**
 * A policy's per-key overrides, on its page: rules for one key that replace the policy's for
 * that key (a tenant's plan). The list, a page at a time by key (a policy may hold 100,000),
 * filtered by a key prefix; and, for those who may change the policy, the form that adds or
 * changes one (the service refuses rules the policy would refuse, naming the field) and a
 * Delete on each row. Every change is in the audit log, and in force on every node and
 * embedded client within a second.
 */
import { ApiError, type OverridePage, type OverrideRecord, type PolicyRecord } from "../api.js";
import { h, mount, when } from "../dom.js";
import {
  type Ctx,
  deleteButton,
  field,
  headedCard,
  input,
  listTable,
  loading,
  messageOf,
  ruleText,
  rulesEditor,
  scroller,
  titledForm,
} from "../ui.js";

/** Overrides shown per page. */
const PAGE = 20;

/** The overrides card of policy `p`; `editable`: the user may change the policy. */
export function overridesCard(ctx: Ctx, p: PolicyRecord, editable: boolean): HTMLElement {
  const body = h("div", { class: "overrides-list" }, loading());
  const formSlot = h("div", { class: "override-form" });
  const prefix = input({
    id: "override-prefix",
    placeholder: "key prefix",
    "aria-label": "Key prefix",
  });
  /** The pages' starting keys so far (`undefined`: the first), to go back one. */
  const starts: (string | undefined)[] = [];
  let shown: string | undefined;

  const load = async (after: string | undefined) => {
    shown = after;
    try {
      const page = await ctx.api.overrides(p.name, {
        after,
        prefix: prefix.value.trim() || undefined,
        limit: PAGE,
      });
      mount(
        body,
        listView(ctx, p, page, editable, pager(page), edit, () => load(shown)),
      );
    } catch (err) {
      mount(body, h("p", { class: "error" }, messageOf(err)));
    }
  };
  const pager = (page: OverridePage) =>
    h(
      "div",
      { class: "actions pager" },
      h("span", { class: "muted", id: "overrides-total" }, `${page.total} in all`),
      starts.length > 0
        ? h(
            "button",
            {
              type: "button",
              class: "secondary",
              id: "overrides-prev",
              onclick: () => void load(starts.pop()),
            },
            "Previous page",
          )
        : null,
      page.next !== undefined
        ? h(
            "button",
            {
              type: "button",
              class: "secondary",
              id: "overrides-next",
              onclick: () => {
                starts.push(shown);
                void load(page.next);
              },
            },
            "Next page",
          )
        : null,
    );
  const edit = (o?: OverrideRecord) => {
    if (!editable) return;
    mount(
      formSlot,
      overrideForm(ctx, p, o, () => load(shown)),
    );
    formSlot.querySelector<HTMLInputElement>("input")?.focus();
  };
  prefix.addEventListener("change", () => {
    starts.length = 0;
    void load(undefined);
  });
  if (editable) edit();
  void load(undefined);
  return headedCard(
    "overrides",
    "Per-key overrides",
    prefix,
    h(
      "p",
      { class: "muted small" },
      "Rules for one key that replace this policy's rules for that key (its algorithm and other settings stay); the key keeps its counters.",
    ),
    body,
    formSlot,
  );
}

/** One page of overrides as a table, with its pager. */
function listView(
  ctx: Ctx,
  p: PolicyRecord,
  page: OverridePage,
  editable: boolean,
  pager: HTMLElement,
  edit: (o: OverrideRecord) => void,
  reload: () => Promise<void>,
): HTMLElement {
  if (page.overrides.length === 0)
    return h(
      "p",
      { class: "muted", id: "overrides-empty" },
      "No overrides: every key gets the policy's rules.",
    );
  return h(
    "div",
    {},
    scroller(
      listTable(
        { class: "list", id: "overrides-table" },
        ["Key", "Rules", "Updated", ""],
        h(
          "tbody",
          {},
          page.overrides.map((o) =>
            h(
              "tr",
              { "data-key": o.key },
              h("td", {}, h("code", {}, o.key)),
              h("td", {}, o.rules.map(ruleText).join(" and ")),
              h("td", {}, `${when(o.updatedAt)} by ${o.updatedBy}`),
              h(
                "td",
                { class: "actions" },
                editable
                  ? [
                      h(
                        "button",
                        {
                          type: "button",
                          class: "secondary edit-override",
                          onclick: () => edit(o),
                        },
                        "Edit",
                      ),
                      deleteButton(
                        ctx,
                        () => ctx.api.deleteOverride(p.name, o.key),
                        `Override of ${o.key} deleted`,
                        reload,
                      ),
                    ]
                  : null,
              ),
            ),
          ),
        ),
      ),
    ),
    pager,
  );
}

/** The form that adds an override, or changes `o`. */
function overrideForm(
  ctx: Ctx,
  p: PolicyRecord,
  o: OverrideRecord | undefined,
  saved: () => Promise<void>,
): HTMLFormElement {
  const key = input({
    name: "key",
    value: o?.key ?? "",
    placeholder: "tenant:acme",
    readonly: o !== undefined,
  });
  const rules = rulesEditor(o?.rules ?? p.rules);
  const algorithm = p.algorithm ?? "gcra";
  rules.setBurst(algorithm === "gcra" || algorithm === "token-bucket");
  return titledForm(
    {
      id: "override-form",
      title: h("h3", {}, o ? `Change the override of ${o.key}` : "Add an override"),
      submit: ["save-override", "Save override"],
    },
    async () => {
      const k = key.value.trim();
      // An empty key names no route to send to: refused here, at its field.
      if (k === "")
        throw new ApiError(400, "invalid_request", "Invalid override", [
          { path: "key", message: "is required" },
        ]);
      await ctx.api.putOverride(p.name, k, rules.read());
      ctx.flash(`Override of ${k} saved`);
      await saved();
    },
    field("Key", "key", key, "The identifier the override applies to, as decisions name it."),
    rules.element,
  );
}
