/**
 * Envoy: the domains of the Envoy rate limit service (the reference service's configuration
 * files, kept as versioned documents), and one domain — its descriptor limits as the service
 * runs them, their traffic and top keys, a descriptor's counters (peek; reset by admins), its
 * YAML (edited and saved as a new version or as a draft evaluated in shadow, by admins) — around
 * the draft and versions every versioned document has (../document-view.ts).
 *
 * It calls the admin API through `ctx.api.request` and, for YAML bodies, a plain fetch with the
 * session's token; its types come from the API contract (@sluice/api).
 */
import {
  ApiError,
  type EnvoyCounterAnswer as CounterAnswer,
  type EnvoyDomainDoc,
  type EnvoyDomainList as DomainList,
  type EnvoyDomainRecord as DomainRecord,
  type EnvoyImportResult as ImportResult,
  type EnvoyLimit as Limit,
} from "../api.js";
import { type ConsoleKind, documentPage } from "../document-view.js";
import { h, mount, when } from "../dom.js";
import { trafficCard } from "../traffic-view.js";
import {
  type Ctx,
  confirmButton,
  formError,
  heading,
  isAdmin,
  listTable,
  loading,
  scroller,
  select,
  showIssues,
  submitActions,
  submitForm,
} from "../ui.js";
import { topKeysCard } from "./keys.js";

const enc = encodeURIComponent;
const BASE = "/v1/admin/envoy";
/**
 * YAML and descriptors are code: wide and monospaced. Set through the CSSOM (the page's
 * Content-Security-Policy refuses style attributes), here so the shared stylesheet is untouched.
 */
function codeStyle<T extends HTMLElement>(el: T): T {
  el.style.maxWidth = "none";
  el.style.fontFamily = "ui-monospace, monospace";
  el.style.fontSize = "13px";
  return el;
}

/** Sends YAML text (the reference format) to the admin API; answers like `ctx.api.request`. */
async function sendYaml<T>(ctx: Ctx, method: string, path: string, yaml: string): Promise<T> {
  const res = await fetch(`${BASE}${path}`, {
    method,
    headers: {
      "content-type": "application/yaml",
      accept: "application/json",
      ...(ctx.api.token ? { authorization: `Bearer ${ctx.api.token}` } : {}),
    },
    body: yaml,
  });
  const text = await res.text();
  const data: unknown = text ? JSON.parse(text) : undefined;
  if (!res.ok) {
    const e = (data as { error?: { code?: string; message?: string; issues?: [] } } | undefined)
      ?.error;
    throw new ApiError(res.status, e?.code ?? `http_${res.status}`, e?.message ?? text, e?.issues);
  }
  return data as T;
}

/** The YAML of one domain, as the export writes it. */
async function yamlOf(ctx: Ctx, domain: string): Promise<string> {
  const res = await fetch(`${BASE}/export?domain=${enc(domain)}`, {
    headers: ctx.api.token ? { authorization: `Bearer ${ctx.api.token}` } : {},
  });
  if (!res.ok) throw new ApiError(res.status, `http_${res.status}`, await res.text());
  return res.text();
}

/** A limit's rules as short text: `5 / day`, `10 / 30s (burst 2)`, `unlimited`, `0 / second`. */
function limitText(l: Limit): string {
  if (l.unlimited) return "unlimited";
  return l.rules
    .map((r) => {
      const per = r.unit ?? `${r.periodMs / 1000}s`;
      return `${r.requestsPerUnit} / ${per}${r.burst !== null ? ` (burst ${r.burst})` : ""}`;
    })
    .join(" and ");
}

function limitFlags(l: Limit): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (l.shadow) out.push(h("span", { class: "tag shadow" }, "shadow"));
  if (l.quota) out.push(h("span", { class: "tag" }, "quota"));
  if (l.onStoreError !== "allow")
    out.push(h("span", { class: "tag" }, `store down: ${l.onStoreError}`));
  return out;
}

