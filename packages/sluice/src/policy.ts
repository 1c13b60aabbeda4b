import { z } from "zod";
import {
  ALGORITHMS,
  type Algorithm,
  type AlgorithmName,
  type ResolvedRule,
  algorithms,
  fixedWindowFromFirstRequest,
  tokenBucketInterval,
} from "./algorithms/index.js";
import {
  CALENDARS,
  CALENDAR_PERIOD_MS,
  type CalendarUnit,
  CalendarWindows,
  anchorProblem,
  defaultAnchor,
  timeZoneProblem,
} from "./calendar.js";
import { type Duration, parseDurationOrMessage } from "./duration.js";
import { ValidationError, type ValidationIssue } from "./errors.js";

/**
 * One rule as written by a user: `limit` per `period` (and for token-bucket/GCRA a `burst`), or
 * — fixed-window only — `limit` per `calendar` window in a time zone.
 */
export type RuleInput = PeriodRuleInput | CalendarRuleInput;

/** A rule counted per `period`: `limit` per `period`, and for token-bucket/GCRA a `burst`. */
export interface PeriodRuleInput {
  /** Requests (cost units) allowed per period; for `concurrency`, permits in flight. A positive integer. */
  limit: number;
  /** The period, e.g. `"1m"` or `60000`; for `concurrency`, how long a permit lives if never released. */
  period: Duration;
  /** token-bucket and gcra only: how many may pass at once (bucket capacity). Defaults to `limit`. */
  burst?: number;
  /** Not with `period` (see {@link CalendarRuleInput}). */
  calendar?: undefined;
  /** Only with `calendar`. */
  timeZone?: undefined;
  /** Only with `calendar`. */
  anchor?: undefined;
}

/**
 * A rule counted per calendar window (`fixed-window` with aligned windows only): at most `limit`
 * per day, ISO week, month or year, whose edges are local midnights in `timeZone` — a day of 23
 * or 25 hours (a DST change) is one window. See docs/quotas.md.
 */
export interface CalendarRuleInput {
  /** Requests (cost units) allowed per window. A positive integer. */
  limit: number;
  /** The window: `"day"`, `"week"`, `"month"` or `"year"`. */
  calendar: CalendarUnit;
  /** The IANA time zone whose local midnights are the edges. Default `"UTC"`. */
  timeZone?: string;
  /**
   * Where a window starts. `week`: an ISO weekday, 1 (Monday, the default) to 7 (Sunday).
   * `month`: a day of the month, 1 (the default) to 31 — a shorter month's window starts on its
   * last day, as Stripe anchors billing. `year`: `"MM-DD"` (default `"01-01"`; `"02-29"` is Feb 28
   * in other years). Not for `day`.
   */
  anchor?: number | string;
  /** Not with `calendar`. */
  period?: undefined;
  /** Not with `calendar` (fixed-window has no burst). */
  burst?: undefined;
}

/**
 * Allotment tuning, the object form of the policy field `lease` (see docs/leases.md). An
 * allotment is capacity a node takes from Redis ahead of its requests for a hot key and decides
 * from in memory; what it does not use goes back.
 */
export interface AllotmentInput {
  /** The largest share of a rule's capacity one node may hold at once, in (0, 1]. Default 0.1. */
  maxShare?: number;
  /** How long an allotment lives: units not used by then go back. Default `"1s"`. */
  ttl?: Duration;
  /** A key gets an allotment once a node has decided it this many times within a second. Default 20. */
  hotAfter?: number;
}

/** A policy's allotment settings, resolved (the policy's `lease` field). */
export interface AllotmentSettings {
  /** The largest share of a rule's capacity one node may hold at once, in (0, 1]. */
  readonly maxShare: number;
  /** How long an allotment lives (ms): units not used by then go back. */
  readonly ttlMs: number;
  /** Decisions within a second after which a key gets an allotment. */
  readonly hotAfter: number;
}

/**
 * The first name of {@link AllotmentInput}.
 * @deprecated Use {@link AllotmentInput} ("lease" is the policy field's name only; docs/ARCHITECTURE.md, Glossary).
 */
export type LeaseInput = AllotmentInput;

/**
 * The first name of {@link AllotmentSettings}.
 * @deprecated Use {@link AllotmentSettings} ("lease" is the policy field's name only; docs/ARCHITECTURE.md, Glossary).
 */
