/**
 * The Envoy domains a node serves, rebuilt from each snapshot the registry loads: a domain
 * whose version did not change keeps its compiled tree and limiters (so insurance counters and
 * caches survive a reload), a draft is compiled on its own policy names so it never charges the
 * enforced limits, and a row that cannot be read or compiled keeps what the node last had.
 */
import type { Limiter, Policy } from "sluice";
import type { Logger } from "pino";
import type { DocumentRecord, DraftRecord } from "../repository/documents.js";
import type { CorruptRecordError } from "../repository/rows.js";
import { ENVOY_POLICY_PREFIX, compileDomain } from "./compile.js";
import type { EnvoyDomainDocument } from "./config.js";
import type { LiveEnvoyDomain, LiveEnvoyDraft } from "./rls.js";

/** The prefix of a draft's policy names: its counters are its own. */
export const draftPrefix = (draftId: number): string => `sluice.draft.envoy.${draftId}.`;

/** What a limit of a domain is for: the domain's enforced configuration, or its draft. */
export interface LimitUse {
  readonly domain: string;
  readonly draft: boolean;
}

/** Builds the live domains of a snapshot, reusing what did not change. */
export function loadEnvoyDomains(
  prev: ReadonlyMap<string, LiveEnvoyDomain>,
  snap: {
    readonly envoyDomains: readonly DocumentRecord<EnvoyDomainDocument>[];
    readonly envoyDrafts: readonly DraftRecord<EnvoyDomainDocument>[];
    readonly corrupt: readonly CorruptRecordError[];
  },
  options: {
    /** The limiter of one limit's policy (the registry's: the node's store, and traffic). */
    readonly limiter: (policy: Policy, use: LimitUse) => Limiter;
    readonly logger: Logger;
  },
): Map<string, LiveEnvoyDomain> {
  const corruptDomains = new Set<string>();
  const corruptDrafts = new Set<string>();
  for (const err of snap.corrupt) {
    if (err.key.kind !== "envoy_domain") continue;
    if (err.table === "documents") corruptDomains.add(String(err.key.name));
    if (err.table === "document_drafts") corruptDrafts.add(String(err.key.name));
  }
  const drafts = new Map(snap.envoyDrafts.map((d) => [d.name, d]));
  const next = new Map<string, LiveEnvoyDomain>();
  for (const rec of snap.envoyDomains) {
    const name = rec.doc.domain;
    const before = prev.get(name);
    try {
      const compiled =
        before && before.version === rec.version
          ? before.compiled
          : compileDomain(rec.doc, {
              prefix: ENVOY_POLICY_PREFIX,
              limiter: (policy) => options.limiter(policy, { domain: name, draft: false }),
            });
      const d = drafts.get(name);
      let draft: LiveEnvoyDraft | undefined;
      if (!d && corruptDrafts.has(name)) draft = before?.draft;
      else if (d && before?.draft?.id === d.id) draft = before.draft;
      else if (d)
        draft = {
          id: d.id,
          compiled: compileDomain(d.doc, {
            prefix: draftPrefix(d.id),
            limiter: (policy) => options.limiter(policy, { domain: name, draft: true }),
          }),
          stats: { evaluated: 0, wouldDeny: 0, wouldDenyNewly: 0, wouldAllowNewly: 0 },
        };
      next.set(name, { version: rec.version, compiled, draft });
    } catch (err) {
      options.logger.error(
        { err, domain: name },
        "stored Envoy domain cannot be compiled; keeping its last good version",
      );
      if (before) next.set(name, before);
    }
  }
  for (const name of corruptDomains) {
    const before = prev.get(name);
    if (before && !next.has(name)) next.set(name, before);
  }
  return next;
}
