/**
 * `sluice/http`: the framework-free core — header builders, problem bodies, client-IP
 * resolution and key helpers — for servers without a dedicated adapter.
 */
export * from "../index.js";
