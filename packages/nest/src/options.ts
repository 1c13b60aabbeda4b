/**
 * The module's options, checked once when the module starts: every problem named by its field
 * in one `SLUICE_ERR_OPTIONS` error (sluice's `ValidationError`), unknown options caught.
 */
import {
  type Clock,
  type Limiter,
  type Policy,
  type PolicyClient,
  type PolicyInput,
  type Store,
  ValidationError,
  type ValidationIssue,
  createLimiter,
  memoryStore,
} from "sluice";
import { HEADER_FORMATS, type HeaderFormat } from "sluice/http";
import { DEFAULT_ERROR_CODE, DEFAULT_MAX_KEYS } from "./constants.js";
import type { DeniedEvent, KeyFunction, SluiceModuleOptions } from "./types.js";

/** The options, resolved. @internal */
export interface ResolvedOptions {
  /** Policies from code, by name: their limiters over `store`. */
  readonly policies: ReadonlyMap<string, Limiter>;
  /** The `connectPolicies` client, when the policies come from the service. */
  readonly client: PolicyClient | undefined;
  readonly store: Store;
  /** Whether `store` is the module's own memory store. */
  readonly ownStore: boolean;
  readonly defaultPolicies: readonly string[];
  readonly key: KeyFunction | undefined;
  readonly headers: HeaderFormat | false;
  readonly rpcIdentity: string;
  readonly errorCode: string;
  readonly guard: "global" | "manual";
  readonly clock: Clock;
  readonly onDenied: ((event: DeniedEvent) => void) | undefined;
}

const KNOWN = new Set<string>([
  "policies",
  "store",
  "maxKeys",
  "clock",
  "defaultPolicies",
  "key",
  "headers",
  "rpcIdentity",
  "errorCode",
  "guard",
  "onDenied",
] satisfies ReadonlyArray<keyof SluiceModuleOptions>);

/** Whether `value` is a `connectPolicies` client. */
export function isPolicyClient(value: unknown): value is PolicyClient {
  const c = value as Partial<PolicyClient> | null;
  return (
    typeof c === "object" &&
    c !== null &&
    typeof c.limiter === "function" &&
    typeof c.has === "function" &&
    typeof c.names === "function"
  );
}

function isStore(value: unknown): value is Store {
  const s = value as Partial<Store> | null;
  return (
    typeof s === "object" &&
    s !== null &&
    typeof s.decide === "function" &&
    typeof s.peek === "function" &&
    typeof s.adjust === "function"
  );
}

/** The message of a policy that does not validate (sluice's issues, joined). */
export function policyProblem(err: unknown): string {
  if (err instanceof ValidationError)
    return err.issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ");
  return err instanceof Error ? err.message : String(err);
}

/** Checks and resolves the module's options; throws one error naming every bad field. */
export function resolveModuleOptions(options: SluiceModuleOptions): ResolvedOptions {
  const subject = "Invalid SluiceModule options";
  if (typeof options !== "object" || options === null)
    throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
      { path: "", message: "must be an object ({ policies, … })" },
    ]);
  const issues: ValidationIssue[] = [];
  for (const name of Object.keys(options))
    if (!KNOWN.has(name)) issues.push({ path: name, message: "unknown option" });

  const store = options.store !== undefined && isStore(options.store) ? options.store : undefined;
  const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
  const clock = options.clock ?? Date.now;
  const policyStore =
    store ??
    memoryStore({
      maxKeys: Number.isSafeInteger(maxKeys) && maxKeys >= 1 ? maxKeys : DEFAULT_MAX_KEYS,
      now: typeof clock === "function" ? clock : Date.now,
    });
  const policies = new Map<string, Limiter>();
  let client: PolicyClient | undefined;
  const source: unknown = options.policies;
  if (isPolicyClient(source)) client = source;
  else if (Array.isArray(source)) {
    source.forEach((input: PolicyInput | Policy, i) => {
      try {
        const limiter = createLimiter({ store: policyStore, policy: input });
        const policy = limiter.policy;
        if (policies.has(policy.name))
          issues.push({
            path: `policies[${i}].name`,
            message: `"${policy.name}" names two policies`,
          });
        else policies.set(policy.name, limiter);
      } catch (err) {
        issues.push({ path: `policies[${i}]`, message: policyProblem(err) });
      }
    });
  } else
    issues.push({
      path: "policies",
      message: "must be a list of policies or the client of connectPolicies",
    });

  if (options.store !== undefined && !isStore(options.store))
    issues.push({ path: "store", message: "must be a sluice store (decide, peek, adjust, …)" });
  if (!Number.isSafeInteger(maxKeys) || maxKeys < 1)
    issues.push({
      path: "maxKeys",
      message: `must be a positive integer (got ${String(options.maxKeys)})`,
    });
  if (options.store !== undefined && options.maxKeys !== undefined)
    issues.push({ path: "maxKeys", message: "applies to the default memory store, not to store" });
  if (options.clock !== undefined && typeof options.clock !== "function")
    issues.push({ path: "clock", message: "must be a function returning epoch ms" });

  const defaults = options.defaultPolicies ?? [];
  if (!Array.isArray(defaults))
    issues.push({ path: "defaultPolicies", message: "must be a list of policy names" });
  else
    defaults.forEach((name: unknown, i) => {
      if (typeof name !== "string" || name === "")
        issues.push({ path: `defaultPolicies[${i}]`, message: "must be a policy name" });
      else if (client === undefined ? !policies.has(name) : !client.has(name))
        issues.push({
          path: `defaultPolicies[${i}]`,
          message: `unknown policy "${name}" (known: ${known(policies, client)})`,
        });
    });
  if (options.key !== undefined && typeof options.key !== "function")
    issues.push({ path: "key", message: "must be a function of the ExecutionContext" });
  const headers = options.headers ?? "ietf";
  if (headers !== false && !(HEADER_FORMATS as readonly unknown[]).includes(headers))
    issues.push({
      path: "headers",
      message: `must be one of ${HEADER_FORMATS.join(", ")} or false (got ${JSON.stringify(headers)})`,
    });
  const rpcIdentity = options.rpcIdentity ?? "clientId";
  if (typeof rpcIdentity !== "string" || rpcIdentity === "")
    issues.push({ path: "rpcIdentity", message: "must be a non-empty field name" });
  const errorCode = options.errorCode ?? DEFAULT_ERROR_CODE;
  if (typeof errorCode !== "string" || errorCode === "")
    issues.push({ path: "errorCode", message: "must be a non-empty string" });
  const guard = options.guard ?? "global";
  if (guard !== "global" && guard !== "manual")
    issues.push({ path: "guard", message: `must be "global" or "manual" (got ${String(guard)})` });
  if (options.onDenied !== undefined && typeof options.onDenied !== "function")
    issues.push({ path: "onDenied", message: "must be a function" });
  if (issues.length > 0) throw new ValidationError("SLUICE_ERR_OPTIONS", subject, issues);

  return {
    policies,
    client,
    store: policyStore,
    ownStore: options.store === undefined,
    defaultPolicies: defaults,
    key: options.key,
    headers,
    rpcIdentity,
    errorCode,
    guard,
    clock,
    onDenied: options.onDenied,
  };
}

/** The names a policy may be given, for an error message. */
export function known(
  policies: ReadonlyMap<string, unknown>,
  client: PolicyClient | undefined,
): string {
  const names = client !== undefined ? client.names() : [...policies.keys()];
  return names.length > 0 ? names.map((n) => `"${n}"`).join(", ") : "none";
}
