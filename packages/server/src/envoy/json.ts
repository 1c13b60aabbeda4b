/**
 * The protojson form of `RateLimitRequest` and `RateLimitResponse`, for `POST /json` (the
 * reference service's door for callers without gRPC). Read as protojson reads it — JSON names
 * (`hitsAddend`) or proto names (`hits_addend`), enums by name or number, 64-bit integers as
 * numbers or strings, `null` for "not set" — and written as protojson writes it: JSON names,
 * enum names, fields at their default value left out, durations as `"60s"`, bytes as base64.
 */
import type { ValidationIssue } from "sluice";
import { LONE_SURROGATE, NOT_UTF8 } from "../json-body.js";
import type { RlsRequest, RlsResponse } from "./rls.js";

/** `envoy.type.v3.RateLimitUnit` by name. */
const OVERRIDE_UNIT_NAMES: Readonly<Record<string, number>> = {
  UNKNOWN: 0,
  SECOND: 1,
  MINUTE: 2,
  HOUR: 3,
  DAY: 4,
  MONTH: 5,
  YEAR: 6,
};
/** `RateLimitResponse.RateLimit.Unit` names by number. */
const UNIT_NAMES: Readonly<Record<number, string>> = {
  0: "UNKNOWN",
  1: "SECOND",
  2: "MINUTE",
  3: "HOUR",
  4: "DAY",
  5: "MONTH",
  6: "YEAR",
  7: "WEEK",
};
const CODE_NAMES: Readonly<Record<number, string>> = { 0: "UNKNOWN", 1: "OK", 2: "OVER_LIMIT" };

type Fields = Record<string, unknown>;

/** The fields of a JSON object under their JSON names, or an issue for each unknown one. */
function fieldsOf(
  value: unknown,
  path: string,
  names: Readonly<Record<string, string>>,
  issues: ValidationIssue[],
): Fields | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value !== "object" || Array.isArray(value)) {
    issues.push({ path, message: `must be an object (got ${kind(value)})` });
    return undefined;
  }
  const out: Fields = {};
  for (const [k, v] of Object.entries(value as Fields)) {
    const name = names[k];
    if (name === undefined) {
      const known = [...new Set(Object.values(names))].join(", ");
      issues.push({ path: at(path, k), message: `unknown field (known: ${known})` });
    } else if (v !== null) out[name] = v;
  }
  return out;
}

function kind(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "a list";
  return typeof v;
}

const at = (path: string, key: string | number) => (path ? `${path}.${key}` : String(key));

function string(v: unknown, path: string, issues: ValidationIssue[]): string {
  if (v === undefined) return "";
  if (typeof v === "string") return v;
  issues.push({ path, message: `must be a string (got ${kind(v)})` });
  return "";
}

/**
 * A string that is well-formed text: a descriptor's key or value becomes part of a counter's
 * key, where a lone surrogate would be stored as U+FFFD (one counter for every such value).
 */
function text(v: unknown, path: string, issues: ValidationIssue[]): string {
  const s = string(v, path, issues);
  if (LONE_SURROGATE.test(s)) issues.push({ path, message: NOT_UTF8 });
  return s;
}

/** An unsigned integer up to `max`, as a number or a decimal string. */
function unsigned(v: unknown, path: string, max: number, issues: ValidationIssue[]): number {
  if (v === undefined) return 0;
  const n = typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > max) {
    issues.push({
      path,
      message: `must be a whole number from 0 to ${max === Number.MAX_VALUE ? "18446744073709551615" : max} (got ${JSON.stringify(v)})`,
    });
    return 0;
  }
  return n;
}

function list(v: unknown, path: string, issues: ValidationIssue[]): unknown[] {
  if (v === undefined) return [];
  if (Array.isArray(v)) return v;
  issues.push({ path, message: `must be a list (got ${kind(v)})` });
  return [];
}

