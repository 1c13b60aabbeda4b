/** The audit log: every change, newest first, filterable by target, paged with "Older". */
import type { AuditRecord } from "../api.js";
import { h, mount, when } from "../dom.js";
import { type Ctx, heading, input, loading } from "../ui.js";

const PAGE = 50;

function detailText(d: unknown): string {
  if (d === null || d === undefined) return "";
  const t = typeof d === "string" ? d : JSON.stringify(d);
  return t.length > 160 ? `${t.slice(0, 157)}…` : t;
}

/** `#/audit`: the audit log. */
export async function auditPage(ctx: Ctx): Promise<void> {
  mount(ctx.main, heading("Audit log"), loading());
  const target = input({
    name: "target",
    value: ctx.query.get("target") ?? "",
    placeholder: "policy, app or user name",
  });
  const body = h("tbody", {});
  const more = h("button", { type: "button", class: "secondary", id: "older" }, "Older");
  let oldest: number | undefined;

  const row = (e: AuditRecord) =>
    h(
      "tr",
      { "data-audit": e.id },
      h("td", {}, when(e.at)),
      h("td", {}, e.actor),
      h("td", {}, e.action),
      h("td", {}, `${e.targetType} ${e.target}`),
      h(
        "td",
        {
          class: "detail",
          title: typeof e.detail === "string" ? e.detail : JSON.stringify(e.detail),
        },
        detailText(e.detail),
      ),
    );

  const load = async (reset: boolean) => {
    if (reset) {
      body.replaceChildren();
      oldest = undefined;
    }
    const t = target.value.trim();
    const entries = await ctx.api.audit({
      limit: PAGE,
      ...(oldest ? { before: oldest } : {}),
      ...(t ? { target: t } : {}),
    });
    for (const e of entries) body.appendChild(row(e));
    if (entries.length > 0) oldest = entries[entries.length - 1]!.id;
    more.hidden = entries.length < PAGE;
    if (reset && entries.length === 0) {
      body.appendChild(h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No entries.")));
    }
  };
  more.addEventListener("click", () => void load(false));

  mount(
    ctx.main,
    heading("Audit log"),
    h(
      "form",
      {
        class: "filters",
        onsubmit: (e: Event) => {
          e.preventDefault();
          void load(true);
        },
      },
      h("label", { for: "audit-target" }, "Target "),
      Object.assign(target, { id: "audit-target" }),
      h("button", { type: "submit", class: "secondary" }, "Filter"),
    ),
    h(
      "table",
      { class: "list", id: "audit" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["When", "Who", "Action", "Target", "Detail"].map((t) => h("th", {}, t)),
        ),
      ),
      body,
    ),
    more,
  );
  await load(true);
}
