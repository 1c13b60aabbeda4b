/**
 * The service's documents: a policy as stored and exchanged (a sluice `PolicyInput` plus the
 * apps granted and `enabled`), apps, users and roles. Policy fields are validated by sluice's
 * own `definePolicy`, so the service accepts exactly what the library does.
 */
import {
  ALGORITHMS,
  type Policy,
  type PolicyInput,
  ValidationError,
  type ValidationIssue,
  definePolicy,
} from "sluice";
import { z } from "zod";
import { zodIssues } from "./errors.js";

/** Names of apps: letters, digits, `.`, `_`, `-`; 1–64 characters. */
export const APP_NAME = /^[A-Za-z0-9._-]{1,64}$/;
/** Usernames: letters, digits, `.`, `_`, `-`, `@`; 1–64 characters. */
export const USERNAME = /^[A-Za-z0-9._@-]{1,64}$/;
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

/** Admin roles: `viewer` reads, `owner` edits the policies granted to its apps, `admin` does everything. */
export const ROLES = ["viewer", "owner", "admin"] as const;
/** An admin role, see {@link ROLES}. */
export type Role = (typeof ROLES)[number];

const duration = z.union([z.number().int().positive(), z.string()]).meta({
  description: 'Milliseconds, or a string such as "500ms", "1s", "1m", "1h", "1d".',
});

/** Schema of a rule (documentation; values are checked by sluice's `definePolicy`). */
export const ruleSchema = z.strictObject({
  limit: z
    .number()
    .int()
    .positive()
    .meta({ description: "Requests (cost units) per period; for concurrency, leases in flight." }),
  period: duration,
  burst: z
    .number()
    .int()
    .positive()
    .optional()
    .meta({ description: "gcra and token-bucket: bucket capacity (default: limit)." }),
});

const appName = z
  .string({ error: "must be a string" })
  .regex(APP_NAME, { error: "must be 1–64 letters, digits, '.', '_' or '-'" });

/** Schema of a policy document as the admin API, YAML files and the database hold it. */
export const policyDocumentSchema = z.strictObject({
  name: z
    .string()
    .meta({ description: "Unique name: letters, digits, '.', '_', '-', ':' (1–128)." }),
  description: z.string().max(2000).optional(),
  algorithm: z.enum(ALGORITHMS).optional().meta({ description: "Default gcra." }),
  rules: z.array(ruleSchema).min(1).max(16),
  blockDuration: duration.optional(),
  onStoreError: z.enum(["allow", "deny", "insurance"]).optional(),
  insuranceInstances: z.number().int().positive().optional(),
  shadow: z
    .boolean()
    .optional()
    .meta({ description: "Allow everything, but report what would have been denied." }),
  apps: z
    .array(appName)
    .optional()
    .meta({ description: "Apps granted this policy (default none)." }),
  enabled: z.boolean().optional().meta({
    description: "A disabled policy allows every request without counting (default true).",
  }),
});

/** A policy as stored: sluice's input form (durations as written) plus grants and `enabled`. */
export interface PolicyDocument extends PolicyInput {
  /** Apps granted this policy. */
  apps: string[];
  /** A disabled policy allows every request without counting. */
  enabled: boolean;
}

const serverFields = z.object({
  apps: z
    .array(appName, { error: "must be a list of app names" })
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
    rules: r.rules.map((x) => ({
      limit: x.limit,
      period: x.period,
      ...(x.burst !== undefined ? { burst: x.burst } : {}),
    })),
    ...(r.blockDuration !== undefined ? { blockDuration: r.blockDuration } : {}),
    ...(r.onStoreError !== undefined ? { onStoreError: r.onStoreError } : {}),
    ...(r.insuranceInstances !== undefined ? { insuranceInstances: r.insuranceInstances } : {}),
    shadow: policy.shadow,
    apps: extra.data.apps,
    enabled: extra.data.enabled,
  };
  return { doc, policy };
}

/** The sluice input of a stored document (without grants), for `definePolicy`. */
export function documentToInput(doc: PolicyDocument): PolicyInput {
  const { apps: _apps, enabled: _enabled, ...input } = doc;
  return input;
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
