/**
 * Request and answer schemas of the HTTP API, in zod: the service validates requests with them
 * and generates `/openapi.json` from them; the console takes its types from them; and the
 * server's test/api-answers.test.ts parses a real answer of every admin route with them.
 */
import { ALGORITHMS } from "sluice/algorithms";
import {
  envoyCounterAnswerSchema,
  envoyCounterRequestSchema,
  envoyDomainDocumentSchema,
  envoyDomainListSchema,
  envoyDomainRecordSchema,
  envoyDomainWriteSchema,
  envoyDraftSchema,
  envoyImportRequestSchema,
  envoyImportResultSchema,
  envoyVersionListSchema,
  envoyVersionSchema,
} from "./envoy.js";
import { z } from "zod";
import { APP_NAME, ROLES, USERNAME, policyDocumentSchema, ruleSchema } from "./documents.js";

const positiveInt = z
  .number({ error: "must be a positive integer" })
  .int({ error: "must be a positive integer" })
  .positive({ error: "must be a positive integer" });

const policyName = z
  .string({ error: "must be a string (a policy name)" })
  .min(1, { error: "must not be empty" })
  .max(128, { error: "must be at most 128 characters" });
/**
 * Half of a surrogate pair, alone: JSON may escape one (`"\ud800"`), but it is no character, and
 * Redis (UTF-8) would store every such key as U+FFFD: one counter for all of them.
 */
const LONE_SURROGATE = /\p{Cs}/u;
const key = z
  .string({ error: "must be a string (the identifier to limit: an IP, user id, API key…)" })
  .min(1, { error: "must not be empty" })
  .max(4096, { error: "must be at most 4096 characters" })
  .refine((k) => !LONE_SURROGATE.test(k), {
    error:
      "is not valid UTF-8: bytes that encode no character, or a lone surrogate (\\ud800–\\udfff), would be stored as U+FFFD, the same for every such text",
  });

/** `POST /v1/limit`. */
export const limitRequestSchema = z.strictObject({
  policy: policyName,
  key,
  cost: positiveInt.optional().meta({ description: "Units to charge (default 1)." }),
});

/** `POST /v1/limit/batch`. */
export const batchRequestSchema = z.strictObject({
  requests: z
    .array(limitRequestSchema, { error: "must be a list of { policy, key, cost? }" })
    .min(1, { error: "must hold at least one request" }),
});

/** `POST /v1/peek`. */
export const peekRequestSchema = z.strictObject({ policy: policyName, key });

/** `POST /v1/release`. */
export const releaseRequestSchema = z.strictObject({
  policy: policyName,
  key,
  leaseId: z
    .string({ error: "must be a string (the decision's leaseId)" })
    .min(1, { error: "must not be empty" })
    .max(200),
});

/** Query of `GET /v1/policies`. */
export const policiesQuerySchema = z.strictObject({
  wait: z.coerce
    .number({ error: "must be a whole number of ms from 0 to 60000" })
    .int({ error: "must be a whole number of ms from 0 to 60000" })
    .min(0, { error: "must be a whole number of ms from 0 to 60000" })
    .max(60_000, { error: "must be a whole number of ms from 0 to 60000" })
    .default(0)
    .meta({
      description:
        "Long poll: when the set's ETag equals If-None-Match, wait up to this long (ms) for a change before answering 304.",
    }),
  revision: z.coerce
    .number({ error: "must be a revision number (a whole number ≥ 0)" })
    .int({ error: "must be a revision number (a whole number ≥ 0)" })
    .min(0, { error: "must be a revision number (a whole number ≥ 0)" })
    .optional()
    .meta({
      description:
        "The revision the client has seen: a node behind it checks the database before answering.",
    }),
});

const reportCount = z
  .number({ error: "must be a whole number ≥ 0" })
  .int({ error: "must be a whole number ≥ 0" })
  .min(0, { error: "must be a whole number ≥ 0" })
  .max(Number.MAX_SAFE_INTEGER, { error: "is too large" });

