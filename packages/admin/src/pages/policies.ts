/**
 * Policies: the list; one policy — its traffic, top keys, a key lookup, copy-ready snippets and
 * the enforced document, around the draft and versions every versioned document has
 * (../document-view.ts); and the form that creates or edits one (or saves the edit as a draft
 * evaluated in shadow).
 */
import { ALGORITHMS, ALLOTMENT_ALGORITHMS } from "sluice/algorithms";
import type { AppRecord, DraftRecord, PolicyDoc, PolicyRecord } from "../api.js";
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
  type RulesEditor,
  appBoxes,
  canDeletePolicy,
  canEditPolicy,
  canWrite,
  checkedApps,
  checkLabel,
  clearIssues,
  copyBlock,
  durationOrRaw,
  emptyCard,
  failed,
  field,
  fieldGroup,
  formError,
  heading,
  input,
  listTable,
  loading,
  numberOrRaw,
  rulesEditor,
  ruleText,
  scroller,
  select,
  showIssues,
  submitActions,
  submitForm,
} from "../ui.js";
import { keyLookup, topKeysCard } from "./keys.js";
import { overridesCard } from "./overrides.js";

const enc = encodeURIComponent;

/** A policy's state as tags: disabled, shadow, draft. */
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
      ? emptyCard(
          "policies-empty",
          "No policies yet",
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
          listTable(
            { class: "list", id: "policies" },
            ["Name", "Algorithm", "Rules", "Apps", "", "Version", "Updated"],
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

/** The enforced document, field by field in words. */
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
    row("Allotments (lease)", allotmentText(doc.lease)),
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

/** A policy's allotment setting (its `lease` field) in words (docs/leases.md). */
function allotmentText(lease: PolicyDoc["lease"]): string {
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
        overridesCard(ctx, p, editable),
      ],
      after: [snippetsCard(p)],
    };
  },
};

/** `#/policies/:name`: one policy, its traffic and keys, its draft and its versions. */
export function policyPage(ctx: Ctx, name: string): Promise<void> {
  return documentPage(ctx, policyKind, name);
}

/** The form's first values for a new policy (an owner's first app granted). */
function newPolicy(ctx: Ctx): PolicyDoc {
  const user = ctx.session.user;
  return {
    name: "",
    algorithm: "gcra",
    rules: [{ limit: 100, period: "1m" }],
    onStoreError: "allow",
    shadow: false,
    enabled: true,
    apps: user.role === "owner" ? [...user.apps].slice(0, 1) : [],
  };
}

/**
 * The allotment setting (the document's `lease` field, and the form's): a checkbox, and its
 * tuning shown while it is ticked.
 */
interface AllotmentSection {
  /** The field (hidden by the form for algorithms allotments do not serve). */
  readonly element: HTMLElement;
  readonly box: HTMLInputElement;
  readonly tuning: HTMLElement;
  /** The `lease` field as written — the tuning given, else `true` — or undefined when off or hidden. */
  read(): unknown;
}

/** Builds the {@link AllotmentSection} filled from `lease`. */
function allotmentSection(lease: PolicyDoc["lease"]): AllotmentSection {
  const tuned = typeof lease === "object" ? lease : {};
  const box = h("input", {
    type: "checkbox",
    name: "lease",
    checked: lease !== undefined && lease !== false,
  });
  const part = (key: "maxShare" | "ttl" | "hotAfter", placeholder: string, inputmode?: string) =>
    input({ name: `lease.${key}`, value: tuned[key] ?? "", inputmode, placeholder });
  const share = part("maxShare", "0.1", "decimal");
  const ttl = part("ttl", "1s");
  const hot = part("hotAfter", "20", "numeric");
  const tuning = h(
    "div",
    { class: "lease-tuning" },
    field("Largest share per node", "lease.maxShare", share, "Of the capacity, in (0, 1]."),
    field("Allotment lifetime", "lease.ttl", ttl, "Unspent units go back then."),
    field("Hot after", "lease.hotAfter", hot, "Decisions of a key a second, on one node."),
  );
  const element = fieldGroup(
    "lease",
    checkLabel(
      box,
      " Allotments (lease): decide hot keys in memory from capacity taken from Redis ahead (never over the limit)",
    ),
    tuning,
  );
  return {
    element,
    box,
    tuning,
    read() {
      if (!box.checked || element.hidden) return undefined;
      const t: Record<string, unknown> = {};
      const maxShare = numberOrRaw(share.value);
      const lifetime = durationOrRaw(ttl.value);
      const hotAfter = numberOrRaw(hot.value);
      if (maxShare !== undefined) t.maxShare = maxShare;
      if (lifetime !== undefined) t.ttl = lifetime;
      if (hotAfter !== undefined) t.hotAfter = hotAfter;
      return Object.keys(t).length > 0 ? t : true;
    },
  };
}

