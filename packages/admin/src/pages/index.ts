/**
 * Every page of the console, in navigation order (see ../nav.ts). A new page is one import and
 * one entry here.
 */
import type { PageModule } from "../nav.js";
import { accountPage } from "./account.js";
import { appPage, appsPage } from "./apps.js";
import { auditPage } from "./audit.js";
import { clientsPage } from "./clients.js";
import { envoyDomainPage, envoyPage } from "./envoy.js";
import { keysPage } from "./keys.js";
import { overviewPage } from "./overview.js";
import { policiesPage, policyFormPage, policyPage } from "./policies.js";
import { simulatorPage } from "./simulator.js";
import { usersPage } from "./users.js";

export const PAGES: readonly PageModule[] = [
  { path: "", label: "Overview", render: (ctx) => overviewPage(ctx) },
  {
    path: "policies",
    label: "Policies",
    render(ctx, [name, what]) {
      if (name === undefined) return policiesPage(ctx);
      if (name === "new" && what === undefined) return policyFormPage(ctx, undefined);
      if (what === "edit") return policyFormPage(ctx, name);
      return policyPage(ctx, name);
    },
  },
  {
    path: "apps",
    label: "Apps",
    render: (ctx, [name]) => (name === undefined ? appsPage(ctx) : appPage(ctx, name)),
  },
  { path: "keys", label: "Keys", render: (ctx) => keysPage(ctx) },
  { path: "clients", label: "Clients", render: (ctx) => clientsPage(ctx) },
  { path: "audit", label: "Audit log", render: (ctx) => auditPage(ctx) },
  { path: "users", label: "Users", render: (ctx) => usersPage(ctx) },
  { path: "simulator", label: "Simulator", render: (ctx) => simulatorPage(ctx) },
  {
    path: "envoy",
    label: "Envoy",
    render: (ctx, [domain]) =>
      domain === undefined ? envoyPage(ctx) : envoyDomainPage(ctx, domain),
  },
  { path: "account", render: (ctx) => accountPage(ctx) },
  {
    // The live-traffic page of earlier releases: its charts are on each policy's page now.
    path: "traffic",
    render(ctx) {
      const policy = ctx.query.get("policy");
      ctx.navigate(policy ? `/policies/${encodeURIComponent(policy)}` : "/");
      return Promise.resolve();
    },
  },
];
