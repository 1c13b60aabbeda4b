/**
 * The descriptor configuration of Envoy's reference rate limit service (one YAML file per
 * `domain`), as sluice stores and exchanges it: read from the reference format, checked the way
 * the reference service checks it (unknown keys, duplicate key/value pairs at one level, units,
 * `unlimited`, `replaces`, `share_threshold`), with sluice's extensions of `rate_limit`
 * (`algorithm`, `period`, `burst`, `rules`, `on_store_error`), and written back in the same
 * format. A document is data: the database keeps it as canonical JSON, versioned like a policy.
 *
 * ```yaml
 * domain: mongo_cps
 * descriptors:
 *   - key: database
 *     value: users
 *     rate_limit:
 *       unit: second
 *       requests_per_unit: 500
 * ```
 *
 * Scalars are read as the reference service reads them (YAML 1.1): a string field given a
 * number or a boolean keeps its text as written (`value: 0123` is the string `"0123"`), a null
 * string is empty, `yes`/`no`/`on`/`off` are booleans.
 */
import {
  ALGORITHMS,
  type AlgorithmName,
  type Duration,
  type OnStoreError,
  ValidationError,
  type ValidationIssue,
  definePolicy,
  parseDuration,
} from "sluice";
import {
  type Document,
  type Node,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  parseAllDocuments,
  stringify,
} from "yaml";
import { nestingIssue } from "../json-body.js";
import { ENVOY_UNITS } from "@sluice/api";

export { ENVOY_UNITS } from "@sluice/api";

/** One of {@link ENVOY_UNITS}. */
export type EnvoyUnit = (typeof ENVOY_UNITS)[number];

/**
 * Length of each unit in seconds, as the reference service counts them: a month is 30 days and
 * a year 365 days; windows are aligned to the Unix epoch (a day starts at 00:00 UTC).
 */
export const UNIT_SECONDS: Readonly<Record<EnvoyUnit, number>> = Object.freeze({
  second: 1,
  minute: 60,
  hour: 3600,
  day: 86_400,
  week: 7 * 86_400,
  month: 30 * 86_400,
  year: 365 * 86_400,
});

/** The wire codes of `RateLimitResponse.RateLimit.Unit` (WEEK is 7: it was added last). */
export const UNIT_CODES: Readonly<Record<EnvoyUnit, number>> = Object.freeze({
  second: 1,
  minute: 2,
  hour: 3,
  day: 4,
  month: 5,
  year: 6,
  week: 7,
});

/** Algorithms a descriptor limit may use: every sluice algorithm but `concurrency` (Envoy never releases a permit). */
export const ENVOY_ALGORITHMS = ALGORITHMS.filter(
  (a): a is Exclude<AlgorithmName, "concurrency"> => a !== "concurrency",
);

/** One limit of several (extension `rules`): all of a descriptor's rules are checked and charged together. */
export interface EnvoyRule {
  /** Requests per unit (or per `period`): at least 1. */
  requests_per_unit: number;
  /** One of the reference units; or `period` instead. */
  unit?: EnvoyUnit;
  /** Extension: any period, e.g. `30s`, `5m` (milliseconds or a duration string). */
  period?: Duration;
  /** Extension (gcra, token-bucket): how many may pass at once. */
  burst?: number;
}

/** A descriptor's `rate_limit`: the reference fields and sluice's extensions. */
export interface EnvoyRateLimit {
  /** The reference: one of {@link ENVOY_UNITS}. */
  unit?: EnvoyUnit;
  /** The reference: requests per unit; 0 (or absent) denies every request. */
  requests_per_unit?: number;
  /** The reference: no limit at all (answered OK with the largest remaining, never counted). */
  unlimited?: boolean;
  /** The reference: the name other descriptors' `replaces` refer to; also shown in headers. */
  name?: string;
  /** The reference: limits (by name) that this one replaces when both match a request. */
  replaces?: { name: string }[];
  /** Extension: the sluice algorithm (default `fixed-window`, the reference's). */
  algorithm?: Exclude<AlgorithmName, "concurrency">;
  /** Extension: any period instead of `unit`. */
  period?: Duration;
  /** Extension (gcra, token-bucket): how many may pass at once. */
  burst?: number;
  /** Extension: several limits at once, all-or-nothing (instead of requests_per_unit/unit/period/burst). */
  rules?: EnvoyRule[];
  /** Extension: what to answer when the counter store fails (default `allow`, as Envoy does on an error). */
  on_store_error?: OnStoreError;
}

