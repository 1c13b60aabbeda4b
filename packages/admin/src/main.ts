/**
 * The sluice console: a small single-page app on hash routes (`#/`, `#/policies/api`, …),
 * signed in with a bearer token kept in sessionStorage. Served by `sluice serve` at `/admin/`.
 * The pages and the navigation come from one list (pages/index.ts, see nav.ts); this file is
 * the shell around them: sign-in and first-run setup, the top bar, messages, routing.
 */
import { Api, ApiError, type Session, loadSession, saveSession } from "./api.js";
import { h, mount } from "./dom.js";
import { navFor } from "./nav.js";
import { PAGES } from "./pages/index.js";
import {
  type Ctx,
  failed,
  field,
  formError,
  input,
  showIssues,
  submitActions,
  submitForm,
} from "./ui.js";

const root = document.getElementById("app") ?? document.body;
const api = new Api(loadSession()?.token);
let leave: Array<() => void> = [];
/** A message for the next page rendered (and only that one): set by `ctx.navigate(…, { flash })`. */
let pendingFlash: string | undefined;

function route(): { parts: string[]; query: URLSearchParams } {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path = "/", qs = ""] = raw.split("?");
  return {
    parts: path.split("/").filter(Boolean).map(decodeURIComponent),
    query: new URLSearchParams(qs),
  };
}

function navigate(path: string, flash?: string): void {
  pendingFlash = flash;
  if (location.hash === `#${path}`) void render();
  else location.hash = path;
}

function leavePage(): void {
  for (const fn of leave) fn();
  leave = [];
}

