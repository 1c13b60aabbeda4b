/**
 * The policy store: every SQL read and write of the service, over SQLite, PostgreSQL or
 * MySQL/MariaDB through Kysely. Every write is one transaction that also appends to the audit log and bumps the
 * `revision` counter other nodes poll; a rejected change throws before anything is written,
 * and a failure rolls the whole change back.
 *
 * This class is a façade over the modules in ./repository/, one per kind of data:
 *
 * | module                      | holds                                                          |
 * | --------------------------- | -------------------------------------------------------------- |
 * | `repository/documents.ts`   | versioned documents of any kind: versions, drafts, import      |
 * | `repository/kinds.ts`       | the kinds: policies and Envoy domains                          |
 * | `repository/identity.ts`    | apps and their API keys, users, sessions                       |
 * | `repository/audit.ts`       | the revision counter and the audit log                         |
 * | `repository/traffic.ts`     | traffic history and heavy hitters (observations, not changes)  |
 * | `repository/grants.ts`      | policy ↔ app checks, from both sides                           |
 * | `repository/clients.ts`     | embedded policy clients and their last report                  |
 * | `repository/common.ts`      | the write transaction, audit append, timestamps                |
 * | `repository/rows.ts`        | reading stored values back                                     |
 */
import type { Database } from "./db/connect.js";
import type { ScryptParams } from "./secrets.js";
import { AuditRepository } from "./repository/audit.js";
import { TrafficRepository } from "./repository/traffic.js";
import { type ClientHeartbeat, ClientRepository } from "./repository/clients.js";
import type { CorruptRecordError } from "./repository/rows.js";
import { type AppKey, IdentityRepository, appKeys } from "./repository/identity.js";
import {
  type DocumentRecord,
  DocumentRepository,
  type DraftRecord,
  type DraftStats,
  type ImportPlan,
  type VersionRecord,
  addDraftStats,
  getDraftStats,
  importIn,
  liveDocuments,
} from "./repository/documents.js";
import { envoyDomainKind, policyKind } from "./repository/kinds.js";
import { type LoadedKind, type Tx, readMeta, writeTransaction } from "./repository/common.js";
import { type OverrideRecord, OverrideRepository, overrideRows } from "./repository/overrides.js";
import type { PolicyDocument } from "./model.js";
import type { EnvoyDomainDocument } from "./envoy/config.js";

export type { AuditQuery, AuditRecord } from "./repository/audit.js";
export type {
  KeyKind,
  KeyRow,
  TrafficCounts,
  TrafficRow,
  TrafficRepository,
} from "./repository/traffic.js";
export type { ClientHeartbeat, ClientRecord } from "./repository/clients.js";
export { CorruptRecordError } from "./repository/rows.js";
export type { AppKey, AppRecord, UserRecord } from "./repository/identity.js";
export type {
  DocumentKind,
  DocumentRecord,
  DraftRecord,
  DraftStats,
  ImportPlan,
  VersionRecord,
} from "./repository/documents.js";
export { DocumentRepository } from "./repository/documents.js";
export { envoyDomainKind, policyKind } from "./repository/kinds.js";
export type { LiveOverrideRecord, OverridePage, OverrideRecord } from "./repository/overrides.js";

/** A policy as enforced, with its bookkeeping. */
export type PolicyRecord = DocumentRecord<PolicyDocument>;
/** One kept version of a policy. */
export type PolicyVersionRecord = VersionRecord<PolicyDocument>;
/** A policy's draft. */
export type PolicyDraftRecord = DraftRecord<PolicyDocument>;
/** An Envoy domain as enforced, with its bookkeeping. */
export type EnvoyDomainRecord = DocumentRecord<EnvoyDomainDocument>;
/** One kept version of an Envoy domain. */
export type EnvoyDomainVersionRecord = VersionRecord<EnvoyDomainDocument>;
/** An Envoy domain's draft. */
export type EnvoyDraftRecord = DraftRecord<EnvoyDomainDocument>;

