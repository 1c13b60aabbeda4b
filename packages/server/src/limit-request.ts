/**
 * The decision route's shortcut for the common `POST /v1/limit` body (see {@link plainLimitRequest}).
 */
import type { limitRequestSchema } from "@sluice/api";
import type { z } from "zod";
import { LONE_SURROGATE } from "./json-body.js";

/**
 * The common shape of a `POST /v1/limit` body, recognised without zod: exactly `policy` and
 * `key` (1–128 and 1–4096 characters, the key with no lone surrogate) and maybe a positive
 * integer `cost`. Anything else
 * returns undefined, and the route validates with {@link limitRequestSchema}, which names every
 * problem. (A test checks that whatever this accepts, the schema accepts as the same value.)
 */
export function plainLimitRequest(body: unknown): z.output<typeof limitRequestSchema> | undefined {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined;
  const b = body as { policy?: unknown; key?: unknown; cost?: unknown };
  const { policy, key, cost } = b;
  if (typeof policy !== "string" || policy.length === 0 || policy.length > 128) return undefined;
  if (typeof key !== "string" || key.length === 0 || key.length > 4096) return undefined;
  // Half a surrogate pair is no character (the schema says so, naming the key).
  if (LONE_SURROGATE.test(key)) return undefined;
  let fields = 2;
  if (cost !== undefined) {
    if (typeof cost !== "number" || !Number.isSafeInteger(cost) || cost <= 0) return undefined;
    fields = 3;
  }
  for (const k in b)
    if (--fields < 0 || (k !== "policy" && k !== "key" && k !== "cost")) return undefined;
  if (fields !== 0 || Object.getPrototypeOf(b) !== Object.prototype) return undefined;
  return cost === undefined ? { policy, key } : { policy, key, cost };
}
