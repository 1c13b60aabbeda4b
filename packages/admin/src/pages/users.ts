/**
 * Users and roles: viewer (reads), owner (edits the policies granted to the apps it owns),
 * admin (everything). Only admins change users; everyone can see who has which role.
 */
import type { AppRecord, Role, User } from "../api.js";
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
  confirmButton,
  messageOf,
  scroller,
  select,
  showIssues,
} from "../ui.js";

const ROLE_OPTIONS = [
  ["viewer", "viewer — reads everything"],
  ["owner", "owner — edits its apps' policies"],
  ["admin", "admin — everything"],
] as const;

function appChecks(apps: readonly AppRecord[], owned: readonly string[]): HTMLElement {
  return h(
    "div",
    { class: "checks" },
    apps.length === 0
      ? h("span", { class: "muted" }, "No apps yet.")
      : apps.map((a) =>
          h(
            "label",
            { class: "check" },
            h("input", {
              type: "checkbox",
              name: "apps",
              value: a.name,
              checked: owned.includes(a.name),
            }),
            ` ${a.name}`,
          ),
        ),
  );
}

const checked = (el: HTMLElement) =>
  [...el.querySelectorAll<HTMLInputElement>('input[name="apps"]:checked')].map((x) => x.value);

/** `#/users`: users and their roles. */
export async function usersPage(ctx: Ctx): Promise<void> {
  mount(ctx.main, heading("Users and roles"), loading());
  const [users, apps] = await Promise.all([
    ctx.api.users(),
    ctx.api.apps().catch((): AppRecord[] => []),
  ]);
  const admin = isAdmin(ctx);
  const reload = () => usersPage(ctx);

  const row = (u: User): HTMLElement => {
    if (!admin || u.username === ctx.session.user.username) {
      return h(
        "tr",
        { "data-user": u.username },
        h("td", { "data-label": "User" }, u.username),
        h("td", { "data-label": "Role" }, u.role),
        h(
          "td",
          { "data-label": "Apps owned" },
          u.apps.join(", ") || h("span", { class: "muted" }, "—"),
        ),
        h("td", { "data-label": "Updated" }, u.updatedAt ? when(u.updatedAt) : ""),
        h(
          "td",
          {},
          u.username === ctx.session.user.username ? h("span", { class: "muted" }, "you") : null,
        ),
      );
    }
    const roleSel = select(ROLE_OPTIONS, u.role, {
      name: "role",
      "aria-label": `Role of ${u.username}`,
    });
    const owned = appChecks(apps, u.apps);
    const err = h("div", { class: "form-error", role: "alert", hidden: true });
    owned.hidden = u.role !== "owner";
    roleSel.addEventListener("change", () => {
      owned.hidden = roleSel.value !== "owner";
    });
    return h(
      "tr",
      { "data-user": u.username },
      h("td", { "data-label": "User" }, u.username),
      h("td", { "data-label": "Role" }, roleSel),
      h("td", { "data-label": "Apps owned" }, owned, err),
      h("td", { "data-label": "Updated" }, u.updatedAt ? when(u.updatedAt) : ""),
      h(
        "td",
        { class: "row-actions" },
        h(
          "button",
          {
            type: "button",
            class: "secondary",
            onclick: async () => {
              const role = roleSel.value as Role;
              try {
                await ctx.api.updateUser(u.username, {
                  role,
                  apps: role === "owner" ? checked(owned) : [],
                });
                ctx.flash(`Saved ${u.username}`);
                await reload();
              } catch (e) {
                err.textContent = e instanceof Error ? e.message : String(e);
                err.hidden = false;
              }
            },
          },
          "Save",
        ),
        confirmButton("Delete", async () => {
          try {
            await ctx.api.deleteUser(u.username);
            ctx.flash(`Deleted ${u.username}`);
            await reload();
          } catch (e) {
            ctx.flash(messageOf(e), "error");
          }
        }),
      ),
    );
  };

  const username = input({ name: "username", placeholder: "ada" });
  const password = input({
    name: "password",
    type: "password",
    autocomplete: "new-password",
    placeholder: "at least 8 characters",
  });
  const role = select(ROLE_OPTIONS, "viewer", { name: "role" });
  const owned = appChecks(apps, []);
  const ownedField = h(
    "div",
    { class: "field", "data-field": "apps" },
    h("label", {}, "Apps owned"),
    owned,
    h("div", { class: "field-error", role: "alert" }),
  );
  ownedField.hidden = true;
  role.addEventListener("change", () => {
    ownedField.hidden = role.value !== "owner";
  });
  const form: HTMLFormElement = h(
    "form",
    {
      class: "card",
      id: "user-form",
      novalidate: true,
      onsubmit: async (e: Event) => {
        e.preventDefault();
        clearIssues(form);
        const r = role.value as Role;
        try {
          await ctx.api.createUser({
            username: username.value.trim(),
            password: password.value,
            role: r,
            apps: r === "owner" ? checked(owned) : [],
          });
          ctx.flash(`Created ${username.value.trim()} (${r})`);
          await reload();
        } catch (err) {
          showIssues(form, err);
        }
      },
    },
    h("h2", {}, "New user"),
    formError(),
    h(
      "div",
      { class: "row" },
      field("Username", "username", username),
      field("Password", "password", password),
      field("Role", "role", role),
    ),
    ownedField,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", id: "create-user" }, "Create user"),
    ),
  );

  mount(
    ctx.main,
    heading("Users and roles"),
    scroller(
      h(
        "table",
        // On a phone each user is stacked (one labelled line per cell): see app.css.
        { class: "list stack", id: "users" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["User", "Role", "Apps owned", "Updated", ""].map((t) => h("th", {}, t)),
          ),
        ),
        h("tbody", {}, users.map(row)),
      ),
    ),
    admin ? form : h("p", { class: "muted" }, "Only admins change users and roles."),
  );
}
