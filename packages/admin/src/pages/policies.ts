/**
 * Policies: the list; one policy — its traffic, top keys, a key lookup, copy-ready snippets and
 * the enforced document, around the draft and versions every versioned document has
 * (../document-view.ts); and the form that creates or edits one (or saves the edit as a draft
 * evaluated in shadow).
 */
import { ALGORITHMS, LEASE_ALGORITHMS } from "sluice/algorithms";
import type { AppRecord, PolicyDoc, PolicyRecord } from "../api.js";
import { type ConsoleKind, documentPage, warningsText } from "../document-view.js";
import { h, mount, when } from "../dom.js";
import {
  curlLimit,
  expressConnectSnippet,
  expressSnippet,
  expressViaServiceSnippet,
} from "../snippets.js";
import { trafficCard } from "../traffic-view.js";
import {
  type Ctx,
  canDeletePolicy,
  canEditPolicy,
  canWrite,
  clearIssues,
  copyBlock,
  failed,
  field,
  formError,
  heading,
  input,
  loading,
  numberOrRaw,
  durationOrRaw,
  ruleText,
  rulesEditor,
  scroller,
  select,
  showIssues,
} from "../ui.js";
import { keyLookup, topKeysCard } from "./keys.js";

const enc = encodeURIComponent;

function flags(p: PolicyDoc & { hasDraft?: boolean }): HTMLElement[] {
  const out: HTMLElement[] = [];
  if (p.enabled === false) out.push(h("span", { class: "tag off" }, "disabled"));
  if (p.shadow) out.push(h("span", { class: "tag shadow" }, "shadow"));
  if (p.hasDraft) out.push(h("span", { class: "tag draft" }, "draft"));
  return out;
}

/** `#/policies`: every policy. */
export async function policiesPage(ctx: Ctx): Promise<void> {
  mount(ctx.main, heading("Policies"), loading());
  const list = await ctx.api.policies();
  const canCreate = canWrite(ctx);
  mount(
    ctx.main,
    heading(
      "Policies",
      canCreate
        ? h("a", { class: "button", href: "#/policies/new", id: "new-policy" }, "New policy")
        : null,
    ),
    list.length === 0
      ? h(
          "div",
          { class: "card empty", id: "policies-empty" },
          h("h2", {}, "No policies yet"),
          h(
            "p",
            {},
            "A policy is a limit (an algorithm and its rules) and the apps that may use it. ",
            canCreate
              ? "Create one with New policy; the overview shows the commands to call it."
              : "Admins and app owners create them.",
          ),
          h("a", { class: "button secondary", href: "#/" }, "Get started"),
        )
      : scroller(
          h(
            "table",
            { class: "list", id: "policies" },
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                ["Name", "Algorithm", "Rules", "Apps", "", "Version", "Updated"].map((t) =>
                  h("th", {}, t),
                ),
              ),
            ),
            h(
              "tbody",
              {},
              list.map((p) =>
                h(
                  "tr",
                  { "data-policy": p.name },
                  h("td", {}, h("a", { href: `#/policies/${enc(p.name)}` }, p.name)),
                  h("td", {}, p.algorithm ?? "gcra"),
                  h("td", {}, p.rules.map(ruleText).join(" and ")),
                  h("td", {}, (p.apps ?? []).join(", ") || h("span", { class: "muted" }, "none")),
                  h("td", {}, flags(p)),
                  h("td", { class: "num" }, `v${p.version}`),
                  h("td", {}, `${when(p.updatedAt)} by ${p.updatedBy}`),
                ),
              ),
            ),
          ),
        ),
  );
}

