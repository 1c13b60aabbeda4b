/**
 * A domain's descriptor tree, made ready to answer: each `rate_limit` becomes a sluice policy
 * (its rules, algorithm and shadow flag) with a name derived from the domain and the descriptor
 * path, and a limiter over the node's counter store; the tree becomes the lookup structure the
 * reference service matches requests against.
 *
 * Matching follows the reference service exactly. At each level of the tree, an entry
 * `(key, value)` of the request's descriptor is looked up as `key_value`, then against the
 * level's wildcard values in the order they were written, then as `key` alone (any value). A
 * limit applies only when it sits at the request's last entry: `(a, 1), (b, 2)` never matches a
 * limit on `a` alone.
 *
 * The identifier counted under a limit's policy is built from the request's entries, so a key
 * without a value (or with a wildcard) counts each value apart, as the reference service does;
 * with `share_threshold` every value matching the wildcard shares one counter.
 */
import { createHash } from "node:crypto";
import {
  type AlgorithmName,
  type Limiter,
  type OnStoreError,
  type Policy,
  definePolicy,
} from "sluice";
import { ENVOY_PREFIX } from "../model.js";
import {
  type EnvoyDescriptor,
  type EnvoyDomainDocument,
  type ResolvedEnvoyRule,
  limitRules,
} from "./config.js";

/** One step of a descriptor path: a key and, when the configuration names one, its value. */
export interface PathElement {
  readonly key: string;
  readonly value?: string | undefined;
}

/** A descriptor entry of a request. */
export interface Entry {
  readonly key: string;
  readonly value: string;
}

/** The prefix of every descriptor limit's policy name (reserved: no policy of the admin API may use it). */
export const ENVOY_POLICY_PREFIX = ENVOY_PREFIX;

/** Longest policy name sluice accepts. */
const MAX_NAME = 128;

/**
 * The reference service's name of a descriptor path: `domain.key_value.key` (its statistics
 * key). It is what sluice shows and the label of the metrics: it never holds request values.
 */
export function descriptorPath(domain: string, path: readonly PathElement[]): string {
  return [domain, ...path.map((p) => (p.value !== undefined ? `${p.key}_${p.value}` : p.key))].join(
    ".",
  );
}

/**
 * The policy name of a descriptor limit: `<prefix><readable path>:<hash>`. The readable part is
 * the descriptor path with characters outside a policy name's alphabet replaced by `_` and cut
 * to fit 128 characters; the hash (SHA-256 of the exact domain and path, 12 hex digits) keeps
 * two paths that read alike (`a_b` and `a`=`b`, dots in values) apart. The same domain and path
 * always give the same name, so a limit keeps its counters across reloads, restarts and nodes.
 */
export function envoyPolicyName(
  prefix: string,
  domain: string,
  path: readonly PathElement[],
): string {
  const hash = createHash("sha256")
    .update(JSON.stringify([domain, path.map((p) => [p.key, p.value ?? null])]))
    .digest("hex")
    .slice(0, 12);
  const readable = descriptorPath(domain, path).replace(/[^A-Za-z0-9._-]/g, "_");
  return `${prefix}${readable.slice(0, MAX_NAME - prefix.length - hash.length - 1)}:${hash}`;
}

/** A descriptor limit, compiled. */
export interface CompiledLimit {
  /** The descriptor path, as the reference service names it (`domain.key_value.key`). */
  readonly path: string;
  /** The path's steps. */
  readonly elements: readonly PathElement[];
  /** The `rate_limit` name, if any (what `replaces` refers to). */
  readonly name: string | undefined;
  /** Names of the limits this one replaces. */
  readonly replaces: readonly string[];
  /** Never limited (answered OK with the largest remaining, not counted). */
  readonly unlimited: boolean;
  /** `shadow_mode`: OK even when over the limit. */
  readonly shadow: boolean;
  /** `quota_mode`: over limit only when every quota descriptor of the request is. */
  readonly quota: boolean;
  /** What the limit answers when the counter store fails. */
  readonly onStoreError: OnStoreError;
  /** The limit's rules as reported in `current_limit` (empty when unlimited). */
  readonly rules: readonly ResolvedEnvoyRule[];
  /** The sluice algorithm. */
  readonly algorithm: AlgorithmName;
  /** The sluice policy; undefined when unlimited or when a limit of 0 denies everything. */
  readonly policy: Policy | undefined;
  /** The policy's limiter over the node's store (none when compiled for display only). */
  readonly limiter: Limiter | undefined;
  /** A `limit` override sent by Envoy, not a configured limit. */
  readonly override: boolean;
}

