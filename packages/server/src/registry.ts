/**
 * The node's live view of policies, apps and Envoy domains, kept in step with the database: every
 * `pollIntervalMs` it reads the `revision` counter (one tiny query, same on SQLite and
 * PostgreSQL) and, when it moved, reads what changed since the revision it runs (the `changes`
 * table names the objects each write touched) and rebuilds those alone, all swapped in at once;
 * the first load, and one the change log cannot answer, reads everything. A load that fails
 * leaves the last good view in force.
 */
import { type Limiter, type Policy, type RuleInput, type Store, createLimiter } from "sluice";
import {
  type LiveDocument,
  type LiveDraft as SharedLiveDraft,
  type LiveKind,
  type LivePolicy as SharedLivePolicy,
  type PolicyDraftForm,
  type PolicyForm,
  buildLiveSet,
  overridesOf,
  policyLiveKind,
  restoreDraftStats,
  takeDraftStats,
} from "sluice/service";
import type { Logger } from "pino";
import type { PolicyDocument } from "./model.js";
import type { AppKey, Repository, Snapshot } from "./repository.js";
import type { DocumentKind, DocumentRecord, DraftRecord } from "./repository/documents.js";
import { overrideTarget, parseOverrideTarget } from "./repository/overrides.js";
import { envoyDomainKind, policyKind } from "./repository/kinds.js";
import { secretId, secretMatches } from "./secrets.js";
import type { EnvoyDomainDocument } from "./envoy/config.js";
import { type EnvoyDomainForm, type LiveEnvoyDomain, envoyDomainLiveKind } from "./envoy/live.js";
import { type DecisionSink, recordedLimiter } from "./traffic/recorded-limiter.js";

/** The draft of a policy, running in shadow on its own keys (`sluice.draft.<id>`). */
export type LiveDraft = SharedLiveDraft<PolicyDocument>;

/** A policy as a node enforces it (with the apps granted it). */
export type LivePolicy = SharedLivePolicy<PolicyDocument>;

/** What one load read and rebuilt (for metrics, logs and tests that count it). */
export interface RegistryLoad {
  readonly revision: number;
  /** Whether everything was read: the first load, or changes the change log could not tell. */
  readonly whole: boolean;
  /** Rows read. */
  readonly read: {
    readonly policies: number;
    readonly drafts: number;
    readonly apps: number;
    readonly envoyDomains: number;
    readonly envoyDrafts: number;
    /** Per-key override rows (deleted ones too). */
    readonly overrides: number;
  };
  /**
   * Policies built anew (a limiter or a draft's), Envoy domains compiled anew, and per-key
   * overrides set or deleted on the live limiters.
   */
  readonly built: {
    readonly policies: number;
    readonly envoyDomains: number;
    readonly overrides: number;
  };
  /** What the node runs after the load. */
  readonly live: { readonly policies: number; readonly envoyDomains: number };
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
  onLoad?: (load: RegistryLoad) => void;
  /**
   * The traffic history, which counts the decisions of the Envoy domains' limits (the decision
   * routes count their own).
   */
  traffic?: DecisionSink;
}

/** Most verified API keys remembered per snapshot of the apps. */
const VERIFIED_KEYS = 10_000;

/** How often each node adds its draft shadow counts to the shared totals. */
const DRAFT_FLUSH_MS = 1000;

/**
 * Most override changes a node remembers for embedded clients (`overridesSince`): a client
 * further behind gets every override of its policies again.
 */
const OVERRIDE_LOG = 20_000;

/** One key's override as an embedded client receives it; `rules` null: deleted. */
export interface OverrideChange {
  readonly policy: string;
  readonly key: string;
  readonly rules: RuleInput[] | null;
}

/** The live policies and app keys of one node. */
export class Registry {
  private policies = new Map<string, LivePolicy>();
  /** App keys by key id, and each app's key id by app name. */
  private apps = new Map<string, AppKey>();
  private keyIdOf = new Map<string, string>();
  /** API keys verified against `apps` (see {@link Registry.appForKey}). */
  private verified = new Map<string, string>();
  private envoy = new Map<string, LiveEnvoyDomain>();
  /** Per policy, the revision of the last change to one of its overrides (a deletion too). */
  private overrideStamps = new Map<string, number>();
  /** The override changes since `overrideLogFrom`, in order (for embedded clients). */
  private overrideLog: { revision: number; policy: string; key: string }[] = [];
  private overrideLogFrom = Number.MAX_SAFE_INTEGER;
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
  private last: RegistryLoad | undefined;
  private readonly listeners = new Set<() => void>();
  /** How a stored policy becomes live: its limiters on the node's store. */
  private readonly policyLive: LiveKind<
    PolicyDocument,
    PolicyForm<PolicyDocument>,
    PolicyDraftForm<PolicyDocument>
  >;
  /** How a stored Envoy domain becomes live (its limits' decisions counted in the traffic history). */
  private readonly envoyLive: LiveKind<EnvoyDomainDocument, EnvoyDomainForm>;

