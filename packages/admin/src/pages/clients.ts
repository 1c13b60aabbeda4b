/**
 * Clients: the app processes that decide in-process with `connectPolicies` (sluice's embedded
 * policy client). Each reports every few seconds (app, host, library version, the policy
 * revision it runs); the list is the same on every node of the service. Refreshed every 5 s.
 */
import type { ClientRecord } from "../api.js";
import { h, mount, when } from "../dom.js";
import { type Ctx, heading, listTable, loading, scroller } from "../ui.js";

/** A client not heard from for this long is marked silent (clients report every ≤ 30 s). */
const SILENT_MS = 60_000;
const REFRESH_MS = 5000;

function ago(iso: string, nowMs: number): string {
  const s = Math.max(0, Math.round((nowMs - Date.parse(iso)) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return `${Math.floor(s / 3600)} h ago`;
}

function row(c: ClientRecord, revision: number, nowMs: number): HTMLElement {
  const silent = nowMs - Date.parse(c.lastSeen) > SILENT_MS;
  return h(
    "tr",
    { "data-client": `${c.app}/${c.instance}` },
    h("td", {}, c.app),
    h("td", {}, c.host, h("small", { class: "muted" }, ` ${c.instance}`)),
    h("td", {}, c.version),
    h(
      "td",
      { class: "num" },
      String(c.revision),
      c.revision < revision
        ? h("span", { class: "tag off", title: `the service runs ${revision}` }, "behind")
        : null,
    ),
    h(
      "td",
      { title: when(c.lastSeen) },
      ago(c.lastSeen, nowMs),
      silent ? h("span", { class: "tag off" }, "silent") : null,
    ),
    h("td", {}, when(c.firstSeen)),
  );
}

/** `#/clients`: the embedded policy clients seen in the last day. */
export async function clientsPage(ctx: Ctx): Promise<void> {
  mount(ctx.main, heading("Clients"), loading());
  const body = h("tbody", {});
  const summary = h("p", { class: "muted", id: "clients-summary" });
  const load = async () => {
    const { revision, clients } = await ctx.api.clients();
    const now = Date.now();
    body.replaceChildren(
      ...(clients.length === 0
        ? [
            h(
              "tr",
              {},
              h(
                "td",
                { colspan: 6, class: "muted" },
                "No embedded client has reported in the last day.",
              ),
            ),
          ]
        : clients.map((c) => row(c, revision, now))),
    );
    const live = clients.filter((c) => now - Date.parse(c.lastSeen) <= SILENT_MS).length;
    summary.textContent = `${live} of ${clients.length} reporting; the service runs revision ${revision}.`;
  };
  await load();
  mount(
    ctx.main,
    heading("Clients"),
    h(
      "p",
      { class: "muted" },
      "App processes that enforce the policies in their own process (connectPolicies), by their last report.",
    ),
    summary,
    scroller(
      listTable(
        { class: "list", id: "clients" },
        ["App", "Host", "Client", "Revision", "Last seen", "First seen"],
        body,
      ),
    ),
  );
  const timer = setInterval(() => {
    load().catch(() => undefined);
  }, REFRESH_MS);
  ctx.onLeave(() => clearInterval(timer));
}