/** One descriptor of a domain's tree. */
export interface EnvoyDescriptor {
  key: string;
  /** A value to match (`*` matches any run of characters); absent: any value, each counted apart. */
  value?: string;
  rate_limit?: EnvoyRateLimit;
  descriptors?: EnvoyDescriptor[];
  /** Answer OK even when over the limit (and count what would have been denied). */
  shadow_mode?: boolean;
  /** Over limit only when every quota-mode descriptor of the request is. */
  quota_mode?: boolean;
  /** Accepted and kept; sluice's metrics never carry request values (their labels stay bounded). */
  detailed_metric?: boolean;
  /** Accepted and kept, like `detailed_metric`. */
  value_to_metric?: boolean;
  /** With a wildcard `value`: every matching value shares one counter. */
  share_threshold?: boolean;
  /** Free data, kept as written. */
  metadata?: Record<string, unknown>;
}

/** One domain's configuration: the reference service's file. */
export interface EnvoyDomainDocument {
  domain: string;
  descriptors: EnvoyDescriptor[];
}

/** Longest domain name (it is a key in SQL). */
export const MAX_DOMAIN_LENGTH = 128;

const ROOT_KEYS = ["domain", "descriptors"] as const;
const DESCRIPTOR_KEYS = [
  "key",
  "value",
  "rate_limit",
  "descriptors",
  "shadow_mode",
  "quota_mode",
  "detailed_metric",
  "value_to_metric",
  "share_threshold",
  "metadata",
] as const;
const RATE_LIMIT_KEYS = [
  "unit",
  "requests_per_unit",
  "unlimited",
  "name",
  "replaces",
  "algorithm",
  "period",
  "burst",
  "rules",
  "on_store_error",
] as const;
const RULE_KEYS = ["requests_per_unit", "unit", "period", "burst"] as const;
/** Keys the reference service accepts anywhere; one misplaced here is named as such. */
const REFERENCE_KEYS = new Set<string>([
  ...ROOT_KEYS,
  ...DESCRIPTOR_KEYS,
  "unit",
  "requests_per_unit",
  "unlimited",
  "name",
  "replaces",
]);

/**
 * A scalar YAML read as a number, boolean or null, with its text as written: a string field
 * given one takes the text, as the reference service does.
 */
class Scalar {
  constructor(
    readonly value: number | boolean | null,
    readonly source: string,
  ) {}
}

/** Milliseconds of a duration, or why it is not one (sluice's own parser and message). */
function parseDurationOrMessage(value: unknown): number | string {
  try {
    return parseDuration(value as Duration);
  } catch (err) {
    if (err instanceof ValidationError) return err.issues[0]?.message ?? err.message;
    throw err;
  }
}

/** What a document check returns: the canonical document, or every problem. */
export type DocumentResult = { doc: EnvoyDomainDocument } | { issues: ValidationIssue[] };

/** Validation context: issues found so far. */
class Checker {
  readonly issues: ValidationIssue[] = [];
  add(path: string, message: string): void {
    this.issues.push({ path, message });
  }
}

const join = (path: string, key: string | number) => (path ? `${path}.${key}` : String(key));

function typeName(v: unknown): string {
  if (v instanceof Scalar) return v.value === null ? "null" : typeof v.value;
  if (v === null || v === undefined) return "null";
  if (Array.isArray(v)) return "a list";
  return typeof v === "object" ? "a mapping" : typeof v;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Scalar);
}

