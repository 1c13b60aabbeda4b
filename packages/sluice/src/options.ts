/**
 * One way to check an options object, as the core checks policies: a zod schema of fields,
 * validated once into a frozen, resolved form (defaults filled in); every problem is named at
 * once, with its field, and an unknown option is caught. Each field's message is the one users
 * read: `timeoutMs: must be an integer ≥ 1 (got 0)`.
 */
import { z } from "zod";
import { type Timers, systemTimers } from "./clock.js";
import { ValidationError, type ValidationIssue } from "./errors.js";

/** A value in a message: strings quoted, the rest as JavaScript writes it. */
function shown(v: unknown): string {
  return typeof v === "string" ? JSON.stringify(v) : String(v);
}

/** One field of an options schema: a zod schema whose messages are the field's own. */
export type OptionField<T> = z.ZodType<T, unknown>;

/**
 * What a field's check answers for a bad value: one problem of the field itself, or several
 * (`problems`), each at a path inside the field (`""` the field itself, `"1"` its second entry,
 * `"maxWaitMs"` a member).
 */
export type Problem =
  { readonly problem: string } | { readonly problems: readonly ValidationIssue[] };

function isProblem(r: unknown): r is Problem {
  return typeof r === "object" && r !== null && ("problem" in r || "problems" in r);
}

/** Reports a check's problem(s) on the field being checked. */
function report(ctx: z.core.$RefinementCtx, p: Problem): void {
  if ("problem" in p) ctx.addIssue({ code: "custom", message: p.problem });
  else
    for (const i of p.problems)
      ctx.addIssue({
        code: "custom",
        message: i.message,
        path: i.path === "" ? [] : i.path.split("."),
      });
}

/** What a value must have, member by member, as `typeof` names it (see {@link hasShape}). */
export type Shape = Readonly<Record<string, "function" | "object" | "string" | "number">>;

/**
 * Whether `x` is an object whose members are of the types `shape` names: the run-time check of
 * an interface given as an option (timers, a store, a limiter, a cache), so that each such check
 * is one line, the same way. An `"object"` member must not be null.
 */
export function hasShape(x: unknown, shape: Shape): boolean {
  if ((typeof x !== "object" && typeof x !== "function") || x === null) return false;
  for (const [k, type] of Object.entries(shape)) {
    const v = (x as Record<string, unknown>)[k];
    if (typeof v !== type || v === null) return false;
  }
  return true;
}

/** The message of a `timers` option that is not {@link Timers}. */
export const TIMERS_MESSAGE =
  "must be an object with setTimeout(callback, ms) and clearTimeout(handle)";

/** What an integer field says it must be: from `min` (to `max`), before `(got …)`. */
function intSays(min: number, max: number): string {
  return max === Number.MAX_SAFE_INTEGER
    ? `must be an integer ≥ ${min}`
    : `must be an integer from ${min} to ${max}`;
}

function intField<D>(min: number, dflt: D, max: number, says: string): OptionField<number | D> {
  return z.unknown().transform((v, ctx) => {
    if (v === undefined) return dflt;
    if (typeof v === "number" && Number.isSafeInteger(v) && v >= min && v <= max) return v;
    ctx.addIssue({ code: "custom", message: `${says} (got ${shown(v)})` });
    return z.NEVER;
  });
}

function fnField<F>(message: string, dflt?: F): OptionField<F | undefined> {
  return z.unknown().transform((v, ctx) => {
    if (v === undefined) return dflt;
    if (typeof v === "function") return v as F;
    ctx.addIssue({ code: "custom", message });
    return z.NEVER;
  });
}