/** `POST /v1/policies/report`: an embedded client's counts since its last report, and its heartbeat. */
export const policyReportSchema = z.strictObject({
  instance: z
    .string({ error: "must be a string (the client process's id)" })
    .regex(/^[A-Za-z0-9._:-]{1,64}$/, {
      error: "must be 1–64 letters, digits, '.', '_', ':' or '-'",
    }),
  host: z
    .string({ error: "must be a string (the client's host name)" })
    .min(1, { error: "must not be empty" })
    .max(255, { error: "must be at most 255 characters" }),
  client: z
    .string({ error: "must be a string (the client library and version)" })
    .min(1, { error: "must not be empty" })
    .max(64, { error: "must be at most 64 characters" })
    .meta({ description: "The client library and version, e.g. sluice/0.1.0." }),
  revision: reportCount.meta({ description: "The policy revision the client runs." }),
  drafts: z
    .array(
      z
        .strictObject({
          policy: policyName,
          draftId: positiveInt,
          evaluated: reportCount,
          wouldDeny: reportCount,
          wouldDenyNewly: reportCount,
          wouldAllowNewly: reportCount,
        })
        .refine((d) => d.wouldDeny <= d.evaluated, {
          error: "wouldDeny must not exceed evaluated",
          path: ["wouldDeny"],
        })
        .refine((d) => d.wouldDenyNewly <= d.wouldDeny, {
          error: "wouldDenyNewly must not exceed wouldDeny",
          path: ["wouldDenyNewly"],
        })
        .refine(
          (d) => d.wouldDeny > d.evaluated || d.wouldAllowNewly <= d.evaluated - d.wouldDeny,
          {
            error: "wouldAllowNewly must not exceed the requests the draft allowed",
            path: ["wouldAllowNewly"],
          },
        ),
      { error: "must be a list of draft counts" },
    )
    .max(1000, { error: "must hold at most 1000 entries" })
    .default([])
    .meta({ description: "Draft counts since the last report (added to the draft's totals)." }),
  decisions: z
    .array(
      z.strictObject({
        policy: policyName,
        allowed: z.boolean({ error: "must be true or false" }),
        reason: z
          .enum(["blocked", "store-error", "insurance", "deny-cache", "shadow", "disabled"], {
            error: "must be a decision reason",
          })
          .optional(),
        count: reportCount,
      }),
      { error: "must be a list of decision counts" },
    )
    .max(10_000, { error: "must hold at most 10000 entries" })
    .default([])
    .meta({ description: "Decisions since the last report, by policy, outcome and reason." }),
});

/** `POST /v1/policies/report` answer. */
export const policyReportAnswerSchema = z.strictObject({
  revision: z.number().int().meta({ description: "The revision this node runs." }),
  ignored: z.array(z.object({ path: z.string(), message: z.string() })).meta({
    description: "Entries not counted (a draft replaced meanwhile, a policy not granted).",
  }),
});

const ruleDecisionSchema = z.object({
  allowed: z.boolean(),
  remaining: z.number(),
  resetAfterMs: z.number(),
  retryAfterMs: z.number(),
  limit: z.number(),
  periodMs: z.number(),
  burst: z.number(),
});

/** A decision, as answered by the decision API. */
export const decisionSchema = z.object({
  allowed: z.boolean(),
  limit: z.number(),
  remaining: z
    .number()
    .meta({ description: "Requests of cost 1 still allowed right after this decision." }),
  resetAfterMs: z.number(),
  retryAfterMs: z.number().meta({
    description: "0 when allowed; when denied, the wait after which the same request would pass.",
  }),
  policy: z.string(),
  rule: z.number().meta({ description: "Index of the reported rule in `rules`." }),
  rules: z.array(ruleDecisionSchema),
  cost: z.number(),
  reason: z
    .enum(["blocked", "store-error", "insurance", "deny-cache", "shadow", "disabled"])
    .optional(),
  leaseId: z.string().optional().meta({
    description:
      "concurrency: the permit's id (the field keeps its first name); release it with POST /v1/release.",
  }),
  disabled: z.boolean().optional().meta({
    description:
      'Present (true) when the policy is disabled: everything is allowed, nothing counted; the same as reason "disabled".',
  }),
});

/** `POST /v1/limit/batch` answer. */
export const batchResponseSchema = z.object({ results: z.array(decisionSchema) });

/** Every error body. */
export const errorSchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  }),
});

/** `POST /v1/admin/login`. */
export const loginRequestSchema = z.strictObject({
  username: z
    .string({ error: "must be a string" })
    .min(1, { error: "must not be empty" })
    .max(64, { error: "must be at most 64 characters" }),
  password: z
    .string({ error: "must be a string" })
    .min(1, { error: "must not be empty" })
    .max(1024, { error: "must be at most 1024 characters" }),
});