function docView(doc: PolicyDoc): HTMLElement {
  const row = (k: string, v: string | HTMLElement | HTMLElement[]) => [
    h("dt", {}, k),
    h("dd", {}, v),
  ];
  return h(
    "dl",
    { class: "doc" },
    row("Algorithm", doc.algorithm ?? "gcra"),
    row(
      "Rules",
      h(
        "ul",
        { class: "plain" },
        doc.rules.map((r) => h("li", {}, ruleText(r))),
      ),
    ),
    row("Block after denial", doc.blockDuration !== undefined ? String(doc.blockDuration) : "off"),
    row("On store error", doc.onStoreError ?? "allow"),
    doc.onStoreError === "insurance"
      ? row("Insurance instances", String(doc.insuranceInstances ?? "counted by the store"))
      : [],
    row("Shadow", doc.shadow ? "yes — everything passes, denials are only reported" : "no"),
    row("Leases", leaseText(doc.lease)),
    doc.windowStart === "first-request" ? row("Windows", "opened by each key's first request") : [],
    doc.refill === "interval"
      ? row("Refill", "the rule's limit at once, every whole period from each key's first request")
      : [],
    doc.resetOnBlock ? row("Block", "forgets the key's counts") : [],
    row("Enabled", doc.enabled === false ? "no — everything passes, nothing is counted" : "yes"),
    row("Apps granted", (doc.apps ?? []).join(", ") || "none"),
    doc.description ? row("Description", doc.description) : [],
  );
}

/** The parts of a document a diff compares (the bookkeeping of a record left out). */
function docOf(p: PolicyDoc): PolicyDoc {
  return {
    name: p.name,
    description: p.description ?? "",
    algorithm: p.algorithm ?? "gcra",
    rules: p.rules,
    ...(p.blockDuration !== undefined ? { blockDuration: p.blockDuration } : {}),
    onStoreError: p.onStoreError ?? "allow",
    ...(p.insuranceInstances !== undefined ? { insuranceInstances: p.insuranceInstances } : {}),
    shadow: p.shadow ?? false,
    ...(p.lease !== undefined && p.lease !== false ? { lease: p.lease } : {}),
    ...(p.windowStart !== undefined ? { windowStart: p.windowStart } : {}),
    ...(p.refill !== undefined ? { refill: p.refill } : {}),
    ...(p.resetOnBlock !== undefined ? { resetOnBlock: p.resetOnBlock } : {}),
    enabled: p.enabled ?? true,
    apps: p.apps ?? [],
  };
}

/** A policy's lease setting in words (docs/leases.md). */
function leaseText(lease: PolicyDoc["lease"]): string {
  if (lease === undefined || lease === false) return "no — every decision asks the counters";
  if (lease === true) return "yes — hot keys decided in memory (defaults)";
  const parts: string[] = [];
  if (lease.maxShare !== undefined) parts.push(`at most ${lease.maxShare * 100}% per node`);
  if (lease.ttl !== undefined) parts.push(`lasting ${String(lease.ttl)}`);
  if (lease.hotAfter !== undefined) parts.push(`after ${lease.hotAfter} decisions a second`);
  return `yes — ${parts.join(", ") || "defaults"}`;
}

/** Copy-ready ways to use the policy: curl, Express through the service, the library. */
function snippetsCard(p: PolicyRecord): HTMLElement {
  const app = p.apps?.[0];
  return h(
    "section",
    { class: "card", id: "snippets" },
    h("h2", {}, "Use it"),
    app
      ? h(
          "p",
          { class: "muted" },
          `With the API key of an app it is granted to (${(p.apps ?? []).join(", ")}) in SLUICE_API_KEY:`,
        )
      : h(
          "p",
          { class: "notice" },
          "No app is granted this policy yet: edit it and tick an app, or no caller may use it.",
        ),
    h("h3", {}, "curl"),
    copyBlock(curlLimit(p.name), { id: "snippet-curl" }),
    h("h3", {}, "Express, asking the service (console changes apply at once)"),
    copyBlock(expressViaServiceSnippet(p.name), { id: "snippet-express-service" }),
    h("h3", {}, "Express with the library, following the console (connectPolicies)"),
    copyBlock(expressConnectSnippet(p.name), { id: "snippet-express-connect" }),
    h(
      "h3",
      {},
      "Express with the library, a fixed copy (sluice/express, the same Redis: one limit)",
    ),
    copyBlock(expressSnippet(p), { id: "snippet-express" }),
  );
}