/** A string field: strings as they are; other scalars as written (null: empty). */
function str(c: Checker, v: unknown, path: string): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v === "string") return v;
  if (v === null) return "";
  if (v instanceof Scalar) return v.value === null ? "" : v.source;
  c.add(path, `must be a string (got ${typeName(v)})`);
  return undefined;
}

function bool(c: Checker, v: unknown, path: string): boolean | undefined {
  const b = v instanceof Scalar ? v.value : v;
  if (b === undefined || b === null) return undefined;
  if (typeof b === "boolean") return b;
  c.add(path, `must be true or false (got ${typeName(v)})`);
  return undefined;
}

function uint(c: Checker, v: unknown, path: string, min = 0): number | undefined {
  const n = v instanceof Scalar ? v.value : v;
  if (n === undefined || n === null) return undefined;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > 0xffff_ffff) {
    c.add(
      path,
      `must be a whole number from ${min} to 4294967295 (got ${v instanceof Scalar ? v.source : JSON.stringify(n)})`,
    );
    return undefined;
  }
  return n;
}

function unit(c: Checker, v: unknown, path: string): EnvoyUnit | undefined {
  const s = str(c, v, path);
  if (s === undefined) return undefined;
  const u = s.toLowerCase();
  if ((ENVOY_UNITS as readonly string[]).includes(u)) return u as EnvoyUnit;
  c.add(path, `invalid rate limit unit '${s}': must be one of ${ENVOY_UNITS.join(", ")}`);
  return undefined;
}

function period(c: Checker, v: unknown, path: string): Duration | undefined {
  const raw = v instanceof Scalar ? (v.value === null ? undefined : v.value) : v;
  if (raw === undefined || raw === null) return undefined;
  const ms = parseDurationOrMessage(raw);
  if (typeof ms === "string") {
    c.add(path, ms);
    return undefined;
  }
  return raw as Duration;
}

/** Checks a mapping's keys; returns it (or undefined when it is not a mapping). */
function mapping(
  c: Checker,
  v: unknown,
  path: string,
  keys: readonly string[],
  what: string,
): Record<string, unknown> | undefined {
  if (!isRecord(v)) {
    c.add(path, `must be a mapping (${what}), not ${typeName(v)}`);
    return undefined;
  }
  for (const k of Object.keys(v)) {
    if (keys.includes(k)) continue;
    const misplaced = REFERENCE_KEYS.has(k) ? ` (${k} is not a field of ${what})` : "";
    c.add(join(path, k), `unknown key '${k}'${misplaced}; known here: ${keys.join(", ")}`);
  }
  return v;
}

function list(c: Checker, v: unknown, path: string, what: string): unknown[] | undefined {
  if (v === undefined || v === null || (v instanceof Scalar && v.value === null)) return undefined;
  if (!Array.isArray(v)) {
    c.add(path, `must be a list of ${what}, not ${typeName(v)}`);
    return undefined;
  }
  return v;
}