/** The fields an options schema is made of. */
export const option = {
  /**
   * An integer in [min, max] (a safe integer when max is not given), `dflt` when absent. A bad
   * value is told `says (got …)`; `says` is by default "must be an integer ≥ min" (or "from min
   * to max").
   */
  int(
    min: number,
    dflt: number,
    max = Number.MAX_SAFE_INTEGER,
    says = intSays(min, max),
  ): OptionField<number> {
    return intField(min, dflt, max, says);
  },
  /** The same, with no default: absent stays undefined. */
  optionalInt(
    min: number,
    max = Number.MAX_SAFE_INTEGER,
    says = intSays(min, max),
  ): OptionField<number | undefined> {
    return intField(min, undefined, max, says);
  },
  /** true or false, `dflt` when absent. */
  bool(dflt: boolean): OptionField<boolean> {
    return z.unknown().transform((v, ctx) => {
      if (v === undefined) return dflt;
      if (typeof v === "boolean") return v;
      ctx.addIssue({ code: "custom", message: "must be true or false" });
      return z.NEVER;
    });
  },
  /** One of `values` (compared with ===), `dflt` when absent; anything else is told `message`. */
  oneOf<const V extends readonly (string | boolean)[], const D extends V[number] | undefined>(
    values: V,
    dflt: D,
    message: string,
  ): OptionField<V[number] | D> {
    return z.unknown().transform((v, ctx) => {
      if (v === undefined) return dflt;
      if ((values as readonly unknown[]).includes(v)) return v as V[number];
      ctx.addIssue({ code: "custom", message });
      return z.NEVER;
    });
  },
  /** Anything `check` accepts (it answers the resolved value, or a {@link Problem}), `dflt` when absent. */
  custom<T>(check: (value: unknown) => T | Problem, dflt: T): OptionField<T> {
    return z.unknown().transform((v, ctx) => {
      if (v === undefined) return dflt;
      const r = check(v);
      if (isProblem(r)) {
        report(ctx, r);
        return z.NEVER;
      }
      return r as T;
    });
  },
  /** What `check` accepts, absent included (a required option says so itself). */
  required<T>(check: (value: unknown) => T | Problem): OptionField<T> {
    return z.unknown().transform((v, ctx) => {
      const r = check(v);
      if (isProblem(r)) {
        report(ctx, r);
        return z.NEVER;
      }
      return r as T;
    });
  },
  /** A function (kept as given); when absent, `dflt`, or undefined without one. */
  fn: fnField as {
    <F>(message: string): OptionField<F | undefined>;
    <F>(message: string, dflt: F): OptionField<F>;
  },
  /** Injected {@link Timers} (an object with setTimeout and clearTimeout), the system's when absent. */
  timers(): OptionField<Timers> {
    return z.unknown().transform((v, ctx) => {
      if (v === undefined) return systemTimers;
      if (hasShape(v, { setTimeout: "function", clearTimeout: "function" })) return v as Timers;
      ctx.addIssue({ code: "custom", message: TIMERS_MESSAGE });
      return z.NEVER;
    });
  },
};

/** The resolved form of a schema's fields. */
export type Resolved<S extends Record<string, OptionField<unknown>>> = {
  readonly [K in keyof S]: z.output<S[K]>;
};

/** What {@link resolveOptions} checks besides each field. */
export interface OptionsRules<S extends Record<string, OptionField<unknown>>> {
  /** What a value that is not an object is told. Default: "must be an object". */
  readonly notAnObject?: string;
  /**
   * Checks between fields, once every field is checked: each field's resolved value (undefined
   * where the field has a problem of its own), and `fail(path, message)` to report one.
   */
  readonly across?: (
    resolved: { readonly [K in keyof S]?: z.output<S[K]> },
    fail: (path: string, message: string) => void,
  ) => void;
}

/**
 * Checks `options` against `schema` once: the resolved, frozen options, or a
 * {@link ValidationError} (`SLUICE_ERR_OPTIONS`, message `subject`) listing every problem with
 * its field — unknown options first (`name: unknown option`), then the fields in the schema's
 * order, then the checks `rules.across` makes between them.
 */
export function resolveOptions<S extends Record<string, OptionField<unknown>>>(
  subject: string,
  schema: S,
  options: unknown,
  rules: OptionsRules<S> = {},
): Resolved<S> {
  if (typeof options !== "object" || options === null || Array.isArray(options))
    throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
      { path: "", message: rules.notAnObject ?? "must be an object" },
    ]);
  const issues: ValidationIssue[] = [];
  for (const k of Object.keys(options))
    if (!Object.hasOwn(schema, k)) issues.push({ path: k, message: "unknown option" });
  const resolved: Record<string, unknown> = {};
  for (const k of Object.keys(schema)) {
    // One field at a time, so that the checks between fields see every field that resolved.
    const parsed = schema[k]!.safeParse((options as Record<string, unknown>)[k]);
    if (parsed.success) resolved[k] = parsed.data;
    else
      for (const i of parsed.error.issues)
        issues.push({ path: [k, ...i.path.map(String)].join("."), message: i.message });
  }
  rules.across?.(resolved as Partial<Resolved<S>>, (path, message) =>
    issues.push({ path, message }),
  );
  if (issues.length > 0) throw new ValidationError("SLUICE_ERR_OPTIONS", subject, issues);
  return Object.freeze(resolved as Resolved<S>);
}
