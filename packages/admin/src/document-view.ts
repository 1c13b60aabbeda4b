/**
 * The console's one view of a versioned document, whatever its kind (a policy, an Envoy domain):
 * its bookkeeping, the draft evaluated in shadow (its counts, its diff against the enforced
 * version, promote and discard) and every version (diffs between any two, restore) — with what
 * differs given by the kind's {@link ConsoleKind}: how a document reads, which cards come
 * before and after, and who may change it. The service's routes are the same for every kind
 * (`<collection>/{name}/versions`, `…/draft`, …), so is this view.
 */
import { ApiError, type DraftStats } from "./api.js";
import { type Change, diff } from "./diff.js";
import { type Child, h, mount, when } from "./dom.js";
import { REFRESH_MS, every } from "./traffic-view.js";
import {
  type Ctx,
  confirmButton,
  heading,
  listTable,
  loading,
  messageOf,
  scroller,
  select,
} from "./ui.js";

/** What every stored document answers with beside its fields. */
export interface Bookkept {
  readonly version: number;
  readonly createdBy: string;
  readonly updatedBy: string;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly hasDraft?: boolean | undefined;
  /**
   * What the document asks that the service will not do as written, each naming its field
   * (`lease` on memory counters); the document was saved all the same.
   */
  readonly warnings?: readonly Warning[] | undefined;
}

/** One warning of the service about a document: its field and what it will not do. */
export interface Warning {
  readonly path: string;
  readonly message: string;
}

/** Warnings in one line, for a message after a save: `Warning — lease: …` (empty for none). */
export function warningsText(warnings: readonly Warning[] | undefined): string {
  if (!warnings || warnings.length === 0) return "";
  return `Warning — ${warnings.map((w) => (w.path ? `${w.path}: ${w.message}` : w.message)).join("; ")}`;
}

/** One kept version. */
export interface KeptVersion<D> {
  readonly version: number;
  readonly doc: D;
  readonly action: string;
  readonly createdBy: string;
  readonly createdAt: string;
}

/** A draft, evaluated in shadow beside the enforced version. */
export interface Draft<D> {
  readonly id: number;
  readonly doc: D;
  readonly baseVersion: number;
  readonly createdBy: string;
  readonly createdAt: string;
  readonly stats?: DraftStats | undefined;
}

/** The parts of the page a kind adds around the draft and the versions. */
export interface KindSections {
  /** Buttons and links of the heading (before Delete). */
  readonly actions?: Child[];
  /** Notices under the bookkeeping line. */
  readonly notices?: Child[];
  /** Cards before the draft (traffic, the enforced document…). */
  readonly before?: Child[];
  /** Cards after the versions. */
  readonly after?: Child[];
}

/** What the page knows when a kind adds its parts. */
export interface PageState<D> {
  /** Whether the user may change the document. */
  readonly editable: boolean;
  /** Its draft, when it has one. */
  readonly draft: Draft<D> | undefined;
  /** Draws the page again (after a change made from it). */
  reload(): Promise<void>;
}

/** What the console needs to know of a kind of document: its strategy. */
export interface ConsoleKind<R extends Bookkept, D> {
  /** The admin API's collection, under `/v1/admin`: `/policies`. */
  readonly collection: string;
  /** The console's route: `policies` for `#/policies/<name>`. */
  readonly route: string;
  /** Its noun, in messages: `policy`. */
  readonly noun: string;
  /** Where a stale draft is written again: `Save it again from the form`. */
  readonly saveAgain: string;
  /** The heading of the versions table's summary column: `Rules`. */
  readonly summaryHead: string;
  nameOf(rec: R): string;
  /** The enforced document of a record. */
  docOf(rec: R): D;
  /** A document as the diffs compare it (defaults filled in, bookkeeping left out). */
  comparable(doc: D): unknown;
  /** A document in one line, for the versions table and the draft. */
  summary(doc: D): string;
  /** Tags beside the bookkeeping (`disabled`, `shadow`, `draft`). */
  flags(rec: R): HTMLElement[];
  /** Whether the user may change the document (the service decides in the end). */
  mayEdit(ctx: Ctx, rec: R): boolean;
  /** Whether the user may delete it. */
  mayDelete(ctx: Ctx, rec: R): boolean;
  /** The kind's own parts of the page. */
  sections(ctx: Ctx, rec: R, page: PageState<D>): KindSections | Promise<KindSections>;
}