export type LeaseSettings = AllotmentSettings;

/** Algorithms an allotment can serve exactly (their state is a count or a time that units move). */
export const ALLOTMENT_ALGORITHMS: readonly AlgorithmName[] = [
  "gcra",
  "token-bucket",
  "fixed-window",
  "concurrency",
];

/**
 * The first name of {@link ALLOTMENT_ALGORITHMS} (the same array).
 * @deprecated Use {@link ALLOTMENT_ALGORITHMS}.
 */
export const LEASE_ALGORITHMS: readonly AlgorithmName[] = ALLOTMENT_ALGORITHMS;

/**
 * Where a `fixed-window` policy's windows start: `aligned` to the clock ([k·P, (k+1)·P), every
 * key resets at the same moment), or at a key's `first-request` (each key's window opens with
 * its first charge and lasts `period`, as express-rate-limit, rate-limiter-flexible and
 * @nestjs/throttler count).
 */
export type WindowStart = "aligned" | "first-request";

/**
 * How a `token-bucket` policy's buckets refill: `continuous`ly (limit/period tokens per ms, a
 * token as soon as it has accrued), or by `interval` (`limit` tokens at once every whole
 * `period` after the key's anchor, its first charge since it was last full and expired: as
 * @upstash/ratelimit's token bucket counts). Both admit `burst` at once and `limit` per period
 * in the long run; between steps an interval bucket admits nothing.
 */
export type Refill = "continuous" | "interval";

/** The algorithms that move an adaptive concurrency limit (docs/adaptive.md). */
export const ADAPTIVE_ALGORITHMS = ["gradient2", "vegas", "aimd"] as const;

/** One of {@link ADAPTIVE_ALGORITHMS}. */
export type AdaptiveAlgorithm = (typeof ADAPTIVE_ALGORITHMS)[number];

/**
 * An adaptive concurrency limit, the policy field `adaptive` of a `concurrency` policy: the
 * limit moves between `min` and `max` from the latency (and drops) its permits report when
 * released (docs/adaptive.md). The rule's `limit` stays the hard ceiling the store enforces.
 */
export interface AdaptiveInput {
  /** How the limit moves. Default `gradient2`. */
  algorithm?: AdaptiveAlgorithm;
  /** The lowest limit, a positive integer. Default 1. */
  min?: number;
  /** The highest limit, at most the rule's `limit`. Default the rule's `limit`. */
  max?: number;
  /** The limit to start from, in [min, max]. Default `min`: the RTT baseline is learnt as the limit grows. */
  initial?: number;
  /**
   * The share of the limit kept for priority 0 (critical): the lowest priority sees the limit
   * less this share, the tiers between proportionally less. In [0, 0.9]. Default 0.2.
   */
  reserve?: number;
}

/** A policy's adaptive settings, resolved. */
export interface AdaptiveSettings {
  /** How the limit moves. */
  readonly algorithm: AdaptiveAlgorithm;
  /** The lowest limit. */
  readonly min: number;
  /** The highest limit (at most the rule's `limit`). */
  readonly max: number;
  /** The limit a limiter starts from. */
  readonly initial: number;
  /** The share of the limit kept for priority 0. */
  readonly reserve: number;
}

/** What to do when the counter store fails or times out. */
export type OnStoreError = "allow" | "deny" | "insurance";