  constructor(private readonly options: RegistryOptions) {
    this.policyLive = policyLiveKind(
      (policy) => this.limiter(policy),
      (policy, key, err) =>
        options.logger.error(
          { err, policy, key },
          "a per-key override does not validate on the policy's new version; the key gets the policy's rules until the override is written again",
        ),
    );
    const traffic = options.traffic;
    this.envoyLive = envoyDomainLiveKind((policy, use) =>
      // The enforced limits' decisions count in the traffic history, as `envoy:<domain>` (app
      // names cannot hold a colon); a draft's do not.
      traffic && !use.draft
        ? recordedLimiter(this.limiter(policy), traffic, `envoy:${use.domain}`)
        : this.limiter(policy),
    );
  }

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
    // Drafts of every kind: their ids are unique, their counts in one table.
    const taken = takeDraftStats([...this.policies.values(), ...this.envoy.values()]);
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

  /** What the last load read and rebuilt. */
  get lastLoad(): RegistryLoad | undefined {
    return this.last;
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
    const run = this.chain.then(() => this.load(true));
    this.chain = run.catch(() => {});
    return run;
  }

  /** Reads what changed since the revision this node runs (or everything) and swaps it in. */
  private async load(whole = false): Promise<void> {
    const repo = this.options.repo;
    const snap =
      (!whole && this.revision >= 0 ? await repo.changesSince(this.revision) : undefined) ??
      (await repo.snapshot());
    this.apply(snap);
  }

