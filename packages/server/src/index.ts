/**
 * `@sluice/server`: the sluice decision service, policy store (SQLite, PostgreSQL,
 * MySQL/MariaDB), admin API and CLI. Most users run the `sluice` command; this module is for
 * embedding and tests.
 */
export { createService, buildApp } from "./service.js";
export type { Service, ServiceContext, ServiceOptions } from "./service.js";
export { loadConfig, configSchema, ConfigError, CONFIG_KEYS } from "./config.js";
export type { ServerConfig, ConfigSources } from "./config.js";
export { openDatabase } from "./db/connect.js";
export type { Database, DatabaseOptions } from "./db/connect.js";
export type { DialectName } from "./db/migrations.js";
export { Repository, CorruptRecordError } from "./repository.js";
export type {
  RepositoryOptions,
  PolicyRecord,
  PolicyVersionRecord,
  DraftRecord,
  AppRecord,
  UserRecord,
  AuditRecord,
  AuditQuery,
  KeyKind,
  KeyRow,
  TrafficCounts,
  TrafficRow,
  TrafficRepository,
  DraftStats,
  ImportPlan,
  Snapshot,
  ClientRecord,
  OverrideRecord,
  LiveOverrideRecord,
  OverridePage,
} from "./repository.js";
export type { OverrideRepository } from "./repository/overrides.js";
export { Registry } from "./registry.js";
export type { LivePolicy, LiveDraft, OverrideChange } from "./registry.js";
export { API_ERROR_CODES, ApiError, toApiError } from "./errors.js";
export type { ApiErrorCode, ApiErrorBody } from "./errors.js";
export { ROLES, policyDocumentSchema } from "@sluice/api";
export type { Role } from "@sluice/api";
export { validatePolicyDocument } from "./model.js";
export type { PolicyDocument, ValidPolicy } from "./model.js";
export {
  exportPolicyFile,
  parsePolicyFile,
  validatePolicyList,
  POLICY_FILE_VERSION,
} from "./policy-file.js";
export { buildOpenApi } from "./openapi.js";
export { redisClientFromUrl } from "./counters.js";
export { SCRYPT_PARAMS } from "./secrets.js";
export type { ScryptParams } from "./secrets.js";
export { DatabaseUnavailableError } from "./db/health.js";
export type { DatabaseHealth } from "./db/health.js";
export { SetupToken, SETUP_TOKEN_TTL_MS } from "./setup.js";
export type { SetupCheck } from "./setup.js";
export { TrafficRecorder } from "./traffic/recorder.js";
export type { TrafficOutcome, TrafficRecorderOptions, TrafficSink } from "./traffic/recorder.js";
export { TrafficQueries, TRAFFIC_WINDOWS, KEY_WINDOWS } from "./traffic/queries.js";
export type { TrafficWindow, KeyWindow, OverviewRow, TrafficPoint } from "./traffic/queries.js";
export { SpaceSaving, mergeSummaries } from "./traffic/sketch.js";
export type { HeavyHitter, SlotEntry, Summary } from "./traffic/sketch.js";
export type { ClientIp } from "./client-ip.js";
export type { RedisClient } from "./counters.js";
