/**
 * Every action the audit log records, in one list: the service's writes take only these
 * (typed), and the console suggests them in its audit filter (its list is typed against this
 * one: packages/admin/src/pages/audit.ts). The filter itself takes an action exactly, or a
 * prefix ending at a dot (`policy`, `envoy.draft`).
 */
export const VERSION_ACTIONS = ["create", "update", "restore", "promote", "import"] as const;
/** How a new version of a policy or an Envoy domain came to be. */
export type VersionAction = (typeof VERSION_ACTIONS)[number];

/** Every action of the audit log. */
export const AUDIT_ACTIONS = [
  ...VERSION_ACTIONS.map((a) => `policy.${a}` as const),
  "policy.delete",
  "policy.draft",
  "policy.draft.discard",
  "policy.override.put",
  "policy.override.delete",
  "key.reset",
  ...VERSION_ACTIONS.map((a) => `envoy.${a}` as const),
  "envoy.delete",
  "envoy.draft",
  "envoy.draft.discard",
  "envoy.counters.reset",
  "app.create",
  "app.rotate-key",
  "app.delete",
  "user.create",
  "user.update",
  "user.delete",
  "session.login",
  "session.logout",
] as const;
/** One action of the audit log. */
export type AuditAction = (typeof AUDIT_ACTIONS)[number];
