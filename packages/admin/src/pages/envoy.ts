/**
 * Envoy: the domains of the Envoy rate limit service (the reference service's configuration
 * files, kept as versioned data), each domain's descriptor tree as the service runs it, its
 * YAML (edited and saved as a new version or as a draft evaluated in shadow, by admins), its
 * versions, and a descriptor's counters (peek; reset by admins).
 *
 * Self-contained: it calls the admin API through `ctx.api.request` and, for YAML bodies, a
 * plain fetch with the session's token; its types come from the API contract (@sluice/api).
 */
import type * as schemas from "@sluice/api";
import type { z } from "zod";
import { ApiError } from "../api.js";
import { h, mount, when } from "../dom.js";
import {
  type Ctx,
  confirmButton,
  failed,
  formError,
  heading,
  isAdmin,
  loading,
  scroller,
  showIssues,
} from "../ui.js";

type DomainList = z.infer<typeof schemas.envoyDomainListSchema>;
type DomainRecord = z.infer<typeof schemas.envoyDomainRecordSchema>;
type Limit = z.infer<typeof schemas.envoyLimitSchema>;
type VersionList = z.infer<typeof schemas.envoyVersionListSchema>;
type Draft = z.infer<typeof schemas.envoyDraftSchema>;
type CounterAnswer = z.infer<typeof schemas.envoyCounterAnswerSchema>;
type ImportResult = z.infer<typeof schemas.envoyImportResultSchema>;

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
  const form: HTMLFormElement = h(
    "form",
    {
      class: "card",
      id: "envoy-import",
      onsubmit: async (e: Event) => {
        e.preventDefault();
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
    },
    h("h2", {}, "Import"),
    h(
      "p",
      { class: "muted" },
      "The Envoy reference rate limit service's YAML, as it is: one domain per document (separate several with ---).",
    ),
    formError(),
    textarea,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", id: "envoy-import-submit" }, "Import"),
    ),
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
          h(
            "table",
            { class: "list", id: "envoy-domains" },
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                ["Domain", "Limits", "Version", "Updated"].map((t) => h("th", {}, t)),
              ),
            ),
            h("tbody", {}, rows),
          ),
        ),
    isAdmin(ctx) ? form : null,
    result,
  );
}

