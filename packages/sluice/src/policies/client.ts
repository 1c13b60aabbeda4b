/**
 * `connectPolicies`: policies managed in the sluice service, enforced in this process. The
 * client loads the policies granted to the app's API key (`GET /v1/policies`), keeps them
 * current with a long poll (the service answers when the set changes, or 304 after `waitMs`),
 * and decides every request locally against the store it was given, with the same keys as the
 * service. A changed policy is swapped in whole (the new set replaces the old in one
 * assignment); limiters are rebuilt on the same store, so counters are kept. When the service
 * cannot be reached, the last good set stays in force; it can also start from a cache it wrote
 * earlier. Draft and decision counts are reported back (`POST /v1/policies/report`), which is
 * also the client's heartbeat in the admin's list of clients.
 */
import { z } from "zod";
import {
  type Clock,
  TIMERS_MESSAGE,
  type Timers,
  isTimers,
  systemClock,
  systemTimers,
} from "../clock.js";
import type { Decision } from "../decision.js";
import { SluiceError, ValidationError, type ValidationIssue } from "../errors.js";
import {
  type Lease,
  type LimitOptions,
  type Limiter,
  type Reservation,
  type SetCountOptions,
  createLimiter,
  leaseOf,
} from "../limiter.js";
import { type Policy, policyCapacity } from "../policy.js";
import type { Store } from "../store.js";
import { VERSION } from "../version.js";
import { importBuiltin, randomHex } from "../platform.js";
import { type PolicyCache, fileCache } from "./file-cache.js";
import {
  type DecideLiveHooks,
  type LivePolicy,
  type ManagedPolicyDocument,
  type TakenDraftStats,
  decideLive,
  disabledDecision,
  livePolicy,
  restoreDraftStats,
  takeDraftStats,
} from "./live.js";

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

/** Options of {@link connectPolicies}. */
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

// ------------------------------------------------------------------ options

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