/** A policy as written by a user (in code, YAML or through the admin API). */
export interface PolicyInput {
  /** Unique name: letters, digits, `.`, `_`, `-`, `:`; 1–128 characters. */
  name: string;
  /** The algorithm; `gcra` by default. */
  algorithm?: AlgorithmName;
  /** One or more rules, all enforced together (all pass and are charged, or none is). */
  rules: RuleInput[];
  /** After a denial, deny the key for this long (a penalty box). Off by default. */
  blockDuration?: Duration;
  /**
   * With `blockDuration`: the denial that starts a block also forgets the key's counts, so the
   * key is fresh when the block ends (as @nestjs/throttler's and rate-limiter-flexible's blocks
   * behave). The block then replaces the window: up to twice the limit may pass within a period
   * that spans one. Default false (counts keep running through a block).
   */
  resetOnBlock?: boolean;
  /** `fixed-window` only: where windows start (see {@link WindowStart}). Default `aligned`. */
  windowStart?: WindowStart;
  /** `token-bucket` only: how buckets refill (see {@link Refill}). Default `continuous`. */
  refill?: Refill;
  /**
   * When the store fails: `allow` (fail open, the default), `deny` (fail closed), or
   * `insurance` (an in-memory limiter enforcing this instance's share of the limit).
   */
  onStoreError?: OnStoreError;
  /** For `insurance`: how many instances share the limit (default: counted by the store, else 1). */
  insuranceInstances?: number;
  /** Let every request pass but report what would have been denied (`reason: "shadow"`). */
  shadow?: boolean;
  /** Free text shown in the admin. */
  description?: string;
  /**
   * Turns on allotments for this policy (the field keeps its first name): the Redis store
   * decides hot keys in memory from capacity taken from Redis ahead (`true` for the defaults,
   * or their tuning). Never over the limit; see docs/leases.md. gcra, token-bucket,
   * fixed-window and concurrency; not with `blockDuration`, first-request windows or interval
   * refills. The memory store ignores it.
   */
  lease?: boolean | AllotmentInput;
  /**
   * `concurrency` only: let the limit adapt to the backend's latency (docs/adaptive.md). The
   * rule's `limit` is then the hard ceiling, and `adaptive.max` at most it.
   */
  adaptive?: AdaptiveInput;
}

/** A validated policy: frozen, durations in ms, defaults filled in. */
export interface Policy {
  readonly name: string;
  readonly algorithm: AlgorithmName;
  readonly rules: readonly ResolvedRule[];
  /** 0 when no penalty is set. */
  readonly blockMs: number;
  /** Whether starting a penalty block forgets the key's counts. */
  readonly resetOnBlock: boolean;
  /** Where windows start (`aligned` for every algorithm but a `first-request` fixed-window). */
  readonly windowStart: WindowStart;
  /** How buckets refill (`continuous` for every algorithm but an `interval` token-bucket). */
  readonly refill: Refill;
  readonly onStoreError: OnStoreError;
  /** 0 means "ask the store, else 1". */
  readonly insuranceInstances: number;
  readonly shadow: boolean;
  readonly description: string;
  /**
   * Allotment settings (the field keeps its first name, `lease`), or undefined when the policy
   * takes no allotments.
   */
  readonly lease: AllotmentSettings | undefined;
  /** Adaptive concurrency settings, or undefined when the limit is the rule's, fixed. */
  readonly adaptive: AdaptiveSettings | undefined;
}

const NAME = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The largest `limit` and `burst` (2^48, 281 trillion). Every figure a store answers stays
 * within it, so no Redis client's number parser can round it (some read integers near 2^53 off
 * by one: docs/redis.md, "What crosses the wire").
 */
export const MAX_LIMIT = 2 ** 48;

/**
 * The longest `period` and `blockDuration`: 100 years. Times in µs (gcra) then stay below 2^53,
 * exact in every store's arithmetic.
 */
export const MAX_PERIOD_MS = 100 * 365 * 24 * 3_600_000;

const durationSchema = z.unknown().transform((v, ctx) => {
  const r = parseDurationOrMessage(v);
  if (typeof r === "string" || r > MAX_PERIOD_MS) {
    ctx.addIssue({
      code: "custom",
      message: typeof r === "string" ? r : `must be at most 100 years (got ${r} ms)`,
    });
    return z.NEVER;
  }
  return r;
});

const positiveInt = (what: string, max = Number.MAX_SAFE_INTEGER) =>
  z.unknown().transform((v, ctx) => {
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v <= 0 || v > max) {
      ctx.addIssue({
        code: "custom",
        message:
          typeof v === "number" && Number.isSafeInteger(v) && v > max
            ? `${what} must be at most ${max} (got ${v})`
            : `${what} must be a positive integer (got ${describe(v)})`,
      });
      return z.NEVER;
    }
    return v;
  });

