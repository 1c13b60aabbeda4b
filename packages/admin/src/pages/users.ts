/**
 * Users and roles: viewer (reads), owner (edits the policies granted to the apps it owns),
 * admin (everything). Only admins change users; everyone can see who has which role.
 */
import type { AppRecord, Role, User } from "../api.js";
import { h, mount, when } from "../dom.js";
import {
  type Ctx,
  appBoxes,
  checkedApps,
  deleteButton,
  field,
  fieldGroup,
  heading,
  input,
  isAdmin,
  listTable,
  loading,
  messageOf,
  scroller,
  select,
  titledForm,
} from "../ui.js";

const ROLE_OPTIONS = [
  ["viewer", "viewer — reads everything"],
  ["owner", "owner — edits its apps' policies"],
  ["admin", "admin — everything"],
] as const;

/** A checkbox per app, ticked for those `owned`. */
function appChecks(apps: readonly AppRecord[], owned: readonly string[]): HTMLElement {
  return h(
    "div",
    { class: "checks" },
    apps.length === 0
      ? h("span", { class: "muted" }, "No apps yet.")
      : appBoxes(
          apps.map((a) => a.name),
          (name) => owned.includes(name),
        ),
  );
}

/** Shows `owned` (the apps a user owns) only while `role` says owner: only owners own apps. */
function showForOwners(role: HTMLSelectElement, owned: HTMLElement): void {
  const sync = () => {
    owned.hidden = role.value !== "owner";
  };
  sync();
  role.addEventListener("change", sync);
}

/** A user's row to read (the user's own, and every row for those who are not admins). */
function userRow(ctx: Ctx, u: User): HTMLElement {
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

/**
 * A user's row for admins: the role and the apps owned to change, Save (a refusal is said in the
 * row) and Delete; either reloads the page when done.
 */
function editableUserRow(
  ctx: Ctx,
  u: User,
  apps: readonly AppRecord[],
  reload: () => Promise<void>,
): HTMLElement {
  const roleSel = select(ROLE_OPTIONS, u.role, {
    name: "role",
    "aria-label": `Role of ${u.username}`,
  });
  const owned = appChecks(apps, u.apps);
  const err = h("div", { class: "form-error", role: "alert", hidden: true });
  showForOwners(roleSel, owned);
  const save = async () => {
    const role = roleSel.value as Role;
    try {
      await ctx.api.updateUser(u.username, {
        role,
        apps: role === "owner" ? checkedApps(owned) : [],
      });
      ctx.flash(`Saved ${u.username}`);
      await reload();
    } catch (e) {
      err.textContent = messageOf(e);
      err.hidden = false;
    }
  };
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
      h("button", { type: "button", class: "secondary", onclick: save }, "Save"),
      deleteButton(ctx, () => ctx.api.deleteUser(u.username), `Deleted ${u.username}`, reload),
    ),
  );
}

/** The New user form (admins): created users are listed when the page reloads. */
function newUserForm(
  ctx: Ctx,
  apps: readonly AppRecord[],
  reload: () => Promise<void>,
): HTMLFormElement {
  const username = input({ name: "username", placeholder: "ada" });
  const password = input({
    name: "password",
    type: "password",
    autocomplete: "new-password",
    placeholder: "at least 8 characters",
  });
  const role = select(ROLE_OPTIONS, "viewer", { name: "role" });
  const owned = appChecks(apps, []);
  const ownedField = fieldGroup("apps", h("label", {}, "Apps owned"), owned);
  showForOwners(role, ownedField);
  return titledForm(
    { class: "card", id: "user-form", title: "New user", submit: ["create-user", "Create user"] },
    async () => {
      const r = role.value as Role;
      await ctx.api.createUser({
        username: username.value.trim(),
        password: password.value,
        role: r,
        apps: r === "owner" ? checkedApps(owned) : [],
      });
      ctx.flash(`Created ${username.value.trim()} (${r})`);
      await reload();
    },
    h(
      "div",
      { class: "row" },
      field("Username", "username", username),
      field("Password", "password", password),
      field("Role", "role", role),
    ),
    ownedField,
  );
}

/** `#/users`: users and their roles. */
export async function usersPage(ctx: Ctx): Promise<void> {
  mount(ctx.main, heading("Users and roles"), loading());
  const [users, apps] = await Promise.all([
    ctx.api.users(),
    ctx.api.apps().catch((): AppRecord[] => []),
  ]);
  const admin = isAdmin(ctx);
  const reload = () => usersPage(ctx);
  const row = (u: User) =>
    !admin || u.username === ctx.session.user.username
      ? userRow(ctx, u)
      : editableUserRow(ctx, u, apps, reload);
  mount(
    ctx.main,
    heading("Users and roles"),
    scroller(
      listTable(
        // On a phone each user is stacked (one labelled line per cell): see app.css.
        { class: "list stack", id: "users" },
        ["User", "Role", "Apps owned", "Updated", ""],
        h("tbody", {}, users.map(row)),
      ),
    ),
    admin
      ? newUserForm(ctx, apps, reload)
      : h("p", { class: "muted" }, "Only admins change users and roles."),
  );
}
