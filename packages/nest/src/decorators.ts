/**
 * The decorators. Each stores metadata on a class (every handler of it) or a handler; the guard
 * reads the handler's and the class's together. Their arguments are checked here, at the
 * moment the class is defined, so a mistake is named where it is made; policy names are checked
 * against the module's policies when the module starts (`SluiceLimits.onModuleInit`).
 */
import { ValidationError, type Policy, type PolicyInput, type ValidationIssue } from "sluice";
import { COST_METADATA, KEY_METADATA, RATE_LIMIT_METADATA, SKIP_METADATA } from "./constants.js";
import type {
  CostFunction,
  KeyFunction,
  RateLimitCostOptions,
  RateLimitOptions,
  SettleFunction,
} from "./types.js";

/** One `@RateLimit` as stored: a policy (by name or inline) and its own key and cost. @internal */
export interface RateLimitEntry {
  readonly policy: string | PolicyInput | Policy;
  readonly key: KeyFunction | undefined;
  readonly cost: number | CostFunction | undefined;
}

/** One `@RateLimitCost` as stored. @internal */
export interface CostEntry {
  readonly cost: CostFunction;
  readonly settle: SettleFunction | undefined;
}

/** What `@SkipRateLimit` stores: `true` skips every policy. @internal */
export type SkipEntry = true | string;

/** A class or method decorator (Nest's shape). */
export type ClassOrMethodDecorator = ClassDecorator & MethodDecorator;

/** Appends `value` to the list stored under `key` on the class or the handler being decorated. */
function appendMetadata<T>(key: string, value: T): ClassOrMethodDecorator {
  return ((target: object, _property?: string | symbol, descriptor?: PropertyDescriptor) => {
    const on: object = descriptor !== undefined ? (descriptor.value as object) : target;
    const list = (Reflect.getOwnMetadata(key, on) as T[] | undefined) ?? [];
    // Decorators apply bottom-up; the list keeps them in the order they are written.
    Reflect.defineMetadata(key, [value, ...list], on);
    return descriptor;
  }) as ClassOrMethodDecorator;
}

/** Stores `value` under `key` on the class or the handler being decorated. */
function setMetadata(key: string, value: unknown): ClassOrMethodDecorator {
  return ((target: object, _property?: string | symbol, descriptor?: PropertyDescriptor) => {
    Reflect.defineMetadata(key, value, descriptor !== undefined ? descriptor.value : target);
    return descriptor;
  }) as ClassOrMethodDecorator;
}

function fail(subject: string, issues: ValidationIssue[]): never {
  throw new ValidationError("SLUICE_ERR_OPTIONS", subject, issues);
}

function isPositiveInteger(n: unknown): n is number {
  return typeof n === "number" && Number.isSafeInteger(n) && n >= 1;
}

/**
 * Limits a handler (or every handler of a class) by a policy: a name among the module's
 * policies, or a policy input (`{ name, algorithm, rules }`) that the module creates over its
 * store. Several on one handler (and its class) make one all-or-nothing decision: the request
 * passes only if every policy allows it, and a denial by one charges none of the others.
 *
 * ```ts
 * @RateLimit("per-user", { key: (ctx) => ctx.switchToHttp().getRequest().user.id })
 * @RateLimit({ name: "search", algorithm: "gcra", rules: [{ limit: 10, period: "1s" }] })
 * @Get("search") search() { … }
 * ```
 */
export function RateLimit(
  policy: string | PolicyInput | Policy,
  options: RateLimitOptions = {},
): ClassOrMethodDecorator {
  const subject = "Invalid @RateLimit";
  const issues: ValidationIssue[] = [];
  if (typeof policy === "string") {
    if (policy === "") issues.push({ path: "policy", message: "must be a non-empty name" });
  } else if (typeof policy !== "object" || policy === null) {
    issues.push({
      path: "policy",
      message: `must be a policy name or a policy input (got ${policy === null ? "null" : typeof policy})`,
    });
  } else if (typeof (policy as { name?: unknown }).name !== "string") {
    issues.push({ path: "policy.name", message: "must name the inline policy" });
  }
  if (typeof options !== "object" || options === null) {
    issues.push({ path: "options", message: "must be an object ({ key?, cost? })" });
  } else {
    for (const name of Object.keys(options))
      if (name !== "key" && name !== "cost")
        issues.push({ path: `options.${name}`, message: "unknown option (key, cost)" });
    if (options.key !== undefined && typeof options.key !== "function")
      issues.push({ path: "options.key", message: "must be a function of the ExecutionContext" });
    if (
      options.cost !== undefined &&
      typeof options.cost !== "function" &&
      !isPositiveInteger(options.cost)
    )
      issues.push({
        path: "options.cost",
        message: `must be a positive integer or a function (got ${String(options.cost)})`,
      });
  }
  if (issues.length > 0) fail(subject, issues);
  const entry: RateLimitEntry = { policy, key: options.key, cost: options.cost };
  return appendMetadata(RATE_LIMIT_METADATA, entry);
}

/**
 * Lets a handler (or every handler of a class) through without a decision: bare, for every
 * policy — the module's `defaultPolicies` and any `@RateLimit` — or for the named one only.
 */
export function SkipRateLimit(policy?: string): ClassOrMethodDecorator {
  if (policy !== undefined && (typeof policy !== "string" || policy === ""))
    fail("Invalid @SkipRateLimit", [
      { path: "policy", message: "must be a policy name, or nothing for every policy" },
    ]);
  const entry: SkipEntry = policy ?? true;
  return appendMetadata(SKIP_METADATA, entry);
}

/**
 * Whom the handler's requests count for (every policy of it that has no `key` of its own): a
 * function of the ExecutionContext. A handler's wins over its class's.
 */
export function RateLimitKey(key: KeyFunction): ClassOrMethodDecorator {
  if (typeof key !== "function")
    fail("Invalid @RateLimitKey", [
      { path: "key", message: "must be a function of the ExecutionContext" },
    ]);
  return setMetadata(KEY_METADATA, key);
}

/**
 * What the handler's requests cost (every policy of it that has no `cost` of its own): a
 * function of the ExecutionContext — a GraphQL field's complexity, an upload's size, an LLM
 * call's estimated tokens. With `settle`, that cost is an estimate: once the handler answered,
 * `settle(value, context)` gives the actual cost and the difference is refunded or charged.
 */
export function RateLimitCost(
  cost: CostFunction,
  options: RateLimitCostOptions = {},
): ClassOrMethodDecorator {
  const issues: ValidationIssue[] = [];
  if (typeof cost !== "function")
    issues.push({ path: "cost", message: "must be a function of the ExecutionContext" });
  if (options.settle !== undefined && typeof options.settle !== "function")
    issues.push({ path: "options.settle", message: "must be a function (value, context)" });
  if (issues.length > 0) fail("Invalid @RateLimitCost", issues);
  const entry: CostEntry = { cost, settle: options.settle };
  return setMetadata(COST_METADATA, entry);
}
