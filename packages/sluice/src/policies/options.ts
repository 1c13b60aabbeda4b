/**
 * `connectPolicies`' options, validated once into a frozen, resolved form by the options helper
 * (../options.ts): unknown keys are caught, every problem is named, defaults are filled in.
 */
import { type Clock, type Timers, systemClock } from "../clock.js";
import type { SluiceError } from "../errors.js";
import { hasShape, option, resolveOptions } from "../options.js";
import type { Policy } from "../policy.js";
import type { Store } from "../store.js";
import { type PolicyCache, fileCache } from "./file-cache.js";
import type { ConnectPoliciesOptions, PolicyFetch, PolicyUpdate } from "./types.js";

const MUST_BE_A_FUNCTION = "must be a function";

/** A whole number of ms in [min, max], `dflt` when absent. */
function ms(min: number, dflt: number, max: number) {
  return option.int(min, dflt, max, `must be a whole number of ms from ${min} to ${max}`);
}

/** The service's base URL, without a trailing slash. */
function urlOf(v: unknown): string | { problem: string } {
  if (typeof v !== "string" || v === "")
    return {
      problem: "is required: the sluice service's base URL, e.g. http://sluice.internal:8080",
    };
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    return { problem: `must be an http:// or https:// URL (got ${JSON.stringify(v)})` };
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    return { problem: `must be an http:// or https:// URL (got ${JSON.stringify(v)})` };
  if (parsed.search !== "" || parsed.hash !== "")
    return { problem: "must be the service's base URL, without a query or fragment" };
  return v.replace(/\/+$/, "");
}

/**
 * Every option of {@link ConnectPoliciesOptions} and how it is checked, in the order problems
 * are reported (a map over the options' keys: a new option cannot be forgotten here).
 */
const OPTIONS = {
  url: option.required<string>(urlOf),
  apiKey: option.required<string>((v) =>
    typeof v !== "string" || v.trim() === ""
      ? { problem: "is required: the app's API key (from POST /v1/admin/apps)" }
      : /\s/.test(v)
        ? { problem: "must not contain spaces or line breaks" }
        : v,
  ),
  store: option.required<Store>((v) =>
    hasShape(v, { decide: "function" })
      ? (v as Store)
      : { problem: "is required: a counter store, e.g. redisStore({ client })" },
  ),
  cacheFile: option.custom<string | undefined>(
    (v) => (typeof v === "string" && v !== "" ? v : { problem: "must be a file path" }),
    undefined,
  ),
  cache: option.custom<PolicyCache | undefined>(
    (v) =>
      hasShape(v, { load: "function", save: "function" })
        ? (v as PolicyCache)
        : { problem: "must be an object with load() and save(text)" },
    undefined,
  ),
  waitMs: ms(1000, 25_000, 60_000),
  timeoutMs: ms(100, 10_000, 120_000),
  retryMinMs: ms(1, 500, 600_000),
  retryMaxMs: ms(1, 30_000, 600_000),
  reportIntervalMs: ms(1000, 10_000, 30_000),
  host: option.custom<string | undefined>(
    (v) =>
      typeof v === "string" && v !== "" && v.length <= 255
        ? v
        : { problem: "must be a non-empty string of at most 255 characters" },
    undefined,
  ),
  onError: option.fn<(error: SluiceError) => void>(MUST_BE_A_FUNCTION),
  onUpdate: option.fn<(update: PolicyUpdate) => void>(MUST_BE_A_FUNCTION),
  onStoreError: option.fn<(error: unknown, policy: Policy) => void>(MUST_BE_A_FUNCTION),
  fetch: option.required<PolicyFetch>((v) => {
    if (typeof v === "function") return v as PolicyFetch;
    if (v !== undefined) return { problem: MUST_BE_A_FUNCTION };
    const global = (globalThis as { fetch?: PolicyFetch }).fetch;
    return (
      global?.bind(globalThis) ?? { problem: "is required where the runtime has no global fetch" }
    );
  }),
  clock: option.fn<Clock>(MUST_BE_A_FUNCTION, systemClock),
  timers: option.timers(),
  random: option.fn<() => number>(MUST_BE_A_FUNCTION, Math.random),
} satisfies { readonly [K in keyof Required<ConnectPoliciesOptions>]: unknown };

/** The options, checked once and resolved (defaults filled in), frozen. */
export interface Resolved {
  readonly url: string;
  readonly apiKey: string;
  readonly keyId: string;
  readonly store: Store;
  readonly cache: PolicyCache | undefined;
  readonly waitMs: number;
  readonly timeoutMs: number;
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
  readonly reportIntervalMs: number;
  readonly host: string | undefined;
  readonly onError: ((error: SluiceError) => void) | undefined;
  readonly onUpdate: ((update: PolicyUpdate) => void) | undefined;
  readonly onStoreError: ((error: unknown, policy: Policy) => void) | undefined;
  readonly fetch: PolicyFetch;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly random: () => number;
}

/** Checks every option; throws `SLUICE_ERR_OPTIONS` naming each problem. */
export function resolveConnectOptions(options: ConnectPoliciesOptions): Resolved {
  const o = resolveOptions("Invalid connectPolicies options", OPTIONS, options, {
    notAnObject: "must be an object with url, apiKey and store",
    across: (r, fail) => {
      if (options.cacheFile !== undefined && options.cache !== undefined)
        fail("cache", "give cacheFile or cache, not both");
      if (r.retryMinMs !== undefined && r.retryMaxMs !== undefined && r.retryMaxMs < r.retryMinMs)
        fail("retryMaxMs", `must be at least retryMinMs (${r.retryMinMs})`);
    },
  });
  return Object.freeze({
    ...o,
    // The public part of a sluice API key (`sk_<id>_<secret>`): what the cache remembers.
    keyId: /^sk_([0-9a-f]{16})_/.exec(o.apiKey)?.[1] ?? "",
    cache: o.cache ?? (o.cacheFile !== undefined ? fileCache(o.cacheFile) : undefined),
  });
}
