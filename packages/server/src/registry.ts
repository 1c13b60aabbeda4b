/**
 * The node's live view of policies, apps and Envoy domains, kept in step with the database: every
 * `pollIntervalMs` it reads the `revision` counter (one tiny query, same on SQLite and
 * PostgreSQL) and, when it moved, reloads the snapshot and swaps it in whole. A snapshot that
 * fails to load leaves the last good one in force.
 */
import {
  type LiveDraft as SharedLiveDraft,
  type LivePolicy as SharedLivePolicy,
  type Limiter,
  type Policy,
  type Store,
  createLimiter,
  livePolicy,
  restoreDraftStats,
  takeDraftStats,
} from "sluice";
import type { Logger } from "pino";
import type { PolicyDocument } from "./model.js";
import type { AppKey, Repository, Snapshot } from "./repository.js";
import { secretId, secretMatches } from "./secrets.js";
import { loadEnvoyDomains } from "./envoy/live.js";
import type { LiveEnvoyDomain } from "./envoy/rls.js";

/** The draft of a policy, running in shadow on its own keys (`sluice.draft.<id>`). */
export type LiveDraft = SharedLiveDraft<PolicyDocument>;

/** A policy as a node enforces it: sluice's live policy, plus the apps granted it. */
export interface LivePolicy extends SharedLivePolicy<PolicyDocument> {
  readonly apps: ReadonlySet<string>;
}

/** Options of {@link Registry}. */
export interface RegistryOptions {
  repo: Repository;
  store: Store;
  logger: Logger;
  pollIntervalMs: number;
  /** Called with the store error when a limiter's `onStoreError` decided instead. */
  onStoreError?: (error: unknown, policy: Policy) => void;
  /** Called after each (re)load. */
  onLoad?: (snapshot: Snapshot) => void;
}

/** Most verified API keys remembered per snapshot of the apps. */
const VERIFIED_KEYS = 10_000;

/** How often each node adds its draft shadow counts to the shared totals. */
const DRAFT_FLUSH_MS = 1000;

/** The live policies and app keys of one node. */
export class Registry {
  private policies = new Map<string, LivePolicy>();
  private apps = new Map<string, AppKey>();
  /** API keys verified against `apps` (see {@link Registry.appForKey}). */
  private verified = new Map<string, string>();
  private envoy = new Map<string, LiveEnvoyDomain>();
  private revision = -1;
  private timer: NodeJS.Timeout | undefined;
  /** The last load queued: every check and reload runs after the one before it. */
  private chain: Promise<void> = Promise.resolve();
  /** A poll queued but not started yet, which later callers share. */
  private queued: Promise<void> | undefined;
  private lastError: unknown;
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;
  private loads = 0;
  private readonly listeners = new Set<() => void>();

  constructor(private readonly options: RegistryOptions) {}

  /** Loads the first snapshot (throws if it cannot) and starts polling. */
  async start(): Promise<void> {
    await this.reload();
    this.timer = setInterval(() => void this.poll(), this.options.pollIntervalMs);
    this.timer.unref();
    this.flushTimer = setInterval(() => {
      this.flushDraftStats().catch((err: unknown) =>
        this.options.logger.warn({ err }, "could not record draft shadow counts"),
      );
    }, DRAFT_FLUSH_MS);
    this.flushTimer.unref();
  }