const ruleSchema = z.strictObject({
  limit: positiveInt("limit", MAX_LIMIT),
  // Required unless the rule has a calendar (crossFieldIssues).
  period: durationSchema.optional(),
  burst: positiveInt("burst", MAX_LIMIT).optional(),
  calendar: z
    .enum(CALENDARS, { error: `calendar must be one of ${CALENDARS.join(", ")}` })
    .optional(),
  timeZone: z
    .unknown()
    .transform((v, ctx) => {
      if (v === undefined) return v;
      const problem = timeZoneProblem(v);
      if (problem !== undefined) {
        ctx.addIssue({ code: "custom", message: problem });
        return z.NEVER;
      }
      return v as string;
    })
    .optional(),
  // Checked against the calendar (crossFieldIssues).
  anchor: z
    .union([z.number(), z.string()], { error: "anchor must be a number or a string" })
    .optional(),
});

const allotmentSchema = z.strictObject({
  maxShare: z
    .number({ error: "maxShare must be a number" })
    .gt(0, { error: "maxShare must be more than 0 (a share of the capacity)" })
    .lte(1, { error: "maxShare must be at most 1 (a share of the capacity)" })
    .optional(),
  ttl: durationSchema.optional(),
  hotAfter: positiveInt("hotAfter").optional(),
});

const adaptiveSchema = z.strictObject({
  algorithm: z
    .enum(ADAPTIVE_ALGORITHMS, {
      error: `algorithm must be one of ${ADAPTIVE_ALGORITHMS.join(", ")}`,
    })
    .optional(),
  min: positiveInt("min", MAX_LIMIT).optional(),
  max: positiveInt("max", MAX_LIMIT).optional(),
  initial: positiveInt("initial", MAX_LIMIT).optional(),
  reserve: z
    .number({ error: "reserve must be a number" })
    .gte(0, { error: "reserve must be at least 0 (a share of the limit)" })
    .lte(0.9, { error: "reserve must be at most 0.9 (a share of the limit)" })
    .optional(),
});

/**
 * A policy field holding an object of settings (`lease`, `adaptive`; `lease` also takes
 * `true`/`false`): anything else is refused with `message`, and the object's own issues keep
 * their paths under the field (`lease.ttl`, `adaptive.min`).
 */
function settingsField<T extends z.ZodType>(
  schema: T,
  message: string,
  orBoolean: true,
): z.ZodType<z.output<T> | boolean | undefined, unknown>;
function settingsField<T extends z.ZodType>(
  schema: T,
  message: string,
  orBoolean: false,
): z.ZodType<z.output<T> | undefined, unknown>;
function settingsField<T extends z.ZodType>(schema: T, message: string, orBoolean: boolean) {
  return z.unknown().transform((v, ctx) => {
    if (v === undefined || (orBoolean && typeof v === "boolean")) return v;
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      ctx.addIssue({ code: "custom", message });
      return z.NEVER;
    }
    const r = schema.safeParse(v);
    if (!r.success) {
      for (const i of toIssues(r.error))
        ctx.addIssue({ code: "custom", message: i.message, path: i.path ? i.path.split(".") : [] });
      return z.NEVER;
    }
    return r.data as z.output<T>;
  });
}

const policySchema = z.strictObject({
  name: z.string({ error: "name must be a string" }).regex(NAME, {
    error: "name must be 1–128 characters of letters, digits, '.', '_', '-', ':'",
  }),
  algorithm: z
    .enum(ALGORITHMS, { error: `algorithm must be one of ${ALGORITHMS.join(", ")}` })
    .default("gcra"),
  rules: z
    .array(ruleSchema, { error: "rules must be a list of { limit, period }" })
    .min(1, { error: "rules must have at least one rule" })
    .max(16, { error: "rules may have at most 16 rules" }),
  blockDuration: durationSchema.optional(),
  resetOnBlock: z.boolean({ error: "resetOnBlock must be true or false" }).optional(),
  windowStart: z
    .enum(["aligned", "first-request"], {
      error: "windowStart must be aligned or first-request",
    })
    .optional(),
  refill: z
    .enum(["continuous", "interval"], { error: "refill must be continuous or interval" })
    .optional(),
  onStoreError: z
    .enum(["allow", "deny", "insurance"], {
      error: "onStoreError must be allow, deny or insurance",
    })
    .default("allow"),
  insuranceInstances: positiveInt("insuranceInstances").optional(),
  shadow: z.boolean({ error: "shadow must be true or false" }).default(false),
  description: z.string({ error: "description must be a string" }).max(2000).default(""),
  lease: settingsField(
    allotmentSchema,
    "lease must be true, false or { maxShare, ttl, hotAfter }",
    true,
  ).optional(),
  adaptive: settingsField(
    adaptiveSchema,
    "adaptive must be an object { algorithm, min, max, initial }",
    false,
  ).optional(),
});