/** `POST /v1/admin/login` answer. */
export const loginResponseSchema = z.object({
  token: z.string(),
  expiresAt: z.string(),
  user: z.object({ username: z.string(), role: z.enum(ROLES), apps: z.array(z.string()) }),
});

/** `PUT /v1/admin/policies/:name` and the draft: a policy document, plus optimistic concurrency. */
export const policyWriteSchema = policyDocumentSchema.extend({
  name: z
    .string()
    .optional()
    .meta({ description: "Taken from the URL; when given it must match." }),
  expectVersion: positiveInt
    .optional()
    .meta({ description: "Refuse (409) unless the stored version is this one." }),
});

/** `PUT /v1/admin/policies/:name/draft`: a policy document, plus optimistic concurrency. */
export const draftWriteSchema = policyWriteSchema.extend({
  expectVersion: positiveInt.optional().meta({
    description: "Refuse (409) unless the enforced version is this one (the draft's base).",
  }),
  draftId: positiveInt.optional().meta({
    description:
      "The id of the draft this one replaces. Required when the policy has a draft (else 409); refused when it has none.",
  }),
});

/** `POST /v1/admin/policies/:name/draft/promote` (the body is optional). */
export const promoteRequestSchema = z.strictObject({
  expectVersion: positiveInt
    .optional()
    .meta({ description: "Refuse (409) unless the enforced version is this one." }),
  draftId: positiveInt
    .optional()
    .meta({ description: "Refuse (409) unless the draft is still this one (the one reviewed)." }),
});

/** `POST /v1/admin/policies/import`. */
export const importRequestSchema = z.strictObject({
  version: z
    .literal(1, { error: "must be 1 (the policy file version)" })
    .optional()
    .meta({ description: "The policy file version, as `GET …/export?format=json` writes it." }),
  policies: z
    .array(z.unknown(), { error: "must be a list of policy documents" })
    .meta({ description: "Policy documents (see PolicyDocument)." }),
  prune: z
    .boolean({ error: "must be true or false" })
    .optional()
    .meta({ description: "Delete policies that are not in the list." }),
  dryRun: z
    .boolean({ error: "must be true or false" })
    .optional()
    .meta({ description: "Validate and report the plan; change nothing." }),
});

/** `POST /v1/admin/apps`. */
export const appCreateSchema = z.strictObject({
  name: z
    .string({ error: "must be a string" })
    .regex(APP_NAME, { error: "must be 1–64 letters, digits, '.', '_' or '-'" }),
  description: z
    .string({ error: "must be a string" })
    .max(2000, { error: "must be at most 2000 characters" })
    .optional(),
});

const password = z
  .string({ error: "must be a string" })
  .min(8, { error: "must be at least 8 characters" })
  .max(1024, { error: "must be at most 1024 characters" });
const role = z.enum(ROLES, { error: `must be one of ${ROLES.join(", ")}` });
const ownedApps = z.array(
  z.string({ error: "must be an app name" }).regex(APP_NAME, { error: "must be an app name" }),
  { error: "must be a list of app names" },
);

/** `POST /v1/admin/users`. */
export const userCreateSchema = z.strictObject({
  username: z
    .string({ error: "must be a string" })
    .regex(USERNAME, { error: "must be 1–64 letters, digits, '.', '_', '-' or '@'" }),
  password,
  role,
  apps: ownedApps.optional().meta({ description: "owner: the apps this user owns." }),
});

/** `PATCH /v1/admin/users/:username`. */
export const userUpdateSchema = z.strictObject({
  password: password.optional(),
  role: role.optional(),
  apps: ownedApps.optional(),
});

/** An ISO 8601 time in a query (`2026-03-01T12:00:00Z`), as UTC ISO text. */
const isoTime = z
  .string({ error: "must be an ISO 8601 time, e.g. 2026-03-01T12:00:00Z" })
  .refine(
    (v) =>
      /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?$/.test(v) &&
      !Number.isNaN(Date.parse(v)),
    {
      error: "must be an ISO 8601 time, e.g. 2026-03-01T12:00:00Z",
    },
  )
  .transform((v) => new Date(v).toISOString());