/** Policies, as the console's view of versioned documents shows them (../document-view.ts). */
export const policyKind: ConsoleKind<PolicyRecord, PolicyDoc> = {
  collection: "/policies",
  route: "policies",
  noun: "policy",
  saveAgain: "Save it again from the form",
  summaryHead: "Rules",
  nameOf: (p) => p.name,
  docOf: (p) => p,
  comparable: docOf,
  summary: (doc) => `${doc.algorithm ?? "gcra"}: ${doc.rules.map(ruleText).join(" and ")}`,
  flags,
  mayEdit: canEditPolicy,
  mayDelete: canDeletePolicy,
  sections(ctx, p, { editable }) {
    const lookup = keyLookup(ctx, p, ctx.query.get("key") ?? undefined);
    return {
      actions: [
        h(
          "a",
          { class: "button secondary", href: `#/simulator?policy=${enc(p.name)}` },
          "Simulate",
        ),
        editable
          ? h(
              "a",
              { class: "button", id: "edit-policy", href: `#/policies/${enc(p.name)}/edit` },
              "Edit",
            )
          : null,
      ],
      notices: [
        editable
          ? canDeletePolicy(ctx, p)
            ? null
            : h(
                "p",
                { class: "notice", id: "shared-policy" },
                `Shared with apps you do not own (${(p.apps ?? []).filter((a) => !ctx.session.user.apps.includes(a)).join(", ")}): you may edit it, but only an admin may delete it.`,
              )
          : h(
              "p",
              { class: "notice", id: "read-only" },
              // An owner may change policies, but only those granted to one of its apps.
              ctx.session.user.role === "owner"
                ? "Read-only: this policy is not granted to any of your apps."
                : "Read-only: your role cannot change this policy.",
            ),
      ],
      before: [
        trafficCard(ctx, { policy: p.name }, () =>
          h(
            "div",
            {},
            h("p", { class: "muted small" }, "Call it with the API key of a granted app:"),
            copyBlock(curlLimit(p.name)),
          ),
        ),
        topKeysCard(ctx, p.name, (k) => {
          lookup.lookUp(k);
          lookup.scrollIntoView({ block: "nearest" });
        }),
        lookup,
        h("section", { class: "card", id: "enforced" }, h("h2", {}, "Enforced"), docView(p)),
      ],
      after: [snippetsCard(p)],
    };
  },
};

/** `#/policies/:name`: one policy, its traffic and keys, its draft and its versions. */
export function policyPage(ctx: Ctx, name: string): Promise<void> {
  return documentPage(ctx, policyKind, name);
}

