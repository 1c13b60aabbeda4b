/**
 * What `connectPolicies` (./client.ts) takes and gives: its options, the client it resolves to,
 * its status and its updates, and the HTTP it needs of the runtime (a subset of `fetch`).
 */
import type { Clock, Timers } from "../clock.js";
import type { Decision } from "../decision.js";
import type { SluiceError } from "../errors.js";
import type { LimitOptions, Limiter } from "../limiter.js";
import type { Policy } from "../policy.js";
import type { Store } from "../store.js";
import type { PolicyCache } from "./file-cache.js";

/**
 * The runtime's `AbortSignal` type where there is one (DOM, `@types/node`), `never` elsewhere:
 * so that these declarations compile without either, and the global `fetch` is a
 * {@link PolicyFetch}.
 */
export type RuntimeAbortSignal = typeof globalThis extends {
  AbortSignal: { prototype: infer S };
}
  ? S
  : never;

/** A request as {@link PolicyFetch} is given it (a subset of `fetch`'s `RequestInit`). */
export interface PolicyFetchInit {
  readonly method: "GET" | "POST";
  readonly headers: Record<string, string>;
  readonly body?: string;
  /** Aborted on timeout and on `close()`. */
  readonly signal?: RuntimeAbortSignal;
}

/** What the client reads of an answer (a subset of `fetch`'s `Response`). */
export interface PolicyFetchResponse {
  readonly status: number;
  readonly headers: { get(name: string): string | null };
  text(): Promise<string>;
}

/** How the client makes HTTP requests: the global `fetch` by default; injectable for tests. */
export type PolicyFetch = (url: string, init: PolicyFetchInit) => Promise<PolicyFetchResponse>;

/** Options of `connectPolicies`. */
export interface ConnectPoliciesOptions {
  /** The sluice service's base URL (`http://sluice.internal:8080`). */
  url: string;
  /** The app's API key (from `POST /v1/admin/apps`); the policies granted to the app are loaded. */
  apiKey: string;
  /**
   * Where counters live. To share limits with the service (`POST /v1/limit`) and with other
   * processes, the service's Redis with the default key prefix: `redisStore({ client })`.
   */
  store: Store;
  /**
   * A file to keep the last policy set in (Node), to start from when the service cannot be
   * reached. Same as `cache: fileCache(path)`.
   */
  cacheFile?: string;
  /** Where to keep the last policy set (see {@link PolicyCache}); instead of `cacheFile`. */
  cache?: PolicyCache;
  /** How long each long poll may wait for a change (ms, 1000–60000). Default 25000. */
  waitMs?: number;
  /** How long a request may take beyond its wait before it is given up (ms). Default 10000. */
  timeoutMs?: number;
  /** The first retry delay after a failure (ms); doubled on each further failure. Default 500. */
  retryMinMs?: number;
  /** The longest retry delay (ms). Default 30000. */
  retryMaxMs?: number;
  /** How often counts are reported and the client says it is alive (ms, 1000–30000). Default 10000. */
  reportIntervalMs?: number;
  /** This host's name in the admin's list of clients. Default: the OS host name. */
  host?: string;
  /**
   * Called with each failure to reach or understand the service, to read or write the cache,
   * or with a policy that does not validate (the last good set stays in force meanwhile).
   * Default: a warning on the console for the first failure of a run of them.
   */
  onError?: (error: SluiceError) => void;
  /** Called after each new policy set is put in force. */
  onUpdate?: (update: PolicyUpdate) => void;
  /** Passed to every limiter: called when the store fails and `onStoreError` decided. */
  onStoreError?: (error: unknown, policy: Policy) => void;
  /** The HTTP client (default: the global `fetch`). */
  fetch?: PolicyFetch;
  /** The clock (epoch ms), for tests. */
  clock?: Clock;
  /** Timers, for tests. */
  timers?: Timers;
  /** Random numbers in [0, 1), which spread retries (for tests). Default `Math.random`. */
  random?: () => number;
}

/** A new policy set in force. */
export interface PolicyUpdate {
  /** The service's revision of the set. */
  readonly revision: number;
  /** Where it came from: the service, or the cache at start. */
  readonly source: "service" | "cache";
  /** Every policy in force, by name. */
  readonly policies: readonly string[];
  /** Policies added or changed (a new version or draft). */
  readonly changed: readonly string[];
  /** Policies no longer granted. */
  readonly removed: readonly string[];
}

/** How the client stands. */
export interface PolicyClientStatus {
  /** The highest revision of the service seen (-1 before any). */
  readonly revision: number;
  /** Where the set in force came from. */
  readonly source: "service" | "cache";
  /** Whether the last request to the service succeeded. */
  readonly connected: boolean;
  /** When the service last answered (epoch ms), or undefined. */
  readonly lastContactAt: number | undefined;
  /** Failed requests in a row (0 when connected). */
  readonly failures: number;
  /** The last failure, until a request succeeds. */
  readonly lastError: SluiceError | undefined;
}

/** The policies granted to an app, decided in this process. */
export interface PolicyClient {
  /**
   * Decides one request under policy `name`, locally. Rejects with `SLUICE_ERR_POLICY_NOT_FOUND`
   * when the policy is unknown or no longer granted to the app (never a silent allow).
   */
  limit(name: string, key: string, options?: LimitOptions): Promise<Decision>;
  /**
   * A limiter for policy `name` that follows the policy's changes (a stable object: hand it to
   * the middleware once). Throws `SLUICE_ERR_POLICY_NOT_FOUND` when the policy is not granted
   * now; its calls reject with it when the grant is revoked later.
   */
  limiter(name: string): Limiter;
  /** Whether policy `name` is granted now. */
  has(name: string): boolean;
  /** The policies granted now. */
  names(): string[];
  /** How the client stands. */
  status(): PolicyClientStatus;
  /** Reports the counts gathered so far now (they are also reported every `reportIntervalMs`). */
  report(): Promise<void>;
  /** Stops polling and reporting (after a last report); decisions go on with the last set. */
  close(): Promise<void>;
}