/** Everything a node needs to answer decisions, read in one go. */
export interface Snapshot {
  readonly revision: number;
  readonly policies: readonly PolicyRecord[];
  readonly drafts: readonly PolicyDraftRecord[];
  readonly apps: readonly AppKey[];
  /** Envoy descriptor limits: every domain's enforced document. */
  readonly envoyDomains: readonly EnvoyDomainRecord[];
  /** Every domain's draft. */
  readonly envoyDrafts: readonly EnvoyDraftRecord[];
  /**
   * Per-key overrides of policies: every row (deleted ones without rules), or in the changes
   * since a revision those that changed.
   */
  readonly overrides: readonly OverrideRecord[];
  /**
   * Rows of `documents`, `document_drafts` and `apps` that could not be read: left out of the lists above, so that one bad row does not hold back every
   * other change.
   */
  readonly corrupt: readonly CorruptRecordError[];
  /**
   * Absent for a whole snapshot. In the changes since a revision ({@link
   * Repository.changesSince}), the objects that changed: the lists above hold those of them that
   * exist (and their drafts), and one named here but not listed was deleted.
   */
  readonly changed?: {
    readonly policies: ReadonlySet<string>;
    readonly apps: ReadonlySet<string>;
    readonly envoyDomains: ReadonlySet<string>;
    /** Overrides, as `<policy>/<key>` (see repository/overrides.ts). */
    readonly overrides: ReadonlySet<string>;
  };
}

/**
 * Most objects {@link Repository.changesSince} reads by name; past that (a large import) a
 * whole snapshot costs no more.
 */
const MOST_CHANGES = 500;

/**
 * What a node loads, read in `trx` and stamped with `revision`: every object, or only those
 * `names` lists (the snapshot then says so in `changed`).
 */
async function readSnapshot(
  trx: Tx,
  revision: number,
  names?: Readonly<Record<LoadedKind, ReadonlySet<string>>>,
): Promise<Snapshot> {
  const only = (kind: LoadedKind) => (names ? [...names[kind]] : undefined);
  const live = await liveDocuments(trx, policyKind, only("policy"));
  const keys = await appKeys(trx, only("app"));
  const envoy = await liveDocuments(trx, envoyDomainKind, only("envoy_domain"));
  const overrides = await overrideRows(trx, only("policy_override"));
  return {
    revision,
    policies: live.documents,
    drafts: live.drafts,
    apps: keys.apps,
    envoyDomains: envoy.documents,
    envoyDrafts: envoy.drafts,
    overrides: overrides.records,
    corrupt: [...live.corrupt, ...keys.corrupt, ...envoy.corrupt, ...overrides.corrupt],
    ...(names
      ? {
          changed: {
            policies: names.policy,
            apps: names.app,
            envoyDomains: names.envoy_domain,
            overrides: names.policy_override,
          },
        }
      : {}),
  };
}

/** Options of {@link Repository}. */
export interface RepositoryOptions {
  /**
   * The cost of new password hashes (default: N=2^17, r=8, p=1). Lower it only where hashing
   * time matters more than strength, such as tests.
   */
  scrypt?: ScryptParams;
}

type Args<M extends (...args: never[]) => unknown> = Parameters<M>;

/** Data access for the service. Construct with an open {@link Database}. */
export class Repository {
  /** Policies: their versions, drafts and imports. */
  readonly policies: DocumentRepository<PolicyDocument>;
  /** Envoy domains: their versions, drafts and imports. */
  readonly envoyDomains: DocumentRepository<EnvoyDomainDocument>;
  /** Per-key overrides of policies (rows of their own, not in the policy's document). */
  readonly overrides: OverrideRepository;
  private readonly identity: IdentityRepository;
  private readonly audit: AuditRepository;
  /** Traffic history (see repository/traffic.ts): written by every node, read by the console. */
  readonly traffic: TrafficRepository;
  private readonly clients: ClientRepository;