/** Query of `GET /v1/admin/audit`. */
export const auditQuerySchema = z.strictObject({
  limit: z.coerce
    .number({ error: "must be an integer from 1 to 500" })
    .int({ error: "must be an integer from 1 to 500" })
    .min(1, { error: "must be an integer from 1 to 500" })
    .max(500, { error: "must be an integer from 1 to 500" })
    .default(100),
  before: z.coerce
    .number({ error: "must be an audit id" })
    .int({ error: "must be an audit id" })
    .positive({ error: "must be an audit id" })
    .optional(),
  target: z.string().max(200).optional().meta({ description: "The target's exact name." }),
  actor: z.string().max(200).optional().meta({ description: "Who acted (exact)." }),
  action: z.string().max(200).optional().meta({
    description: "The action, or a prefix of it ending at a dot: `policy` matches `policy.update`.",
  }),
  object: z.string().max(200).optional().meta({
    description: "A case-insensitive substring of the target's name.",
  }),
  since: isoTime.optional().meta({ description: "Entries at or after this time." }),
  until: isoTime.optional().meta({ description: "Entries before this time." }),
});

/** `POST /v1/admin/setup`: the first admin, with the setup token `sluice serve` printed. */
export const setupRequestSchema = z.strictObject({
  token: z
    .string({ error: "must be a string (the setup token sluice serve printed)" })
    .min(1, { error: "must not be empty (the setup token sluice serve printed)" })
    .max(200, { error: "is not a setup token" }),
  username: z
    .string({ error: "must be a string" })
    .regex(USERNAME, { error: "must be 1–64 letters, digits, '.', '_', '-' or '@'" }),
  password: z
    .string({ error: "must be a string" })
    .min(8, { error: "must be at least 8 characters" })
    .max(1024, { error: "must be at most 1024 characters" }),
});

/** `GET /v1/admin/setup`: whether the first admin is still to be made. */
export const setupStatusSchema = z.strictObject({
  needed: z.boolean().meta({ description: "True while no admin exists." }),
  tokenActive: z
    .boolean()
    .meta({ description: "Whether this node holds a usable setup token (it printed one)." }),
});

/** `POST /v1/admin/me/password`: change your own password. */
export const passwordChangeSchema = z.strictObject({
  currentPassword: z
    .string({ error: "must be a string" })
    .min(1, { error: "must not be empty" })
    .max(1024, { error: "must be at most 1024 characters" }),
  newPassword: z
    .string({ error: "must be a string" })
    .min(8, { error: "must be at least 8 characters" })
    .max(1024, { error: "must be at most 1024 characters" }),
});

/** Query of `GET /v1/admin/traffic`. */
export const trafficQuerySchema = z.strictObject({
  policy: policyName.optional().meta({ description: "One policy (default: every policy)." }),
  app: z.string().max(128).optional().meta({ description: "One app (default: every app)." }),
  window: z
    .enum(["5m", "15m", "1h", "6h", "24h"], { error: "must be one of 5m, 15m, 1h, 6h, 24h" })
    .default("15m"),
});

/** Query of `GET /v1/admin/traffic/keys`. */
export const topKeysQuerySchema = z.strictObject({
  policy: policyName,
  window: z
    .enum(["1m", "5m", "15m", "1h"], { error: "must be one of 1m, 5m, 15m, 1h" })
    .default("5m"),
});

/** Query of `GET /v1/admin/policies/:name/key`. */
export const keyQuerySchema = z.strictObject({ key });

/** `POST /v1/admin/policies/:name/key/reset`. */
export const keyResetRequestSchema = z.strictObject({ key });

/** Query of `GET /v1/admin/explain`: why a key is (or is not) limited under a policy. */
export const explainQuerySchema = z.strictObject({
  policy: policyName,
  key,
  cost: z.coerce
    .number({ error: "must be a positive integer" })
    .int({ error: "must be a positive integer" })
    .positive({ error: "must be a positive integer" })
    .optional()
    .meta({ description: "The cost explained (default 1)." }),
});

/** A path's version number. */
export const versionParamSchema = z.coerce
  .number({ error: "must be a version number" })
  .int({ error: "must be a version number" })
  .positive({ error: "must be a version number" });

// ------------------------------------------------------------ admin API answers
// What the admin routes send. The admin page takes its types from these (`z.infer`), and
// test/api-answers.test.ts parses a real answer of every route with them, so neither side can
// drift from what the service really sends.