/** `#/envoy`: every domain, and (admins) the import of reference-format files. */
export async function envoyPage(ctx: Ctx): Promise<void> {
  mount(ctx.main, heading("Envoy"), loading());
  const list = await ctx.api.request<DomainList>("GET", "/envoy/domains");
  const rows = list.domains.map((d) =>
    h(
      "tr",
      { "data-domain": d.domain },
      h("td", {}, h("a", { href: `#/envoy/${enc(d.domain)}` }, d.domain)),
      h("td", {}, String(d.limits)),
      h("td", {}, `v${d.version}`, d.hasDraft ? h("span", { class: "tag draft" }, "draft") : null),
      h("td", {}, `${when(d.updatedAt)} by ${d.updatedBy}`),
    ),
  );
  const textarea = codeStyle(
    h("textarea", {
      id: "envoy-import-yaml",
      rows: 10,
      spellcheck: "false",
      placeholder:
        "domain: my_domain\ndescriptors:\n  - key: remote_address\n    rate_limit:\n      unit: second\n      requests_per_unit: 10",
    }),
  );
  const result = h("div", { id: "envoy-import-result", role: "status" });
  const form = submitForm(
    { class: "card", id: "envoy-import", novalidate: false },
    async () => {
      try {
        const r = await sendYaml<ImportResult>(ctx, "POST", "/import", textarea.value);
        const p = r.plan;
        ctx.flash(
          `Imported: ${p.create.length} created, ${p.update.length} updated, ${p.unchanged.length} unchanged`,
        );
        await envoyPage(ctx);
      } catch (err) {
        showIssues(form, err);
      }
    },
    h("h2", {}, "Import"),
    h(
      "p",
      { class: "muted" },
      "The Envoy reference rate limit service's YAML, as it is: one domain per document (separate several with ---).",
    ),
    formError(),
    textarea,
    submitActions("envoy-import-submit", "Import"),
  );
  mount(
    ctx.main,
    heading("Envoy"),
    h(
      "p",
      { class: "muted" },
      "Descriptor limits of the Envoy rate limit service (gRPC RLS v3 and POST /json): each rate_limit is a sluice policy named after its domain and descriptor path.",
    ),
    list.service.grpc
      ? null
      : h(
          "div",
          { class: "notice", id: "envoy-service-off", role: "status" },
          "This node does not serve the Envoy rate limit service: start sluice serve with --grpc-port <port> (gRPC, and POST /json on the HTTP port) to answer Envoy. The domains below can still be edited here.",
        ),
    list.domains.length === 0
      ? h("p", { class: "muted", id: "envoy-empty" }, "No domain yet.")
      : scroller(
          listTable(
            { class: "list", id: "envoy-domains" },
            ["Domain", "Limits", "Version", "Updated"],
            h("tbody", {}, rows),
          ),
        ),
    isAdmin(ctx) ? form : null,
    result,
  );
}

/** The traffic history's name for a domain's decisions (app names cannot hold a colon). */
const trafficApp = (domain: string) => `envoy:${domain}`;

/** Each `rate_limit` of a domain's tree in one line: `remote_address: 3 / day; path=/api: …`. */
function descriptorSummary(doc: EnvoyDomainDoc): string {
  type Descriptor = EnvoyDomainDoc["descriptors"][number];
  const out: string[] = [];
  const walk = (list: readonly Descriptor[], at: string) => {
    for (const d of list) {
      const path = `${at}${d.key}${d.value !== undefined ? `=${d.value}` : ""}`;
      const r = d.rate_limit;
      if (r)
        out.push(
          `${path}: ${
            r.unlimited
              ? "unlimited"
              : r.rules
                ? r.rules.map((x) => `${x.requests_per_unit} / ${x.unit ?? x.period}`).join(" and ")
                : `${r.requests_per_unit ?? 0} / ${r.unit ?? r.period}`
          }`,
        );
      walk(d.descriptors ?? [], `${path} › `);
    }
  };
  walk(doc.descriptors, "");
  return out.join("; ") || "no limit";
}