interface Wildcard {
  /** The configured `key_value` with its `*`s. */
  readonly composite: string;
  /** `composite` split at each `*`. */
  readonly parts: readonly string[];
}

/** One level of the lookup tree. */
export interface MatchNode {
  readonly children: ReadonlyMap<string, MatchNode>;
  /** This level's wildcard values, in the order written. */
  readonly wildcards: readonly Wildcard[];
  readonly limit: CompiledLimit | undefined;
  /** `share_threshold` with a wildcard value: the wildcard's value part, counted as one. */
  readonly sharedValue: string | undefined;
}

/** A domain, compiled. */
export interface CompiledDomain {
  readonly domain: string;
  /** The prefix of its limits' policy names (and of Envoy's overrides decided in it). */
  readonly prefix: string;
  readonly root: MatchNode;
  /** Every limit of the tree, in the order written (depth first). */
  readonly limits: readonly CompiledLimit[];
}

/** Options of {@link compileDomain}. */
export interface CompileOptions {
  /** Prefix of the policy names ({@link ENVOY_POLICY_PREFIX}, or a draft's own). */
  readonly prefix: string;
  /** Makes the limiter of a policy (over the node's store); leave out to compile for display only. */
  readonly limiter?: ((policy: Policy) => Limiter) | undefined;
}

/** Builds the sluice policy of a limit's rules (none for unlimited or a limit of 0). */
export function limitPolicy(options: {
  name: string;
  algorithm: AlgorithmName;
  rules: readonly ResolvedEnvoyRule[];
  shadow: boolean;
  onStoreError: OnStoreError;
  description: string;
}): Policy | undefined {
  if (options.rules.length === 0 || options.rules.some((r) => r.requestsPerUnit === 0))
    return undefined;
  return definePolicy({
    name: options.name,
    algorithm: options.algorithm,
    rules: options.rules.map((r) => ({
      limit: r.requestsPerUnit,
      period: r.periodMs,
      ...(r.burst !== undefined ? { burst: r.burst } : {}),
    })),
    shadow: options.shadow,
    onStoreError: options.onStoreError,
    description: options.description,
  });
}

/** Compiles a validated domain document. */
export function compileDomain(doc: EnvoyDomainDocument, options: CompileOptions): CompiledDomain {
  const limits: CompiledLimit[] = [];
  const level = (
    descriptors: readonly EnvoyDescriptor[],
    parent: readonly PathElement[],
  ): Pick<MatchNode, "children" | "wildcards"> => {
    const children = new Map<string, MatchNode>();
    const wildcards: Wildcard[] = [];
    for (const d of descriptors) {
      const composite = d.value === undefined ? d.key : `${d.key}_${d.value}`;
      const elements = [
        ...parent,
        { key: d.key, ...(d.value !== undefined ? { value: d.value } : {}) },
      ];
      let limit: CompiledLimit | undefined;
      const rl = d.rate_limit;
      if (rl) {
        const unlimited = rl.unlimited === true;
        const rules = unlimited ? [] : limitRules(rl);
        const algorithm = rl.algorithm ?? "fixed-window";
        const shadow = d.shadow_mode === true;
        const onStoreError = rl.on_store_error ?? "allow";
        const path = descriptorPath(doc.domain, elements);
        const policy = limitPolicy({
          name: envoyPolicyName(options.prefix, doc.domain, elements),
          algorithm,
          rules,
          shadow,
          onStoreError,
          description: `Envoy descriptor ${path}`,
        });
        limit = {
          path,
          elements,
          name: rl.name,
          replaces: (rl.replaces ?? []).map((r) => r.name),
          unlimited,
          shadow,
          quota: d.quota_mode === true,
          onStoreError,
          rules,
          algorithm,
          policy,
          limiter: policy && options.limiter ? options.limiter(policy) : undefined,
          override: false,
        };
        limits.push(limit);
      }
      const below = level(d.descriptors ?? [], elements);
      const wildcard = composite.includes("*");
      if (wildcard) wildcards.push({ composite, parts: composite.split("*") });
      children.set(composite, {
        ...below,
        limit,
        sharedValue: d.share_threshold && wildcard ? (d.value ?? "") : undefined,
      });
    }
    return { children, wildcards };
  };
  const root: MatchNode = {
    ...level(doc.descriptors, []),
    limit: undefined,
    sharedValue: undefined,
  };
  return { domain: doc.domain, prefix: options.prefix, root, limits };
}