/** The apps the policy may be granted to, ticked where it is; an owner changes only its own. */
function appsField(ctx: Ctx, doc: PolicyDoc, apps: readonly AppRecord[]): HTMLElement {
  const user = ctx.session.user;
  const granted = new Set(doc.apps ?? []);
  const names = [...new Set([...apps.map((a) => a.name), ...granted])].sort();
  const boxes = appBoxes(
    names,
    (a) => granted.has(a),
    (a) => user.role === "owner" && !user.apps.includes(a),
  );
  return fieldGroup(
    "apps",
    h("label", {}, "Apps granted"),
    boxes.length > 0
      ? h("div", { class: "checks" }, boxes)
      : h("p", { class: "muted" }, "No apps yet."),
  );
}

/** The policy form's controls. */
interface PolicyControls {
  readonly name: HTMLInputElement;
  readonly description: HTMLTextAreaElement;
  readonly algorithm: HTMLSelectElement;
  readonly rules: RulesEditor;
  readonly block: HTMLInputElement;
  readonly onStoreError: HTMLSelectElement;
  readonly instances: HTMLInputElement;
  readonly instancesField: HTMLElement;
  readonly lease: AllotmentSection;
  readonly shadow: HTMLInputElement;
  readonly enabled: HTMLInputElement;
  readonly apps: HTMLElement;
}

/**
 * Builds the {@link PolicyControls} filled from `doc`, each shown only where it applies (burst,
 * insurance instances, allotments and their tuning), and kept so as the choices change.
 */
function policyControls(
  ctx: Ctx,
  doc: PolicyDoc,
  existing: boolean,
  apps: readonly AppRecord[],
): PolicyControls {
  const algorithm = select(
    ALGORITHMS.map((a) => [a, a] as const),
    doc.algorithm ?? "gcra",
    { name: "algorithm" },
  );
  const rules = rulesEditor(doc.rules);
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
  const lease = allotmentSection(doc.lease);
  const sync = () => {
    rules.setBurst(algorithm.value === "gcra" || algorithm.value === "token-bucket");
    instancesField.hidden = onStoreError.value !== "insurance";
    // Allotments serve these algorithms only (sliding-window and sliding-log are refused).
    lease.element.hidden = !ALLOTMENT_ALGORITHMS.includes(
      algorithm.value as (typeof ALGORITHMS)[number],
    );
    lease.tuning.hidden = !lease.box.checked;
  };
  algorithm.addEventListener("change", sync);
  onStoreError.addEventListener("change", sync);
  lease.box.addEventListener("change", sync);
  sync();
  return {
    name: input({
      name: "name",
      value: doc.name,
      required: true,
      readonly: existing ? true : undefined,
      placeholder: "api.search",
    }),
    description: h("textarea", { name: "description", rows: 2 }, doc.description ?? ""),
    algorithm,
    rules,
    block: input({
      name: "blockDuration",
      value: doc.blockDuration ?? "",
      placeholder: "off, or e.g. 5m",
    }),
    onStoreError,
    instances,
    instancesField,
    lease,
    shadow: h("input", { type: "checkbox", name: "shadow", checked: doc.shadow === true }),
    enabled: h("input", { type: "checkbox", name: "enabled", checked: doc.enabled !== false }),
    apps: appsField(ctx, doc, apps),
  };
}