interface Resolved {
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

function resolveOptions(o: ConnectPoliciesOptions): Resolved {
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

// ------------------------------------------------------------------ what the service sends

/** A document of the set: the service's document minus its grants. Checked by `definePolicy`. */
const documentSchema = z.looseObject({ name: z.string() });

/** `GET /v1/policies`: the policies granted to the app. */
const policySetSchema = z.object({
  app: z.string(),
  revision: z.number().int().min(0),
  policies: z.array(
    z.object({
      version: z.number().int().min(1),
      document: documentSchema,
      draft: z.object({ id: z.number().int().min(1), document: documentSchema }).optional(),
    }),
  ),
});

/** A policy set as the service sends it. */
type PolicySet = z.infer<typeof policySetSchema>;

/** The cache's content: the last set, and whom it was for. */
const cacheSchema = z.object({
  format: z.literal("sluice-policy-cache"),
  version: z.literal(1),
  url: z.string(),
  keyId: z.string(),
  savedAt: z.string(),
  etag: z.string().optional(),
  set: policySetSchema,
});

// ------------------------------------------------------------------ the client

/**
 * Connects to the sluice service and resolves once a policy set is in force: the service's,
 * or (when the service cannot be reached) the cache's. Rejects with `SLUICE_ERR_POLICY_SOURCE`
 * when there is neither, and with `SLUICE_ERR_OPTIONS` for bad options or an API key the
 * service refuses.
 *
 * ```ts
 * const policies = await connectPolicies({ url, apiKey, store: redisStore({ client }) });
 * const d = await policies.limit("api", "user:42");
 * ```
 */
export async function connectPolicies(options: ConnectPoliciesOptions): Promise<PolicyClient> {
  const o = resolveOptions(options);
  const client = new Client(o, o.host ?? (await defaultHost()));
  await client.start();
  return client;
}

async function defaultHost(): Promise<string> {
  try {
    const os = await importBuiltin<{ hostname(): string }>("os");
    return os.hostname() || "unknown";
  } catch {
    return "unknown";
  }
}

/** Thrown inside the client: the service answered, but not with what was asked. */
function sourceError(message: string, cause?: unknown): SluiceError {
  return new SluiceError("SLUICE_ERR_POLICY_SOURCE", message, { cause });
}

/** A policy as the client enforces it. */
type Live = LivePolicy<ManagedPolicyDocument>;

class Client implements PolicyClient {
  /** The set in force: replaced whole, never changed in place. */
  live = new Map<string, Live>();
  private readonly handles = new Map<string, ManagedLimiter>();
  private revision = -1;
  private etag: string | undefined;
  private source: "service" | "cache" = "service";
  private connected = false;
  private lastContactAt: number | undefined;
  private failures = 0;
  private lastError: SluiceError | undefined;
  private closed = false;
  private readonly instance = randomHex(8);
  private readonly requests = new Set<AbortController>();
  private readonly sleepers = new Set<() => void>();
  private loop: Promise<void> | undefined;
  private reportTimer: unknown;
  private reporting: Promise<void> | undefined;
  private saving: Promise<void> = Promise.resolve();
  private readonly limiterFor: (policy: Policy) => Limiter;

  constructor(
    readonly o: Resolved,
    private readonly host: string,
  ) {
    const onError = o.onStoreError;
    this.limiterFor = (policy) =>
      createLimiter({ store: o.store, policy, ...(onError ? { onError } : {}) });
  }

  // ---------------------------------------------------------------- start and stop

  async start(): Promise<void> {
    let pause = 0;
    try {
      await this.fetchSet(0);
      this.succeeded();
    } catch (err) {
      if (err instanceof ValidationError) throw err; // the key was refused
      const e = toSourceError(err);
      const cached = await this.loadCache();
      if (!cached) {
        throw sourceError(
          `${e.message}; and there is no cached policy set to start from${this.o.cache ? "" : " (set cacheFile to keep one)"}`,
          e,
        );
      }
      this.failed(e);
      pause = this.backoff();
    }
    this.loop = this.run(pause);
    this.scheduleReport(0);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.requests) c.abort();
    for (const wake of this.sleepers) wake();
    if (this.reportTimer !== undefined) this.o.timers.clearTimeout(this.reportTimer);
    await this.loop;
    await this.reporting;
    // A last report, so that the counts since the previous one are not lost.
    await this.sendReport().catch(() => undefined);
    await this.saving;
  }

  // ---------------------------------------------------------------- decisions

  limit(name: string, key: string, options?: LimitOptions): Promise<Decision> {
    let handle: ManagedLimiter;
    try {
      handle = this.handle(name);
    } catch (err) {
      return Promise.reject(err);
    }
    return handle.limit(key, options);
  }

  limiter(name: string): Limiter {
    return this.handle(name);
  }

  has(name: string): boolean {
    return this.live.has(name);
  }

  names(): string[] {
    return [...this.live.keys()];
  }

  status(): PolicyClientStatus {
    return {
      revision: this.revision,
      source: this.source,
      connected: this.connected,
      lastContactAt: this.lastContactAt,
      failures: this.failures,
      lastError: this.lastError,
    };
  }

  private handle(name: string): ManagedLimiter {
    let h = this.handles.get(name);
    if (h) return h;
    const live = this.live.get(name);
    if (!live) throw this.notFound(name);
    h = new ManagedLimiter(this, name, live);
    this.handles.set(name, h);
    return h;
  }

  /** The error for a policy that is not granted (never a silent allow). */
  notFound(name: string): SluiceError {
    return new SluiceError(
      "SLUICE_ERR_POLICY_NOT_FOUND",
      `policy "${name}" is not granted to this app by the sluice service at ${this.o.url}: it does not exist, or its grant was revoked (revision ${this.revision}; granted: ${this.names().join(", ") || "none"})`,
    );
  }

  /** The hooks of {@link decideLive}: a failed draft evaluation is reported, never thrown. */
  readonly hooks: DecideLiveHooks = {
    onDraftError: (err) =>
      this.tell(sourceErrorFrom("a draft could not be evaluated (its counts skip it)", err)),
  };

  // ---------------------------------------------------------------- the policy set

  /** One request for the set; resolves to whether a new set was put in force. */
  private async fetchSet(waitMs: number): Promise<boolean> {
    const query = new URLSearchParams();
    if (waitMs > 0) query.set("wait", String(waitMs));
    if (this.revision >= 0) query.set("revision", String(this.revision));
    const qs = query.toString();
    const res = await this.request(
      "GET",
      `/v1/policies${qs ? `?${qs}` : ""}`,
      undefined,
      waitMs,
      this.etag !== undefined ? { "if-none-match": this.etag } : {},
    );
    const rev = Number(res.headers.get("sluice-revision") ?? "");
    if (res.status === 304) {
      if (Number.isSafeInteger(rev) && rev > this.revision) this.revision = rev;
      return false;
    }
    if (res.status === 401) {
      const message = `the service refused it (401): ${errorMessage(res.text) ?? "unknown or revoked API key"}`;
      // At start this is the caller's mistake; later, the last good set stays in force.
      if (this.loop === undefined)
        throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid connectPolicies options", [
          { path: "apiKey", message },
        ]);
      throw sourceError(`the sluice service at ${this.o.url} refused the API key: ${message}`);
    }
    if (res.status !== 200) throw statusError(this.o.url, "GET /v1/policies", res);
    const set = parseSet(res.text, `the sluice service at ${this.o.url}`);
    const etag = res.headers.get("etag") ?? undefined;
    this.apply(set, etag, "service");
    this.saveCache(set, etag);
    return true;
  }

  /** Puts a set in force, whole. A document that does not validate keeps its last good version. */
  private apply(set: PolicySet, etag: string | undefined, source: "service" | "cache"): void {
    const prev = this.live;
    const next = new Map<string, Live>();
    const changed: string[] = [];
    for (const p of set.policies) {
      const doc = p.document as unknown as ManagedPolicyDocument;
      const before = prev.get(doc.name);
      try {
        const draft = p.draft
          ? { id: p.draft.id, doc: p.draft.document as unknown as ManagedPolicyDocument }
          : undefined;
        const live = livePolicy(doc, p.version, draft, before, this.limiterFor);
        if (live !== before && (live.version !== before?.version || live.draft !== before.draft))
          changed.push(doc.name);
        next.set(doc.name, live);
      } catch (err) {
        this.tell(
          sourceErrorFrom(
            `policy "${doc.name}" (version ${p.version}) from the service does not validate; ${before ? `keeping version ${before.version}` : "it is left out"}`,
            err,
          ),
        );
        if (before) next.set(doc.name, before);
      }
    }
    const removed = [...prev.keys()].filter((n) => !next.has(n));
    this.live = next;
    this.etag = etag;
    this.source = source;
    this.revision = source === "service" ? set.revision : Math.max(this.revision, set.revision);
    if (this.o.onUpdate) {
      const update: PolicyUpdate = {
        revision: this.revision,
        source,
        policies: [...next.keys()],
        changed,
        removed,
      };
      try {
        this.o.onUpdate(update);
      } catch {
        // An observer must not break the client.
      }
    }
  }

  /** The long poll, until closed. */
  private async run(firstPause: number): Promise<void> {
    if (firstPause > 0) await this.sleep(firstPause);
    while (!this.closed) {
      const started = this.o.clock();
      let pause = 0;
      try {
        const changed = await this.fetchSet(this.o.waitMs);
        this.succeeded();
        // An answer that came back early with nothing new (a node shutting down, a proxy
        // cutting the request): wait a little rather than ask again at once.
        if (!changed && this.o.clock() - started < this.o.waitMs / 2) pause = this.o.retryMinMs;
      } catch (err) {
        if (this.closed) break;
        this.failed(toSourceError(err));
        pause = this.backoff();
      }
      if (pause > 0 && !this.closed) await this.sleep(pause);
    }
  }

  /** The delay before retry number `failures`: doubling from retryMinMs up to retryMaxMs, spread. */
  private backoff(): number {
    const base = Math.min(
      this.o.retryMaxMs,
      this.o.retryMinMs * 2 ** Math.min(30, this.failures - 1),
    );
    return Math.max(1, Math.round(base * (0.5 + this.o.random() / 2)));
  }

  private succeeded(): void {
    this.connected = true;
    this.failures = 0;
    this.lastError = undefined;
    this.lastContactAt = this.o.clock();
  }

  private failed(err: SluiceError): void {
    const first = this.failures === 0;
    this.connected = false;
    this.failures++;
    this.lastError = err;
    if (this.o.onError) this.tell(err);
    else if (first)
      console.warn(
        JSON.stringify({
          msg: "sluice: the policy service cannot be reached; the last good policies stay in force",
          error: err.message,
        }),
      );
  }

  /** Tells `onError` (never throws). */
  private tell(err: SluiceError): void {
    try {
      this.o.onError?.(err);
    } catch {
      // An observer must not break the client.
    }
  }

  // ---------------------------------------------------------------- the cache

  private async loadCache(): Promise<boolean> {
    const cache = this.o.cache;
    if (!cache) return false;
    let text: string | undefined;
    try {
      text = await cache.load();
    } catch (err) {
      this.tell(sourceErrorFrom("the policy cache could not be read", err));
      return false;
    }
    if (text === undefined) return false;
    let parsed: z.infer<typeof cacheSchema>;
    try {
      const r = cacheSchema.safeParse(JSON.parse(text));
      if (!r.success) throw new Error(r.error.issues.map((i) => i.message).join("; "));
      parsed = r.data;
    } catch (err) {
      this.tell(sourceErrorFrom("the policy cache is not a policy set sluice wrote", err));
      return false;
    }
    if (parsed.url !== this.o.url || parsed.keyId !== this.o.keyId) {
      this.tell(
        sourceError(
          `the policy cache was written for ${parsed.url === this.o.url ? "another API key" : parsed.url}; not used`,
        ),
      );
      return false;
    }
    this.apply(parsed.set, parsed.etag, "cache");
    return true;
  }

  /** Writes the set to the cache, after any write under way; a failure is reported. */
  private saveCache(set: PolicySet, etag: string | undefined): void {
    const cache = this.o.cache;
    if (!cache) return;
    const text = JSON.stringify({
      format: "sluice-policy-cache",
      version: 1,
      url: this.o.url,
      keyId: this.o.keyId,
      savedAt: new Date(this.o.clock()).toISOString(),
      ...(etag !== undefined ? { etag } : {}),
      set,
    });
    this.saving = this.saving
      .then(() => cache.save(text))
      .catch((err: unknown) =>
        this.tell(sourceErrorFrom("the policy cache could not be written", err)),
      );
  }

  /** Resolves once every cache write started so far is done (for tests). */
  flushed(): Promise<void> {
    return this.saving;
  }

  // ---------------------------------------------------------------- reports

  private scheduleReport(ms: number): void {
    if (this.closed) return;
    this.reportTimer = this.o.timers.setTimeout(() => {
      this.reportTimer = undefined;
      this.reporting = this.sendReport()
        // A report given up by close() is no failure: close() sends its counts again.
        .catch((err: unknown) => (this.closed ? undefined : this.tell(toSourceError(err))))
        .finally(() => {
          this.reporting = undefined;
          this.scheduleReport(this.o.reportIntervalMs);
        });
    }, ms);
  }

  async report(): Promise<void> {
    await this.reporting;
    await this.sendReport();
  }

  /** Sends the counts gathered since the last report; on failure they are kept for the next. */
  private async sendReport(): Promise<void> {
    const drafts: TakenDraftStats[] = takeDraftStats(this.live.values());
    const decisions: { handle: ManagedLimiter; counts: Map<string, number> }[] = [];
    for (const handle of this.handles.values()) {
      if (handle.counts.size === 0) continue;
      decisions.push({ handle, counts: handle.counts });
      handle.counts = new Map();
    }
    const body = {
      instance: this.instance,
      host: this.host,
      client: `sluice/${VERSION}`,
      revision: Math.max(0, this.revision),
      drafts: drafts.map((t) => ({
        policy: t.policy.policy.name,
        draftId: t.draft.id,
        ...t.delta,
      })),
      decisions: decisions.flatMap(({ handle, counts }) =>
        [...counts].map(([k, count]) => {
          const [outcome, reason] = k.split("|") as [string, string];
          return {
            policy: handle.name,
            allowed: outcome === "allowed",
            ...(reason ? { reason } : {}),
            count,
          };
        }),
      ),
    };
    try {
      const res = await this.request("POST", "/v1/policies/report", JSON.stringify(body), 0, {
        "content-type": "application/json",
      });
      if (res.status !== 200) throw statusError(this.o.url, "POST /v1/policies/report", res);
    } catch (err) {
      restoreDraftStats(drafts);
      for (const { handle, counts } of decisions)
        for (const [k, n] of counts) handle.counts.set(k, (handle.counts.get(k) ?? 0) + n);
      throw err;
    }
  }

  // ---------------------------------------------------------------- HTTP

  /** One request, given up after `waitMs + timeoutMs` or on close; the body read whole. */
  private async request(
    method: "GET" | "POST",
    path: string,
    body: string | undefined,
    waitMs: number,
    headers: Record<string, string>,
  ): Promise<{ status: number; headers: PolicyFetchResponse["headers"]; text: string }> {
    if (this.closed && method === "GET") throw sourceError("the policy client is closed");
    const controller = new AbortController();
    this.requests.add(controller);
    const limitMs = waitMs + this.o.timeoutMs;
    // Settled by whichever comes first: the timeout, or an abort (close()).
    let fail!: (err: SluiceError) => void;
    const failed = new Promise<never>((_, reject) => (fail = reject));
    const timer = this.o.timers.setTimeout(() => {
      fail(
        sourceError(
          `the sluice service at ${this.o.url} did not answer ${method} ${path.split("?")[0]} within ${limitMs} ms`,
        ),
      );
      controller.abort();
    }, limitMs);
    controller.signal.addEventListener("abort", () =>
      fail(sourceError("the request was given up: the policy client is closing")),
    );
    try {
      const work = (async () => {
        const res = await this.o.fetch(`${this.o.url}${path}`, {
          method,
          headers: {
            accept: "application/json",
            authorization: `Bearer ${this.o.apiKey}`,
            ...headers,
          },
          ...(body !== undefined ? { body } : {}),
          signal: controller.signal as RuntimeAbortSignal,
        });
        const text = await res.text();
        return { status: res.status, headers: res.headers, text };
      })();
      work.catch(() => undefined);
      return await Promise.race([work, failed]);
    } catch (err) {
      if (err instanceof SluiceError) throw err;
      throw sourceError(
        `could not reach the sluice service at ${this.o.url}: ${causeMessage(err)}`,
        err,
      );
    } finally {
      this.o.timers.clearTimeout(timer);
      this.requests.delete(controller);
      failed.catch(() => undefined);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        this.o.timers.clearTimeout(handle);
        this.sleepers.delete(wake);
        resolve();
      };
      const handle = this.o.timers.setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }
}