const timestamp = z.string().meta({ description: "ISO 8601 time (UTC)." });
const names = z.array(z.string());

/** The signed-in user (`GET /v1/admin/me`; `user` of the login answer). */
export const sessionUserSchema = z.strictObject({
  username: z.string(),
  role: z.enum(ROLES),
  apps: names.meta({ description: "owner: the apps this user owns." }),
});

/** A user, as the user routes answer (never with a password hash). */
export const userSchema = sessionUserSchema.extend({ createdAt: timestamp, updatedAt: timestamp });

/** `GET /v1/admin/users`. */
export const userListSchema = z.strictObject({ users: z.array(userSchema) });

/**
 * What a valid document asks that this node will not do as written, each naming its field
 * (`lease` on memory counters); the write was made all the same. Left out when there is none.
 */
const warningsSchema = z
  .array(z.strictObject({ path: z.string(), message: z.string() }))
  .optional()
  .meta({
    description:
      "What the document asks that this service will not do as written (lease on memory counters), each naming its field; the write was made all the same. Left out when there is none.",
  });

/** A policy document as stored: every default filled in. */
export const storedPolicySchema = policyDocumentSchema.extend({
  description: z.string(),
  algorithm: z.enum(ALGORITHMS),
  shadow: z.boolean(),
  apps: names,
  enabled: z.boolean(),
});

/** A policy with its bookkeeping: the document's fields flattened beside them. */
export const policyRecordSchema = storedPolicySchema.extend({
  version: z.number().int(),
  createdBy: z.string(),
  updatedBy: z.string(),
  createdAt: timestamp,
  updatedAt: timestamp,
  hasDraft: z
    .boolean()
    .optional()
    .meta({ description: "In lists: whether a draft is evaluated in shadow." }),
  warnings: warningsSchema,
});

/** `GET /v1/admin/policies`. */
export const policyListSchema = z.strictObject({
  revision: z.number().int().meta({ description: "The revision this node runs." }),
  policies: z.array(policyRecordSchema),
});

/** One kept version of a policy. */
export const policyVersionSchema = z.strictObject({
  name: z.string(),
  version: z.number().int(),
  doc: storedPolicySchema,
  action: z.string().meta({ description: "What made this version (create, update, restore…)." }),
  createdBy: z.string(),
  createdAt: timestamp,
});

/** `GET /v1/admin/policies/:name/versions`. */
export const versionListSchema = z.strictObject({ versions: z.array(policyVersionSchema) });

/** What a draft would have done on live traffic, over every node. */
export const draftStatsSchema = z.strictObject({
  evaluated: z.number().int(),
  wouldDeny: z.number().int(),
  wouldDenyNewly: z.number().int(),
  wouldAllowNewly: z.number().int(),
});

/** A draft, evaluated in shadow beside the enforced version. */
export const draftSchema = z.strictObject({
  id: z.number().int(),
  name: z.string(),
  doc: storedPolicySchema,
  baseVersion: z.number().int(),
  createdBy: z.string(),
  createdAt: timestamp,
  stats: draftStatsSchema.optional().meta({ description: "In GET: what it would have done." }),
  warnings: warningsSchema,
});

/** An app (never its key, only the key's public id). */
export const appSchema = z.strictObject({
  name: z.string(),
  description: z.string(),
  keyId: z.string(),
  createdBy: z.string(),
  createdAt: timestamp,
  updatedAt: timestamp,
  policies: names.optional().meta({ description: "In lists: the policies granted to the app." }),
});

/** `GET /v1/admin/apps`. */
export const appListSchema = z.strictObject({ apps: z.array(appSchema) });

/** An app just created or re-keyed, with its API key: shown this once. */
export const appWithKeySchema = appSchema.extend({ apiKey: z.string(), note: z.string() });

/** One audit log entry. */
export const auditEntrySchema = z.strictObject({
  id: z.number().int(),
  at: timestamp,
  actor: z.string(),
  action: z.string(),
  targetType: z.string(),
  target: z.string(),
  detail: z.unknown(),
});

/** `GET /v1/admin/audit`. */
export const auditListSchema = z.strictObject({ entries: z.array(auditEntrySchema) });

/** `POST /v1/admin/policies/import` answer: what changed (or, with `dryRun`, would change). */
export const importResultSchema = z.strictObject({
  dryRun: z.boolean(),
  plan: z.strictObject({ create: names, update: names, unchanged: names, delete: names }),
  warnings: warningsSchema,
});

