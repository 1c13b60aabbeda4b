/**
 * Keys: who is being limited. The heaviest keys of a policy (busiest, most denied — from every
 * node's heavy-hitter sketch, merged by the service), and one key looked up: what it has left
 * (a peek, nothing charged), why it is limited (the explanation: each rule, the one that denies
 * and when it frees, a penalty block, what answers, the draft's answer beside the live one) and,
 * for those who may change the policy, **Unblock** (a reset of its counters, recorded in the
 * audit log). `#/keys?policy=<name>&key=<key>` is the page; the
 * policy page embeds the same parts.
 */
import type { Decision, Explanation, KeyState, KeyWindow, PolicyRecord, TopKeys } from "../api.js";
import { type Child, h, mount } from "../dom.js";
import { REFRESH_MS, every } from "../traffic-view.js";
import {
  type Ctx,
  canEditPolicy,
  confirmButton,
  count,
  field,
  formError,
  headedCard,
  heading,
  input,
  listTable,
  loading,
  messageOf,
  scroller,
  select,
  showIssues,
  submitActions,
  submitForm,
  windowSelect,
} from "../ui.js";

const KEY_WINDOWS: readonly (readonly [KeyWindow, string])[] = [
  ["1m", "last minute"],
  ["5m", "last 5 minutes"],
  ["15m", "last 15 minutes"],
  ["1h", "last hour"],
];

function ms(v: number): string {
  if (v === 0) return "0 s";
  if (v < 1000) return `${v} ms`;
  if (v < 120_000) return `${+(v / 1000).toFixed(1)} s`;
  if (v < 7_200_000) return `${+(v / 60_000).toFixed(1)} min`;
  return `${+(v / 3_600_000).toFixed(1)} h`;
}

/**
 * A decision in words: passes or not, what is left of the capacity (a rule's `burst`, which is
 * its limit for algorithms without one), and the wait. A key with every rule's capacity left
 * is `full`: no replenish time (a peek's `resetAfterMs` is as if charged).
 */
function decisionView(d: Decision, what: string): HTMLElement {
  const capacity = d.rules[d.rule]?.burst ?? d.limit;
  const full =
    d.rules.length > 0 ? d.rules.every((r) => r.remaining >= r.burst) : d.remaining >= d.limit;
  return h(
    "div",
    { class: `decision ${d.allowed ? "ok" : "blocked"}`, "data-allowed": String(d.allowed) },
    h(
      "p",
      {},
      h("strong", {}, d.allowed ? "Passes" : "Blocked"),
      ` (${what}) · `,
      h(
        "span",
        { class: "remaining", "data-remaining": d.remaining },
        `${count(d.remaining)} of ${count(capacity)} left`,
      ),
      d.allowed ? "" : ` · retry in ${ms(d.retryAfterMs)}`,
      full
        ? h("span", { class: "full" }, " · full")
        : ` · fully replenished in ${ms(d.resetAfterMs)}`,
      d.reason ? h("span", { class: "tag" }, d.reason) : null,
    ),
    d.rules.length > 1
      ? h(
          "ul",
          { class: "plain small" },
          d.rules.map((r, i) =>
            h(
              "li",
              {},
              `rule ${i + 1} (${r.limit} per ${ms(r.periodMs)}): ${r.allowed ? "passes" : "blocks"}, ${r.remaining} of ${r.burst} left`,
            ),
          ),
        )
      : null,
  );
}

/** A rule in words: `3 per 1 min`. */
function ruleWords(r: { limit: number; periodMs: number }): string {
  return `${count(r.limit)} per ${ms(r.periodMs)}`;
}

/** What answers the next decision, in words. */
const ANSWERED_BY: Record<Explanation["answeredBy"], string> = {
  store: "the counter store",
  "deny-cache": "the deny cache of the node you are connected to (Redis is not asked)",
  allotment: "an allotment the node you are connected to holds (Redis is not asked)",
};

type Explained = Omit<Explanation, "enabled" | "draft">;

