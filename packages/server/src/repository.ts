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
 * | `repository/policies.ts`    | policies, their versions, drafts and shadow counts, import     |
 * | `repository/identity.ts`    | apps and their API keys, users, sessions                       |
 * | `repository/audit.ts`       | the revision counter and the audit log                         |
 * | `repository/traffic.ts`     | traffic history and heavy hitters (observations, not changes)  |
 * | `repository/grants.ts`      | policy ↔ app checks shared by the two above                    |
 * | `repository/common.ts`      | the write transaction, audit append, timestamps                |
 * | `repository/rows.ts`        | reading stored values back                                     |
 */
import type { Database } from "./db/connect.js";
import type { ScryptParams } from "./secrets.js";
import { AuditRepository } from "./repository/audit.js";
import { TrafficRepository } from "./repository/traffic.js";
import type { CorruptRecordError } from "./repository/rows.js";
import { type AppKey, IdentityRepository, appKeys } from "./repository/identity.js";
import {
  type DraftRecord,
  type PolicyRecord,
  PolicyRepository,
  livePolicies,
} from "./repository/policies.js";

export type { AuditQuery, AuditRecord } from "./repository/audit.js";
export type {
  KeyKind,
  KeyRow,
  TrafficCounts,
  TrafficRow,
  TrafficRepository,
} from "./repository/traffic.js";
export { CorruptRecordError } from "./repository/rows.js";
export type { AppKey, AppRecord, UserRecord } from "./repository/identity.js";
export type {
  DraftRecord,
  DraftStats,
  ImportPlan,
  PolicyRecord,
  PolicyVersionRecord,
} from "./repository/policies.js";

/** Everything a node needs to answer decisions, read in one go. */
export interface Snapshot {
  readonly revision: number;
  readonly policies: readonly PolicyRecord[];
  readonly drafts: readonly DraftRecord[];
  readonly apps: readonly AppKey[];
  /**
   * Rows of `policies`, `policy_drafts` and `apps` that could not be read: left out of the
   * lists above, so that one bad row does not hold back every other change.
   */
  readonly corrupt: readonly CorruptRecordError[];
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
  private readonly policies: PolicyRepository;
  private readonly identity: IdentityRepository;
  private readonly audit: AuditRepository;
  /** Traffic history (see repository/traffic.ts): written by every node, read by the console. */
  readonly traffic: TrafficRepository;

  constructor(
    readonly database: Database,
    options: RepositoryOptions = {},
  ) {
    this.policies = new PolicyRepository(database.db, database.dialect);
    this.identity = new IdentityRepository(database.db, options.scrypt);
    this.audit = new AuditRepository(database.db);
    this.traffic = new TrafficRepository(database.db, database.dialect);
  }

  /** Policies, drafts and app keys, consistent with one revision. */
  async snapshot(): Promise<Snapshot> {
    return this.database.db.transaction().execute(async (trx) => {
      const revision = await this.audit.revision(trx);
      const live = await livePolicies(trx);
      const keys = await appKeys(trx);
      return {
        revision,
        policies: live.policies,
        drafts: live.drafts,
        apps: keys.apps,
        corrupt: [...live.corrupt, ...keys.corrupt],
      };
    });
  }

  // ---------------------------------------------------------------- the record of changes

  /** {@inheritDoc AuditRepository.revision} */
  revision() {
    return this.audit.revision();
  }
  /** {@inheritDoc AuditRepository.listAudit} */
  listAudit(...a: Args<AuditRepository["listAudit"]>) {
    return this.audit.listAudit(...a);
  }
  /** {@inheritDoc AuditRepository.record} */
  recordAudit(...a: Args<AuditRepository["record"]>) {
    return this.audit.record(...a);
  }

  // ---------------------------------------------------------------- policies

  /** {@inheritDoc PolicyRepository.listPolicies} */
  listPolicies() {
    return this.policies.listPolicies();
  }
  /** {@inheritDoc PolicyRepository.getPolicy} */
  getPolicy(name: string) {
    return this.policies.getPolicy(name);
  }
  /** {@inheritDoc PolicyRepository.listVersions} */
  listVersions(...a: Args<PolicyRepository["listVersions"]>) {
    return this.policies.listVersions(...a);
  }
  /** {@inheritDoc PolicyRepository.getVersion} */
  getVersion(name: string, version: number) {
    return this.policies.getVersion(name, version);
  }
  /** {@inheritDoc PolicyRepository.getDraft} */
  getDraft(name: string) {
    return this.policies.getDraft(name);
  }
  /** {@inheritDoc PolicyRepository.getDraftStats} */
  getDraftStats(...a: Args<PolicyRepository["getDraftStats"]>) {
    return this.policies.getDraftStats(...a);
  }
  /** {@inheritDoc PolicyRepository.addDraftStats} */
  addDraftStats(...a: Args<PolicyRepository["addDraftStats"]>) {
    return this.policies.addDraftStats(...a);
  }
  /** {@inheritDoc PolicyRepository.putPolicy} */
  putPolicy(...a: Args<PolicyRepository["putPolicy"]>) {
    return this.policies.putPolicy(...a);
  }
  /** {@inheritDoc PolicyRepository.deletePolicy} */
  deletePolicy(...a: Args<PolicyRepository["deletePolicy"]>) {
    return this.policies.deletePolicy(...a);
  }
  /** {@inheritDoc PolicyRepository.restoreVersion} */
  restoreVersion(...a: Args<PolicyRepository["restoreVersion"]>) {
    return this.policies.restoreVersion(...a);
  }
  /** {@inheritDoc PolicyRepository.putDraft} */
  putDraft(...a: Args<PolicyRepository["putDraft"]>) {
    return this.policies.putDraft(...a);
  }
  /** {@inheritDoc PolicyRepository.deleteDraft} */
  deleteDraft(...a: Args<PolicyRepository["deleteDraft"]>) {
    return this.policies.deleteDraft(...a);
  }
  /** {@inheritDoc PolicyRepository.promoteDraft} */
  promoteDraft(...a: Args<PolicyRepository["promoteDraft"]>) {
    return this.policies.promoteDraft(...a);
  }
  /** {@inheritDoc PolicyRepository.planImport} */
  planImport(...a: Args<PolicyRepository["planImport"]>) {
    return this.policies.planImport(...a);
  }
  /** {@inheritDoc PolicyRepository.importPolicies} */
  importPolicies(...a: Args<PolicyRepository["importPolicies"]>) {
    return this.policies.importPolicies(...a);
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