const counts = z.strictObject({
  allowed: z.number().int(),
  denied: z.number().int(),
  shadow: z
    .number()
    .int()
    .meta({ description: "Allowed by shadow mode where the policy would have denied." }),
});

/** `GET /v1/admin/traffic/overview`: every policy, in order of attention. */
export const trafficOverviewSchema = z.strictObject({
  at: z.number().int().meta({ description: "The node's time, epoch seconds." }),
  recentSec: z.number().int(),
  windowSec: z.number().int(),
  sparkFrom: z.number().int().meta({ description: "Start of the first sparkline point." }),
  sparkStepSec: z.number().int(),
  policies: z.array(
    z.strictObject({
      name: z.string(),
      enabled: z.boolean(),
      shadow: z.boolean(),
      hasDraft: z.boolean(),
      apps: names,
      rate: z.number().meta({ description: "Decisions per second over the last recentSec." }),
      recent: counts.meta({ description: "Totals over the last windowSec (the sparkline's)." }),
      spark: z.array(counts),
    }),
  ),
});

/** `GET /v1/admin/traffic`: a history, summed over every node. */
export const trafficHistorySchema = z.strictObject({
  policy: z.string().optional(),
  app: z.string().optional(),
  window: z.string(),
  from: z.number().int(),
  to: z.number().int(),
  stepSec: z.number().int(),
  points: z.array(counts.extend({ at: z.number().int() })),
  totals: counts,
  by: z
    .array(z.strictObject({ name: z.string(), counts }))
    .meta({ description: "Totals per app (for a policy) or per policy." }),
});

const heavyHitter = z.strictObject({
  key: z.string(),
  count: z.number().int().meta({ description: "Upper bound of the key's decisions." }),
  overcount: z.number().int().meta({
    description: "At most this much of count may be over (count − overcount is a floor).",
  }),
});

/** `GET /v1/admin/traffic/keys`: the heaviest keys of a policy. */
export const topKeysSchema = z.strictObject({
  policy: z.string(),
  window: z.string(),
  from: z.number().int().meta({ description: "Start of the first minute counted, epoch seconds." }),
  busiest: z.array(heavyHitter),
  denied: z
    .array(heavyHitter)
    .meta({ description: "Denied (shadow would-denials not counted), most first." }),
  shadow: z.array(heavyHitter).meta({
    description: "Shadow would-denials (allowed only because of shadow mode), most first.",
  }),
});

/** `GET /v1/admin/policies/:name/key`: what a key has left. */
export const keyStateSchema = z.strictObject({
  policy: z.string(),
  key: z.string(),
  counters: z
    .string()
    .meta({ description: "Where the counters are: memory (this node) or redis." }),
  decision: decisionSchema.meta({ description: "What a cost-1 request would get now." }),
  draft: decisionSchema.optional().meta({ description: "The same under the policy's draft." }),
});

/** `POST /v1/admin/policies/:name/key/reset`. */
export const keyResetSchema = keyStateSchema.extend({
  reset: z.literal(true),
});

/** One rule's state in an explanation. */
const ruleExplanationSchema = z.strictObject({
  index: z.number().int(),
  limit: z.number(),
  periodMs: z.number(),
  burst: z.number(),
  remaining: z
    .number()
    .meta({ description: "Requests of cost 1 this rule admits now (before the request)." }),
  resetAfterMs: z.number(),
  retryAfterMs: z.number().meta({ description: "0 when this rule admits the request." }),
  denies: z
    .boolean()
    .meta({ description: "Whether this rule alone would deny a request of the cost now." }),
});