function describe(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (v === undefined) return "nothing";
  if (v === null) return "null";
  if (typeof v === "number") return String(v);
  return typeof v;
}

/** Turns zod issues into ours: a dotted path and a message. */
export function toIssues(error: z.ZodError): ValidationIssue[] {
  return error.issues.map((i) => {
    const path = i.path.map(String).join(".");
    let message = i.message;
    if (i.code === "invalid_type" && i.input === undefined) message = "is required";
    if (i.code === "unrecognized_keys") message = `unknown field(s): ${i.keys.join(", ")}`;
    return { path, message };
  });
}

/** Every policy {@link definePolicy} returned: only these skip validation in `createLimiter`. */
const resolved = new WeakSet<object>();

/**
 * Validates a policy and resolves it into a frozen {@link Policy}.
 * Throws a {@link ValidationError} (code `SLUICE_ERR_POLICY`) listing every problem with its field.
 */
export function definePolicy(input: PolicyInput): Policy {
  const parsed = policySchema.safeParse(input, { reportInput: true });
  const name =
    typeof (input as { name?: unknown } | null)?.name === "string"
      ? (input as { name: string }).name
      : "";
  const subject = name ? `Invalid policy "${name}"` : "Invalid policy";
  // Every problem at once: when a field is wrong on its own, how the others go together is
  // still checked, over the fields that are right (what cannot be known is not guessed at).
  const issues: ValidationIssue[] = parsed.success ? [] : toIssues(parsed.error);
  const p: KnownFields = parsed.success ? parsed.data : knownFields(input);
  issues.push(...crossFieldIssues(p, input));
  if (!parsed.success || issues.length > 0)
    throw new ValidationError("SLUICE_ERR_POLICY", subject, issues);
  const d = parsed.data;
  const usesBurst = d.algorithm === "gcra" || d.algorithm === "token-bucket";
  const rules = d.rules.map((r): ResolvedRule =>
    r.calendar !== undefined
      ? Object.freeze({
          limit: r.limit,
          periodMs: CALENDAR_PERIOD_MS[r.calendar],
          burst: r.limit,
          calendar: new CalendarWindows(
            r.calendar,
            r.timeZone ?? "UTC",
            r.anchor ?? defaultAnchor(r.calendar),
          ),
        })
      : Object.freeze({
          limit: r.limit,
          // Required without a calendar (crossFieldIssues).
          periodMs: r.period!,
          burst: usesBurst ? (r.burst ?? r.limit) : r.limit,
        }),
  );
  let lease: AllotmentSettings | undefined;
  if (d.lease !== undefined && d.lease !== false) {
    const l = d.lease === true ? {} : d.lease;
    lease = Object.freeze({
      maxShare: l.maxShare ?? 0.1,
      ttlMs: l.ttl ?? 1000,
      hotAfter: l.hotAfter ?? 20,
    });
  }
  let adaptive: AdaptiveSettings | undefined;
  if (d.adaptive !== undefined) {
    const a = d.adaptive;
    const min = a.min ?? 1;
    adaptive = Object.freeze({
      algorithm: a.algorithm ?? "gradient2",
      min,
      max: a.max ?? rules[0]!.limit,
      initial: a.initial ?? min,
      reserve: a.reserve ?? 0.2,
    });
  }
  const policy: Policy = Object.freeze({
    name: d.name,
    algorithm: d.algorithm,
    rules: Object.freeze(rules),
    blockMs: d.blockDuration ?? 0,
    resetOnBlock: d.resetOnBlock ?? false,
    windowStart: d.windowStart ?? "aligned",
    refill: d.refill ?? "continuous",
    onStoreError: d.onStoreError,
    insuranceInstances: d.insuranceInstances ?? 0,
    shadow: d.shadow,
    description: d.description,
    lease,
    adaptive,
  });
  resolved.add(policy);
  return policy;
}

type ParsedPolicy = z.output<typeof policySchema>;
type ParsedRule = ParsedPolicy["rules"][number];

/**
 * What is known of a policy's fields: each as parsed, or undefined when it is absent (and has
 * no default) or wrong. `rules` holds the rules' fields that parsed, when `rules` is a list.
 */
