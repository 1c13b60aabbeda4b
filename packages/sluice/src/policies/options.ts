/**
 * `connectPolicies`' options, validated once into a frozen, resolved form: unknown keys are
 * caught, every problem is named, defaults are filled in.
 */
import {
  type Clock,
  TIMERS_MESSAGE,
  type Timers,
  isTimers,
  systemClock,
  systemTimers,
} from "../clock.js";
import { type SluiceError, ValidationError, type ValidationIssue } from "../errors.js";
import type { Policy } from "../policy.js";
import type { Store } from "../store.js";
import { type PolicyCache, fileCache } from "./file-cache.js";
import type { ConnectPoliciesOptions, PolicyFetch, PolicyUpdate } from "./types.js";

const OPTION_KEYS: Record<keyof ConnectPoliciesOptions, true> = {
  url: true,
  apiKey: true,
  store: true,
  cacheFile: true,
  cache: true,
  waitMs: true,
  timeoutMs: true,
  retryMinMs: true,
  retryMaxMs: true,
  reportIntervalMs: true,
  host: true,
  onError: true,
  onUpdate: true,
  onStoreError: true,
  fetch: true,
  clock: true,
  timers: true,
  random: true,
};

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
export function resolveOptions(o: ConnectPoliciesOptions): Resolved {
  if (typeof o !== "object" || o === null) {
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid connectPolicies options", [
      { path: "", message: "must be an object with url, apiKey and store" },
    ]);
  }
  const issues: ValidationIssue[] = [];
  const fail = (path: string, message: string) => issues.push({ path, message });
  const unknown = Object.keys(o).filter((k) => !Object.hasOwn(OPTION_KEYS, k));
  if (unknown.length > 0) fail("", `unknown option(s): ${unknown.join(", ")}`);

  let url = "";
  if (typeof o.url !== "string" || o.url === "") {
    fail("url", "is required: the sluice service's base URL, e.g. http://sluice.internal:8080");
  } else {
    let parsed: URL | undefined;
    try {
      parsed = new URL(o.url);
    } catch {
      fail("url", `must be an http:// or https:// URL (got ${JSON.stringify(o.url)})`);
    }
    if (parsed && parsed.protocol !== "http:" && parsed.protocol !== "https:")
      fail("url", `must be an http:// or https:// URL (got ${JSON.stringify(o.url)})`);
    else if (parsed && (parsed.search !== "" || parsed.hash !== ""))
      fail("url", "must be the service's base URL, without a query or fragment");
    url = o.url.replace(/\/+$/, "");
  }
  if (typeof o.apiKey !== "string" || o.apiKey.trim() === "")
    fail("apiKey", "is required: the app's API key (from POST /v1/admin/apps)");
  else if (/\s/.test(o.apiKey)) fail("apiKey", "must not contain spaces or line breaks");
  if (typeof o.store !== "object" || o.store === null || typeof o.store.decide !== "function")
    fail("store", "is required: a counter store, e.g. redisStore({ client })");
  if (o.cacheFile !== undefined && (typeof o.cacheFile !== "string" || o.cacheFile === ""))
    fail("cacheFile", "must be a file path");
  if (o.cacheFile !== undefined && o.cache !== undefined)
    fail("cache", "give cacheFile or cache, not both");
  if (
    o.cache !== undefined &&
    (typeof o.cache !== "object" ||
      o.cache === null ||
      typeof o.cache.load !== "function" ||
      typeof o.cache.save !== "function")
  )
    fail("cache", "must be an object with load() and save(text)");
  const int = (path: keyof ConnectPoliciesOptions, min: number, max: number, dflt: number) => {
    const v = o[path] ?? dflt;
    if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
      fail(path, `must be a whole number of ms from ${min} to ${max} (got ${String(v)})`);
      return dflt;
    }
    return v;
  };
  const waitMs = int("waitMs", 1000, 60_000, 25_000);
  const timeoutMs = int("timeoutMs", 100, 120_000, 10_000);
  const retryMinMs = int("retryMinMs", 1, 600_000, 500);
  const retryMaxMs = int("retryMaxMs", 1, 600_000, 30_000);
  if (retryMaxMs < retryMinMs) fail("retryMaxMs", `must be at least retryMinMs (${retryMinMs})`);
  const reportIntervalMs = int("reportIntervalMs", 1000, 30_000, 10_000);
  if (o.host !== undefined && (typeof o.host !== "string" || o.host === "" || o.host.length > 255))
    fail("host", "must be a non-empty string of at most 255 characters");
  for (const f of ["onError", "onUpdate", "onStoreError", "fetch", "clock", "random"] as const)
    if (o[f] !== undefined && typeof o[f] !== "function") fail(f, "must be a function");
  const timers = o.timers ?? systemTimers;
  if (!isTimers(timers)) fail("timers", TIMERS_MESSAGE);
  const fetchFn =
    o.fetch ?? (globalThis as { fetch?: PolicyFetch }).fetch?.bind(globalThis) ?? undefined;
  if (!fetchFn) fail("fetch", "is required where the runtime has no global fetch");
  if (issues.length > 0)
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid connectPolicies options", issues);
  return Object.freeze({
    url,
    apiKey: o.apiKey,
    // The public part of a sluice API key (`sk_<id>_<secret>`): what the cache remembers.
    keyId: /^sk_([0-9a-f]{16})_/.exec(o.apiKey)?.[1] ?? "",
    store: o.store,
    cache: o.cache ?? (o.cacheFile !== undefined ? fileCache(o.cacheFile) : undefined),
    waitMs,
    timeoutMs,
    retryMinMs,
    retryMaxMs,
    reportIntervalMs,
    host: o.host,
    onError: o.onError,
    onUpdate: o.onUpdate,
    onStoreError: o.onStoreError,
    fetch: fetchFn!,
    clock: o.clock ?? systemClock,
    timers,
    random: o.random ?? Math.random,
  });
}
