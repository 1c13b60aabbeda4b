/**
 * Apps: the callers of the decision API. Creating an app (or rotating its key) shows its API
 * key once — with the line that puts it in `SLUICE_API_KEY` for the snippets — and the service
 * keeps only a hash. One app (`#/apps/<name>`): its policies, its traffic and copy-ready calls.
 */
import type { AppRecord, AppWithKey } from "../api.js";
import { h, mount, when } from "../dom.js";
import { curlLimit, shellQuote } from "../snippets.js";
import { trafficCard } from "../traffic-view.js";
import {
  type Ctx,
  confirmButton,
  copyBlock,
  copyButton,
  deleteButton,
  emptyCard,
  failed,
  field,
  flashingErrors,
  heading,
  input,
  isAdmin,
  listTable,
  loading,
  scroller,
  titledForm,
} from "../ui.js";

const enc = encodeURIComponent;

/** A new API key, shown once: copy it, and the line that exports it for the snippets. */
function keyBox(app: AppWithKey, verb: string): HTMLElement {
  const code = h("code", { id: "api-key" }, app.apiKey);
  return h(
    "div",
    { class: "notice key", id: "new-key", role: "status" },
    h("strong", {}, `API key of ${app.name} (${verb}) — copy it now: it is shown only this once.`),
    h("div", { class: "keyline" }, code, copyButton(app.apiKey, code, "secondary")),
    h(
      "small",
      {},
      `Callers send it as "Authorization: Bearer <key>" to POST /v1/limit. For the commands on these pages:`,
    ),
    copyBlock(`export SLUICE_API_KEY=${shellQuote(app.apiKey)}`, { id: "export-key" }),
  );
}

/** Rotate key (admins and the app's owners), with the new key shown on the apps page. */
function rotateButton(
  ctx: Ctx,
  a: AppRecord,
  after: (k: AppWithKey) => Promise<void>,
): HTMLElement {
  return confirmButton(
    "Rotate key",
    flashingErrors(ctx, async () => after(await ctx.api.rotateApp(a.name))),
    { class: "secondary" },
  );
}

const mayRotate = (ctx: Ctx, name: string) =>
  isAdmin(ctx) || (ctx.session.user.role === "owner" && ctx.session.user.apps.includes(name));

/** `#/apps/:name`: one app — its key id, policies, traffic and how to call it. */
export async function appPage(ctx: Ctx, name: string): Promise<void> {
  mount(ctx.main, heading(name), loading());
  const apps = await ctx.api.apps();
  const a = apps.find((x) => x.name === name);
  if (!a) {
    mount(ctx.main, heading(name), failed(new Error(`app "${name}" does not exist`)));
    return;
  }
  const policies = a.policies ?? [];
  mount(
    ctx.main,
    heading(
      a.name,
      mayRotate(ctx, a.name)
        ? rotateButton(ctx, a, (k) =>
            appsPage(ctx, { app: k, verb: "new key; the old one no longer works" }),
          )
        : null,
    ),
    h(
      "p",
      { class: "muted meta" },
      a.description ? `${a.description} · ` : "",
      "key id ",
      h("code", {}, a.keyId),
      ` · created ${when(a.createdAt)} by ${a.createdBy}`,
    ),
    h(
      "section",
      { class: "card", id: "app-policies" },
      h("h2", {}, "Policies granted"),
      policies.length === 0
        ? h(
            "p",
            { class: "muted" },
            "None yet: grant it a policy on the policy's form (Apps granted).",
          )
        : h(
            "ul",
            { class: "plain" },
            policies.map((p) => h("li", {}, h("a", { href: `#/policies/${enc(p)}` }, p))),
          ),
    ),
    trafficCard(ctx, { app: a.name }, () =>
      policies[0]
        ? h(
            "div",
            {},
            h("p", { class: "muted small" }, "Call it:"),
            copyBlock(curlLimit(policies[0])),
          )
        : null,
    ),
    h(
      "section",
      { class: "card", id: "snippets" },
      h("h2", {}, "Call the decision API"),
      h(
        "p",
        { class: "muted" },
        `With this app's API key in SLUICE_API_KEY (shown once when created or rotated; rotate it if it is lost):`,
      ),
      copyBlock(curlLimit(policies[0] ?? "<policy>"), { id: "snippet-curl" }),
      policies.length > 1
        ? h("p", { class: "muted small" }, `Any of its policies: ${policies.join(", ")}.`)
        : null,
    ),
  );
}

/** `#/apps`: the apps, and (admins) a form to create one. */
export async function appsPage(ctx: Ctx, fresh?: { app: AppWithKey; verb: string }): Promise<void> {
  mount(ctx.main, heading("Apps"), loading());
  const apps = await ctx.api.apps();
  const admin = isAdmin(ctx);
  const reload = (app?: AppWithKey, verb = "created") =>
    appsPage(ctx, app ? { app, verb } : undefined);

  const name = input({ name: "name", placeholder: "checkout-service", required: true });
  const description = input({
    name: "description",
    placeholder: "What calls sluice with this key",
  });
  const form = titledForm(
    {
      class: "card inline-form",
      id: "app-form",
      title: "New app",
      submit: ["create-app", "Create app"],
    },
    async () => {
      const created = await ctx.api.createApp(name.value.trim(), description.value.trim());
      ctx.flash(`Created app ${created.name}`);
      await reload(created);
    },
    h(
      "div",
      { class: "row" },
      field("Name", "name", name),
      field("Description", "description", description),
    ),
  );

  mount(
    ctx.main,
    heading("Apps"),
    fresh ? keyBox(fresh.app, fresh.verb) : null,
    apps.length === 0
      ? emptyCard(
          "apps-empty",
          "No apps yet",
          h(
            "p",
            {},
            "An app is a caller of the decision API: it gets an API key and may use the policies granted to it. ",
            admin ? "Create the first one below." : "Admins create them.",
          ),
        )
      : scroller(
          listTable(
            { class: "list", id: "apps" },
            ["Name", "Description", "Key id", "Policies", "Created", ""],
            h(
              "tbody",
              {},
              apps.map((a) => {
                return h(
                  "tr",
                  { "data-app": a.name },
                  h("td", {}, h("a", { href: `#/apps/${enc(a.name)}` }, a.name)),
                  h("td", {}, a.description),
                  h("td", {}, h("code", {}, a.keyId)),
                  h(
                    "td",
                    {},
                    (a.policies ?? []).join(", ") || h("span", { class: "muted" }, "none"),
                  ),
                  h("td", {}, `${when(a.createdAt)} by ${a.createdBy}`),
                  h(
                    "td",
                    { class: "row-actions" },
                    mayRotate(ctx, a.name)
                      ? rotateButton(ctx, a, (k) =>
                          reload(k, "new key; the old one no longer works"),
                        )
                      : null,
                    admin
                      ? deleteButton(
                          ctx,
                          () => ctx.api.deleteApp(a.name),
                          `Deleted app ${a.name}`,
                          reload,
                        )
                      : null,
                  ),
                );
              }),
            ),
          ),
        ),
    admin ? form : null,
  );
}