type KnownFields = Partial<Omit<ParsedPolicy, "rules">> & {
  rules?: ReadonlyArray<Partial<ParsedRule>>;
};

/** {@link KnownFields} of an input that does not parse as a whole: each field on its own. */
function knownFields(input: unknown): KnownFields {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return {};
  const raw = input as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [field, schema] of Object.entries(policySchema.shape)) {
    if (field === "rules") continue;
    const r = (schema as z.ZodType).safeParse(raw[field]);
    if (r.success) out[field] = r.data;
  }
  const rules = raw.rules;
  if (Array.isArray(rules) && rules.length >= 1 && rules.length <= 16)
    out.rules = rules.map((rule: unknown) => {
      const known: Record<string, unknown> = {};
      if (typeof rule !== "object" || rule === null) return known;
      for (const [field, schema] of Object.entries(ruleSchema.shape)) {
        const r = (schema as z.ZodType).safeParse((rule as Record<string, unknown>)[field]);
        if (r.success) known[field] = r.data;
      }
      return known;
    });
  return out as KnownFields;
}

/**
 * How the fields go together: each check runs when the fields it reads are known. A field
 * that is written but wrong still counts as written (`burst` given to fixed-window, `lease` on
 * sliding-log), so the issue is named beside the field's own.
 */
function crossFieldIssues(p: KnownFields, input: unknown): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const raw =
    typeof input === "object" && input !== null && !Array.isArray(input)
      ? (input as Record<string, unknown>)
      : {};
  const rawRules = Array.isArray(raw.rules) ? (raw.rules as unknown[]) : [];
  const written = (rule: unknown, field: string) =>
    typeof rule === "object" &&
    rule !== null &&
    (rule as Record<string, unknown>)[field] !== undefined;
  const algorithm = p.algorithm;
  const usesBurst = algorithm === "gcra" || algorithm === "token-bucket";
  let calendars = false;
  p.rules?.forEach((r, i) => {
    const rawRule = rawRules[i];
    const calendar = written(rawRule, "calendar");
    if (calendar) calendars = true;
    if (calendar && written(rawRule, "period"))
      issues.push({
        path: `rules.${i}.calendar`,
        message: "a rule counts per period or per calendar window, not both: remove period",
      });
    else if (!calendar && !written(rawRule, "period"))
      issues.push({ path: `rules.${i}.period`, message: "is required (or a calendar)" });
    if (!calendar) {
      for (const field of ["timeZone", "anchor"])
        if (written(rawRule, field))
          issues.push({
            path: `rules.${i}.${field}`,
            message: `${field} applies only with calendar`,
          });
    } else {
      if (algorithm !== undefined && algorithm !== "fixed-window")
        issues.push({
          path: `rules.${i}.calendar`,
          message: `calendar windows apply only to fixed-window, not ${algorithm}`,
        });
      if (r.calendar !== undefined && written(rawRule, "anchor")) {
        const problem = anchorProblem(r.calendar, (rawRule as Record<string, unknown>).anchor);
        if (problem !== undefined) issues.push({ path: `rules.${i}.anchor`, message: problem });
      }
    }
    if (algorithm !== undefined && !usesBurst && written(rawRules[i], "burst")) {
      issues.push({
        path: `rules.${i}.burst`,
        message: `burst applies only to gcra and token-bucket, not ${algorithm}`,
      });
    }
    if (algorithm === "sliding-log" && r.limit !== undefined && r.limit > 100_000) {
      issues.push({
        path: `rules.${i}.limit`,
        message: "sliding-log keeps one entry per request: limit must be at most 100000",
      });
    }
  });
  const blockKnown = raw.blockDuration === undefined || p.blockDuration !== undefined;
  const blocks = p.blockDuration !== undefined && p.blockDuration > 0;
  if (p.resetOnBlock === true && blockKnown && !blocks) {
    issues.push({ path: "resetOnBlock", message: "needs a blockDuration" });
  }
  if (p.resetOnBlock === true && algorithm === "concurrency") {
    issues.push({
      path: "resetOnBlock",
      message: "does not apply to concurrency (permits are not counts)",
    });
  }
  if (calendars && p.windowStart === "first-request") {
    issues.push({
      path: "windowStart",
      message: "calendar windows start at local midnights: windowStart must be aligned",
    });
  }
  if (raw.windowStart !== undefined && algorithm !== undefined && algorithm !== "fixed-window") {
    issues.push({
      path: "windowStart",
      message: `windowStart applies only to fixed-window, not ${algorithm}`,
    });
  }
  if (raw.refill !== undefined && algorithm !== undefined && algorithm !== "token-bucket") {
    issues.push({
      path: "refill",
      message: `refill applies only to token-bucket, not ${algorithm}`,
    });
  }
  if (algorithm === "concurrency" && p.rules !== undefined && p.rules.length > 1) {
    issues.push({ path: "rules", message: "concurrency takes exactly one rule" });
  }
  issues.push(...allotmentIssues(p, raw, blocks, calendars));
  issues.push(...adaptiveIssues(p, raw));
  return issues;
}