/** The verdict of an explanation: which rule denies (or will deny first), and when it frees. */
function verdict(ex: Explained): Child[] {
  const rule = ex.rules[ex.denyingRule];
  const which = rule ? `rule ${ex.denyingRule + 1} (${ruleWords(rule)})` : "";
  const frees = ex.freesInMs > 0 ? ` · frees in ${ms(ex.freesInMs)}` : "";
  if (ex.reason === "disabled")
    return [h("strong", {}, "Passes"), " · the policy is disabled: nothing is counted"];
  if (!ex.allowedNow) {
    if (ex.denyingNow) return [h("strong", {}, "Denied"), ` by ${which}${frees}`];
    return [h("strong", {}, "Denied"), ` by the penalty block${frees}`];
  }
  if (ex.denyingNow) return [h("strong", {}, "Passes"), ` (shadow) · ${which} would deny${frees}`];
  return [
    h("strong", {}, "Passes"),
    ` · ${which} will deny first (${count(rule?.remaining ?? 0)} left)`,
  ];
}

/** An explanation: the verdict, a penalty block and its end, what answers, every rule. */
function explanationView(ex: Explained, what: string, id: string): HTMLElement {
  const blockEnd = new Date(Date.now() + ex.blockedForMs).toLocaleTimeString("en-GB");
  return h(
    "div",
    {
      class: `decision explanation ${ex.allowedNow ? "ok" : "blocked"}`,
      id,
      "data-allowed-now": String(ex.allowedNow),
      "data-denying-rule": ex.denyingRule,
      "data-denying-now": String(ex.denyingNow),
      "data-frees-in-ms": ex.freesInMs,
      "data-answered-by": ex.answeredBy,
    },
    h("h3", {}, what),
    h("p", { class: "verdict" }, ...verdict(ex)),
    ex.blockedForMs > 0
      ? h(
          "p",
          { class: "block", "data-blocked-for-ms": ex.blockedForMs },
          `Penalty block: ${ms(ex.blockedForMs)} left, until ${blockEnd}`,
        )
      : null,
    h("p", { class: "muted small answered-by" }, `Answered by ${ANSWERED_BY[ex.answeredBy]}.`),
    scroller(
      listTable(
        { class: "list compact rules" },
        ["Rule", "Left", "Retry in", "Replenished in", ""],
        h(
          "tbody",
          {},
          ex.rules.map((r) =>
            h(
              "tr",
              {
                "data-rule": r.index,
                "data-denies": String(r.denies),
                class: r.index === ex.denyingRule ? "current" : "",
              },
              h("td", {}, `${r.index + 1}: ${ruleWords(r)}`),
              h("td", { class: "num" }, `${count(r.remaining)} of ${count(r.burst)}`),
              h("td", { class: "num" }, r.denies ? ms(r.retryAfterMs) : "—"),
              h("td", { class: "num" }, ms(r.resetAfterMs)),
              h(
                "td",
                {},
                r.denies
                  ? h("span", { class: "tag off" }, "denies")
                  : r.index === ex.denyingRule
                    ? h("span", { class: "tag" }, "next to deny")
                    : null,
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

/** "Why": the enforced version's explanation, and the draft's beside it. */
function whyView(ex: Explanation): HTMLElement {
  const draft = ex.draft;
  return h(
    "section",
    { id: "explanation" },
    h("h3", {}, "Why"),
    h(
      "div",
      { class: draft ? "cols" : "" },
      explanationView(ex, "Enforced version", "explain-live"),
      draft
        ? draft.explanation
          ? explanationView(draft.explanation, `Draft #${draft.id}`, "explain-draft")
          : h(
              "div",
              {
                class: "decision explanation blocked",
                id: "explain-draft",
                "data-allowed-now": "false",
              },
              h("h3", {}, `Draft #${draft.id}`),
              h("p", { class: "verdict" }, h("strong", {}, "Denied"), ": the cost can never fit"),
            )
        : null,
    ),
  );
}

/**
 * Looks up one key of `policy`: its state, and Unblock when the user may change the policy.
 * `preset` fills the key in (and looks it up at once); `onLookUp` hears of every lookup made.
 */
export function keyLookup(
  ctx: Ctx,
  policy: PolicyRecord,
  preset?: string,
  onLookUp?: (key: string) => void,
): HTMLElement & { lookUp(key: string): void } {
  const keyInput = input({
    name: "key",
    id: "lookup-key",
    placeholder: "user:42, 203.0.113.7, an API key…",
    value: preset ?? "",
  });
  const result = h("div", { id: "lookup-result", "aria-live": "polite" });
  const mayReset = canEditPolicy(ctx, policy);
  /** The explanation of `key`, or what kept it from coming. */
  const explained = (key: string): Promise<Explanation | string> =>
    ctx.api.explain(policy.name, key).catch((err: unknown) => messageOf(err));
  const show = (st: KeyState, ex: Explanation | string, done?: string) => {
    mount(
      result,
      done ? h("div", { class: "notice ok", role: "status" }, done) : null,
      decisionView(st.decision, "under the enforced version"),
      st.draft ? decisionView(st.draft, "under the draft") : null,
      typeof ex === "string"
        ? h("p", { class: "error-text" }, `Cannot explain: ${ex}`)
        : whyView(ex),
      h(
        "p",
        { class: "muted small" },
        st.counters === "memory"
          ? "Counters are in memory: this is what the node you are connected to counts; each node counts its own."
          : "Counters are in Redis, shared by every node.",
      ),
      mayReset
        ? h(
            "div",
            { class: "actions" },
            confirmButton(
              "Unblock",
              async () => {
                try {
                  const after = await ctx.api.resetKey(policy.name, st.key);
                  show(
                    after,
                    await explained(st.key),
                    `Unblocked "${st.key}": its counters under ${policy.name} start afresh (recorded in the audit log).`,
                  );
                } catch (err) {
                  showIssues(form, err);
                }
              },
              { id: "unblock-key", title: "Reset this key's counters under this policy" },
            ),
            h("span", { class: "muted small" }, "Resets its counters: the key starts afresh."),
          )
        : null,
    );
  };
  const lookUp = async (key: string) => {
    keyInput.value = key;
    onLookUp?.(key);
    try {
      const [st, ex] = await Promise.all([ctx.api.keyState(policy.name, key), explained(key)]);
      show(st, ex);
    } catch (err) {
      mount(result);
      showIssues(form, err);
    }
  };
  const form = submitForm(
    { class: "inline-form", id: "lookup-form" },
    () => lookUp(keyInput.value),
    formError(),
    h(
      "div",
      { class: "row" },
      field("Key", "key", keyInput, "The identifier your app sends as key."),
    ),
    submitActions("lookup", "Look up"),
  );
  const card = h(
    "section",
    { class: "card", id: "key-lookup" },
    h("h2", {}, "Look up a key"),
    h(
      "p",
      { class: "muted" },
      "What one identifier has left under this policy, right now, and why it is limited (nothing is charged).",
    ),
    form,
    result,
  ) as HTMLElement & { lookUp(key: string): void };
  card.lookUp = (key) => void lookUp(key);
  if (preset) void lookUp(preset);
  return card;
}

/**
 * A key's count: one number when exact, else the range the sketches vouch for — at least
 * `count − overcount` (the decisions counted while a sketch watched it), at most `count`.
 */
function countCell(r: TopKeys["busiest"][number]): HTMLElement {
  const lower = r.count - r.overcount;
  return r.overcount > 0
    ? h(
        "td",
        { class: "num range", title: `at least ${count(lower)}, at most ${count(r.count)}` },
        `${count(lower)}–${count(r.count)}`,
      )
    : h("td", { class: "num", title: "exact" }, count(r.count));
}

/** What the figures shown mean: said for what is on screen (all exact, or some ranges). */
function boundsNote(rows: TopKeys["busiest"]): HTMLElement | null {
  if (rows.length === 0) return null;
  const ranges = rows.some((r) => r.overcount > 0);
  return h(
    "p",
    { class: "muted small", id: "top-keys-bounds", "data-ranges": String(ranges) },
    ranges
      ? "A range, such as 14–87, is what the sketches can vouch for: the key made at least the first number and at most the second. Ranges appear when a node saw more distinct keys of the policy in a minute than its sketch holds; keys are ranked by the second number. A single number is exact."
      : "Every count shown is exact.",
  );
}

/** The heaviest keys of a policy, refreshed while the page is open; `onPick` looks one up. */
export function topKeysCard(
  ctx: Ctx,
  policy: string,
  onPick: (key: string) => void,
  /** More controls for the card's head (an Envoy domain's choice of limit). */
  extra?: Child,
): HTMLElement {
  let window: KeyWindow = "5m";
  const body = h("div", { class: "top-keys" }, loading());
  const list = (
    title: string,
    id: string,
    rows: TopKeys["busiest"],
    empty: string,
    countHead = "Decisions",
  ) =>
    h(
      "div",
      { class: "top-list", id },
      h("h3", {}, title),
      rows.length === 0
        ? h("p", { class: "muted" }, empty)
        : scroller(
            listTable(
              { class: "list compact" },
              ["Key", countHead, ""],
              h(
                "tbody",
                {},
                rows.map((r) =>
                  h(
                    "tr",
                    {
                      "data-key": r.key,
                      "data-count": r.count,
                      "data-lower": r.count - r.overcount,
                    },
                    h("td", { class: "key" }, h("code", {}, r.key)),
                    countCell(r),
                    h(
                      "td",
                      {},
                      h(
                        "button",
                        { type: "button", class: "link pick", onclick: () => onPick(r.key) },
                        "Look up",
                      ),
                    ),
                  ),
                ),
              ),
            ),
          ),
    );
  const load = async () => {
    try {
      const t = await ctx.api.topKeys(policy, window);
      mount(
        body,
        h(
          "div",
          { class: "cols" },
          list("Most denied", "top-denied", t.denied, "No denials.", "Denials"),
          // Shadow would-denials passed: listed apart, never among the denied.
          t.shadow.length > 0
            ? list(
                "Most would-deny (shadow)",
                "top-shadow",
                t.shadow,
                "No would-denials.",
                "Would-denies",
              )
            : null,
          list("Busiest", "top-busiest", t.busiest, "No decisions."),
        ),
        boundsNote([...t.busiest, ...t.denied, ...t.shadow]),
      );
    } catch (err) {
      mount(body, h("p", { class: "error-text" }, `Cannot read the top keys: ${messageOf(err)}`));
    }
  };
  every(ctx, REFRESH_MS, load, body);
  return headedCard(
    "top-keys",
    "Top keys",
    [
      extra,
      windowSelect("keys-window", KEY_WINDOWS, window, (w) => {
        window = w;
        void load();
      }),
    ],
    h(
      "p",
      { class: "muted small" },
      "From every node: each counts a policy's keys per minute in a sketch of bounded size (Space-Saving), merged here; whole minutes and the current one.",
    ),
    body,
  );
}

/** `#/keys`: pick a policy, see its top keys, look one up. */
export async function keysPage(ctx: Ctx): Promise<void> {
  mount(ctx.main, heading("Keys"), loading());
  const policies = await ctx.api.policies();
  if (policies.length === 0) {
    mount(
      ctx.main,
      heading("Keys"),
      h(
        "p",
        { class: "muted", id: "keys-empty" },
        "No policies yet: keys appear here once a policy decides.",
      ),
      h("a", { class: "button", href: "#/" }, "Get started"),
    );
    return;
  }
  const wanted = ctx.query.get("policy");
  const policy = policies.find((p) => p.name === wanted) ?? policies[0]!;
  const picker = select(
    policies.map((p) => [p.name, p.name] as const),
    policy.name,
    { id: "keys-policy", "aria-label": "Policy" },
  );
  picker.addEventListener("change", () =>
    ctx.navigate(`/keys?policy=${encodeURIComponent(picker.value)}`),
  );
  // Each lookup goes into the address (`#/keys?policy=…&key=…`): the view reloads and can be
  // shared. Replaced, not navigated: the page stays as it is.
  const lookup = keyLookup(ctx, policy, ctx.query.get("key") ?? undefined, (key) => {
    const q = new URLSearchParams({ policy: policy.name, key });
    history.replaceState(null, "", `#/keys?${q}`);
  });
  mount(
    ctx.main,
    heading("Keys", h("label", { for: "keys-policy" }, "Policy "), picker),
    topKeysCard(ctx, policy.name, (k) => lookup.lookUp(k)),
    lookup,
  );
}