/** A policy's stable limiter: every call goes to the policy's current version. */
class ManagedLimiter implements Limiter {
  /** Decisions since the last report, by `outcome|reason`. */
  counts = new Map<string, number>();
  /** The last version seen (its policy answers `policy` after a revocation). */
  private last: Live;

  constructor(
    private readonly client: Client,
    readonly name: string,
    first: Live,
  ) {
    this.last = first;
  }

  private current(): Live {
    const live = this.client.live.get(this.name);
    if (!live) throw this.client.notFound(this.name);
    this.last = live;
    return live;
  }

  /** The current version's policy (the last one seen when the policy is no longer granted). */
  get policy(): Policy {
    return (this.client.live.get(this.name) ?? this.last).policy;
  }

  get store(): Store {
    return this.client.o.store;
  }

  ready(): Promise<void> {
    return this.client.o.store.ready?.() ?? Promise.resolve();
  }

  limit(key: string, options?: LimitOptions): Promise<Decision> {
    let live: Live;
    let cost: number;
    try {
      live = this.current();
      cost = options?.cost ?? 1;
      // The limiter checks key and cost; a disabled policy has no limiter call, so check here.
      if (!live.enabled) checkInput(live.policy, key, cost);
    } catch (err) {
      return Promise.reject(err);
    }
    return decideLive(live, key, cost, this.client.hooks).then((d) => {
      const k = `${d.allowed ? "allowed" : "denied"}|${d.reason ?? ""}`;
      this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
      return d;
    });
  }

