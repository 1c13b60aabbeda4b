/**
 * `@sluice/api`: the contract between the sluice service (`@sluice/server`) and its clients —
 * the console first. It holds what both sides must agree on and nothing that runs a service:
 *
 * - the request and answer schemas of the HTTP API, in zod (`./schemas.ts`, `./envoy.ts`): the
 *   service validates with them and builds `/openapi.json` from them; clients take their types
 *   from them (`z.infer`);
 * - the documents they carry (`./documents.ts`): policies, rules, app and user names, roles;
 * - the error codes and their HTTP statuses (`./errors.ts`);
 * - the actions of the audit log (`./audit.ts`).
 *
 * Browser-safe: no Node APIs (its only imports are zod and `sluice/algorithms`).
 */
export * from "./audit.js";
export * from "./documents.js";
export * from "./envoy.js";
export * from "./errors.js";
export * from "./schemas.js";