/** Plain JSON of free data (metadata): YAML scalars become their values. */
function plain(v: unknown): unknown {
  if (v instanceof Scalar) return v.value;
  if (Array.isArray(v)) return v.map(plain);
  if (isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

function checkRules(c: Checker, v: unknown, path: string): EnvoyRule[] | undefined {
  const items = list(c, v, path, "rules ({ requests_per_unit, unit | period, burst? })");
  if (!items) return undefined;
  if (items.length === 0 || items.length > 16)
    c.add(path, `must hold 1 to 16 rules (got ${items.length})`);
  const out: EnvoyRule[] = [];
  items.forEach((item, i) => {
    const p = join(path, i);
    const m = mapping(c, item, p, RULE_KEYS, "a rule");
    if (!m) return;
    const rpu = uint(c, m.requests_per_unit, join(p, "requests_per_unit"), 1);
    if (m.requests_per_unit === undefined)
      c.add(join(p, "requests_per_unit"), "is required (at least 1)");
    const u = unit(c, m.unit, join(p, "unit"));
    const per = period(c, m.period, join(p, "period"));
    if (m.unit === undefined && m.period === undefined) c.add(p, "needs a unit or a period");
    if (m.unit !== undefined && m.period !== undefined)
      c.add(p, "takes a unit or a period, not both");
    const burst = uint(c, m.burst, join(p, "burst"), 1);
    if (rpu === undefined) return;
    out.push({
      requests_per_unit: rpu,
      ...(u !== undefined ? { unit: u } : {}),
      ...(per !== undefined ? { period: per } : {}),
      ...(burst !== undefined ? { burst } : {}),
    });
  });
  return out;
}

function checkRateLimit(c: Checker, v: unknown, path: string): EnvoyRateLimit | undefined {
  const m = mapping(c, v, path, RATE_LIMIT_KEYS, "rate_limit");
  if (!m) return undefined;
  const unlimited = bool(c, m.unlimited, join(path, "unlimited")) ?? false;
  const u = unit(c, m.unit, join(path, "unit"));
  const rpu = uint(c, m.requests_per_unit, join(path, "requests_per_unit"));
  const name = str(c, m.name, join(path, "name"));
  const per = period(c, m.period, join(path, "period"));
  const burst = uint(c, m.burst, join(path, "burst"), 1);
  let algorithm: EnvoyRateLimit["algorithm"];
  const alg = str(c, m.algorithm, join(path, "algorithm"));
  if (alg !== undefined) {
    if ((ENVOY_ALGORITHMS as readonly string[]).includes(alg))
      algorithm = alg as EnvoyRateLimit["algorithm"];
    else
      c.add(
        join(path, "algorithm"),
        alg === "concurrency"
          ? "concurrency does not apply: Envoy never releases what it took"
          : `must be one of ${ENVOY_ALGORITHMS.join(", ")} (got '${alg}')`,
      );
  }
  let onStoreError: OnStoreError | undefined;
  const ose = str(c, m.on_store_error, join(path, "on_store_error"));
  if (ose !== undefined) {
    if (ose === "allow" || ose === "deny" || ose === "insurance") onStoreError = ose;
    else c.add(join(path, "on_store_error"), `must be allow, deny or insurance (got '${ose}')`);
  }
  const rules = m.rules === undefined ? undefined : checkRules(c, m.rules, join(path, "rules"));
  const replaces: { name: string }[] = [];
  const rep = list(c, m.replaces, join(path, "replaces"), "{ name }");
  rep?.forEach((item, i) => {
    const p = join(join(path, "replaces"), i);
    const r = mapping(c, item, p, ["name"], "a replaces entry");
    if (!r) return;
    const n = str(c, r.name, join(p, "name")) ?? "";
    if (n === "") c.add(join(p, "name"), "should not have an empty replaces entry");
    else if (n === name)
      c.add(join(p, "name"), "replaces should not contain name of same descriptor");
    replaces.push({ name: n });
  });

  if (unlimited) {
    for (const k of ["unit", "period", "rules", "algorithm", "burst"] as const)
      if (m[k] !== undefined)
        c.add(
          join(path, k),
          k === "unit"
            ? "should not specify rate limit unit when unlimited"
            : `does not apply when unlimited`,
        );
  } else if (rules !== undefined) {
    for (const k of ["unit", "period", "requests_per_unit", "burst"] as const)
      if (m[k] !== undefined) c.add(join(path, k), "goes inside each of rules when rules is given");
  } else if (m.unit === undefined && m.period === undefined) {
    c.add(join(path, "unit"), `is required: one of ${ENVOY_UNITS.join(", ")} (or a period)`);
  } else if (m.unit !== undefined && m.period !== undefined) {
    c.add(path, "takes a unit or a period, not both");
  }
  const out: EnvoyRateLimit = {
    ...(u !== undefined ? { unit: u } : {}),
    ...(rpu !== undefined ? { requests_per_unit: rpu } : {}),
    ...(unlimited ? { unlimited: true } : {}),
    ...(name ? { name } : {}),
    ...(replaces.length > 0 ? { replaces } : {}),
    ...(algorithm !== undefined ? { algorithm } : {}),
    ...(per !== undefined ? { period: per } : {}),
    ...(burst !== undefined ? { burst } : {}),
    ...(rules !== undefined ? { rules } : {}),
    ...(onStoreError !== undefined ? { on_store_error: onStoreError } : {}),
  };
  return out;
}

function checkDescriptors(c: Checker, v: unknown, path: string): EnvoyDescriptor[] {
  const items = list(c, v, path, "descriptors");
  if (!items) return [];
  const seen = new Map<string, number>();
  const out: EnvoyDescriptor[] = [];
  items.forEach((item, i) => {
    const p = join(path, i);
    const m = mapping(c, item, p, DESCRIPTOR_KEYS, "a descriptor");
    if (!m) return;
    const key = str(c, m.key, join(p, "key")) ?? "";
    if (key === "") c.add(join(p, "key"), "descriptor has empty key");
    const value = str(c, m.value, join(p, "value")) ?? "";
    // The reference service keys each level by "key_value" (or "key" without a value).
    const composite = value === "" ? key : `${key}_${value}`;
    const first = seen.get(composite);
    if (key !== "" && first !== undefined)
      c.add(p, `duplicate descriptor composite key '${composite}' (also at ${join(path, first)})`);
    else seen.set(composite, i);
    const shareThreshold = bool(c, m.share_threshold, join(p, "share_threshold")) ?? false;
    if (shareThreshold && !composite.includes("*"))
      c.add(
        join(p, "share_threshold"),
        `share_threshold can only be used with wildcard values (containing '*'), but found key '${composite}'`,
      );
    let metadata: Record<string, unknown> | undefined;
    if (m.metadata !== undefined && m.metadata !== null) {
      if (isRecord(m.metadata)) metadata = plain(m.metadata) as Record<string, unknown>;
      else c.add(join(p, "metadata"), `must be a mapping, not ${typeName(m.metadata)}`);
    }
    const rateLimit =
      m.rate_limit === undefined || m.rate_limit === null
        ? undefined
        : checkRateLimit(c, m.rate_limit, join(p, "rate_limit"));
    const children = checkDescriptors(c, m.descriptors, join(p, "descriptors"));
    const flags = {
      shadow_mode: bool(c, m.shadow_mode, join(p, "shadow_mode")),
      quota_mode: bool(c, m.quota_mode, join(p, "quota_mode")),
      detailed_metric: bool(c, m.detailed_metric, join(p, "detailed_metric")),
      value_to_metric: bool(c, m.value_to_metric, join(p, "value_to_metric")),
      share_threshold: shareThreshold,
    };
    const d: EnvoyDescriptor = {
      key,
      ...(value !== "" ? { value } : {}),
      ...(rateLimit ? { rate_limit: rateLimit } : {}),
      ...(children.length > 0 ? { descriptors: children } : {}),
    };
    for (const [k, on] of Object.entries(flags))
      if (on) (d as unknown as Record<string, unknown>)[k] = true;
    if (metadata) d.metadata = metadata;
    out.push(d);
  });
  return out;
}

/**
 * Checks one domain's configuration — parsed YAML (see {@link parseEnvoyYaml}) or a JSON value
 * from the admin API — and returns its canonical form (fields in a fixed order, `false` flags
 * and empty values left out) or every problem, each with its path (`descriptors.0.rate_limit.unit`).
 * The sluice extensions are checked by sluice itself (`definePolicy`), so a `burst` on a
 * fixed window is refused here, not at run time.
 */
export function validateEnvoyDocument(input: unknown): DocumentResult {
  const c = new Checker();
  const root = mapping(c, input, "", ROOT_KEYS, "a domain configuration");
  if (!root) return { issues: c.issues };
  const domain = str(c, root.domain, "domain") ?? "";
  if (domain === "") c.add("domain", "config file cannot have empty domain");
  else if (domain.length > MAX_DOMAIN_LENGTH)
    c.add("domain", `must be at most ${MAX_DOMAIN_LENGTH} characters (got ${domain.length})`);
  const descriptors = checkDescriptors(c, root.descriptors, "descriptors");
  const doc: EnvoyDomainDocument = { domain, descriptors };
  if (c.issues.length === 0) checkPolicies(c, doc.descriptors, "descriptors");
  return c.issues.length > 0 ? { issues: c.issues } : { doc };
}

/** Runs every limit's rules through sluice's own policy validation. */
function checkPolicies(c: Checker, descriptors: readonly EnvoyDescriptor[], path: string): void {
  descriptors.forEach((d, i) => {
    const p = join(path, i);
    const rl = d.rate_limit;
    // A single limit of 0 requests denies everything: no policy to check.
    const denyAll = rl?.rules === undefined && (rl?.requests_per_unit ?? 0) === 0;
    if (rl && !rl.unlimited && !denyAll) {
      const rules = limitRules(rl);
      {
        try {
          definePolicy({
            name: "envoy.check",
            algorithm: rl.algorithm ?? "fixed-window",
            rules: rules.map((r) => ({
              limit: r.requestsPerUnit,
              period: r.periodMs,
              ...(r.burst !== undefined ? { burst: r.burst } : {}),
            })),
          });
        } catch (err) {
          if (!(err instanceof ValidationError)) throw err;
          for (const issue of err.issues) {
            const at = issue.path.replace(/^rules\.(\d+)\.limit$/, "rules.$1.requests_per_unit");
            // One rule written without `rules`: its fields sit on rate_limit itself.
            const field = rl.rules === undefined ? at.replace(/^rules\.0\./, "") : at;
            c.add(join(join(p, "rate_limit"), field || "rules"), issue.message);
          }
        }
      }
    }
    if (d.descriptors) checkPolicies(c, d.descriptors, join(p, "descriptors"));
  });
}

/** One rule of a limit, resolved. */
export interface ResolvedEnvoyRule {
  readonly requestsPerUnit: number;
  readonly periodMs: number;
  /** The reference unit, when the period is one. */
  readonly unit: EnvoyUnit | undefined;
  readonly burst: number | undefined;
}

/**
 * The rules of a (not unlimited) `rate_limit`: its `rules`, or the one rule of
 * `requests_per_unit` per `unit`/`period`. A rule of 0 requests is kept: it denies everything.
 */
export function limitRules(rl: EnvoyRateLimit): ResolvedEnvoyRule[] {
  const one = (
    rpu: number,
    u: EnvoyUnit | undefined,
    per: Duration | undefined,
    burst: number | undefined,
  ): ResolvedEnvoyRule => {
    const periodMs =
      u !== undefined ? UNIT_SECONDS[u] * 1000 : (parseDurationOrMessage(per) as number);
    return { requestsPerUnit: rpu, periodMs, unit: u ?? unitOfPeriod(periodMs), burst };
  };
  if (rl.rules) return rl.rules.map((r) => one(r.requests_per_unit, r.unit, r.period, r.burst));
  return [one(rl.requests_per_unit ?? 0, rl.unit, rl.period, rl.burst)];
}

/** The reference unit whose length is exactly `periodMs`, if any. */
export function unitOfPeriod(periodMs: number): EnvoyUnit | undefined {
  return ENVOY_UNITS.find((u) => UNIT_SECONDS[u] * 1000 === periodMs);
}

// ------------------------------------------------------------------ YAML in and out

/** Converts a parsed YAML node to plain values, keeping the text of non-string scalars. */
function fromYaml(node: Node | null | undefined, doc: Document, depth = 0): unknown {
  if (depth > 64) throw new Error("nested too deeply");
  if (node === null || node === undefined) return null;
  if (isAlias(node)) return fromYaml(node.resolve(doc) as Node | undefined, doc, depth + 1);
  if (isScalar(node)) {
    const v = node.value;
    if (typeof v === "string") return v;
    if (v === null || typeof v === "number" || typeof v === "boolean")
      return new Scalar(v, typeof node.source === "string" ? node.source : String(v));
    return String(v);
  }
  if (isSeq(node)) return node.items.map((i) => fromYaml(i as Node, doc, depth + 1));
  if (isMap(node)) {
    const out: Record<string, unknown> = {};
    for (const pair of node.items) {
      const k = isScalar(pair.key) ? pair.key.value : undefined;
      if (typeof k !== "string")
        throw new Error(
          `config error, key is not of type string: ${isScalar(pair.key) ? String(pair.key.source ?? pair.key.value) : "a collection"}`,
        );
      out[k] = fromYaml(pair.value as Node, doc, depth + 1);
    }
    return out;
  }
  return null;
}

/** One document of a YAML text: its parsed content, or why it could not be read. */
export type YamlDocument = { value: unknown } | { issues: ValidationIssue[] };

/**
 * Reads YAML text as the reference service does (YAML 1.1 scalars). A text may hold several
 * documents (`---`): one per domain. Empty documents are skipped.
 */
export function parseEnvoyYaml(text: string): YamlDocument[] {
  const deep = nestingIssue(text);
  if (deep !== undefined) return [{ issues: [deep] }];
  // An empty text parses to an empty list.
  const docs = parseAllDocuments(text, { schema: "yaml-1.1", merge: true, uniqueKeys: true });
  const out: YamlDocument[] = [];
  for (const d of docs) {
    if (d.errors.length > 0) {
      out.push({
        issues: d.errors.map((e) => ({
          path: "",
          message: `error loading config file: ${e.message}`,
        })),
      });
      continue;
    }
    // An empty document (a trailing `---`) holds nothing.
    if (d.contents === null || (isScalar(d.contents) && d.contents.value === null)) continue;
    try {
      out.push({ value: fromYaml(d.contents as Node, d) });
    } catch (err) {
      out.push({ issues: [{ path: "", message: (err as Error).message }] });
    }
  }
  return out;
}

/**
 * Reads a reference-format file's text: every domain in it, validated; issues are prefixed
 * with the document's index when the text holds several (`1.descriptors.0.key`).
 */
export function parseEnvoyFile(
  text: string,
): { docs: EnvoyDomainDocument[] } | { issues: ValidationIssue[] } {
  const parsed = parseEnvoyYaml(text);
  if (parsed.length === 0)
    return { issues: [{ path: "", message: "holds no domain configuration" }] };
  const docs: EnvoyDomainDocument[] = [];
  const issues: ValidationIssue[] = [];
  parsed.forEach((p, i) => {
    const prefix = (path: string) =>
      parsed.length === 1 ? path : path ? `${i}.${path}` : String(i);
    const r = "issues" in p ? p : validateEnvoyDocument(p.value);
    if ("issues" in r) issues.push(...r.issues.map((x) => ({ ...x, path: prefix(x.path) })));
    else docs.push(r.doc);
  });
  return issues.length > 0 ? { issues } : { docs };
}

/** True when parsed YAML/JSON looks like a reference-format domain file (it has `domain`). */
export function looksLikeEnvoyFile(value: unknown): boolean {
  return isRecord(value) && "domain" in value;
}

/** Writes one domain in the reference format (sluice's extensions included where used). */
export function exportEnvoyYaml(doc: EnvoyDomainDocument): string {
  return stringify(doc, { lineWidth: 0 });
}

/** True when two documents say the same thing (canonical forms compared). */
export function sameEnvoyDocument(a: EnvoyDomainDocument, b: EnvoyDomainDocument): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