/** Reads a protojson `RateLimitRequest`; every problem is an issue with its JSON path. */
export function requestFromJson(
  body: unknown,
): { request: RlsRequest } | { issues: ValidationIssue[] } {
  const issues: ValidationIssue[] = [];
  const root = fieldsOf(
    body,
    "",
    {
      domain: "domain",
      descriptors: "descriptors",
      hitsAddend: "hitsAddend",
      hits_addend: "hitsAddend",
    },
    issues,
  );
  if (!root) {
    if (issues.length === 0)
      issues.push({ path: "", message: "must be a RateLimitRequest object" });
    return { issues };
  }
  const domain = string(root.domain, "domain", issues);
  const hitsAddend = unsigned(root.hitsAddend, "hitsAddend", 0xffff_ffff, issues);
  const descriptors = list(root.descriptors, "descriptors", issues).map((item, i) => {
    const p = at("descriptors", i);
    const d =
      fieldsOf(
        item,
        p,
        {
          entries: "entries",
          limit: "limit",
          hitsAddend: "hitsAddend",
          hits_addend: "hitsAddend",
        },
        issues,
      ) ?? {};
    const entries = list(d.entries, at(p, "entries"), issues).map((e, j) => {
      const ep = at(at(p, "entries"), j);
      const f = fieldsOf(e, ep, { key: "key", value: "value" }, issues) ?? {};
      return {
        key: text(f.key, at(ep, "key"), issues),
        value: text(f.value, at(ep, "value"), issues),
      };
    });
    const lp = at(p, "limit");
    const l = fieldsOf(
      d.limit,
      lp,
      { requestsPerUnit: "requestsPerUnit", requests_per_unit: "requestsPerUnit", unit: "unit" },
      issues,
    );
    let limit: { requestsPerUnit: number; unit: number } | undefined;
    if (l) {
      let unit = 0;
      if (typeof l.unit === "string" && l.unit in OVERRIDE_UNIT_NAMES)
        unit = OVERRIDE_UNIT_NAMES[l.unit]!;
      else if (typeof l.unit === "number" && Number.isInteger(l.unit)) unit = l.unit;
      else if (l.unit !== undefined)
        issues.push({
          path: at(lp, "unit"),
          message: `must be one of ${Object.keys(OVERRIDE_UNIT_NAMES).join(", ")} (got ${JSON.stringify(l.unit)})`,
        });
      limit = {
        requestsPerUnit: unsigned(
          l.requestsPerUnit,
          at(lp, "requestsPerUnit"),
          0xffff_ffff,
          issues,
        ),
        unit,
      };
    }
    return {
      entries,
      limit,
      hitsAddend:
        d.hitsAddend === undefined
          ? undefined
          : unsigned(d.hitsAddend, at(p, "hitsAddend"), Number.MAX_VALUE, issues),
    };
  });
  return issues.length > 0 ? { issues } : { request: { domain, hitsAddend, descriptors } };
}

/** The protojson form of a response (fields at their default value left out). */
export function responseToJson(r: RlsResponse): Record<string, unknown> {
  const out: Record<string, unknown> = { overallCode: CODE_NAMES[r.overallCode] };
  if (r.statuses.length > 0)
    out.statuses = r.statuses.map((s) => {
      const status: Record<string, unknown> = { code: CODE_NAMES[s.code] };
      if (s.currentLimit) {
        const c: Record<string, unknown> = {};
        if (s.currentLimit.name) c.name = s.currentLimit.name;
        if (s.currentLimit.requestsPerUnit) c.requestsPerUnit = s.currentLimit.requestsPerUnit;
        if (s.currentLimit.unit) c.unit = UNIT_NAMES[s.currentLimit.unit];
        status.currentLimit = c;
      }
      if (s.limitRemaining) status.limitRemaining = s.limitRemaining;
      if (s.durationUntilResetS !== undefined)
        status.durationUntilReset = `${s.durationUntilResetS}s`;
      return status;
    });
  if (r.responseHeadersToAdd.length > 0)
    out.responseHeadersToAdd = r.responseHeadersToAdd.map(([key, value]) => ({ key, value }));
  if (r.rawBody && r.rawBody.length > 0) out.rawBody = Buffer.from(r.rawBody).toString("base64");
  return out;
}