/**
 * Whether `value` matches a wildcard split at its `*`s: each `*` matches any run of characters
 * (none included), the parts in between must appear in order.
 */
export function wildcardMatch(parts: readonly string[], value: string): boolean {
  if (parts.length === 1) return parts[0] === value;
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (!value.startsWith(first) || !value.endsWith(last)) return false;
  let fixed = 0;
  for (const p of parts) fixed += p.length;
  if (value.length < fixed) return false;
  let rest = value.slice(first.length, value.length - last.length);
  for (let i = 1; i < parts.length - 1; i++) {
    const at = rest.indexOf(parts[i]!);
    if (at < 0) return false;
    rest = rest.slice(at + parts[i]!.length);
  }
  return true;
}

/** What a request descriptor matched. */
export interface Match {
  /** The limit at the descriptor's last entry, if one is there. */
  readonly limit: CompiledLimit | undefined;
  /**
   * Per entry index: the shared wildcard value counted instead of the request's
   * (`share_threshold`); undefined when there is none.
   */
  readonly shared: ReadonlyMap<number, string> | undefined;
}

/** Finds the limit of a request descriptor in a domain's tree (see the module's comment). */
export function matchDescriptor(domain: CompiledDomain, entries: readonly Entry[]): Match {
  let level: MatchNode = domain.root;
  let limit: CompiledLimit | undefined;
  let shared: Map<number, string> | undefined;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    const composite = `${e.key}_${e.value}`;
    let next = level.children.get(composite);
    let viaWildcard = false;
    if (next === undefined) {
      for (const w of level.wildcards) {
        if (wildcardMatch(w.parts, composite)) {
          next = level.children.get(w.composite);
          viaWildcard = true;
          break;
        }
      }
    }
    if (next === undefined) next = level.children.get(e.key);
    if (next === undefined) break;
    if (viaWildcard && next.sharedValue !== undefined)
      (shared ??= new Map()).set(i, next.sharedValue);
    if (next.limit !== undefined && i === entries.length - 1) limit = next.limit;
    if (next.children.size === 0) break;
    level = next;
  }
  return { limit, shared };
}

/**
 * The identifier counted under a limit's policy for a request descriptor: its entries as
 * `key=value` joined by `&` (each part URL-encoded), with the shared wildcard value in place of
 * the request's where `share_threshold` applies.
 */
export function descriptorIdentifier(
  entries: readonly Entry[],
  shared?: ReadonlyMap<number, string>,
): string {
  // A descriptor without entries (Envoy never sends one) still needs a non-empty identifier.
  if (entries.length === 0) return "=";
  let id = "";
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i]!;
    if (i > 0) id += "&";
    id += `${encodeURIComponent(e.key)}=${encodeURIComponent(shared?.get(i) ?? e.value)}`;
  }
  return id;
}
