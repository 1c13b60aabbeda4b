/**
 * One way to check an options object, as the core checks policies: a zod schema of fields,
 * validated once into a frozen, resolved form (defaults filled in); every problem is named at
 * once, with its field, and an unknown option is caught. Each field's message is the one users
 * read: `timeoutMs: must be an integer ≥ 1 (got 0)`.
 */
import { z } from "zod";
import { ValidationError, type ValidationIssue } from "./errors.js";

/** A value in a message: strings quoted, the rest as JavaScript writes it. */
function shown(v: unknown): string {
  return typeof v === "string" ? JSON.stringify(v) : String(v);
}

/** One field of an options schema: a zod schema whose messages are the field's own. */
export type OptionField<T> = z.ZodType<T, unknown>;

/** The fields an options schema is made of. */
export const option = {
  /** An integer in [min, max] (a safe integer when max is not given), `dflt` when absent. */
  int(min: number, dflt: number, max = Number.MAX_SAFE_INTEGER): OptionField<number> {
    return z.unknown().transform((v, ctx) => {
      if (v === undefined) return dflt;
      if (typeof v === "number" && Number.isSafeInteger(v) && v >= min && v <= max) return v;
      ctx.addIssue({
        code: "custom",
        message:
          max === Number.MAX_SAFE_INTEGER
            ? `must be an integer ≥ ${min} (got ${shown(v)})`
            : `must be an integer from ${min} to ${max} (got ${shown(v)})`,
      });
      return z.NEVER;
    });
  },
  /** The same, with no default: absent stays undefined. */
  optionalInt(min: number, max = Number.MAX_SAFE_INTEGER): OptionField<number | undefined> {
    return z.unknown().transform((v, ctx) => {
      if (v === undefined) return undefined;
      if (typeof v === "number" && Number.isSafeInteger(v) && v >= min && v <= max) return v;
      ctx.addIssue({
        code: "custom",
        message:
          max === Number.MAX_SAFE_INTEGER
            ? `must be an integer ≥ ${min} (got ${shown(v)})`
            : `must be an integer from ${min} to ${max} (got ${shown(v)})`,
      });
      return z.NEVER;
    });
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
  /** Anything `check` accepts (it answers the resolved value, or a message), `dflt` when absent. */
  custom<T>(check: (value: unknown) => T | { readonly problem: string }, dflt: T): OptionField<T> {
    return z.unknown().transform((v, ctx) => {
      if (v === undefined) return dflt;
      const r = check(v);
      if (typeof r === "object" && r !== null && "problem" in r) {
        ctx.addIssue({ code: "custom", message: (r as { problem: string }).problem });
        return z.NEVER;
      }
      return r as T;
    });
  },
  /** What `check` accepts, absent included (a required option says so itself). */
  required<T>(check: (value: unknown) => T | { readonly problem: string }): OptionField<T> {
    return z.unknown().transform((v, ctx) => {
      const r = check(v);
      if (typeof r === "object" && r !== null && "problem" in r) {
        ctx.addIssue({ code: "custom", message: (r as { problem: string }).problem });
        return z.NEVER;
      }
      return r as T;
    });
  },
  /** A function (kept as given), or undefined when absent. */
  fn<F>(message: string): OptionField<F | undefined> {
    return z.unknown().transform((v, ctx) => {
      if (v === undefined || typeof v === "function") return v as F | undefined;
      ctx.addIssue({ code: "custom", message });
      return z.NEVER;
    });
  },
};

/** The resolved form of a schema's fields. */
export type Resolved<S extends Record<string, OptionField<unknown>>> = {
  readonly [K in keyof S]: z.output<S[K]>;
};

/**
 * Checks `options` against `schema` once: the resolved, frozen options, or a
 * {@link ValidationError} (`SLUICE_ERR_OPTIONS`, message `subject`) listing every problem with
 * its field, unknown options included.
 */
export function resolveOptions<S extends Record<string, OptionField<unknown>>>(
  subject: string,
  schema: S,
  options: unknown,
): Resolved<S> {
  if (typeof options !== "object" || options === null || Array.isArray(options))
    throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
      { path: "", message: "must be an object" },
    ]);
  const issues: ValidationIssue[] = [];
  for (const k of Object.keys(options))
    if (!(k in schema)) issues.push({ path: k, message: "unknown option" });
  const known: Record<string, unknown> = {};
  for (const k of Object.keys(schema)) known[k] = (options as Record<string, unknown>)[k];
  const parsed = z.object(schema).safeParse(known);
  if (!parsed.success)
    for (const i of parsed.error.issues)
      issues.push({ path: i.path.map(String).join("."), message: i.message });
  if (issues.length > 0) throw new ValidationError("SLUICE_ERR_OPTIONS", subject, issues);
  return Object.freeze(parsed.data as Resolved<S>);
}