/** What sluice's `limiter.explain` answers (the Explanation type), without a draft. */
const explanationCoreSchema = z.strictObject({
  policy: z.string(),
  key: z.string(),
  cost: z.number().int(),
  allowedNow: z
    .boolean()
    .meta({ description: "Whether a request of the cost would pass now (shadow: it passes)." }),
  reason: z.enum(["blocked", "deny-cache", "shadow", "disabled"]).optional().meta({
    description: "What limit() would give as its reason now.",
  }),
  rules: z.array(ruleExplanationSchema),
  denyingRule: z.number().int().meta({
    description:
      "The rule that denies now (the longest wait), or when all pass the rule that will deny first (least remaining, ties to the longer period).",
  }),
  denyingNow: z.boolean().meta({ description: "Whether denyingRule denies now." }),
  freesInMs: z.number().meta({
    description: "0 when allowed; else the wait until a request of the cost would pass.",
  }),
  blockedForMs: z
    .number()
    .meta({ description: "> 0 while a penalty block is in force: the time until it ends." }),
  answeredBy: z.enum(["store", "deny-cache", "allotment"]).meta({
    description:
      "What would answer the next decision: the counter store, the Redis store's deny cache on the node that answered, or an allotment that node holds.",
  }),
  override: z.literal(true).optional().meta({
    description:
      "Present when the key has a per-key override: `rules` are the override's, in place of the policy's.",
  }),
});

/** `GET /v1/admin/explain`: why a key is (or is not) limited, charging nothing. */
export const explanationSchema = explanationCoreSchema.extend({
  enabled: z
    .boolean()
    .meta({ description: "A disabled policy allows every request without counting." }),
  draft: z
    .strictObject({
      id: z.number().int(),
      allowedNow: z.boolean(),
      explanation: explanationCoreSchema.optional().meta({
        description:
          "The draft's explanation on its own keys (sluice.draft.<id>); absent when the cost can never fit the draft.",
      }),
    })
    .optional()
    .meta({ description: "The draft's answer, beside the enforced version's." }),
});

/** A policy document as an app receives it: the stored document without its grants. */
export const servedPolicySchema = storedPolicySchema.omit({ apps: true });

/** One key's override as an embedded client receives it (`rules` null: deleted). */
const servedOverrideSchema = z.strictObject({
  policy: z.string(),
  key: z.string(),
  rules: z.array(ruleSchema).nullable(),
});

/**
 * The per-key overrides of `GET /v1/policies` (present when the client has some to take): every
 * override of the app's policies (`whole`), or those changed since the client's `revision`.
 */
export const servedOverridesSchema = z
  .strictObject({
    whole: z.boolean().meta({
      description:
        "True: every override of the app's policies (the client drops any it holds that are not listed). False: only those changed since ?revision.",
    }),
    items: z.array(servedOverrideSchema),
  })
  .meta({ description: "Per-key overrides: rules that replace a policy's for one key." });

/** `GET /v1/policies`: the policies granted to the app. */
export const policySetSchema = z.strictObject({
  app: z.string(),
  revision: z.number().int().meta({ description: "The revision this node runs." }),
  policies: z.array(
    z.strictObject({
      version: z.number().int(),
      document: servedPolicySchema,
      draft: z
        .strictObject({ id: z.number().int(), document: servedPolicySchema })
        .optional()
        .meta({ description: "The draft, evaluated in shadow on the keys sluice.draft.<id>." }),
    }),
  ),
  overrides: servedOverridesSchema.optional(),
});

/** An override's key: the identifier it applies to (at most 191 characters, as stored). */
export const overrideKeySchema = z
  .string({ error: "must be a string (the identifier the override applies to)" })
  .min(1, { error: "must not be empty" })
  .max(191, { error: "must be at most 191 characters" })
  .refine((k) => !LONE_SURROGATE.test(k), {
    error: "must not hold an unpaired surrogate",
  });

/** Path of the override routes: `/v1/admin/policies/{name}/overrides/{key}`. */
export const overrideParamsSchema = z.strictObject({ name: policyName, key: overrideKeySchema });

/**
 * `PUT /v1/admin/policies/{name}/overrides/{key}`: the rules that replace the policy's for the
 * key (validated as the policy with these rules: `definePolicy`).
 */
export const overrideWriteSchema = z.strictObject({
  rules: z.array(ruleSchema).meta({
    description:
      "The key's rules, in place of the policy's (the policy's algorithm and other fields stay).",
  }),
});

/** A per-key override, as the admin API answers it. */
export const overrideSchema = z.strictObject({
  policy: z.string(),
  key: z.string(),
  rules: z.array(ruleSchema),
  revision: z.number().int().meta({ description: "The revision of its last write." }),
  updatedBy: z.string(),
  updatedAt: timestamp,
});