/** How `lease` (allotments) goes with the rest of the policy. */
function allotmentIssues(
  p: KnownFields,
  raw: Record<string, unknown>,
  blocks: boolean,
  calendars: boolean,
): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  if (raw.lease === undefined || raw.lease === false) return issues;
  const algorithm = p.algorithm;
  if (algorithm !== undefined && !ALLOTMENT_ALGORITHMS.includes(algorithm)) {
    issues.push({
      path: "lease",
      message: `allotments apply to ${ALLOTMENT_ALGORITHMS.join(", ")}, not ${algorithm} (its state is a log of times that an allotment cannot move exactly)`,
    });
  }
  if (blocks) {
    issues.push({
      path: "lease",
      message:
        "allotments and blockDuration do not go together (an allotment would admit during a block)",
    });
  }
  if (p.windowStart === "first-request") {
    issues.push({
      path: "lease",
      message: "allotments need aligned windows (windowStart first-request gives each key its own)",
    });
  }
  if (calendars) {
    issues.push({
      path: "lease",
      message: "allotments and calendar windows do not go together (yet): remove lease",
    });
  }
  if (p.refill === "interval") {
    issues.push({
      path: "lease",
      message:
        "allotments need a continuous refill (refill interval adds tokens at each key's own anchor)",
    });
  }
  if (typeof p.lease === "object" && p.lease.ttl !== undefined && p.lease.ttl <= 0)
    issues.push({ path: "lease.ttl", message: "must be more than 0" });
  return issues;
}

/** How `adaptive` goes with the rest: concurrency only, and min ≤ initial ≤ max ≤ the rule's limit. */
function adaptiveIssues(p: KnownFields, raw: Record<string, unknown>): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  if (raw.adaptive === undefined) return issues;
  const algorithm = p.algorithm;
  if (algorithm !== undefined && algorithm !== "concurrency") {
    issues.push({
      path: "adaptive",
      message: `adaptive applies only to concurrency, not ${algorithm} (it moves a limit of permits in flight)`,
    });
  }
  const a = p.adaptive;
  if (a === undefined) return issues;
  const ruleLimit = p.rules?.[0]?.limit;
  const min = a.min ?? 1;
  const max = a.max ?? ruleLimit;
  if (a.max !== undefined && a.min !== undefined && a.min > a.max)
    issues.push({
      path: "adaptive.min",
      message: `must be at most adaptive.max (got min ${a.min}, max ${a.max})`,
    });
  if (a.max !== undefined && ruleLimit !== undefined && a.max > ruleLimit)
    issues.push({
      path: "adaptive.max",
      message: `must be at most the rule's limit, ${ruleLimit}, the ceiling the store enforces (got ${a.max})`,
    });
  if (a.max === undefined && ruleLimit !== undefined && min > ruleLimit)
    issues.push({
      path: "adaptive.min",
      message: `must be at most the rule's limit, ${ruleLimit} (got ${min})`,
    });
  if (a.initial !== undefined && (a.initial < min || (max !== undefined && a.initial > max)))
    issues.push({
      path: "adaptive.initial",
      message: `must be within [min, max] = [${min}, ${max ?? "?"}] (got ${a.initial})`,
    });
  return issues;
}

/**
 * True when `value` is a {@link Policy} returned by {@link definePolicy} (the very object, not a
 * look-alike or a copy).
 */
export function isResolvedPolicy(value: unknown): value is Policy {
  return typeof value === "object" && value !== null && resolved.has(value);
}