  peek(key: string, options?: LimitOptions): Promise<Decision> {
    try {
      const live = this.current();
      if (!live.enabled) {
        const cost = options?.cost ?? 1;
        checkInput(live.policy, key, cost);
        return Promise.resolve(disabledDecision(live.policy, cost));
      }
      return live.limiter.peek(key, options);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  async reset(key: string): Promise<void> {
    await this.current().limiter.reset(key);
  }

  async refund(key: string, cost?: number): Promise<void> {
    await this.current().limiter.refund(key, cost);
  }

  async acquire(key: string, options?: LimitOptions): Promise<Lease> {
    const live = this.current();
    if (live.policy.algorithm !== "concurrency") return live.limiter.acquire(key, options);
    return leaseOf(await this.limit(key, options), (id) => this.release(key, id));
  }

  async release(key: string, leaseId: string): Promise<boolean> {
    return this.current().limiter.release(key, leaseId);
  }

  async setCount(key: string, count: number, options?: SetCountOptions): Promise<void> {
    await this.current().limiter.setCount(key, count, options);
  }

  async reserve(key: string, estimate: number): Promise<Reservation> {
    const live = this.current();
    if (live.enabled) return live.limiter.reserve(key, estimate);
    checkInput(live.policy, key, estimate);
    const decision = disabledDecision(live.policy, estimate);
    return {
      decision,
      settle: async (actual: number) => {
        if (typeof actual !== "number" || !Number.isInteger(actual) || actual < 0) {
          throw new ValidationError("SLUICE_ERR_COST", "Invalid settle", [
            { path: "actual", message: `must be a whole number ≥ 0 (got ${String(actual)})` },
          ]);
        }
      },
      cancel: async () => {},
    };
  }
}

/** The key and cost checks of a limiter, for a disabled policy (which calls none). */
function checkInput(policy: Policy, key: unknown, cost: unknown): void {
  if (typeof key !== "string" || key.length === 0)
    throw new ValidationError("SLUICE_ERR_KEY", "Invalid key", [
      {
        path: "key",
        message: `must be a non-empty string (got ${typeof key === "string" ? "an empty string" : typeof key})`,
      },
    ]);
  if (typeof cost !== "number" || !Number.isInteger(cost) || cost <= 0)
    throw new ValidationError("SLUICE_ERR_COST", "Invalid cost", [
      {
        path: "cost",
        message: `must be a positive integer (got ${typeof cost === "number" ? String(cost) : typeof cost})`,
      },
    ]);
  const capacity = policyCapacity(policy);
  if (cost > capacity)
    throw new ValidationError("SLUICE_ERR_COST", "Invalid cost", [
      {
        path: "cost",
        message: `${cost} can never fit policy "${policy.name}", whose capacity is ${capacity}`,
      },
    ]);
}

function parseSet(text: string, from: string): PolicySet {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw sourceError(`${from} answered something that is not JSON`, err);
  }
  const r = policySetSchema.safeParse(data);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw sourceError(
      `${from} answered something that is not a policy set: ${issue.path.join(".") || "the body"}: ${issue.message}`,
    );
  }
  return r.data;
}

/** The service's `error.message`, when the body has one. */
function errorMessage(text: string): string | undefined {
  try {
    const m = (JSON.parse(text) as { error?: { message?: unknown } } | null)?.error?.message;
    return typeof m === "string" ? m : undefined;
  } catch {
    return undefined;
  }
}

function statusError(
  url: string,
  what: string,
  res: { status: number; text: string },
): SluiceError {
  const said = errorMessage(res.text);
  return sourceError(
    `the sluice service at ${url} answered ${what} with ${res.status}${said ? `: ${said}` : ""}${res.status === 404 && !said ? " (is this a sluice service with embedded-client support?)" : ""}`,
  );
}

function causeMessage(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof Error && cause.message
    ? `${err.message} (${cause.message})`
    : err.message;
}

function toSourceError(err: unknown): SluiceError {
  return err instanceof SluiceError ? err : sourceErrorFrom("the policy client failed", err);
}

function sourceErrorFrom(what: string, err: unknown): SluiceError {
  return sourceError(`${what}: ${causeMessage(err)}`, err);
}
