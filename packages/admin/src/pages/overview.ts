/**
 * The overview (`#/`, the landing page): every policy in one table — its current rate, its last
 * five minutes, the share denied and a sparkline of the last 15 minutes — in order of attention
 * (denials first), from every node's counts. Idle policies take one row like the others, never
 * a chart. Until the first decision it says what to do next: create an app, then a policy,
 * then call it, with the commands filled in.
 */
import type { AppRecord, OverviewPolicy, TrafficOverview } from "../api.js";
import { sparkline } from "../chart.js";
import { clock, h, mount } from "../dom.js";
import { curlCreateApp, curlCreatePolicy, curlLimit, curlLogin } from "../snippets.js";
import { REFRESH_MS, every } from "../traffic-view.js";
import {
  type Ctx,
  copyBlock,
  count,
  heading,
  isAdmin,
  loading,
  messageOf,
  noun,
  percent,
  scroller,
} from "../ui.js";

const enc = encodeURIComponent;
const total = (c: OverviewPolicy["recent"]) => c.allowed + c.denied + c.shadow;

function tags(p: OverviewPolicy): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (!p.enabled) out.push(h("span", { class: "tag off" }, "disabled"));
  if (p.shadow) out.push(h("span", { class: "tag shadow" }, "shadow"));
  if (p.hasDraft) out.push(h("span", { class: "tag draft" }, "draft"));
  return out;
}

/** One step of the first run: done or to do, with what to do. */
function step(
  n: number,
  title: string,
  done: boolean,
  ...body: (Node | string | null)[]
): HTMLElement {
  return h(
    "li",
    { class: done ? "step done" : "step", "data-step": n },
    h("h3", {}, h("span", { class: "badge" }, done ? "✓" : String(n)), ` ${title}`),
    done ? null : h("div", { class: "step-body" }, body),
  );
}

/** The first-run guide: app → policy → call, each step with the exact command. */
function gettingStarted(ctx: Ctx, apps: readonly AppRecord[], o: TrafficOverview): HTMLElement {
  const admin = isAdmin(ctx);
  const app = apps[0]?.name ?? "web";
  const policy = o.policies.find((p) => p.apps.length > 0) ?? o.policies[0];
  const policyName = policy?.name ?? "api";
  const hasApp = apps.length > 0;
  const hasPolicy = o.policies.length > 0;
  const who = ctx.session.user.username;
  return h(
    "section",
    { class: "card start", id: "getting-started" },
    h("h2", {}, "Get started"),
    h(
      "p",
      { class: "muted" },
      "Three steps to a first decision; each can be done here or with the commands shown.",
    ),
    h(
      "ol",
      { class: "steps" },
      step(
        1,
        "Create an app",
        hasApp,
        h("p", {}, "An app is a caller of the decision API; it gets an API key, shown once."),
        admin
          ? h("a", { class: "button", href: "#/apps", id: "start-app" }, "Create an app")
          : h("p", { class: "muted" }, "Only admins create apps: ask one."),
        h("p", { class: "muted small" }, "Or with curl:"),
        copyBlock(`${curlLogin(who)}\n${curlCreateApp(app)}`, { id: "curl-app" }),
      ),
      step(
        2,
        "Create a policy granted to it",
        hasPolicy,
        h("p", {}, `A policy is the limit: its algorithm and rules, and the apps that may use it.`),
        ctx.session.user.role !== "viewer"
          ? h(
              "a",
              { class: "button", href: "#/policies/new", id: "start-policy" },
              "Create a policy",
            )
          : h("p", { class: "muted" }, "Viewers cannot create policies."),
        h("p", { class: "muted small" }, "Or with curl:"),
        copyBlock(curlCreatePolicy(policyName, app), { id: "curl-policy" }),
      ),
      step(
        3,
        "Call it",
        false,
        h(
          "p",
          {},
          `Ask for a decision with the app's API key (shown when the app was created, or after `,
          h("a", { href: "#/apps" }, "Rotate key"),
          "). The answer is 200 for allowed and denied alike: read ",
          h("code", {}, "allowed"),
          ".",
        ),
        copyBlock(`SLUICE_API_KEY=<the API key of ${app}>\n${curlLimit(policyName)}`, {
          id: "curl-limit",
        }),
      ),
    ),
  );
}

