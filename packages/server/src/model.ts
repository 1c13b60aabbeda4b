/**
 * The service's documents: a policy as stored and exchanged (a sluice `PolicyInput` plus the
 * apps granted and `enabled`), apps, users and roles. Policy fields are validated by sluice's
 * own `definePolicy`, so the service accepts exactly what the library does.
 */
import { appNameSchema } from "@sluice/api";
import {
  type Policy,
  type PolicyInput,
  ValidationError,
  type ValidationIssue,
  definePolicy,
} from "sluice";
import { z } from "zod";
import { zodIssues } from "./errors.js";

/** Policy names starting with this are reserved for the service's own limiters. */
export const RESERVED_PREFIX = "sluice.";
/**
 * Policy names starting with this are the Envoy descriptor limits' (docs/envoy.md): a policy so
 * named would count on their keys.
 */
export const ENVOY_PREFIX = "envoy.";
/**
 * Policy names that are words of the admin API's routes (`/v1/admin/policies/export`,
 * `/v1/admin/policies/import`): a policy so named could not be read at `…/policies/{name}`.
 */
export const RESERVED_NAMES: readonly string[] = ["export", "import"];

/** A policy as stored: sluice's input form (durations as written) plus grants and `enabled`. */
export interface PolicyDocument extends PolicyInput {
  /** Apps granted this policy. */
  apps: string[];
  /** A disabled policy allows every request without counting. */
  enabled: boolean;
}

const serverFields = z.object({
  apps: z
    .array(appNameSchema, { error: "must be a list of app names" })
    .refine((a) => new Set(a).size === a.length, { error: "must not name an app twice" })
    .default([]),
  enabled: z.boolean({ error: "must be true or false" }).default(true),
});

/** A validated document and the sluice policy it resolves to. */
export interface ValidPolicy {
  readonly doc: PolicyDocument;
  readonly policy: Policy;
}

/**
 * Validates a policy document: every field through sluice's `definePolicy`, plus `apps` and
 * `enabled`. Returns the canonical document (stable key order, defaults filled) or every issue.
 */
export function validatePolicyDocument(
  input: unknown,
): ValidPolicy | { issues: ValidationIssue[] } {
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return { issues: [{ path: "", message: "must be an object (a policy document)" }] };
  }
  const { apps, enabled, ...rest } = input as Record<string, unknown>;
  const issues: ValidationIssue[] = [];
  const extra = serverFields.safeParse({ apps, enabled });
  if (!extra.success) issues.push(...zodIssues(extra.error, "", { apps, enabled }));
  let policy: Policy | undefined;
  try {
    policy = definePolicy(rest as unknown as PolicyInput);
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    issues.push(...err.issues);
  }
  if (typeof rest.name === "string" && rest.name.startsWith(RESERVED_PREFIX)) {
    issues.push({
      path: "name",
      message: `names starting with "${RESERVED_PREFIX}" are reserved for the service`,
    });
  }
  if (typeof rest.name === "string" && rest.name.startsWith(ENVOY_PREFIX)) {
    issues.push({
      path: "name",
      message: `names starting with "${ENVOY_PREFIX}" are reserved for Envoy descriptor limits`,
    });
  }
  if (typeof rest.name === "string" && RESERVED_NAMES.includes(rest.name)) {
    issues.push({
      path: "name",
      message: `"${rest.name}" is reserved: it is a route of the admin API (/v1/admin/policies/${rest.name})`,
    });
  }
  if (issues.length > 0 || !policy || !extra.success) return { issues };
  const r = rest as unknown as PolicyInput;
  const doc: PolicyDocument = {
    name: policy.name,
    description: policy.description,
    algorithm: policy.algorithm,
    rules: r.rules.map((x) =>
      x.calendar !== undefined
        ? {
            limit: x.limit,
            calendar: x.calendar,
            ...(x.timeZone !== undefined ? { timeZone: x.timeZone } : {}),
            ...(x.anchor !== undefined ? { anchor: x.anchor } : {}),
          }
        : {
            limit: x.limit,
            period: x.period,
            ...(x.burst !== undefined ? { burst: x.burst } : {}),
          },
    ),
    ...(r.blockDuration !== undefined ? { blockDuration: r.blockDuration } : {}),
    ...(r.onStoreError !== undefined ? { onStoreError: r.onStoreError } : {}),
    ...(r.insuranceInstances !== undefined ? { insuranceInstances: r.insuranceInstances } : {}),
    shadow: policy.shadow,
    ...(r.resetOnBlock === true ? { resetOnBlock: true } : {}),
    ...(r.windowStart !== undefined && r.windowStart !== "aligned"
      ? { windowStart: r.windowStart }
      : {}),
    ...(r.refill !== undefined && r.refill !== "continuous" ? { refill: r.refill } : {}),
    ...(r.lease !== undefined && r.lease !== false ? { lease: r.lease } : {}),
    ...(r.adaptive !== undefined ? { adaptive: r.adaptive } : {}),
    apps: extra.data.apps,
    enabled: extra.data.enabled,
  };
  return { doc, policy };
}

/** True when a document asks for allotments (`lease: true` or its tuning). */
export function takesAllotments(doc: Pick<PolicyInput, "lease">): boolean {
  return doc.lease !== undefined && doc.lease !== false;
}

/**
 * What a valid document asks that a service whose counters are `counters` (`memory` or
 * `redis`, as `Counters.kind`) will not do as written, each naming its field: `lease` on memory counters, which decide in one place and
 * ignore it. The document is kept all the same — it is shared by every node and by embedded
 * clients (`connectPolicies`), whose own store may be Redis, and it takes effect here once the
 * service runs Redis counters — so these are warnings beside the answer, never a refusal.
 */
export function policyWarnings(
  doc: Pick<PolicyInput, "lease">,
  counters: string,
): ValidationIssue[] {
  if (counters !== "memory" || !takesAllotments(doc)) return [];
  return [
    {
      path: "lease",
      message:
        "this service counts in memory (no Redis counters): its own decisions ignore lease; embedded clients (connectPolicies) whose store is Redis take allotments, and so will this service once it runs Redis counters (redisUrl)",
    },
  ];
}

/** True when two documents say the same thing. */
export function sameDocument(a: PolicyDocument, b: PolicyDocument): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}