const enc = encodeURIComponent;

/** `#/<route>/<name>`: one document, as its kind shows it, with its draft and versions. */
export async function documentPage<R extends Bookkept, D>(
  ctx: Ctx,
  kind: ConsoleKind<R, D>,
  name: string,
): Promise<void> {
  mount(ctx.main, heading(name), loading());
  const path = `${kind.collection}/${enc(name)}`;
  const [rec, versions] = await Promise.all([
    ctx.api.request<R>("GET", path),
    ctx.api
      .request<{ versions: KeptVersion<D>[] }>("GET", `${path}/versions`)
      .then((r) => r.versions)
      .catch((): KeptVersion<D>[] => []),
  ]);
  // Asked only when there is one: no 404 to log for every document without a draft (a 404 is
  // then only the race of a draft discarded in between).
  const draft = rec.hasDraft ? await ctx.api.draftAt<Draft<D>>(path) : undefined;
  const editable = kind.mayEdit(ctx, rec);
  const reload = () => documentPage(ctx, kind, name);
  const parts = await kind.sections(ctx, rec, { editable, draft, reload });
  const flags = kind.flags(rec);
  mount(
    ctx.main,
    heading(
      kind.nameOf(rec),
      ...(parts.actions ?? []),
      kind.mayDelete(ctx, rec)
        ? confirmButton(
            "Delete",
            async () => {
              try {
                await ctx.api.request("DELETE", path);
                ctx.navigate(`/${kind.route}`, { flash: `Deleted ${kind.noun} ${name}` });
              } catch (err) {
                ctx.flash(messageOf(err), "error");
              }
            },
            { id: "delete-document" },
          )
        : null,
    ),
    h(
      "p",
      { class: "muted meta" },
      h("span", { id: "document-version" }, `Version ${rec.version}`),
      ` · created ${when(rec.createdAt)} by ${rec.createdBy} · updated ${when(rec.updatedAt)} by ${rec.updatedBy}`,
      flags.length > 0 ? [" · ", flags] : null,
    ),
    rec.warnings && rec.warnings.length > 0
      ? h(
          "div",
          { class: "notice", id: "document-warnings", role: "note" },
          rec.warnings.map((w) => h("p", {}, w.path ? `${w.path}: ${w.message}` : w.message)),
        )
      : null,
    parts.notices ?? [],
    parts.before ?? [],
    draft ? draftSection(ctx, kind, rec, draft, path, editable, reload) : null,
    versionsSection(ctx, kind, rec, versions, path, editable, reload),
    parts.after ?? [],
  );
}

/**
 * A diff as a table: field, before, after (or a line when nothing differs). What was only
 * created (or only removed) is a two-column list of its fields.
 */