/**
 * The algorithm that decides `policy` (a fixed-window's variant follows its `windowStart`, a
 * token-bucket's its `refill`).
 */
export function algorithmOf(policy: Policy): Algorithm {
  return policy.windowStart === "first-request"
    ? fixedWindowFromFirstRequest
    : policy.refill === "interval"
      ? tokenBucketInterval
      : algorithms[policy.algorithm];
}

/** Largest cost one request may have under this policy: the smallest rule capacity. */
export function policyCapacity(policy: Policy): number {
  let capacity = capacities.get(policy);
  if (capacity === undefined) {
    const alg = algorithmOf(policy);
    capacity = Math.min(...policy.rules.map((r) => alg.capacity(r)));
    capacities.set(policy, capacity);
  }
  return capacity;
}

/** {@link policyCapacity} per policy object (policies are frozen: it never changes). */
const capacities = new WeakMap<Policy, number>();

/**
 * A resolved rule in its input form: `{ limit, period, burst? }` (`burst` when the algorithm
 * uses one and it is not the limit), or `{ limit, calendar, timeZone?, anchor? }` (defaults
 * left out).
 */
export function ruleToInput(rule: ResolvedRule, usesBurst: boolean): RuleInput {
  const c = rule.calendar;
  if (c !== undefined)
    return {
      limit: rule.limit,
      calendar: c.calendar,
      ...(c.timeZone !== "UTC" ? { timeZone: c.timeZone } : {}),
      ...(c.anchor !== defaultAnchor(c.calendar) ? { anchor: c.anchor } : {}),
    };
  return {
    limit: rule.limit,
    period: rule.periodMs,
    ...(usesBurst && rule.burst !== rule.limit ? { burst: rule.burst } : {}),
  };
}

/** Converts a resolved policy back to its input form (for export, YAML, the admin API). */
export function policyToInput(policy: Policy): PolicyInput {
  const usesBurst = policy.algorithm === "gcra" || policy.algorithm === "token-bucket";
  const out: PolicyInput = {
    name: policy.name,
    algorithm: policy.algorithm,
    rules: policy.rules.map((r) => ruleToInput(r, usesBurst)),
  };
  if (policy.blockMs > 0) out.blockDuration = policy.blockMs;
  if (policy.resetOnBlock) out.resetOnBlock = true;
  if (policy.windowStart !== "aligned") out.windowStart = policy.windowStart;
  if (policy.refill !== "continuous") out.refill = policy.refill;
  if (policy.onStoreError !== "allow") out.onStoreError = policy.onStoreError;
  if (policy.insuranceInstances > 0) out.insuranceInstances = policy.insuranceInstances;
  if (policy.shadow) out.shadow = true;
  if (policy.description) out.description = policy.description;
  if (policy.lease) {
    const l = policy.lease;
    const tuned: AllotmentInput = {};
    if (l.maxShare !== 0.1) tuned.maxShare = l.maxShare;
    if (l.ttlMs !== 1000) tuned.ttl = l.ttlMs;
    if (l.hotAfter !== 20) tuned.hotAfter = l.hotAfter;
    out.lease = Object.keys(tuned).length > 0 ? tuned : true;
  }
  if (policy.adaptive) {
    const a = policy.adaptive;
    out.adaptive = { algorithm: a.algorithm, min: a.min, max: a.max, initial: a.initial };
    if (a.reserve !== 0.2) out.adaptive.reserve = a.reserve;
  }
  return out;
}

/**
 * The policy a per-key override makes of `policy`: the same policy (name, algorithm, every
 * other field) with `rules` in place of its rules, validated as that policy would be by
 * {@link definePolicy}. Throws a {@link ValidationError} (code `SLUICE_ERR_POLICY`) whose issues
 * name their field under `field` (e.g. `overrides.tenant:big.rules.0.limit`; `""`: `rules.0.limit`).
 */
export function policyWithRules(policy: Policy, rules: unknown, field: string): Policy {
  try {
    return definePolicy({ ...policyToInput(policy), rules: rules as RuleInput[] });
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    const issues = err.issues.map((i) => ({
      path: [field, i.path === "" ? "rules" : i.path].filter(Boolean).join("."),
      message: i.message,
    }));
    throw new ValidationError(
      "SLUICE_ERR_POLICY",
      `Invalid override of policy "${policy.name}"`,
      issues,
    );
  }
}
