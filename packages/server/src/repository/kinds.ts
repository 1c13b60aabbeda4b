/**
 * The kinds of versioned document the service keeps (./documents.ts): each a small strategy —
 * what it is called, how its stored form is checked and compared, and what it refers to. A new
 * kind of configuration is one more of these (and its routes' strategy, ../routes/kinds/).
 */
import { z } from "zod";
import {
  type EnvoyDomainDocument,
  sameEnvoyDocument,
  validateEnvoyDocument,
} from "../envoy/config.js";
import { invalid } from "../errors.js";
import { type PolicyDocument, sameDocument } from "../model.js";
import type { DocumentKind } from "./documents.js";
import { checkAppsExist, missingApps } from "./grants.js";
import { dropOverrides } from "./overrides.js";
import { policyDocumentShape } from "./rows.js";

/**
 * Policies: the documents apps decide with. A policy refers to the apps granted it, which must
 * exist when it is written.
 */
export const policyKind: DocumentKind<PolicyDocument> = {
  kind: "policy",
  actions: "policy",
  noun: "policy",
  notFound: "policy_not_found",
  shape: policyDocumentShape,
  nameOf: (doc) => doc.name,
  same: sameDocument,
  async checkReferences(trx, doc, at) {
    if (at.op === "write") return checkAppsExist(trx, doc.apps, "apps");
    const missing = await missingApps(trx, doc.apps);
    if (missing.length === 0) return;
    const message = `unknown app(s): ${missing.join(", ")}`;
    if (at.op === "restore")
      throw invalid(`Cannot restore version ${at.version}`, [{ path: "apps", message }]);
    throw invalid("Import refused, nothing was changed", [
      { path: `policies.${at.index}.apps`, message },
    ]);
  },
  // A deleted policy's overrides go with it (a policy made again under its name has none).
  onDelete: dropOverrides,
};

/** A stored domain document: it must still pass the checks it passed when written. */
const envoyDocumentShape = z.unknown().transform((value, ctx): EnvoyDomainDocument => {
  const r = validateEnvoyDocument(value);
  if ("issues" in r) {
    for (const i of r.issues)
      ctx.addIssue({ code: "custom", message: i.path ? `${i.path}: ${i.message}` : i.message });
    return z.NEVER;
  }
  return r.doc;
});

/**
 * Envoy domains: one document per domain, the reference rate limit service's file (checked by
 * ../envoy/config.ts). A domain refers to nothing.
 */
export const envoyDomainKind: DocumentKind<EnvoyDomainDocument> = {
  kind: "envoy_domain",
  actions: "envoy",
  noun: "domain",
  notFound: "not_found",
  shape: envoyDocumentShape,
  nameOf: (doc) => doc.domain,
  same: sameEnvoyDocument,
};