/** The policy as the form holds it (numbers where they parse, raw text the service names). */
function readPolicy(c: PolicyControls, doc: PolicyDoc): PolicyDoc {
  const blockValue = durationOrRaw(c.block.value);
  const inst = numberOrRaw(c.instances.value);
  const out: Record<string, unknown> = {
    name: c.name.value.trim(),
    description: c.description.value,
    algorithm: c.algorithm.value,
    rules: c.rules.read(),
    onStoreError: c.onStoreError.value,
    shadow: c.shadow.checked,
    enabled: c.enabled.checked,
    apps: checkedApps(c.apps),
  };
  if (blockValue !== undefined) out.blockDuration = blockValue;
  const lease = c.lease.read();
  if (lease !== undefined) out.lease = lease;
  // Kept as they are (the form does not edit them), while the algorithm they apply to is.
  if (doc.windowStart !== undefined && c.algorithm.value === "fixed-window")
    out.windowStart = doc.windowStart;
  if (doc.refill !== undefined && c.algorithm.value === "token-bucket") out.refill = doc.refill;
  if (doc.resetOnBlock !== undefined) out.resetOnBlock = doc.resetOnBlock;
  if (c.onStoreError.value === "insurance" && inst !== undefined) out.insuranceInstances = inst;
  return out as unknown as PolicyDoc;
}

/**
 * Saves `d`: as a new policy, as the next version of `existing`, or (`asDraft`) as its draft in
 * place of `draft`. Answers what was done, with what the service will not do as written.
 */
async function savePolicy(
  ctx: Ctx,
  d: PolicyDoc,
  existing: PolicyRecord | undefined,
  draft: DraftRecord | undefined,
  asDraft: boolean,
): Promise<string> {
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
  return warnings ? `${message}. ${warnings}` : message;
}

/** A checkbox of the form on its own line, with its text. */
function checkField(path: string, box: HTMLInputElement, text: string): HTMLElement {
  return fieldGroup(path, checkLabel(box, text), null, "field inline");
}

/** The form's fields, in the order it shows them. */
function policyFields(c: PolicyControls, existing: boolean): HTMLElement[] {
  return [
    formError(),
    field("Name", "name", c.name, existing ? undefined : "Letters, digits, '.', '_', '-', ':'."),
    field("Description", "description", c.description),
    field("Algorithm", "algorithm", c.algorithm, "gcra is the default: smooth, one value per key."),
    c.rules.element,
    field(
      "Block after a denial",
      "blockDuration",
      c.block,
      "A penalty box: deny the key for this long after a denial.",
    ),
    field("On store error", "onStoreError", c.onStoreError),
    c.instancesField,
    c.lease.element,
    checkField("shadow", c.shadow, " Shadow: let everything pass, only report denials"),
    checkField("enabled", c.enabled, " Enabled"),
    c.apps,
  ];
}

/** Save (or Create), Save as draft for a policy that exists, and Cancel. */
function policyActions(existing: PolicyRecord | undefined, saveDraft: () => void): HTMLElement {
  return submitActions(
    "save-policy",
    existing ? "Save" : "Create policy",
    existing
      ? h(
          "button",
          { type: "button", class: "secondary", id: "save-draft", onclick: saveDraft },
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
  );
}

/**
 * The policy form for `doc`: saved (or created) on submit, or saved as a draft in place of
 * `draft`; a saved policy's page opens, a refusal is shown next to the fields it names.
 */
function policyForm(
  ctx: Ctx,
  doc: PolicyDoc,
  existing: PolicyRecord | undefined,
  draft: DraftRecord | undefined,
  apps: readonly AppRecord[],
): HTMLFormElement {
  const c = policyControls(ctx, doc, existing !== undefined, apps);
  const submit = async (asDraft: boolean) => {
    clearIssues(form);
    const d = readPolicy(c, doc);
    for (const b of form.querySelectorAll("button")) b.disabled = true;
    try {
      // Saved all the same: what the service will not do as written is said beside it.
      const flash = await savePolicy(ctx, d, existing, draft, asDraft);
      ctx.navigate(`/policies/${enc(d.name)}`, { flash });
    } catch (err) {
      showIssues(form, err);
    } finally {
      for (const b of form.querySelectorAll("button")) b.disabled = false;
    }
  };
  const form = submitForm(
    { class: "card policy-form", id: "policy-form" },
    () => submit(false),
    policyFields(c, existing !== undefined),
    draft
      ? h(
          "p",
          { class: "muted", id: "draft-notice" },
          `Saving as draft replaces the draft saved ${when(draft.createdAt)} by ${draft.createdBy}.`,
        )
      : null,
    policyActions(existing, () => void submit(true)),
  );
  return form;
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
  mount(
    ctx.main,
    heading(existing ? `Edit ${existing.name}` : "New policy"),
    policyForm(ctx, existing ?? newPolicy(ctx), existing, draft, apps),
  );
}
