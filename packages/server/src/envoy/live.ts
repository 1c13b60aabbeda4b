/**
 * The Envoy domain kind of a live document (sluice/service): a domain's live form is its
 * compiled tree, whose limits decide through limiters the registry makes; a draft is compiled
 * on policy names of its own (`sluice.draft.envoy.<id>.…`) so it never charges the enforced
 * limits. What is not the kind's — reuse by version (so insurance counters and caches survive a
 * reload), the draft beside it, its counts, keeping a row that cannot be read or compiled — is
 * the live document's and the registry's, as for policies.
 */
import type { Limiter, Policy } from "sluice";
import {
  type LiveDocument,
  type LiveDocumentDraft,
  type LiveKind,
  draftPolicyPrefix,
} from "sluice/service";
import { type CompiledDomain, ENVOY_POLICY_PREFIX, compileDomain } from "./compile.js";
import type { EnvoyDomainDocument } from "./config.js";

/** The live form of a domain (or of its draft): its compiled tree of limits. */
export interface EnvoyDomainForm {
  readonly compiled: CompiledDomain;
}

/** A domain as a node serves it. */
export type LiveEnvoyDomain = LiveDocument<EnvoyDomainForm>;

/** A domain's draft, evaluated in shadow beside the enforced configuration. */
export type LiveEnvoyDraft = LiveDocumentDraft<EnvoyDomainForm>;

/** What a limit of a domain is for: the domain's enforced configuration, or its draft. */
export interface LimitUse {
  readonly domain: string;
  readonly draft: boolean;
}

/**
 * The Envoy domain kind, its limits' limiters made by `limiter` (the registry's: the node's
 * store, and the traffic history). Throws when a domain cannot be compiled.
 */
export function envoyDomainLiveKind(
  limiter: (policy: Policy, use: LimitUse) => Limiter,
): LiveKind<EnvoyDomainDocument, EnvoyDomainForm> {
  return {
    live: (doc) => ({
      compiled: compileDomain(doc, {
        prefix: ENVOY_POLICY_PREFIX,
        limiter: (policy) => limiter(policy, { domain: doc.domain, draft: false }),
      }),
    }),
    draft: (doc, draftId) => ({
      compiled: compileDomain(doc, {
        prefix: draftPolicyPrefix("envoy", draftId),
        limiter: (policy) => limiter(policy, { domain: doc.domain, draft: true }),
      }),
    }),
  };
}