  constructor(
    readonly database: Database,
    options: RepositoryOptions = {},
  ) {
    this.policies = new DocumentRepository(database.db, policyKind);
    this.envoyDomains = new DocumentRepository(database.db, envoyDomainKind);
    this.overrides = new OverrideRepository(database.db);
    this.identity = new IdentityRepository(database.db, options.scrypt);
    this.audit = new AuditRepository(database.db);
    this.traffic = new TrafficRepository(database.db, database.dialect);
    this.clients = new ClientRepository(database.db, database.dialect);
  }

  /** Policies, drafts and app keys, consistent with one revision. */
  async snapshot(): Promise<Snapshot> {
    return this.database.db
      .transaction()
      .execute(async (trx) => readSnapshot(trx, await this.audit.revision(trx)));
  }

  /**
   * What changed since `revision`, read by name from the `changes` table, consistent with the
   * revision it returns: the objects changed in between, as a {@link Snapshot} with `changed`.
   * Undefined when a whole snapshot is needed instead: the table no longer reaches back to
   * `revision` (pruned: the node was far behind), a revision in between has no note (the
   * database was changed by hand), or more than a few hundred objects changed.
   */
  async changesSince(revision: number): Promise<Snapshot | undefined> {
    return this.database.db.transaction().execute(async (trx) => {
      const current = await this.audit.revision(trx);
      const rows = await trx
        .selectFrom("changes")
        .select(["revision", "kind", "name"])
        .where("revision", ">", revision)
        .where("revision", "<=", current)
        .execute();
      // Read after the rows: a prune committed in between moves it past `revision`.
      const from = await readMeta(trx, "changes_from");
      if (from === undefined || revision < Number(from.value) || revision > current)
        return undefined;
      // A revision with no note was changed by hand (or by a write that audits nothing).
      if (new Set(rows.map((r) => Number(r.revision))).size !== current - revision)
        return undefined;
      const names: Record<LoadedKind, Set<string>> = {
        policy: new Set(),
        app: new Set(),
        envoy_domain: new Set(),
        policy_override: new Set(),
      };
      for (const r of rows) if (r.kind in names) names[r.kind as LoadedKind].add(r.name);
      if (Object.values(names).some((n) => n.size > MOST_CHANGES)) return undefined;
      return readSnapshot(trx, current, names);
    });
  }

  // ---------------------------------------------------------------- the record of changes

  /** {@inheritDoc AuditRepository.revision} */
  revision() {
    return this.audit.revision();
  }
  /** {@inheritDoc AuditRepository.record} */
  recordAudit(...a: Args<AuditRepository["record"]>) {
    return this.audit.record(...a);
  }
  /** {@inheritDoc AuditRepository.listAudit} */
  listAudit(...a: Args<AuditRepository["listAudit"]>) {
    return this.audit.listAudit(...a);
  }

  // ---------------------------------------------------------------- versioned documents

  /** A draft's shadow counts, summed over every node (drafts of every kind: ids are unique). */
  getDraftStats(draftId: number): Promise<DraftStats> {
    return getDraftStats(this.database.db, draftId);
  }
  /**
   * Adds one node's counts to a draft's totals (an upsert; it bumps no revision, so it makes no
   * node reload).
   */
  addDraftStats(draftId: number, stats: DraftStats): Promise<void> {
    return addDraftStats(this.database.db, this.database.dialect, draftId, stats);
  }

  /**
   * Imports sluice policies and Envoy domains together, in one transaction: all or nothing.
   * `prune` deletes, of each kind present in the import, what the import does not hold (a file
   * of domains alone prunes no policy, and the other way round).
   */
  async importAll(
    input: { policies?: readonly PolicyDocument[]; domains?: readonly EnvoyDomainDocument[] },
    actor: string,
    options: { prune?: boolean } = {},
  ): Promise<{ policies?: ImportPlan; domains?: ImportPlan }> {
    return writeTransaction(this.database.db, async (trx) => ({
      ...(input.policies
        ? { policies: await importIn(trx, policyKind, input.policies, actor, options) }
        : {}),
      ...(input.domains
        ? { domains: await importIn(trx, envoyDomainKind, input.domains, actor, options) }
        : {}),
    }));
  }

