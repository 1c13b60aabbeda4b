/**
 * Apps: the callers of the decision API. Creating an app (or rotating its key) shows its API
 * key once; the service keeps only a hash.
 */
import type { AppWithKey } from "../api.js";
import { h, mount, when } from "../dom.js";
import {
  type Ctx,
  clearIssues,
  field,
  formError,
  heading,
  input,
  isAdmin,
  loading,
  showIssues,
} from "../ui.js";
import { confirmButton } from "./policies.js";

function keyBox(app: AppWithKey, verb: string): HTMLElement {
  const code = h("code", { id: "api-key" }, app.apiKey);
  return h(
    "div",
    { class: "notice key", id: "new-key", role: "status" },
    h("strong", {}, `API key of ${app.name} (${verb}) — copy it now: it is shown only this once.`),
    h(
      "div",
      { class: "keyline" },
      code,
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          onclick: async (e: Event) => {
            const b = e.currentTarget as HTMLButtonElement;
            try {
              await navigator.clipboard.writeText(app.apiKey);
              b.textContent = "Copied";
            } catch {
              getSelection()?.selectAllChildren(code);
              b.textContent = "Selected — press Ctrl+C";
            }
          },
        },
        "Copy",
      ),
    ),
    h("small", {}, `Callers send it as "Authorization: Bearer <key>" to POST /v1/limit.`),
  );
}

/** `#/apps`: the apps, and (admins) a form to create one. */
export async function appsPage(ctx: Ctx, fresh?: { app: AppWithKey; verb: string }): Promise<void> {
  mount(ctx.main, heading("Apps"), loading());
  const apps = await ctx.api.apps();
  const user = ctx.session.user;
  const admin = isAdmin(ctx);
  const reload = (app?: AppWithKey, verb = "created") =>
    appsPage(ctx, app ? { app, verb } : undefined);

  const name = input({ name: "name", placeholder: "checkout-service", required: true });
  const description = input({
    name: "description",
    placeholder: "What calls sluice with this key",
  });
  const form: HTMLFormElement = h(
    "form",
    {
      class: "card inline-form",
      id: "app-form",
      novalidate: true,
      onsubmit: async (e: Event) => {
        e.preventDefault();
        clearIssues(form);
        try {
          const created = await ctx.api.createApp(name.value.trim(), description.value.trim());
          ctx.flash(`Created app ${created.name}`);
          await reload(created);
        } catch (err) {
          showIssues(form, err);
        }
      },
    },
    h("h2", {}, "New app"),
    formError(),
    h(
      "div",
      { class: "row" },
      field("Name", "name", name),
      field("Description", "description", description),
    ),
    h("div", { class: "actions" }, h("button", { type: "submit", id: "create-app" }, "Create app")),
  );

  mount(
    ctx.main,
    heading("Apps"),
    fresh ? keyBox(fresh.app, fresh.verb) : null,
    apps.length === 0
      ? h("p", { class: "muted" }, "No apps yet.")
      : h(
          "table",
          { class: "list", id: "apps" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ["Name", "Description", "Key id", "Policies", "Created", ""].map((t) =>
                h("th", {}, t),
              ),
            ),
          ),
          h(
            "tbody",
            {},
            apps.map((a) => {
              const mayRotate = admin || (user.role === "owner" && user.apps.includes(a.name));
              return h(
                "tr",
                { "data-app": a.name },
                h("td", {}, a.name),
                h("td", {}, a.description),
                h("td", {}, h("code", {}, a.keyId)),
                h("td", {}, (a.policies ?? []).join(", ") || h("span", { class: "muted" }, "none")),
                h("td", {}, `${when(a.createdAt)} by ${a.createdBy}`),
                h(
                  "td",
                  { class: "row-actions" },
                  mayRotate
                    ? confirmButton(
                        "Rotate key",
                        async () => {
                          try {
                            await reload(
                              await ctx.api.rotateApp(a.name),
                              "new key; the old one no longer works",
                            );
                          } catch (err) {
                            ctx.flash(err instanceof Error ? err.message : String(err), "error");
                          }
                        },
                        { class: "secondary" },
                      )
                    : null,
                  admin
                    ? confirmButton("Delete", async () => {
                        try {
                          await ctx.api.deleteApp(a.name);
                          ctx.flash(`Deleted app ${a.name}`);
                          await reload();
                        } catch (err) {
                          ctx.flash(err instanceof Error ? err.message : String(err), "error");
                        }
                      })
                    : null,
                ),
              );
            }),
          ),
        ),
    admin ? form : null,
  );
}