/** Query of `GET /v1/admin/policies/{name}/overrides`: one page, by key. */
export const overrideListQuerySchema = z.strictObject({
  after: overrideKeySchema
    .optional()
    .meta({ description: "The page after this key (the previous page's `next`)." }),
  prefix: z
    .string()
    .max(191, { error: "must be at most 191 characters" })
    .optional()
    .meta({ description: "Only keys that start with this." }),
  limit: z.coerce
    .number({ error: "must be a whole number from 1 to 500" })
    .int({ error: "must be a whole number from 1 to 500" })
    .min(1, { error: "must be a whole number from 1 to 500" })
    .max(500, { error: "must be a whole number from 1 to 500" })
    .default(100),
});

/** `GET /v1/admin/policies/{name}/overrides`: one page of a policy's overrides, by key. */
export const overrideListSchema = z.strictObject({
  overrides: z.array(overrideSchema),
  total: z.number().int().meta({ description: "How many overrides match (every page)." }),
  next: z
    .string()
    .optional()
    .meta({ description: "Ask `?after=` this for the next page; absent on the last page." }),
});

/** An embedded policy client, as its last report described it. */
export const clientSchema = z.strictObject({
  app: z.string(),
  instance: z.string().meta({ description: "The client process's own id." }),
  host: z.string(),
  version: z.string().meta({ description: "The client library and version (sluice/0.1.0)." }),
  revision: z.number().int().meta({ description: "The policy revision the client runs." }),
  firstSeen: timestamp,
  lastSeen: timestamp,
});

/** `GET /v1/admin/clients`. */
export const clientListSchema = z.strictObject({
  revision: z.number().int().meta({ description: "The revision this node runs." }),
  clients: z.array(clientSchema),
});

/** Schemas named in the OpenAPI document's components. */
export const namedSchemas = {
  EnvoyDomainDocument: envoyDomainDocumentSchema,
  EnvoyDomainWrite: envoyDomainWriteSchema,
  EnvoyDomainRecord: envoyDomainRecordSchema,
  EnvoyDomainList: envoyDomainListSchema,
  EnvoyVersion: envoyVersionSchema,
  EnvoyVersionList: envoyVersionListSchema,
  EnvoyDraft: envoyDraftSchema,
  EnvoyImportRequest: envoyImportRequestSchema,
  EnvoyImportResult: envoyImportResultSchema,
  EnvoyCounterRequest: envoyCounterRequestSchema,
  EnvoyCounterAnswer: envoyCounterAnswerSchema,
  Rule: ruleSchema,
  PolicyDocument: policyDocumentSchema,
  PolicyWrite: policyWriteSchema,
  DraftWrite: draftWriteSchema,
  PromoteRequest: promoteRequestSchema,
  LimitRequest: limitRequestSchema,
  BatchRequest: batchRequestSchema,
  PeekRequest: peekRequestSchema,
  ReleaseRequest: releaseRequestSchema,
  Decision: decisionSchema,
  BatchResponse: batchResponseSchema,
  Error: errorSchema,
  LoginRequest: loginRequestSchema,
  LoginResponse: loginResponseSchema,
  ImportRequest: importRequestSchema,
  AppCreate: appCreateSchema,
  UserCreate: userCreateSchema,
  UserUpdate: userUpdateSchema,
  SessionUser: sessionUserSchema,
  User: userSchema,
  UserList: userListSchema,
  PolicyRecord: policyRecordSchema,
  PolicyList: policyListSchema,
  PolicyVersion: policyVersionSchema,
  VersionList: versionListSchema,
  Draft: draftSchema,
  App: appSchema,
  AppList: appListSchema,
  AppWithKey: appWithKeySchema,
  AuditList: auditListSchema,
  ImportResult: importResultSchema,
  SetupRequest: setupRequestSchema,
  SetupStatus: setupStatusSchema,
  PasswordChange: passwordChangeSchema,
  TrafficOverview: trafficOverviewSchema,
  TrafficHistory: trafficHistorySchema,
  TopKeys: topKeysSchema,
  KeyResetRequest: keyResetRequestSchema,
  KeyState: keyStateSchema,
  KeyReset: keyResetSchema,
  Explanation: explanationSchema,
  PolicySet: policySetSchema,
  PolicyReport: policyReportSchema,
  PolicyReportAnswer: policyReportAnswerSchema,
  Client: clientSchema,
  ClientList: clientListSchema,
  OverrideWrite: overrideWriteSchema,
  Override: overrideSchema,
  OverrideList: overrideListSchema,
} as const;