/** The descriptor tree as the node runs it. */
function limitsCard(rec: DomainRecord): HTMLElement {
  const tree = listTable(
    { class: "list", id: "envoy-limits" },
    ["Descriptor", "Limit", "Algorithm", "", "Name / replaces", "Policy"],
    h(
      "tbody",
      {},
      rec.limits.map((l) =>
        h(
          "tr",
          { "data-path": l.path },
          h("td", {}, h("code", {}, l.path)),
          h("td", {}, limitText(l)),
          h("td", {}, l.unlimited ? "" : l.algorithm),
          h("td", {}, limitFlags(l)),
          h(
            "td",
            {},
            [l.name ?? "", ...(l.replaces.length > 0 ? [`replaces ${l.replaces.join(", ")}`] : [])]
              .filter(Boolean)
              .join("; "),
          ),
          h("td", { class: "muted" }, l.policy ?? ""),
        ),
      ),
    ),
  );
  return h(
    "section",
    { class: "card", id: "envoy-limits-card" },
    h("h2", {}, "Descriptor limits"),
    rec.limits.length === 0 ? h("p", { class: "muted" }, "No limit.") : scroller(tree),
  );
}

/** A descriptor's counters: entries as key=value lines; peek, and reset (admins). */
function countersCard(
  ctx: Ctx,
  path: string,
): {
  card: HTMLFormElement;
  /** Peeks at the descriptor an identifier counts (`key=value&…`, as the top keys list it). */
  peekAt(identifier: string): void;
} {
  const entriesInput = codeStyle(
    h("textarea", {
      id: "envoy-entries",
      rows: 3,
      spellcheck: "false",
      placeholder: "remote_address=10.0.0.1",
    }),
  );
  const counterOut = h("pre", { id: "envoy-counter", class: "muted" });
  const entries = () =>
    entriesInput.value
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .map((l) => {
        const i = l.indexOf("=");
        return i < 0 ? { key: l, value: "" } : { key: l.slice(0, i), value: l.slice(i + 1) };
      });
  const showCounter = (a: CounterAnswer) => {
    if (!a.limit) {
      counterOut.textContent = "No limit of this domain matches the descriptor.";
      return;
    }
    const d = a.decision as { remaining?: number; limit?: number; resetAfterMs?: number } | null;
    counterOut.textContent = [
      `limit: ${a.limit.path} (${limitText(a.limit)})`,
      `key: ${a.identifier ?? ""}`,
      a.reset
        ? "counter reset"
        : d
          ? `remaining: ${d.remaining ?? "?"} of ${d.limit ?? "?"}; resets in ${Math.ceil((d.resetAfterMs ?? 0) / 1000)} s`
          : "no counter (unlimited, or a limit of 0)",
    ].join("\n");
  };
  const counterAction = async (action: "peek" | "reset") => {
    try {
      showCounter(
        await ctx.api.request<CounterAnswer>("POST", `${path}/counters/${action}`, {
          entries: entries(),
        }),
      );
    } catch (err) {
      showIssues(card, err);
    }
  };
  const card = submitForm(
    { class: "card", id: "envoy-counters", novalidate: false },
    () => counterAction("peek"),
    h("h2", {}, "Counters"),
    h("p", { class: "muted" }, "A request descriptor, one key=value entry per line."),
    formError(),
    entriesInput,
    submitActions(
      "envoy-peek",
      "Peek",
      // Resetting forgets what the counter has used: a second click confirms.
      isAdmin(ctx)
        ? confirmButton("Reset", () => counterAction("reset"), { id: "envoy-reset" })
        : null,
    ),
    counterOut,
  );
  return {
    card,
    peekAt(identifier) {
      entriesInput.value = identifier
        .split("&")
        .map((pair) => pair.split("=").map(decodeURIComponent).join("="))
        .join("\n");
      card.scrollIntoView({ block: "nearest" });
      void counterAction("peek");
    },
  };
}

