/**
 * The Envoy admin routes' requests and answers (`/v1/admin/envoy/…`), as zod schemas: the
 * routes validate with them, `/openapi.json` shows them, the admin page takes its types from
 * them and test/api-answers.test.ts parses real answers with them.
 */
import { ALGORITHMS } from "sluice/algorithms";
import { z } from "zod";

/** The reference service's units, as its YAML writes them (case-insensitive there). */
export const ENVOY_UNITS = ["second", "minute", "hour", "day", "week", "month", "year"] as const;

const timestamp = z.string().meta({ description: "ISO 8601 time (UTC)." });
const names = z.array(z.string());
const duration = z.union([z.number().int().positive(), z.string()]);

/** One rule of a descriptor limit (extension `rules`). */
export const envoyRuleSchema = z.strictObject({
  requests_per_unit: z.number().int().min(1),
  unit: z.enum(ENVOY_UNITS).optional(),
  period: duration.optional(),
  burst: z.number().int().positive().optional(),
});

/** A descriptor's `rate_limit` (the reference's fields and sluice's extensions). */
export const envoyRateLimitSchema = z.strictObject({
  unit: z.enum(ENVOY_UNITS).optional(),
  requests_per_unit: z.number().int().min(0).optional(),
  unlimited: z.boolean().optional(),
  name: z.string().optional(),
  replaces: z.array(z.strictObject({ name: z.string() })).optional(),
  algorithm: z.enum(ALGORITHMS.filter((a) => a !== "concurrency")).optional(),
  period: duration.optional(),
  burst: z.number().int().positive().optional(),
  rules: z.array(envoyRuleSchema).optional(),
  on_store_error: z.enum(["allow", "deny", "insurance"]).optional(),
});

/** One descriptor of a domain's tree (nested `descriptors`). */
export const envoyDescriptorSchema = z.strictObject({
  key: z.string(),
  value: z.string().optional(),
  get rate_limit() {
    return envoyRateLimitSchema.optional();
  },
  get descriptors(): z.ZodOptional<z.ZodArray<typeof envoyDescriptorSchema>> {
    return z.array(envoyDescriptorSchema).optional();
  },
  shadow_mode: z.boolean().optional(),
  quota_mode: z.boolean().optional(),
  detailed_metric: z.boolean().optional(),
  value_to_metric: z.boolean().optional(),
  share_threshold: z.boolean().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

/** A domain's configuration: the reference rate limit service's file, as JSON. */
export const envoyDomainDocumentSchema = z
  .strictObject({ domain: z.string(), descriptors: z.array(envoyDescriptorSchema) })
  .meta({ description: "The reference rate limit service's YAML file, as JSON (docs/envoy.md)." });

/** A domain write: the document (its `domain` may be left out) and `expectVersion`. */
export const envoyDomainWriteSchema = z.looseObject({
  domain: z.string().optional(),
  descriptors: z.array(z.unknown()),
  expectVersion: z.number().int().positive().optional(),
  draftId: z.number().int().positive().optional(),
});

/** A descriptor limit as the node runs it. */
export const envoyLimitSchema = z.strictObject({
  path: z.string().meta({ description: "The descriptor path: domain.key_value.key." }),
  policy: z.string().nullable().meta({
    description: "The sluice policy name its counters live under (none when unlimited or 0).",
  }),
  name: z.string().nullable(),
  replaces: names,
  unlimited: z.boolean(),
  shadow: z.boolean(),
  quota: z.boolean(),
  algorithm: z.enum(ALGORITHMS),
  onStoreError: z.enum(["allow", "deny", "insurance"]),
  rules: z.array(
    z.strictObject({
      requestsPerUnit: z.number().int(),
      periodMs: z.number().int(),
      unit: z.enum(ENVOY_UNITS).nullable(),
      burst: z.number().int().nullable(),
    }),
  ),
});

/** A domain with its bookkeeping. */
export const envoyDomainRecordSchema = z.strictObject({
  domain: z.string(),
  doc: envoyDomainDocumentSchema,
  version: z.number().int(),
  createdBy: z.string(),
  updatedBy: z.string(),
  createdAt: timestamp,
  updatedAt: timestamp,
  hasDraft: z.boolean(),
  limits: z.array(envoyLimitSchema).meta({ description: "Every limit, as this node runs it." }),
});

/** `GET /v1/admin/envoy/domains`. */
export const envoyDomainListSchema = z.strictObject({
  revision: z.number().int(),
  service: z.strictObject({
    grpc: z.boolean().meta({
      description:
        "Whether this node serves the Envoy rate limit service (gRPC and POST /json): started with --grpc-port.",
    }),
  }),
  domains: z.array(
    z.strictObject({
      domain: z.string(),
      version: z.number().int(),
      updatedBy: z.string(),
      updatedAt: timestamp,
      limits: z.number().int(),
      hasDraft: z.boolean(),
    }),
  ),
});

/** One kept version of a domain. */
export const envoyVersionSchema = z.strictObject({
  domain: z.string(),
  version: z.number().int(),
  doc: envoyDomainDocumentSchema,
  action: z.string(),
  createdBy: z.string(),
  createdAt: timestamp,
});

/** `GET /v1/admin/envoy/domains/:domain/versions`. */
export const envoyVersionListSchema = z.strictObject({ versions: z.array(envoyVersionSchema) });

/** A domain's draft, with what it would have done (over every node). */
export const envoyDraftSchema = z.strictObject({
  id: z.number().int(),
  domain: z.string(),
  doc: envoyDomainDocumentSchema,
  baseVersion: z.number().int(),
  createdBy: z.string(),
  createdAt: timestamp,
  stats: z
    .strictObject({
      evaluated: z.number().int(),
      wouldDeny: z.number().int(),
      wouldDenyNewly: z.number().int(),
      wouldAllowNewly: z.number().int(),
    })
    .optional(),
});

/** `POST /v1/admin/envoy/import` (JSON form). */
export const envoyImportRequestSchema = z.strictObject({
  domains: z.array(z.unknown()).meta({ description: "Domain documents (one per domain)." }),
  prune: z.boolean().optional().meta({ description: "Delete the domains not in the import." }),
  dryRun: z.boolean().optional().meta({ description: "Answer the plan; change nothing." }),
});

/** `POST /v1/admin/envoy/import` answer. */
export const envoyImportResultSchema = z.strictObject({
  dryRun: z.boolean(),
  plan: z.strictObject({ create: names, update: names, unchanged: names, delete: names }),
});

/** `POST …/counters/peek` and `…/counters/reset`: a request descriptor. */
export const envoyCounterRequestSchema = z.strictObject({
  entries: z
    .array(z.strictObject({ key: z.string().min(1), value: z.string() }))
    .min(1, { error: "must hold at least one entry" }),
});

/** What a descriptor's counters hold now (peek), or that they were reset. */
export const envoyCounterAnswerSchema = z.strictObject({
  limit: envoyLimitSchema.nullable().meta({ description: "The limit the descriptor matches." }),
  identifier: z
    .string()
    .nullable()
    .meta({ description: "The key counted under the limit's policy." }),
  decision: z
    .unknown()
    .nullable()
    .meta({ description: "Peek: what a request of 1 would get now (a sluice Decision)." }),
  reset: z.boolean().optional(),
});