  /** Stops polling and records the last draft counts. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.flushTimer) clearInterval(this.flushTimer);
    this.timer = this.flushTimer = undefined;
    await this.chain;
    await this.flushDraftStats().catch(() => {});
  }

  /**
   * Adds this node's pending draft counts to the totals in the database (every second, on
   * stop, and before the admin API reads them), so the totals cover every node.
   */
  flushDraftStats(): Promise<void> {
    // `.finally` runs after the assignment, even when there is nothing to write.
    this.flushing ??= this.writeDraftStats().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async writeDraftStats(): Promise<void> {
    for (const live of this.envoy.values()) {
      const draft = live.draft;
      if (!draft || draft.stats.evaluated === 0) continue;
      const s = draft.stats;
      const delta = { ...s };
      s.evaluated = s.wouldDeny = s.wouldDenyNewly = s.wouldAllowNewly = 0;
      try {
        await this.options.repo.addEnvoyDraftStats(draft.id, delta);
      } catch (err) {
        s.evaluated += delta.evaluated;
        s.wouldDeny += delta.wouldDeny;
        s.wouldDenyNewly += delta.wouldDenyNewly;
        s.wouldAllowNewly += delta.wouldAllowNewly;
        throw err;
      }
    }
    const taken = takeDraftStats(this.policies.values());
    for (const [i, t] of taken.entries()) {
      try {
        await this.options.repo.addDraftStats(t.draft.id, t.delta);
      } catch (err) {
        // Keep the counts not written for the next flush.
        restoreDraftStats(taken.slice(i));
        throw err;
      }
    }
  }

  /** The revision this node runs. */
  get currentRevision(): number {
    return this.revision;
  }

  /** How many snapshots this node has loaded: it changes whenever what it runs may have. */
  get generation(): number {
    return this.loads;
  }

  /**
   * Calls `listener` after every snapshot loaded (this node's own writes, and other nodes'
   * changes found by the revision poll); returns the function that stops it. Embedded clients'
   * long polls wait on this: they cost no query of their own.
   */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A policy by name. */
  get(name: string): LivePolicy | undefined {
    return this.policies.get(name);
  }

  /** Every live policy. */
  all(): LivePolicy[] {
    return [...this.policies.values()];
  }

  /** An Envoy domain by name. */
  envoyDomain(name: string): LiveEnvoyDomain | undefined {
    return this.envoy.get(name);
  }

  /** Every live Envoy domain, by name. */
  envoyDomains(): ReadonlyMap<string, LiveEnvoyDomain> {
    return this.envoy;
  }

  /** The app an API key belongs to (constant-time check of the key), or undefined. */
  appForKey(key: string): string | undefined {
    // Keys already verified against this snapshot's hashes skip the SHA-256 (every request of
    // an app carries the same key). The cache is emptied whenever the apps are reloaded, so a
    // rotated or revoked key stops working as before, and it is bounded.
    const known = this.verified.get(key);
    if (known !== undefined) return known;
    const id = secretId("sk", key);
    const app = id === undefined ? undefined : this.apps.get(id);
    if (!app || !secretMatches(key, app.keyHash)) return undefined;
    if (this.verified.size >= VERIFIED_KEYS) this.verified.clear();
    this.verified.set(key, app.name);
    return app.name;
  }

  /**
   * Checks the revision and reloads when it moved; never throws (a failure is logged and the
   * last good policies stay in force). Checks run one after another, and a call made while one
   * runs is answered by the next, so when it resolves everything committed before the call is
   * loaded: the admin API awaits it after each change, so that this node serves its own writes
   * at once. The timer calls it every `pollIntervalMs` for the changes of other nodes.
   */
  poll(): Promise<void> {
    if (!this.queued) {
      const run = this.chain.then(() => {
        this.queued = undefined;
        return this.check();
      });
      this.queued = this.chain = run;
    }
    return this.queued;
  }

  private async check(): Promise<void> {
    try {
      const rev = await this.options.repo.revision();
      if (rev !== this.revision) await this.load();
      this.lastError = undefined;
    } catch (err) {
      if (this.lastError === undefined)
        this.options.logger.error({ err }, "policy reload failed; keeping the last good policies");
      this.lastError = err;
    }
  }

  /** Reads the whole snapshot and swaps it in, after any load under way; throws when it cannot. */
  reload(): Promise<void> {
    const run = this.chain.then(() => this.load());
    this.chain = run.catch(() => {});
    return run;
  }

  private async load(): Promise<void> {
    const snap = await this.options.repo.snapshot();
    // A row that cannot be read keeps what this node last loaded from it.
    const corrupt = {
      policies: new Set<string>(),
      drafts: new Set<string>(),
      apps: new Set<string>(),
    };
    for (const err of snap.corrupt) {
      this.options.logger.error({ err }, "stored record is corrupt; keeping its last good version");
      if (err.table === "policies") corrupt.policies.add(String(err.key.name));
      if (err.table === "policy_drafts") corrupt.drafts.add(String(err.key.policy_name));
      if (err.table === "apps") corrupt.apps.add(String(err.key.name));
    }
    const drafts = new Map(snap.drafts.map((d) => [d.name, d]));
    const next = new Map<string, LivePolicy>();
    for (const rec of snap.policies) {
      const prev = this.policies.get(rec.doc.name);
      try {
        // A draft row that cannot be read keeps the draft this node last loaded.
        const d =
          drafts.get(rec.doc.name) ?? (corrupt.drafts.has(rec.doc.name) ? prev?.draft : undefined);
        const live = livePolicy(rec.doc, rec.version, d, prev, (p) => this.limiter(p));
        next.set(rec.doc.name, { ...live, apps: new Set(rec.doc.apps) });
      } catch (err) {
        // Stored policies were validated on write; one that no longer validates keeps its last good form.
        this.options.logger.error(
          { err, policy: rec.doc.name },
          "stored policy is invalid; keeping its last good version",
        );
        if (prev) next.set(rec.doc.name, prev);
      }
    }
    for (const name of corrupt.policies) {
      const prev = this.policies.get(name);
      if (prev) next.set(name, prev);
    }
    const apps = new Map(snap.apps.map((a) => [a.keyId, a]));
    for (const a of this.apps.values()) if (corrupt.apps.has(a.name)) apps.set(a.keyId, a);
    const envoy = loadEnvoyDomains(this.envoy, snap, {
      limiter: (policy) => this.limiter(policy),
      logger: this.options.logger,
    });
    this.policies = next;
    this.apps = apps;
    this.verified = new Map();
    this.envoy = envoy;
    if (this.revision !== -1 && snap.revision !== this.revision) {
      this.options.logger.info(
        { revision: snap.revision, policies: next.size },
        "policies reloaded",
      );
    }
    this.revision = snap.revision;
    this.loads++;
    this.options.onLoad?.(snap);
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (err) {
        this.options.logger.error({ err }, "a policy change listener failed");
      }
    }
  }

  private limiter(policy: Policy): Limiter {
    const onError = this.options.onStoreError;
    return createLimiter({ store: this.options.store, policy, ...(onError ? { onError } : {}) });
  }
}