/** `#/policies/new` and `#/policies/:name/edit`: the policy form. */
export async function policyFormPage(ctx: Ctx, name: string | undefined): Promise<void> {
  mount(ctx.main, heading(name ? `Edit ${name}` : "New policy"), loading());
  if (!name && !canWrite(ctx)) {
    // Viewers reach this by URL only: say so instead of a form the service would refuse.
    mount(
      ctx.main,
      heading("New policy"),
      failed(new Error("your role (viewer) cannot create policies; admins and app owners can")),
    );
    return;
  }
  const [existing, apps] = await Promise.all([
    name ? ctx.api.policy(name) : Promise.resolve(undefined),
    ctx.api.apps().catch((): AppRecord[] => []),
  ]);
  // A draft saved from this page replaces this one (and only this one); asked only when there
  // is one, so the browser logs no 404.
  const draft = existing?.hasDraft ? await ctx.api.draft(existing.name) : undefined;
  if (existing && !canEditPolicy(ctx, existing)) {
    mount(
      ctx.main,
      heading(`Edit ${existing.name}`),
      failed(new Error("your role cannot change this policy")),
    );
    return;
  }
  const user = ctx.session.user;
  const doc: PolicyDoc = existing ?? {
    name: "",
    algorithm: "gcra",
    rules: [{ limit: 100, period: "1m" }],
    onStoreError: "allow",
    shadow: false,
    enabled: true,
    apps: user.role === "owner" ? [...user.apps].slice(0, 1) : [],
  };

  const nameInput = input({
    name: "name",
    value: doc.name,
    required: true,
    readonly: existing ? true : undefined,
    placeholder: "api.search",
  });
  const description = h("textarea", { name: "description", rows: 2 }, doc.description ?? "");
  const algorithm = select(
    ALGORITHMS.map((a) => [a, a] as const),
    doc.algorithm ?? "gcra",
    { name: "algorithm" },
  );
  const rules = rulesEditor(doc.rules);
  const block = input({
    name: "blockDuration",
    value: doc.blockDuration ?? "",
    placeholder: "off, or e.g. 5m",
  });
  const onStoreError = select(
    [
      ["allow", "allow (fail open)"],
      ["deny", "deny (fail closed)"],
      ["insurance", "insurance (in-memory share of the limit)"],
    ],
    doc.onStoreError ?? "allow",
    { name: "onStoreError" },
  );
  const instances = input({
    name: "insuranceInstances",
    value: doc.insuranceInstances ?? "",
    inputmode: "numeric",
    placeholder: "counted by the store",
  });
  const instancesField = field(
    "Insurance instances",
    "insuranceInstances",
    instances,
    "How many service nodes share the limit.",
  );
  const tuned = typeof doc.lease === "object" ? doc.lease : {};
  const lease = h("input", {
    type: "checkbox",
    name: "lease",
    checked: doc.lease !== undefined && doc.lease !== false,
  });
  const leaseShare = input({
    name: "lease.maxShare",
    value: tuned.maxShare ?? "",
    inputmode: "decimal",
    placeholder: "0.1",
  });
  const leaseTtl = input({ name: "lease.ttl", value: tuned.ttl ?? "", placeholder: "1s" });
  const leaseHot = input({
    name: "lease.hotAfter",
    value: tuned.hotAfter ?? "",
    inputmode: "numeric",
    placeholder: "20",
  });
  const leaseTuning = h(
    "div",
    { class: "lease-tuning" },
    field("Largest share per node", "lease.maxShare", leaseShare, "Of the capacity, in (0, 1]."),
    field("Lease lifetime", "lease.ttl", leaseTtl, "Unspent units go back then."),
    field("Hot after", "lease.hotAfter", leaseHot, "Decisions of a key a second, on one node."),
  );
  const leaseField = h(
    "div",
    { class: "field", "data-field": "lease" },
    h(
      "label",
      { class: "check" },
      lease,
      " Leases: decide hot keys in memory from capacity taken from Redis (never over the limit)",
    ),
    leaseTuning,
    h("div", { class: "field-error", role: "alert" }),
  );
  const shadow = h("input", { type: "checkbox", name: "shadow", checked: doc.shadow === true });
  const enabled = h("input", { type: "checkbox", name: "enabled", checked: doc.enabled !== false });
  const granted = new Set(doc.apps ?? []);
  const appNames = [...new Set([...apps.map((a) => a.name), ...granted])].sort();
  const appBoxes = appNames.map((a) =>
    h(
      "label",
      { class: "check" },
      h("input", {
        type: "checkbox",
        name: "apps",
        value: a,
        checked: granted.has(a),
        disabled: user.role === "owner" && !user.apps.includes(a),
      }),
      ` ${a}`,
    ),
  );
  const sync = () => {
    rules.setBurst(algorithm.value === "gcra" || algorithm.value === "token-bucket");
    instancesField.hidden = onStoreError.value !== "insurance";
    // Leases serve these algorithms only (sliding-window and sliding-log are refused).
    leaseField.hidden = !LEASE_ALGORITHMS.includes(algorithm.value as (typeof ALGORITHMS)[number]);
    leaseTuning.hidden = !lease.checked;
  };
  algorithm.addEventListener("change", sync);
  onStoreError.addEventListener("change", sync);
  lease.addEventListener("change", sync);
  sync();

  const read = (): PolicyDoc => {
    const blockValue = durationOrRaw(block.value);
    const inst = numberOrRaw(instances.value);
    const out: Record<string, unknown> = {
      name: nameInput.value.trim(),
      description: description.value,
      algorithm: algorithm.value,
      rules: rules.read(),
      onStoreError: onStoreError.value,
      shadow: shadow.checked,
      enabled: enabled.checked,
      apps: [...form.querySelectorAll<HTMLInputElement>('input[name="apps"]:checked')].map(
        (x) => x.value,
      ),
    };
    if (blockValue !== undefined) out.blockDuration = blockValue;
    if (lease.checked && !leaseField.hidden) {
      const t: Record<string, unknown> = {};
      const share = numberOrRaw(leaseShare.value);
      const ttl = durationOrRaw(leaseTtl.value);
      const hot = numberOrRaw(leaseHot.value);
      if (share !== undefined) t.maxShare = share;
      if (ttl !== undefined) t.ttl = ttl;
      if (hot !== undefined) t.hotAfter = hot;
      out.lease = Object.keys(t).length > 0 ? t : true;
    }
    // Kept as they are (the form does not edit them), while the algorithm they apply to is.
    if (doc.windowStart !== undefined && algorithm.value === "fixed-window")
      out.windowStart = doc.windowStart;
    if (doc.refill !== undefined && algorithm.value === "token-bucket") out.refill = doc.refill;
    if (doc.resetOnBlock !== undefined) out.resetOnBlock = doc.resetOnBlock;
    if (onStoreError.value === "insurance" && inst !== undefined) out.insuranceInstances = inst;
    return out as unknown as PolicyDoc;
  };

  const submit = async (asDraft: boolean) => {
    clearIssues(form);
    const d = read();
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    try {
      let message: string;
      let warnings: string;
      if (asDraft) {
        const r = await ctx.api.putDraft(d, {
          expectVersion: existing?.version,
          draftId: draft?.id,
        });
        message = `Draft saved for ${d.name}: it is evaluated in shadow until you promote it`;
        warnings = warningsText(r.warnings);
      } else if (existing) {
        const r = await ctx.api.putPolicy(d, existing.version);
        message = `Saved ${r.name}: version ${r.version}`;
        warnings = warningsText(r.warnings);
      } else {
        const r = await ctx.api.createPolicy(d);
        message = `Created ${r.name}: version ${r.version}`;
        warnings = warningsText(r.warnings);
      }
      // Saved all the same: what the service will not do as written is said beside it.
      ctx.navigate(`/policies/${enc(d.name)}`, {
        flash: warnings ? `${message}. ${warnings}` : message,
      });
    } catch (err) {
      showIssues(form, err);
    } finally {
      for (const b of form.querySelectorAll("button")) b.disabled = false;
    }
  };

  const form: HTMLFormElement = h(
    "form",
    {
      class: "card policy-form",
      id: "policy-form",
      novalidate: true,
      onsubmit: (e: Event) => {
        e.preventDefault();
        void submit(false);
      },
    },
    formError(),
    field("Name", "name", nameInput, existing ? undefined : "Letters, digits, '.', '_', '-', ':'."),
    field("Description", "description", description),
    field("Algorithm", "algorithm", algorithm, "gcra is the default: smooth, one value per key."),
    rules.element,
    field(
      "Block after a denial",
      "blockDuration",
      block,
      "A penalty box: deny the key for this long after a denial.",
    ),
    field("On store error", "onStoreError", onStoreError),
    instancesField,
    leaseField,
    h(
      "div",
      { class: "field inline", "data-field": "shadow" },
      h("label", { class: "check" }, shadow, " Shadow: let everything pass, only report denials"),
      h("div", { class: "field-error", role: "alert" }),
    ),
    h(
      "div",
      { class: "field inline", "data-field": "enabled" },
      h("label", { class: "check" }, enabled, " Enabled"),
      h("div", { class: "field-error", role: "alert" }),
    ),
    h(
      "div",
      { class: "field", "data-field": "apps" },
      h("label", {}, "Apps granted"),
      appBoxes.length > 0
        ? h("div", { class: "checks" }, appBoxes)
        : h("p", { class: "muted" }, "No apps yet."),
      h("div", { class: "field-error", role: "alert" }),
    ),
    draft
      ? h(
          "p",
          { class: "muted", id: "draft-notice" },
          `Saving as draft replaces the draft saved ${when(draft.createdAt)} by ${draft.createdBy}.`,
        )
      : null,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "submit", id: "save-policy" }, existing ? "Save" : "Create policy"),
      existing
        ? h(
            "button",
            {
              type: "button",
              class: "secondary",
              id: "save-draft",
              onclick: () => void submit(true),
            },
            "Save as draft (shadow)",
          )
        : null,
      h(
        "a",
        {
          class: "button secondary",
          href: existing ? `#/policies/${enc(existing.name)}` : "#/policies",
        },
        "Cancel",
      ),
    ),
  );
  mount(ctx.main, heading(existing ? `Edit ${existing.name}` : "New policy"), form);
}