function signIn(notice?: string): void {
  const username = input({ name: "username", autocomplete: "username", autofocus: true });
  const password = input({ name: "password", type: "password", autocomplete: "current-password" });
  const form = submitForm(
    { class: "card login", id: "login-form" },
    async () => {
      const button = form.querySelector("button");
      if (button) button.disabled = true;
      try {
        const session = await api.login(username.value.trim(), password.value);
        saveSession(session);
        api.token = session.token;
        const { parts } = route();
        navigate(parts[0] === "setup" ? "/" : location.hash.replace(/^#/, "") || "/");
      } catch (err) {
        showIssues(form, err);
      } finally {
        if (button) button.disabled = false;
      }
    },
    h("h1", {}, "sluice"),
    h("p", { class: "muted" }, "Sign in to the rate-limit console."),
    notice ? h("div", { class: "notice", id: "signed-out" }, notice) : null,
    formError(),
    field("Username", "username", username),
    field("Password", "password", password),
    submitActions("sign-in", "Sign in"),
  );
  mount(root, h("main", { class: "center" }, form));
  username.focus();
}

/**
 * The first run: no admin exists yet. The one-time setup token from `sluice serve`'s start lines
 * (prefilled from the link it prints) creates the first admin, who is signed in at once.
 */
function setup(tokenActive: boolean, presetToken: string): void {
  const token = input({ name: "token", value: presetToken, autocomplete: "off" });
  const username = input({ name: "username", autocomplete: "username", placeholder: "admin" });
  const password = input({ name: "password", type: "password", autocomplete: "new-password" });
  const repeat = input({ name: "repeat", type: "password", autocomplete: "new-password" });
  const form = submitForm(
    { class: "card login", id: "setup-form" },
    async () => {
      // Every problem found here at once (the service's own rules, said the same way); a
      // mismatch alone would otherwise hide the rest, as nothing is sent with one.
      const issues: { path: string; message: string }[] = [];
      if (username.value.trim() === "") issues.push({ path: "username", message: "is required" });
      if (password.value.length < 8)
        issues.push({ path: "password", message: "must be at least 8 characters" });
      if (password.value !== repeat.value)
        issues.push({ path: "repeat", message: "does not match the password" });
      if (issues.length > 0) {
        showIssues(form, new ApiError(400, "invalid_request", "", issues));
        return;
      }
      try {
        const session = await api.setup(token.value.trim(), username.value.trim(), password.value);
        saveSession(session);
        api.token = session.token;
        history.replaceState(null, "", "#/");
        navigate(
          "/",
          `Welcome, ${session.user.username}: you are the first admin. Next: create an app, then a policy.`,
        );
      } catch (err) {
        if (err instanceof ApiError && err.status === 409) {
          signIn(err.message);
          return;
        }
        showIssues(form, err);
      }
    },
    h("h1", {}, "Welcome to sluice"),
    h(
      "p",
      {},
      "No admin exists yet. Create the first one: it can then add apps, policies and users.",
    ),
    tokenActive || presetToken
      ? null
      : h(
          "p",
          { class: "notice", id: "no-token" },
          "The setup link is printed by ",
          h("code", {}, "sluice serve"),
          " when it starts with no admin (it works once, for an hour, on that node). Restart it for a new one, or run ",
          h("code", {}, "npx sluice admin create-user --role admin"),
          ".",
        ),
    formError(),
    field("Setup token", "token", token, "From the link sluice serve printed."),
    field("Username", "username", username),
    field("Password", "password", password, "At least 8 characters."),
    field("Password again", "repeat", repeat),
    submitActions("create-admin", "Create the first admin"),
  );
  mount(root, h("main", { class: "center" }, form));
  (presetToken ? username : token).focus();
}

function shell(session: Session, active: string): HTMLElement {
  const main = h("main", { id: "main" });
  const flash = h("div", { id: "flash", role: "status", "aria-live": "polite" });
  mount(
    root,
    h(
      "header",
      { class: "top" },
      h("a", { class: "brand", href: "#/" }, "sluice"),
      h(
        "nav",
        { "aria-label": "Pages" },
        navFor(PAGES, session.user.role).map((p) =>
          h(
            "a",
            {
              href: `#/${p.path}`,
              class: p.path === active ? "active" : undefined,
              "data-page": p.path || "overview",
            },
            p.label,
          ),
        ),
      ),
      h(
        "div",
        { class: "who" },
        h(
          "a",
          { id: "whoami", href: "#/account", title: "Your account and password" },
          `${session.user.username} (${session.user.role})`,
        ),
        h(
          "button",
          {
            type: "button",
            class: "link",
            id: "sign-out",
            onclick: async () => {
              try {
                await api.logout();
              } catch {
                // Signing out locally is enough when the service is unreachable.
              }
              saveSession(undefined);
              api.token = undefined;
              leavePage();
              signIn();
            },
          },
          "Sign out",
        ),
      ),
    ),
    flash,
    main,
  );
  return main;
}

function showFlash(message: string, kind: "ok" | "error" = "ok"): void {
  const el = document.getElementById("flash");
  if (el) mount(el, h("div", { class: `notice ${kind === "error" ? "error" : "ok"}` }, message));
}

async function render(): Promise<void> {
  leavePage();
  const flash = pendingFlash;
  pendingFlash = undefined;
  const { parts, query } = route();
  const session = loadSession();
  if (!session) {
    api.token = undefined;
    let status = { needed: false, tokenActive: false };
    try {
      status = await api.setupStatus();
    } catch {
      // Sign-in says what is wrong if the service cannot be reached.
    }
    if (status.needed)
      setup(status.tokenActive, parts[0] === "setup" ? (query.get("token") ?? "") : "");
    else signIn(parts[0] === "setup" ? "An admin already exists: sign in." : undefined);
    return;
  }
  api.token = session.token;
  if (parts[0] === "setup") {
    navigate("/");
    return;
  }
  const page = PAGES.find((p) => p.path === (parts[0] ?? ""));
  if (!page) {
    navigate("/");
    return;
  }
  const main = shell(session, page.path);
  if (flash) showFlash(flash);
  const ctx: Ctx = {
    api,
    session,
    main,
    query,
    navigate(p, options) {
      navigate(p, options?.flash);
    },
    flash(message, kind = "ok") {
      showFlash(message, kind);
    },
    onLeave(fn) {
      leave.push(fn);
    },
  };
  try {
    await page.render(ctx, parts.slice(1));
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return;
    mount(main, failed(err));
  }
}

api.onUnauthorized = () => {
  saveSession(undefined);
  leavePage();
  signIn("Your session has ended; sign in again.");
};

window.addEventListener("hashchange", () => void render());
void render();