  /** Builds what `snap` holds and swaps it in, synchronously: no request sees half of it. */
  private apply(snap: Snapshot): void {
    // A row that cannot be read keeps what this node last loaded from it.
    const corruptApps = new Set<string>();
    for (const err of snap.corrupt) {
      this.options.logger.error({ err }, "stored record is corrupt; keeping its last good version");
      if (err.table === "apps") corruptApps.add(String(err.key.name));
    }
    const changed = snap.changed;
    const policies = loadKind(this.policyLive, policyKind, this.policies, {
      documents: snap.policies,
      drafts: snap.drafts,
      changed: changed?.policies,
      corrupt: snap.corrupt,
      onError: (err, policy) =>
        // Stored policies were validated on write; one that no longer validates keeps its last good form.
        this.options.logger.error(
          { err, policy },
          "stored policy is invalid; keeping its last good version",
        ),
    });
    const envoy = loadKind(this.envoyLive, envoyDomainKind, this.envoy, {
      documents: snap.envoyDomains,
      drafts: snap.envoyDrafts,
      changed: changed?.envoyDomains,
      corrupt: snap.corrupt,
      onError: (err, domain) =>
        this.options.logger.error(
          { err, domain },
          "stored Envoy domain cannot be compiled; keeping its last good version",
        ),
    });
    const built = { policies: policies.built, envoyDomains: envoy.built };

    // Everything is built: swap it in (nothing below can fail half-way; an override that does
    // not validate keeps the key's last good override, and is logged).
    this.policies = swapIn(this.policies, policies.changes, changed === undefined);
    this.envoy = swapIn(this.envoy, envoy.changes, changed === undefined);
    const overrides = this.applyOverrides(snap);
    if (!changed || changed.apps.size > 0) this.swapApps(snap, corruptApps, changed?.apps);
    const load: RegistryLoad = {
      revision: snap.revision,
      whole: changed === undefined,
      read: {
        policies: snap.policies.length,
        drafts: snap.drafts.length,
        apps: snap.apps.length,
        envoyDomains: snap.envoyDomains.length,
        envoyDrafts: snap.envoyDrafts.length,
        overrides: snap.overrides.length,
      },
      built: { ...built, overrides },
      live: { policies: this.policies.size, envoyDomains: this.envoy.size },
    };
    if (this.revision !== -1 && snap.revision !== this.revision) {
      this.options.logger.info(
        { revision: snap.revision, policies: this.policies.size, whole: load.whole, built },
        "policies reloaded",
      );
    }
    this.revision = snap.revision;
    this.loads++;
    this.last = load;
    this.options.onLoad?.(load);
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (err) {
        this.options.logger.error({ err }, "a policy change listener failed");
      }
    }
  }

  /**
   * Takes the app keys of `snap`: all of them (`changed` undefined), or those of the apps
   * `changed` names (one named but not read was deleted). A corrupt app row keeps its last good
   * key. Verified keys are forgotten, so a rotated or revoked key stops working at once.
   */
  private swapApps(
    snap: Snapshot,
    corrupt: ReadonlySet<string>,
    changed: ReadonlySet<string> | undefined,
  ): void {
    if (!changed) {
      const kept = [...this.apps.values()].filter((a) => corrupt.has(a.name));
      this.apps = new Map();
      this.keyIdOf = new Map();
      for (const a of kept) this.setApp(a);
    }
    for (const name of changed ?? []) if (!corrupt.has(name)) this.removeApp(name);
    for (const a of snap.apps) this.setApp(a);
    this.verified = new Map();
  }

  private setApp(a: AppKey): void {
    this.removeApp(a.name);
    this.apps.set(a.keyId, a);
    this.keyIdOf.set(a.name, a.keyId);
  }

  private removeApp(name: string): void {
    const keyId = this.keyIdOf.get(name);
    if (keyId !== undefined) this.apps.delete(keyId);
    this.keyIdOf.delete(name);
  }

  /**
   * Puts the per-key overrides of `snap` on the live limiters: every override (a whole
   * snapshot: keys no longer overridden lose theirs), or those that changed. A row that cannot
   * be read, or rules that no longer validate on the policy, keep the key's last good override.
   * Returns how many were set or deleted.
   */
  private applyOverrides(snap: Snapshot): number {
    const corrupt = new Set<string>();
    for (const err of snap.corrupt)
      if (err.table === "policy_overrides")
        corrupt.add(overrideTarget(String(err.key.policy), String(err.key.ident)));
    let applied = 0;
    const put = (live: LivePolicy, key: string, rules: RuleInput[] | null) => {
      applied++;
      if (rules === null) {
        live.limiter.deleteOverride(key);
        return;
      }
      try {
        live.limiter.setOverride(key, rules);
      } catch (err) {
        this.options.logger.error(
          { err, policy: live.policy.name, key },
          "stored override is invalid; keeping the key's last good override",
        );
      }
    };
    const changed = snap.changed?.overrides;
    if (changed === undefined) {
      const stamps = new Map<string, number>();
      const wanted = new Map<string, Map<string, RuleInput[]>>();
      for (const o of snap.overrides) {
        stamps.set(o.policy, Math.max(stamps.get(o.policy) ?? 0, o.revision));
        if (o.rules === null) continue;
        let keys = wanted.get(o.policy);
        if (keys === undefined) wanted.set(o.policy, (keys = new Map()));
        keys.set(o.key, o.rules);
      }
      for (const [name, live] of this.policies) {
        const keys = wanted.get(name);
        const held = overridesOf(live.limiter);
        if (held !== undefined)
          for (const key of [...held.keys()])
            if (!keys?.has(key) && !corrupt.has(overrideTarget(name, key))) put(live, key, null);
        for (const [key, rules] of keys ?? []) put(live, key, rules);
      }
      this.overrideStamps = stamps;
      this.overrideLog = [];
      this.overrideLogFrom = snap.revision;
      return applied;
    }
    const read = new Map(snap.overrides.map((o) => [overrideTarget(o.policy, o.key), o]));
    for (const target of changed) {
      if (corrupt.has(target)) continue;
      const { policy, key } = parseOverrideTarget(target);
      const live = this.policies.get(policy);
      if (live !== undefined) put(live, key, read.get(target)?.rules ?? null);
      this.overrideStamps.set(policy, snap.revision);
      this.overrideLog.push({ revision: snap.revision, policy, key });
    }
    if (this.overrideLog.length > OVERRIDE_LOG) {
      const dropped = this.overrideLog.splice(0, this.overrideLog.length - OVERRIDE_LOG / 2);
      this.overrideLogFrom = dropped[dropped.length - 1]!.revision;
    }
    return applied;
  }

  /**
   * What an embedded client needs of the overrides of `policies` (the app's) to be as this
   * node is: the changes after `revision` (the client's; each key once, as it is now, `rules`
   * null when deleted), or — `whole` — every override of those policies, when the client has
   * none yet (`revision` undefined) or is further behind than this node remembers.
   */
  overridesSince(
    policies: readonly string[],
    revision: number | undefined,
  ): { whole: boolean; items: OverrideChange[] } {
    const items: OverrideChange[] = [];
    if (revision === undefined || revision < this.overrideLogFrom) {
      for (const name of policies) {
        const live = this.policies.get(name);
        const held = live && overridesOf(live.limiter);
        if (held === undefined) continue;
        for (const key of held.keys())
          items.push({ policy: name, key, rules: live!.limiter.override(key)! });
      }
      return { whole: true, items };
    }
    const wanted = new Set(policies);
    const seen = new Set<string>();
    for (let i = this.overrideLog.length - 1; i >= 0; i--) {
      const c = this.overrideLog[i]!;
      if (c.revision <= revision) break;
      const target = overrideTarget(c.policy, c.key);
      if (!wanted.has(c.policy) || seen.has(target)) continue;
      seen.add(target);
      items.push({
        policy: c.policy,
        key: c.key,
        rules: this.policies.get(c.policy)?.limiter.override(c.key) ?? null,
      });
    }
    return { whole: false, items: items.reverse() };
  }

  /** The revision of the last change to one of `policy`'s overrides (0: none seen). */
  overrideStamp(policy: string): number {
    return this.overrideStamps.get(policy) ?? 0;
  }

  private limiter(policy: Policy): Limiter {
    const onError = this.options.onStoreError;
    return createLimiter({ store: this.options.store, policy, ...(onError ? { onError } : {}) });
  }
}