function overviewTable(o: TrafficOverview): HTMLElement {
  return scroller(
    h(
      "table",
      { class: "list overview", id: "overview" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          [
            ["Policy", ""],
            ["Now", "rate"],
            ["Last 5 min", ""],
            ["Denied", "share"],
            ["Trend (5 min)", ""],
          ].map(([t, c]) => h("th", { class: c || undefined }, t)),
        ),
      ),
      h(
        "tbody",
        {},
        o.policies.map((p) => {
          const t = total(p.recent);
          const idle = t === 0 && p.rate === 0;
          // Shadow would-denials let the request pass: never counted as denied.
          const denied = p.recent.denied;
          const shadow = p.recent.shadow;
          return h(
            "tr",
            {
              "data-policy": p.name,
              "data-rate": p.rate,
              class: idle ? "idle" : denied + shadow > 0 ? "attention" : undefined,
            },
            h("td", {}, h("a", { href: `#/policies/${enc(p.name)}` }, p.name), tags(p)),
            h(
              "td",
              { class: "num rate" },
              idle ? h("span", { class: "muted" }, "idle") : `${p.rate}/s`,
            ),
            h(
              "td",
              {
                class: "num",
                "data-allowed": p.recent.allowed,
                "data-denied": p.recent.denied,
                "data-shadow": p.recent.shadow,
              },
              idle
                ? h("span", { class: "muted" }, "—")
                : [
                    h("span", { class: "allowed" }, count(p.recent.allowed)),
                    " · ",
                    h("span", { class: "denied" }, count(p.recent.denied)),
                    p.recent.shadow > 0
                      ? [
                          " · ",
                          h(
                            "span",
                            { class: "shadow", title: "shadow would-deny" },
                            count(p.recent.shadow),
                          ),
                        ]
                      : null,
                  ],
            ),
            h(
              "td",
              { class: "num share" },
              idle
                ? h("span", { class: "muted" }, "—")
                : [
                    percent(denied, t),
                    shadow > 0
                      ? [
                          " · ",
                          h(
                            "span",
                            { class: "shadow would-deny", title: "shadow would-deny share" },
                            `${percent(shadow, t)} would deny`,
                          ),
                        ]
                      : null,
                  ],
            ),
            h(
              "td",
              { class: "spark-cell" },
              idle
                ? h("span", { class: "muted small" }, "no decisions")
                : sparkline(p.spark, `${p.name}: decisions per 10 s over the last 5 minutes`),
            ),
          );
        }),
      ),
    ),
  );
}

/** `#/`: the overview. */
export async function overviewPage(ctx: Ctx): Promise<void> {
  mount(ctx.main, heading("Overview"), loading());
  const status = h("span", { class: "muted small", id: "overview-status" });
  const body = h("div", { id: "overview-body" });
  mount(
    ctx.main,
    heading("Overview", status),
    h(
      "p",
      { class: "muted" },
      "Every policy, trouble first: decisions per second now (last 10 s) and over the last five minutes, from every node. ",
      h(
        "span",
        { class: "legend-inline" },
        h("span", { class: "dot allowed" }),
        "allowed ",
        h("span", { class: "dot shadow" }),
        "shadow would-deny ",
        h("span", { class: "dot denied" }),
        "denied",
      ),
    ),
    body,
  );
  let apps: AppRecord[] | undefined;
  every(
    ctx,
    REFRESH_MS,
    async () => {
      try {
        const [o, a] = await Promise.all([
          ctx.api.trafficOverview(),
          apps ? Promise.resolve(apps) : ctx.api.apps(),
        ]);
        apps = a;
        const anyTraffic = o.policies.some(
          (p) => total(p.recent) > 0 || p.spark.some((s) => s.allowed + s.denied + s.shadow > 0),
        );
        const denials = o.policies.reduce((t, p) => t + p.recent.denied, 0);
        const wouldDeny = o.policies.reduce((t, p) => t + p.recent.shadow, 0);
        const rate = o.policies.reduce((t, p) => t + p.rate, 0);
        mount(
          body,
          anyTraffic ? null : gettingStarted(ctx, a, o),
          o.policies.length === 0
            ? null
            : [
                h(
                  "div",
                  { class: "summary", id: "overview-summary" },
                  h(
                    "div",
                    {},
                    h("strong", {}, count(o.policies.length)),
                    ` ${noun(o.policies.length, "policy", "policies")}`,
                  ),
                  h(
                    "div",
                    {},
                    h("strong", {}, `${Math.round(rate * 10) / 10}/s`),
                    " decisions now",
                  ),
                  h(
                    "div",
                    { class: denials > 0 ? "bad" : undefined },
                    h("strong", {}, count(denials)),
                    " denied in 5 min",
                  ),
                  wouldDeny > 0
                    ? h(
                        "div",
                        { class: "shadow" },
                        h("strong", {}, count(wouldDeny)),
                        " would deny (shadow) in 5 min",
                      )
                    : null,
                ),
                overviewTable(o),
              ],
        );
        status.textContent = `Updated ${clock()} · every ${REFRESH_MS / 1000} s`;
        status.className = "muted small";
      } catch (err) {
        status.textContent = `Cannot read the traffic: ${messageOf(err)}`;
        status.className = "error-text small";
      }
    },
    body,
  );
}