export function diffTable(
  changes: readonly Change[],
  props: Record<string, unknown> = {},
): HTMLElement {
  if (changes.length === 0) return h("p", { class: "muted", ...props }, "No difference.");
  const only = changes.every((c) => c.kind === "added")
    ? "added"
    : changes.every((c) => c.kind === "removed")
      ? "removed"
      : undefined;
  if (only)
    return scroller(
      h(
        "table",
        { class: `list compact diff only-${only}`, ...props },
        h(
          "thead",
          {},
          h("tr", {}, h("th", {}, "Field"), h("th", {}, only === "added" ? "Set to" : "Was")),
        ),
        h(
          "tbody",
          {},
          changes.map((c) =>
            h(
              "tr",
              { class: c.kind, "data-path": c.path },
              h("td", {}, h("code", {}, c.path || "(whole)")),
              h(
                "td",
                { class: only === "added" ? "after" : "before" },
                (only === "added" ? c.after : c.before) ?? "",
              ),
            ),
          ),
        ),
      ),
    );
  return scroller(
    listTable(
      { class: "list compact diff", ...props },
      ["Field", "Before", "After"],
      h(
        "tbody",
        {},
        changes.map((c) =>
          h(
            "tr",
            { class: c.kind, "data-path": c.path },
            h("td", {}, h("code", {}, c.path || "(whole)")),
            h("td", { class: "before" }, c.before ?? h("span", { class: "muted" }, "—")),
            h("td", { class: "after" }, c.after ?? h("span", { class: "muted" }, "removed")),
          ),
        ),
      ),
    ),
  );
}

function draftSection<R extends Bookkept, D>(
  ctx: Ctx,
  kind: ConsoleKind<R, D>,
  rec: R,
  d: Draft<D>,
  path: string,
  editable: boolean,
  reload: () => Promise<void>,
): HTMLElement {
  // The shadow counts, refreshed with the Traffic card (every 5 s) while the page is open. A
  // promote or discard from here stops the refresh first (the draft is about to go).
  const stats = h("p", { class: "stats", id: "draft-stats" });
  const showStats = (st: Draft<D>["stats"]) => {
    stats.textContent = st
      ? `Evaluated ${st.evaluated} · would deny ${st.wouldDeny} · would newly deny ${st.wouldDenyNewly} · would newly allow ${st.wouldAllowNewly}`
      : "";
  };
  showStats(d.stats);
  let leaving = false;
  let first = true;
  every(
    ctx,
    REFRESH_MS,
    async () => {
      if (first) {
        first = false;
        return;
      }
      if (leaving) return;
      try {
        const fresh = await ctx.api.draftAt<Draft<D>>(path);
        if (!leaving && fresh?.id === d.id) showStats(fresh.stats);
      } catch {
        // Kept as last shown; the next tick tries again.
      }
    },
    stats,
  );
  return h(
    "section",
    { class: "card draft", id: "draft", "data-draft": d.id },
    h("h2", {}, "Draft (evaluated in shadow)"),
    h(
      "p",
      { class: "muted" },
      `Draft ${d.id}, saved ${when(d.createdAt)} by ${d.createdBy}, based on version ${d.baseVersion}. Every request is also decided by the draft; its answers are only counted.`,
    ),
    stats,
    h("p", { class: "draft-rules" }, kind.summary(d.doc)),
    h("h3", {}, `Draft against the enforced version ${rec.version}`),
    diffTable(diff(kind.comparable(kind.docOf(rec)), kind.comparable(d.doc)), {
      id: "draft-diff",
    }),
    d.baseVersion !== rec.version
      ? h(
          "p",
          { class: "notice error" },
          `Made from version ${d.baseVersion}, but version ${rec.version} is enforced now: promoting it would undo the changes since. ${kind.saveAgain}, or discard it.`,
        )
      : null,
    editable
      ? h(
          "div",
          { class: "actions" },
          h(
            "button",
            {
              type: "button",
              id: "promote-draft",
              onclick: async () => {
                leaving = true;
                try {
                  const r = await ctx.api.request<Bookkept>("POST", `${path}/draft/promote`, {
                    expectVersion: rec.version,
                    draftId: d.id,
                  });
                  ctx.flash(`Draft promoted: version ${r.version} is enforced`);
                  await reload();
                } catch (err) {
                  leaving = false;
                  // 409: stale (made from an older version) or changed meanwhile. The API's
                  // wording names its own calls; say what to do here instead.
                  ctx.flash(
                    err instanceof ApiError && err.status === 409
                      ? `Not promoted: the draft or the enforced version changed since this draft was made (version ${rec.version} is enforced now). ${kind.saveAgain}, or discard it.`
                      : messageOf(err),
                    "error",
                  );
                }
              },
            },
            "Promote to enforced",
          ),
          confirmButton(
            "Discard draft",
            async () => {
              leaving = true;
              try {
                await ctx.api.request("DELETE", `${path}/draft`);
                ctx.flash("Draft discarded");
                await reload();
              } catch (err) {
                leaving = false;
                ctx.flash(messageOf(err), "error");
              }
            },
            { id: "discard-draft" },
          ),
        )
      : null,
  );
}

