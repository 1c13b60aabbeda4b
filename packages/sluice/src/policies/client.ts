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
import type { z } from "zod";
import type { Decision } from "../decision.js";
import { SluiceError, ValidationError } from "../errors.js";
import { type LimitOptions, type Limiter, createLimiter, overridesOf } from "../limiter.js";
import type { RuleInput } from "../policy.js";
import type { Store } from "../store.js";
import { VERSION } from "../version.js";
import { importBuiltin, randomHex } from "../platform.js";
import {
  type DraftHooks,
  type LiveKind,
  type TakenDraftStats,
  buildLiveSet,
  restoreDraftStats,
  takeDraftStats,
} from "./live-document.js";
import {
  type LivePolicy,
  type ManagedPolicyDocument,
  type PolicyDraftForm,
  type PolicyForm,
  policyLiveKind,
} from "./live.js";
import { type LimiterOwner, ManagedLimiter } from "./managed-limiter.js";
import { type Resolved, resolveConnectOptions } from "./options.js";
import { ServiceHttp } from "./service-http.js";
import type {
  ConnectPoliciesOptions,
  PolicyClient,
  PolicyClientStatus,
  PolicyUpdate,
} from "./types.js";
import {
  type PolicySet,
  cacheSchema,
  errorMessage,
  parseSet,
  sourceError,
  sourceErrorFrom,
  statusError,
  toSourceError,
} from "./wire.js";

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
  const o = resolveConnectOptions(options);
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

class Client implements PolicyClient, LimiterOwner {
  /** The set in force: replaced whole, never changed in place. */
  live = new Map<string, LivePolicy>();
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
  private loop: Promise<void> | undefined;
  private reportTimer: unknown;
  private reporting: Promise<void> | undefined;
  private saving: Promise<void> = Promise.resolve();
  /**
   * A policy new to this client came with the changes of its overrides only: the next request
   * asks for every override (no revision, no ETag), answered at once.
   */
  private wholeOverridesNext = false;
  /** How a served document becomes a live policy, on this client's store. */
  private readonly kind: LiveKind<ManagedPolicyDocument, PolicyForm, PolicyDraftForm>;
  readonly store: Store;
  private readonly http: ServiceHttp;

  constructor(
    readonly o: Resolved,
    private readonly host: string,
  ) {
    this.store = o.store;
    this.http = new ServiceHttp(o);
    const onError = o.onStoreError;
    this.kind = policyLiveKind((policy) =>
      createLimiter({ store: o.store, policy, ...(onError ? { onError } : {}) }),
    );
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
    this.http.close();
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
  readonly hooks: DraftHooks = {
    onDraftError: (err) =>
      this.tell(sourceErrorFrom("a draft could not be evaluated (its counts skip it)", err)),
  };

  // ---------------------------------------------------------------- the policy set

  /** One request for the set; resolves to whether a new set was put in force. */
  private async fetchSet(waitMs: number): Promise<boolean> {
    const query = new URLSearchParams();
    const whole = this.wholeOverridesNext;
    if (waitMs > 0 && !whole) query.set("wait", String(waitMs));
    if (this.revision >= 0 && !whole) query.set("revision", String(this.revision));
    const qs = query.toString();
    const res = await this.http.request(
      "GET",
      `/v1/policies${qs ? `?${qs}` : ""}`,
      undefined,
      whole ? 0 : waitMs,
      this.etag !== undefined && !whole ? { "if-none-match": this.etag } : {},
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
    // The cache holds every override in force, whatever part of them this answer carried.
    this.saveCache({ ...set, overrides: { whole: true, items: this.overrideItems() } }, etag);
    return true;
  }

  /**
   * Puts a set's per-key overrides on the live limiters (after the set is in force): every one
   * (`whole`: a key not listed loses its override), or those that changed. An override that
   * does not validate keeps the key's last good one, and is told to `onError`.
   */
  private applyOverrides(
    overrides: NonNullable<PolicySet["overrides"]>,
    fresh: ReadonlySet<string>,
  ): void {
    const byPolicy = new Map<string, Array<{ key: string; rules: unknown[] | null }>>();
    for (const item of overrides.items) {
      let list = byPolicy.get(item.policy);
      if (list === undefined) byPolicy.set(item.policy, (list = []));
      list.push(item);
    }
    for (const [name, live] of this.live) {
      const items = byPolicy.get(name);
      if (overrides.whole || fresh.has(name)) {
        const listed = new Set(items?.map((i) => i.key));
        for (const key of [...(overridesOf(live.limiter)?.keys() ?? [])])
          if (!listed.has(key)) live.limiter.deleteOverride(key);
      }
      for (const { key, rules } of items ?? []) {
        if (rules === null) {
          live.limiter.deleteOverride(key);
          continue;
        }
        try {
          live.limiter.setOverride(key, rules as RuleInput[]);
        } catch (err) {
          this.tell(
            sourceErrorFrom(
              `the override of key "${key}" of policy "${name}" from the service does not validate; the key keeps its last good override`,
              err,
            ),
          );
        }
      }
    }
  }

  /** Every override in force, as the service sends them. */
  private overrideItems(): NonNullable<PolicySet["overrides"]>["items"] {
    const items: NonNullable<PolicySet["overrides"]>["items"] = [];
    for (const [name, live] of this.live)
      for (const key of overridesOf(live.limiter)?.keys() ?? [])
        items.push({ policy: name, key, rules: live.limiter.override(key) ?? null });
    return items;
  }

  /** Puts a set in force, whole. A document that does not validate keeps its last good version. */
  private apply(set: PolicySet, etag: string | undefined, source: "service" | "cache"): void {
    const prev = this.live;
    const next = buildLiveSet(
      this.kind,
      set.policies.map((p) => {
        const doc = p.document as unknown as ManagedPolicyDocument;
        const draft = p.draft
          ? { id: p.draft.id, doc: p.draft.document as unknown as ManagedPolicyDocument }
          : undefined;
        return { name: doc.name, doc, version: p.version, draft };
      }),
      prev,
      (err, { name, version }, kept) =>
        this.tell(
          sourceErrorFrom(
            `policy "${name}" (version ${version}) from the service does not validate; ${kept ? `keeping version ${kept.version}` : "it is left out"}`,
            err,
          ),
        ),
    );
    // A policy kept as it was (the same version and draft, or one that did not validate) is
    // the same object.
    const changed = [...next].filter(([name, live]) => live !== prev.get(name)).map(([n]) => n);
    const removed = [...prev.keys()].filter((n) => !next.has(n));
    this.live = next;
    // A policy new to this client has none of its overrides yet: only a whole answer has them.
    const fresh = new Set([...next.keys()].filter((n) => !prev.has(n)));
    if (set.overrides !== undefined) this.applyOverrides(set.overrides, fresh);
    this.wholeOverridesNext = fresh.size > 0 && set.overrides?.whole !== true && prev.size > 0;
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
    if (firstPause > 0) await this.http.sleep(firstPause);
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
      if (pause > 0 && !this.closed) await this.http.sleep(pause);
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
    const drafts: TakenDraftStats<LivePolicy>[] = takeDraftStats(this.live.values());
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
      const res = await this.http.request("POST", "/v1/policies/report", JSON.stringify(body), 0, {
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
}