/** The top keys of one limit of the domain, chosen in the card's head. */
function limitKeysCard(ctx: Ctx, rec: DomainRecord, onPick: (key: string) => void): HTMLElement {
  const counted = rec.limits.filter((l) => l.policy !== null);
  const holder = h("div", {});
  if (counted.length === 0) return holder;
  const choose = select(
    counted.map((l) => [l.policy!, l.path] as const),
    counted[0]!.policy!,
    { id: "envoy-keys-limit", "aria-label": "Limit" },
  );
  const show = () => mount(holder, topKeysCard(ctx, choose.value, onPick, choose));
  choose.addEventListener("change", show);
  show();
  return holder;
}

/** The YAML, editable by admins: saved as a new version, or as a draft in shadow. */
async function yamlCard(
  ctx: Ctx,
  rec: DomainRecord,
  draftId: number | undefined,
  reload: () => Promise<void>,
): Promise<HTMLElement> {
  const admin = isAdmin(ctx);
  const editor = codeStyle(
    h(
      "textarea",
      { id: "envoy-yaml", rows: 16, spellcheck: "false", readonly: !admin },
      await yamlOf(ctx, rec.domain),
    ),
  );
  const save = (target: "domain" | "draft") => async () => {
    try {
      const q = new URLSearchParams({ expectVersion: String(rec.version) });
      if (target === "draft" && draftId !== undefined) q.set("draftId", String(draftId));
      await sendYaml(
        ctx,
        "PUT",
        `/domains/${enc(rec.domain)}${target === "draft" ? "/draft" : ""}?${q}`,
        editor.value,
      );
      ctx.flash(target === "draft" ? "Draft saved: it runs in shadow" : "Saved as a new version");
      await reload();
    } catch (err) {
      showIssues(form, err);
    }
  };
  const form: HTMLFormElement = h(
    "form",
    { class: "card", id: "envoy-edit", onsubmit: (e: Event) => e.preventDefault() },
    h("h2", {}, "Configuration (YAML)"),
    formError(),
    editor,
    admin
      ? h(
          "div",
          { class: "actions" },
          h("button", { type: "button", id: "envoy-save", onclick: save("domain") }, "Save"),
          h(
            "button",
            { type: "button", class: "secondary", id: "envoy-save-draft", onclick: save("draft") },
            "Save as draft",
          ),
        )
      : null,
  );
  return form;
}

/** Envoy domains, as the console's view of versioned documents shows them. */
export const envoyDomainKind: ConsoleKind<DomainRecord, EnvoyDomainDoc> = {
  collection: "/envoy/domains",
  route: "envoy",
  noun: "domain",
  saveAgain: "Save it again from the YAML",
  summaryHead: "Limits",
  nameOf: (r) => r.domain,
  docOf: (r) => r.doc,
  comparable: (doc) => doc,
  summary: descriptorSummary,
  flags: (r) => (r.hasDraft ? [h("span", { class: "tag draft" }, "draft")] : []),
  mayEdit: isAdmin,
  mayDelete: isAdmin,
  async sections(ctx, rec, { draft, reload }) {
    const path = `/envoy/domains/${enc(rec.domain)}`;
    const counters = countersCard(ctx, path);
    const pathOf = new Map(rec.limits.map((l) => [l.policy ?? "", l.path]));
    return {
      actions: [h("a", { href: "#/envoy" }, "All domains")],
      before: [
        limitsCard(rec),
        // Every limit's decisions, as the traffic history counts Envoy's: by limit.
        trafficCard(ctx, { app: trafficApp(rec.domain) }, undefined, (policy) =>
          h("code", {}, pathOf.get(policy) ?? policy),
        ),
        limitKeysCard(ctx, rec, (key) => counters.peekAt(key)),
        counters.card,
        await yamlCard(ctx, rec, draft?.id, reload),
      ],
    };
  },
};

/** `#/envoy/<domain>`: one domain. */
export function envoyDomainPage(ctx: Ctx, domain: string): Promise<void> {
  return documentPage(ctx, envoyDomainKind, domain);
}