  // ---------------------------------------------------------------- embedded clients

  /**
   * Records an embedded client's report in one transaction: its draft counts added to the
   * drafts' totals and its heartbeat (so a retried report after a failure counts nothing twice).
   * Bumps no revision. Clients silent for a day are dropped now and then.
   */
  async recordClientReport(
    heartbeat: ClientHeartbeat,
    drafts: readonly { readonly draftId: number; readonly stats: DraftStats }[],
  ): Promise<void> {
    const at = new Date();
    await this.database.db.transaction().execute(async (trx) => {
      for (const d of drafts) await addDraftStats(trx, this.database.dialect, d.draftId, d.stats);
      await this.clients.recordClient(heartbeat, at.toISOString(), trx);
    });
    await this.clients.prune(at.getTime());
  }
  /** {@inheritDoc ClientRepository.listClients} */
  listClients(...a: Args<ClientRepository["listClients"]>) {
    return this.clients.listClients(...a);
  }

  // ---------------------------------------------------------------- apps, users, sessions

  /** {@inheritDoc IdentityRepository.listApps} */
  listApps() {
    return this.identity.listApps();
  }
  /** {@inheritDoc IdentityRepository.getApp} */
  getApp(...a: Args<IdentityRepository["getApp"]>) {
    return this.identity.getApp(...a);
  }
  /** {@inheritDoc IdentityRepository.createApp} */
  createApp(...a: Args<IdentityRepository["createApp"]>) {
    return this.identity.createApp(...a);
  }
  /** {@inheritDoc IdentityRepository.rotateAppKey} */
  rotateAppKey(...a: Args<IdentityRepository["rotateAppKey"]>) {
    return this.identity.rotateAppKey(...a);
  }
  /** {@inheritDoc IdentityRepository.deleteApp} */
  deleteApp(...a: Args<IdentityRepository["deleteApp"]>) {
    return this.identity.deleteApp(...a);
  }
  /** {@inheritDoc IdentityRepository.listUsers} */
  listUsers() {
    return this.identity.listUsers();
  }
  /** {@inheritDoc IdentityRepository.getUser} */
  getUser(...a: Args<IdentityRepository["getUser"]>) {
    return this.identity.getUser(...a);
  }
  /** {@inheritDoc IdentityRepository.countAdmins} */
  countAdmins() {
    return this.identity.countAdmins();
  }
  /** {@inheritDoc IdentityRepository.createUser} */
  createUser(...a: Args<IdentityRepository["createUser"]>) {
    return this.identity.createUser(...a);
  }
  /** {@inheritDoc IdentityRepository.createFirstAdmin} */
  createFirstAdmin(...a: Args<IdentityRepository["createFirstAdmin"]>) {
    return this.identity.createFirstAdmin(...a);
  }
  /** {@inheritDoc IdentityRepository.updateUser} */
  updateUser(...a: Args<IdentityRepository["updateUser"]>) {
    return this.identity.updateUser(...a);
  }
  /** {@inheritDoc IdentityRepository.deleteUser} */
  deleteUser(...a: Args<IdentityRepository["deleteUser"]>) {
    return this.identity.deleteUser(...a);
  }
  /** {@inheritDoc IdentityRepository.checkPassword} */
  checkPassword(...a: Args<IdentityRepository["checkPassword"]>) {
    return this.identity.checkPassword(...a);
  }
  /** {@inheritDoc IdentityRepository.createSession} */
  createSession(...a: Args<IdentityRepository["createSession"]>) {
    return this.identity.createSession(...a);
  }
  /** {@inheritDoc IdentityRepository.authenticateSession} */
  authenticateSession(...a: Args<IdentityRepository["authenticateSession"]>) {
    return this.identity.authenticateSession(...a);
  }
  /** {@inheritDoc IdentityRepository.deleteSession} */
  deleteSession(...a: Args<IdentityRepository["deleteSession"]>) {
    return this.identity.deleteSession(...a);
  }
}
