/**
 * The SQL tables, as Kysely sees them (after every migration: db/migrations.ts). Portable across
 * SQLite, PostgreSQL and MySQL: timestamps are ISO-8601 text, booleans are integers 0/1,
 * structured values are JSON text.
 */
import type { Generated } from "kysely";

/**
 * One versioned document (repository/documents.ts): the enforced version of a policy
 * (`kind` `policy`) or an Envoy domain (`envoy_domain`), whatever is configured.
 */
export interface DocumentsTable {
  /** The kind: `policy`, `envoy_domain`. */
  kind: string;
  name: string;
  /** JSON: the whole document (a policy document; a domain's `{ domain, descriptors }`). */
  spec: string;
  created_by: string;
  updated_by: string;
  created_at: string;
  updated_at: string;
  version: number;
}

/** Every published version of every document (kept after a delete, to restore it). */
export interface DocumentVersionsTable {
  kind: string;
  name: string;
  version: number;
  /** JSON: the whole document of this version. */
  spec: string;
  /** What made it: `create`, `update`, `restore`, `promote`, `import`. */
  action: string;
  created_by: string;
  created_at: string;
}

/**
 * At most one draft per document, evaluated in shadow beside the enforced version. Ids are
 * unique over every kind: they name a draft's counters and its counts in {@link DraftStatsTable}.
 */
export interface DocumentDraftsTable {
  id: Generated<number>;
  kind: string;
  name: string;
  spec: string;
  /** The published version the draft was written against. */
  base_version: number;
  created_by: string;
  created_at: string;
}

/** What each draft would have done on live traffic, summed over every node. */
export interface DraftStatsTable {
  draft_id: number;
  evaluated: number;
  would_deny: number;
  would_deny_newly: number;
  would_allow_newly: number;
}

/** Apps that call the decision API. The API key is stored as its SHA-256 only. */
export interface AppsTable {
  name: string;
  description: string;
  key_id: string;
  key_hash: string;
  created_by: string;
  created_at: string;
  updated_at: string;
}

/** Admin users. `role` is `viewer`, `owner` or `admin`; `apps` (JSON) the apps an owner owns. */
export interface UsersTable {
  username: string;
  password_hash: string;
  role: string;
  apps: string;
  created_at: string;
  updated_at: string;
}

/** Admin sessions; the bearer token is stored as its SHA-256 only. */
export interface SessionsTable {
  id: string;
  token_hash: string;
  username: string;
  created_at: string;
  expires_at: string;
}

/** The audit log: one row per change. */
export interface AuditTable {
  id: Generated<number>;
  at: string;
  actor: string;
  action: string;
  target_type: string;
  target: string;
  /** JSON detail (before/after, version…). */
  detail: string;
}

/**
 * Key/value counters: `revision` is bumped by every change that nodes must reload;
 * `changes_from` is the revision after which {@link ChangesTable} lists every change.
 */
export interface MetaTable {
  key: string;
  value: number;
}

/**
 * What each revision changed: one row per object a write touched (`kind` `policy`, `app` or
 * `envoy_domain`, as the audit log names them; `name` the object's name). Nodes read the rows
 * past the revision they run and reload those objects alone. Old rows are pruned (see
 * repository/common.ts).
 */
export interface ChangesTable {
  revision: number;
  kind: string;
  name: string;
}

/**
 * Embedded policy clients (`connectPolicies`), one row per process (`instance`), written by its
 * reports (`POST /v1/policies/report`); rows not seen for a day are dropped.
 */
export interface PolicyClientsTable {
  app: string;
  /** The process's own random id. */
  instance: string;
  host: string;
  /** The client library and version, e.g. `sluice/0.1.0`. */
  client_version: string;
  /** The policy revision the client runs. */
  revision: number | string;
  first_seen: string;
  last_seen: string;
}

/**
 * Decisions per policy, app and time bucket, summed over every node: each node adds its counts
 * every second. `span` is the bucket's width in seconds: 1 (kept an hour) or 60 (kept a day).
 */
export interface TrafficTable {
  policy: string;
  app: string;
  span: number;
  /** The bucket's start, epoch seconds. */
  at: number;
  allowed: number;
  denied: number;
  /** Allowed by a shadow policy that would have denied them (`reason: "shadow"`). */
  shadow: number;
}

/**
 * Heavy hitters: each node's Space-Saving summary of the keys of one policy in one minute
 * (`kind` `requests`: every decision; `denied`: denials; `shadow`: shadow would-denials), one row
 * per slot of the node's sketch (migration 0009; before it, one per key ever written), so at most
 * the sketch's capacity per node, policy, kind and minute. Kept an hour.
 */
export interface TrafficKeysTable {
  policy: string;
  kind: string;
  /** The node's id (random, per start). */
  node: string;
  /** The minute's start, epoch seconds. */
  minute: number;
  /** The slot of the node's sketch (0 to its capacity − 1); a new key takes an evicted key's. */
  slot: number;
  /** The identifier (the key of the decision) that holds the slot. */
  ident: string;
  /** Upper bound of the key's decisions in this minute on this node. */
  hits: number;
  /** How much of `hits` may be over. */
  overcount: number;
  /** Upper bound of any key of this node and minute that is not listed. */
  floor_hits: number;
}

/**
 * Per-key overrides of policies (migration 0010): one row per policy and identifier (`ident`,
 * the key a decision names), its rules as JSON text, or null once deleted (the row stays, so
 * its `revision` — the write's — says when it last changed).
 */
export interface PolicyOverridesTable {
  policy: string;
  ident: string;
  /** JSON: the rules that replace the policy's for this key; null: deleted. */
  rules: string | null;
  revision: number | string;
  updated_by: string;
  updated_at: string;
}

/** The whole database. */
export interface Tables {
  policy_overrides: PolicyOverridesTable;
  documents: DocumentsTable;
  document_versions: DocumentVersionsTable;
  document_drafts: DocumentDraftsTable;
  draft_stats: DraftStatsTable;
  apps: AppsTable;
  users: UsersTable;
  sessions: SessionsTable;
  audit: AuditTable;
  meta: MetaTable;
  changes: ChangesTable;
  traffic: TrafficTable;
  traffic_keys: TrafficKeysTable;
  policy_clients: PolicyClientsTable;
}
