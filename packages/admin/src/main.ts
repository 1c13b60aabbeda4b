/**
 * The sluice admin page: a small single-page app on hash routes (`#/policies`, `#/apps`, …),
 * signed in with a bearer token kept in sessionStorage. Served by `sluice serve` at `/admin/`.
 */
import { Api, ApiError, type Session, loadSession, saveSession } from "./api.js";
import { h, mount } from "./dom.js";
import { appsPage } from "./pages/apps.js";
import { auditPage } from "./pages/audit.js";
import { envoyDomainPage, envoyPage } from "./pages/envoy.js";
import { policiesPage, policyFormPage, policyPage } from "./pages/policies.js";
import { simulatorPage } from "./pages/simulator.js";
import { trafficPage } from "./pages/traffic.js";
import { usersPage } from "./pages/users.js";
import { type Ctx, failed, field, formError, input, showIssues } from "./ui.js";

const NAV: readonly (readonly [string, string])[] = [
  ["/policies", "Policies"],
  ["/apps", "Apps"],
  ["/users", "Users"],
  ["/audit", "Audit log"],
  ["/traffic", "Traffic"],
  ["/simulator", "Simulator"],
  ["/envoy", "Envoy"],
];

const root = document.getElementById("app") ?? document.body;
const api = new Api(loadSession()?.token);
let leave: Array<() => void> = [];
/** The last message shown; the next page shows it too when it comes right after (a save, then its page). */
let lastFlash: { message: string; kind: "ok" | "error"; at: number } | undefined;

function route(): { path: string; query: URLSearchParams } {
  const raw = location.hash.replace(/^#/, "") || "/policies";
  const [path = "/policies", qs = ""] = raw.split("?");
  return { path, query: new URLSearchParams(qs) };
}

function navigate(path: string): void {
  if (location.hash === `#${path}`) void render();
  else location.hash = path;
}

function signIn(notice?: string): void {
  const username = input({ name: "username", autocomplete: "username", autofocus: true });
  const password = input({ name: "password", type: "password", autocomplete: "current-password" });
  const form: HTMLFormElement = h(
    "form",
    {
      class: "card login",
      id: "login-form",
      novalidate: true,
      onsubmit: async (e: Event) => {
        e.preventDefault();
        const button = form.querySelector("button");
        if (button) button.disabled = true;
        try {
          const session = await api.login(username.value.trim(), password.value);
          saveSession(session);
          api.token = session.token;
          const { path } = route();
          navigate(path === "/login" ? "/policies" : path);
        } catch (err) {
          showIssues(form, err);
        } finally {
          if (button) button.disabled = false;
        }
      },
    },
    h("h1", {}, "sluice admin"),
    h("p", { class: "muted" }, "Sign in to manage rate-limit policies."),
    notice ? h("div", { class: "notice", id: "signed-out" }, notice) : null,
    formError(),
    field("Username", "username", username),
    field("Password", "password", password),
    h("div", { class: "actions" }, h("button", { type: "submit", id: "sign-in" }, "Sign in")),
  );
  mount(root, h("main", { class: "center" }, form));
  username.focus();
}

function shell(session: Session, active: string): HTMLElement {
  const main = h("main", { id: "main" });
  const flash = h("div", { id: "flash", role: "status", "aria-live": "polite" });
  mount(
    root,
    h(
      "header",
      { class: "top" },
      h("a", { class: "brand", href: "#/policies" }, "sluice"),
      h(
        "nav",
        {},
        NAV.map(([path, label]) =>
          h(
            "a",
            { href: `#${path}`, class: active.startsWith(path) ? "active" : undefined },
            label,
          ),
        ),
      ),
      h(
        "div",
        { class: "who" },
        h("span", { id: "whoami" }, `${session.user.username} (${session.user.role})`),
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
  lastFlash = { message, kind, at: Date.now() };
  const el = document.getElementById("flash");
  if (el) mount(el, h("div", { class: `notice ${kind === "error" ? "error" : "ok"}` }, message));
}

async function render(): Promise<void> {
  for (const fn of leave) fn();
  leave = [];
  const session = loadSession();
  if (!session) {
    api.token = undefined;
    signIn();
    return;
  }
  api.token = session.token;
  const { path, query } = route();
  const main = shell(session, path);
  if (lastFlash && Date.now() - lastFlash.at < 2000) showFlash(lastFlash.message, lastFlash.kind);
  lastFlash = undefined;
  const ctx: Ctx = {
    api,
    session,
    main,
    query,
    navigate(p) {
      navigate(p);
    },
    flash(message, kind = "ok") {
      showFlash(message, kind);
    },
    onLeave(fn) {
      leave.push(fn);
    },
  };
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    switch (parts[0]) {
      case "policies":
        if (parts[1] === undefined) await policiesPage(ctx);
        else if (parts[1] === "new" && parts.length === 2) await policyFormPage(ctx, undefined);
        else if (parts[2] === "edit") await policyFormPage(ctx, parts[1]);
        else await policyPage(ctx, parts[1]);
        break;
      case "apps":
        await appsPage(ctx);
        break;
      case "users":
        await usersPage(ctx);
        break;
      case "audit":
        await auditPage(ctx);
        break;
      case "traffic":
        await trafficPage(ctx);
        break;
      case "simulator":
        await simulatorPage(ctx);
        break;
      case "envoy":
        if (parts[1] === undefined) await envoyPage(ctx);
        else await envoyDomainPage(ctx, parts[1]);
        break;
      default:
        navigate("/policies");
        return;
    }
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return;
    mount(main, failed(err));
  }
}

api.onUnauthorized = () => {
  saveSession(undefined);
  for (const fn of leave) fn();
  leave = [];
  signIn("Your session has ended; sign in again.");
};

window.addEventListener("hashchange", () => void render());
void render();
