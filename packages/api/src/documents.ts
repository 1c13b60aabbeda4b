/**
 * The documents the API exchanges: a policy document (a sluice policy input plus the apps
 * granted it and `enabled`) and its rules, and the names of apps, users and roles. The schemas
 * describe; the service validates policy fields with sluice's own `definePolicy`.
 */
import { ALGORITHMS, CALENDARS } from "sluice/algorithms";
import { z } from "zod";

/** Names of apps: letters, digits, `.`, `_`, `-`; 1–64 characters. */
export const APP_NAME = /^[A-Za-z0-9._-]{1,64}$/;
/** Usernames: letters, digits, `.`, `_`, `-`, `@`; 1–64 characters. */
export const USERNAME = /^[A-Za-z0-9._@-]{1,64}$/;
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
    .meta({ description: "Requests (cost units) per period; for concurrency, permits in flight." }),
  period: duration.optional().meta({
    description: "The period (required unless the rule has a calendar).",
  }),
  burst: z
    .number()
    .int()
    .positive()
    .optional()
    .meta({ description: "gcra and token-bucket: bucket capacity (default: limit)." }),
  calendar: z.enum(CALENDARS).optional().meta({
    description:
      "fixed-window only, instead of period: count per day, ISO week, month or year between local midnights of timeZone.",
  }),
  timeZone: z.string().optional().meta({
    description: 'With calendar: an IANA time zone such as "Europe/Berlin" (default UTC).',
  }),
  anchor: z.union([z.number().int(), z.string()]).optional().meta({
    description:
      'With calendar: where a window starts — week: ISO weekday 1–7 (default 1, Monday); month: day 1–31, clamped to a shorter month\'s last day (default 1); year: "MM-DD" (default "01-01").',
  }),
});

/** An app's name. */
export const appNameSchema = z
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
  resetOnBlock: z.boolean().optional().meta({
    description: "With blockDuration: the denial that starts a block forgets the key's counts.",
  }),
  windowStart: z.enum(["aligned", "first-request"]).optional().meta({
    description:
      "fixed-window: windows aligned to the clock (default) or opened by a key's first request.",
  }),
  refill: z.enum(["continuous", "interval"]).optional().meta({
    description:
      "token-bucket: refilled continuously (default) or `limit` tokens at once every whole period from each key's first request (as @upstash/ratelimit).",
  }),
  lease: z
    .union([
      z.boolean(),
      z.strictObject({
        maxShare: z.number().gt(0).lte(1).optional(),
        ttl: duration.optional(),
        hotAfter: z.number().int().positive().optional(),
      }),
    ])
    .optional()
    .meta({
      description:
        "Allotments (the field keeps its first name): with Redis counters, hot keys are decided in memory from capacity taken ahead (docs/leases.md): true, or { maxShare, ttl, hotAfter }.",
    }),
  adaptive: z
    .strictObject({
      algorithm: z.enum(["gradient2", "vegas", "aimd"]).optional(),
      min: z.number().int().positive().optional(),
      max: z.number().int().positive().optional(),
      initial: z.number().int().positive().optional(),
      reserve: z.number().min(0).max(0.9).optional(),
    })
    .optional()
    .meta({
      description:
        "concurrency only: the limit adapts to the backend's latency between min and max (docs/adaptive.md); the rule's limit stays the ceiling.",
    }),
  apps: z
    .array(appNameSchema)
    .optional()
    .meta({ description: "Apps granted this policy (default none)." }),
  enabled: z.boolean().optional().meta({
    description: "A disabled policy allows every request without counting (default true).",
  }),
});