/** `#/envoy/<domain>`: the descriptor tree, YAML, draft, versions and counters of one domain. */
export async function envoyDomainPage(ctx: Ctx, domain: string): Promise<void> {
  mount(ctx.main, heading(domain), loading());
  const path = `/envoy/domains/${enc(domain)}`;
  const [rec, yaml, versions] = await Promise.all([
    ctx.api.request<DomainRecord>("GET", path),
    yamlOf(ctx, domain),
    ctx.api.request<VersionList>("GET", `${path}/versions`),
  ]);
  // The record says whether there is a draft: ask for it only then (a 404 is only the race
  // of a draft discarded in between).
  const draft = rec.hasDraft
    ? await ctx.api.request<Draft>("GET", `${path}/draft`).catch((err: unknown) => {
        if (err instanceof ApiError && err.status === 404) return undefined;
        throw err;
      })
    : undefined;
  const admin = isAdmin(ctx);

  const tree = h(
    "table",
    { class: "list", id: "envoy-limits" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Descriptor", "Limit", "Algorithm", "", "Name / replaces", "Policy"].map((t) =>
          h("th", {}, t),
        ),
      ),
    ),
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

  // Counters of one descriptor: entries as key=value lines.
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
      showIssues(counters, err);
    }
  };
  const counters: HTMLFormElement = h(
    "form",
    {
      class: "card",
      id: "envoy-counters",
      onsubmit: async (e: Event) => {
        e.preventDefault();
        await counterAction("peek");
      },
    },
    h("h2", {}, "Counters"),
    h("p", { class: "muted" }, "A request descriptor, one key=value entry per line."),
    formError(),
    entriesInput,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", id: "envoy-peek" }, "Peek"),
      // Resetting forgets what the counter has used: a second click confirms.
      admin ? confirmButton("Reset", () => counterAction("reset"), { id: "envoy-reset" }) : null,
    ),
    counterOut,
  );

  // The YAML, editable by admins: saved as a new version, or as a draft in shadow.
  const editor = codeStyle(
    h("textarea", { id: "envoy-yaml", rows: 16, spellcheck: "false", readonly: !admin }, yaml),
  );
  const save = (target: "domain" | "draft") => async () => {
    try {
      const q = new URLSearchParams({ expectVersion: String(rec.version) });
      if (target === "draft" && draft) q.set("draftId", String(draft.id));
      await sendYaml(
        ctx,
        "PUT",
        `/domains/${enc(domain)}${target === "draft" ? "/draft" : ""}?${q}`,
        editor.value,
      );
      ctx.flash(target === "draft" ? "Draft saved: it runs in shadow" : "Saved as a new version");
      await envoyDomainPage(ctx, domain);
    } catch (err) {
      showIssues(yamlForm, err);
    }
  };
  const yamlForm: HTMLFormElement = h(
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

  const draftCard = draft
    ? h(
        "div",
        { class: "card", id: "envoy-draft" },
        h("h2", {}, `Draft ${draft.id} (from v${draft.baseVersion}, by ${draft.createdBy})`),
        h(
          "p",
          {},
          draft.stats
            ? `On live requests: ${draft.stats.evaluated} evaluated, ${draft.stats.wouldDeny} it would deny, ${draft.stats.wouldDenyNewly} newly denied, ${draft.stats.wouldAllowNewly} newly allowed.`
            : "",
        ),
        admin
          ? h(
              "div",
              { class: "actions" },
              h(
                "button",
                {
                  type: "button",
                  id: "envoy-promote",
                  onclick: async () => {
                    try {
                      await ctx.api.request("POST", `${path}/draft/promote`, {
                        draftId: draft.id,
                        expectVersion: rec.version,
                      });
                      ctx.flash("Draft promoted");
                      await envoyDomainPage(ctx, domain);
                    } catch (err) {
                      ctx.flash(err instanceof Error ? err.message : String(err), "error");
                    }
                  },
                },
                "Promote",
              ),
              h(
                "button",
                {
                  type: "button",
                  class: "secondary",
                  onclick: async () => {
                    await ctx.api.request("DELETE", `${path}/draft`);
                    ctx.flash("Draft discarded");
                    await envoyDomainPage(ctx, domain);
                  },
                },
                "Discard",
              ),
            )
          : null,
      )
    : null;

  const versionRows = versions.versions.map((v) =>
    h(
      "tr",
      { "data-version": v.version },
      h("td", {}, `v${v.version}`),
      h("td", {}, v.action),
      h("td", {}, `${when(v.createdAt)} by ${v.createdBy}`),
      h(
        "td",
        {},
        admin && v.version !== rec.version
          ? h(
              "button",
              {
                type: "button",
                class: "secondary",
                onclick: async () => {
                  try {
                    await ctx.api.request("POST", `${path}/versions/${v.version}/restore`);
                    ctx.flash(`Version ${v.version} restored`);
                    await envoyDomainPage(ctx, domain);
                  } catch (err) {
                    mount(ctx.main, failed(err));
                  }
                },
              },
              "Restore",
            )
          : null,
      ),
    ),
  );

  mount(
    ctx.main,
    heading(domain, h("a", { href: "#/envoy" }, "All domains")),
    h(
      "p",
      { class: "muted" },
      `Version ${rec.version}, ${when(rec.updatedAt)} by ${rec.updatedBy}`,
    ),
    h(
      "div",
      { class: "card", id: "envoy-limits-card" },
      h("h2", {}, "Descriptor limits"),
      rec.limits.length === 0 ? h("p", { class: "muted" }, "No limit.") : scroller(tree),
    ),
    draftCard,
    counters,
    yamlForm,
    h(
      "div",
      { class: "card" },
      h("h2", {}, "Versions"),
      scroller(h("table", { class: "list", id: "envoy-versions" }, h("tbody", {}, versionRows))),
    ),
  );
}