/** One kind's part of a load: its live documents by name (undefined: gone), and how many are new. */
interface KindLoad<L> {
  readonly changes: Map<string, L | undefined>;
  /** Live documents built anew (a new version, or a new draft). */
  readonly built: number;
}

/**
 * Builds the live documents of one kind that a snapshot holds, from those the node runs
 * (`current`): each document read, with its draft; in a snapshot of changes, each one it names
 * but does not hold is gone. A record that cannot be read keeps what the node last loaded from
 * it (a draft's, the document's draft; a document's, the document), and so does a document the
 * kind cannot build (`onError` is told).
 */
function loadKind<D, F, DF>(
  live: LiveKind<D, F, DF>,
  stored: DocumentKind<D>,
  current: ReadonlyMap<string, LiveDocument<F, DF>>,
  read: {
    readonly documents: readonly DocumentRecord<D>[];
    readonly drafts: readonly DraftRecord<D>[];
    /** The names a snapshot of changes covers (undefined: a whole snapshot). */
    readonly changed: ReadonlySet<string> | undefined;
    /** The records of the snapshot that could not be read (of every kind). */
    readonly corrupt: Snapshot["corrupt"];
    readonly onError: (err: unknown, name: string) => void;
  },
): KindLoad<LiveDocument<F, DF>> {
  const corruptDocuments = new Set<string>();
  const corruptDrafts = new Set<string>();
  for (const err of read.corrupt) {
    if (err.key.kind !== stored.kind) continue;
    if (err.table === "documents") corruptDocuments.add(String(err.key.name));
    if (err.table === "document_drafts") corruptDrafts.add(String(err.key.name));
  }
  const drafts = new Map(read.drafts.map((d) => [d.name, d]));
  const loaded = buildLiveSet(
    live,
    read.documents.map((rec) => {
      const name = stored.nameOf(rec.doc);
      const draft = drafts.get(name) ?? (corruptDrafts.has(name) ? "keep" : undefined);
      return { name, doc: rec.doc, version: rec.version, draft };
    }),
    current,
    (err, source) => read.onError(err, source.name),
  );
  const changes = new Map<string, LiveDocument<F, DF> | undefined>();
  for (const name of read.changed ?? []) changes.set(name, undefined);
  let built = 0;
  for (const [name, doc] of loaded) {
    if (doc !== current.get(name)) built++;
    changes.set(name, doc);
  }
  for (const name of corruptDocuments) {
    const before = current.get(name);
    if (before) changes.set(name, before);
  }
  return { changes, built };
}

/**
 * Puts one kind's changes in force: in `current` itself for a snapshot of changes, else (a
 * whole snapshot) as a new map of what it holds.
 */
function swapIn<L>(
  current: Map<string, L>,
  changes: ReadonlyMap<string, L | undefined>,
  whole: boolean,
): Map<string, L> {
  const next = whole ? new Map<string, L>() : current;
  for (const [name, live] of changes)
    if (live) next.set(name, live);
    else next.delete(name);
  return next;
}