function versionsSection<R extends Bookkept, D>(
  ctx: Ctx,
  kind: ConsoleKind<R, D>,
  rec: R,
  versions: readonly KeptVersion<D>[],
  path: string,
  editable: boolean,
  reload: () => Promise<void>,
): HTMLElement {
  const sorted = [...versions].sort((a, b) => b.version - a.version);
  const byNumber = new Map(sorted.map((v) => [v.version, v]));
  const options = sorted.map((v) => [String(v.version), `v${v.version} (${v.action})`] as const);
  const from = select(options, String(sorted[1]?.version ?? sorted[0]?.version ?? ""), {
    id: "diff-from",
    "aria-label": "Compare from version",
  });
  const to = select(options, String(sorted[0]?.version ?? ""), {
    id: "diff-to",
    "aria-label": "Compare to version",
  });
  const out = h("div", { id: "version-diff" });
  const compare = () => {
    const a = byNumber.get(Number(from.value));
    const b = byNumber.get(Number(to.value));
    mount(
      out,
      a && b
        ? [
            h("h3", {}, `v${a.version} → v${b.version}`),
            diffTable(diff(kind.comparable(a.doc), kind.comparable(b.doc)), {
              id: "version-diff-table",
            }),
          ]
        : null,
    );
  };
  from.addEventListener("change", compare);
  to.addEventListener("change", compare);
  if (sorted.length > 1) compare();
  return h(
    "section",
    { class: "card", id: "versions-card" },
    h("h2", {}, "Versions"),
    scroller(
      listTable(
        { class: "list", id: "versions" },
        ["Version", "Change", "By", "When", kind.summaryHead, ""],
        h(
          "tbody",
          {},
          sorted.map((v, i) =>
            h(
              "tr",
              { "data-version": v.version },
              h("td", { class: "num" }, `v${v.version}`),
              h("td", {}, v.action),
              h("td", {}, v.createdBy),
              h("td", {}, when(v.createdAt)),
              h("td", {}, kind.summary(v.doc)),
              h(
                "td",
                { class: "row-actions" },
                sorted[i + 1]
                  ? h(
                      "button",
                      {
                        type: "button",
                        class: "link show-diff",
                        onclick: () => {
                          from.value = String(sorted[i + 1]!.version);
                          to.value = String(v.version);
                          compare();
                          out.scrollIntoView({ block: "nearest" });
                        },
                      },
                      "Diff",
                    )
                  : null,
                v.version === rec.version
                  ? h("span", { class: "tag" }, "current")
                  : editable
                    ? h(
                        "button",
                        {
                          type: "button",
                          class: "secondary restore",
                          onclick: async () => {
                            try {
                              const r = await ctx.api.request<Bookkept>(
                                "POST",
                                `${path}/versions/${v.version}/restore`,
                              );
                              ctx.flash(`Restored version ${v.version} as version ${r.version}`);
                              await reload();
                            } catch (err) {
                              ctx.flash(messageOf(err), "error");
                            }
                          },
                        },
                        `Restore v${v.version}`,
                      )
                    : null,
              ),
            ),
          ),
        ),
      ),
    ),
    sorted.length > 1
      ? h("div", { class: "compare" }, h("span", {}, "Compare "), from, h("span", {}, " with "), to)
      : null,
    out,
  );
}
