/**
 * What the drop-in entry points (`sluice/compat/*`) share. Each is a thin face: it translates a
 * peer library's API onto `createLimiter` and sluice's stores, with no algorithm and no key
 * layout of its own (DESIGN §7).
 *
 * Most peers count: every hit is added to a key's counter (INCRBY), and the peer compares the
 * count with its limit afterwards — so a count can pass the limit, and the peer reports it
 * (`consumedPoints`, `totalHits`). Their faces count with sluice's `fixed-window` over windows
 * started by the first request, whose limit is {@link COUNTER_LIMIT} (never reached), and
 * compare as the peer does. The count is `COUNTER_LIMIT − remaining`, exact.
 */
import type { Decision } from "../decision.js";
import { ValidationError } from "../errors.js";
import { COUNTING_POLICIES, type Limiter, tallyOf } from "../limiter.js";
import { type OptionField, hasShape, option } from "../options.js";
import { MAX_LIMIT, type Policy, definePolicy } from "../policy.js";
import type { Store } from "../store.js";
import { MemoryStore } from "../stores/memory.js";
import { type RedisClient, clientPort } from "../stores/redis-client.js";
import { RedisStore } from "../stores/redis.js";

/**
 * The limit of a counting policy: never reached, so every charge is counted (up to 2^48 per
 * window, 281 trillion). Not `Number.MAX_SAFE_INTEGER`: the script answers `remaining`, and
 * integers that close to 2^53 are read off by one by some clients' parsers (ioredis 6 and
 * node-redis read `9007199254740991` as …992); every integer on the wire stays below 2^49.
 */
export const COUNTER_LIMIT = MAX_LIMIT;

/** A window that never ends, for peers whose keys can live forever (100 years, in ms). */
export const FOREVER_MS = 100 * 365 * 24 * 3600 * 1000;

/** A policy name: 1–128 of letters, digits, `.`, `_`, `-`, `:`. */
const NAME = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * A counting policy (see the file's comment): fixed windows of `periodMs` started by a key's
 * first charge, named `name` — the same keys a sluice `fixed-window` policy of that name with
 * `windowStart: "first-request"` uses, so the face and sluice's own middleware share counts.
 */
export function counterPolicy(name: string, periodMs: number): Policy {
  const policy = definePolicy({
    name,
    algorithm: "fixed-window",
    windowStart: "first-request",
    rules: [{ limit: COUNTER_LIMIT, period: periodMs }],
  });
  COUNTING_POLICIES.add(policy);
  return policy;
}

/**
 * Counts a face's verdict for its policy (`ratelimit.decisions`): a counting policy's answers
 * are not decisions; the face decides against its own limit.
 */
export function countVerdict(limiter: Limiter, allowed: boolean): void {
  tallyOf(limiter).verdict(allowed);
}

/** The count a counting policy's decision shows. */
export function countOf(d: Decision): number {
  return COUNTER_LIMIT - d.remaining;
}

/**
 * The sluice key of a peer's key. The peers count the empty key as a key of its own, where
 * sluice refuses it (`SLUICE_ERR_KEY`): it becomes `"\u0000"`, and a key that starts with
 * `"\u0000"` gets one more in front, so no two keys meet. Every other key is itself (the same
 * keys sluice's own middleware uses); what is not a string is left for the limiter to refuse.
 */
export function sluiceKey(key: string): string {
  if (typeof key !== "string") return key;
  if (key.length === 0) return "\u0000";
  return key.charCodeAt(0) === 0 ? `\u0000${key}` : key;
}

/** What a bad policy name is told. */
function nameMessage(name: unknown): string {
  return `must be 1–128 letters, digits, '.', '_', '-' or ':' (it names the sluice policy; got ${JSON.stringify(name)})`;
}

/** `name` as a policy name, or a {@link ValidationError} naming `field`. */
export function policyName(name: unknown, field: string, subject: string): string {
  if (typeof name === "string" && NAME.test(name)) return name;
  throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
    { path: field, message: nameMessage(name) },
  ]);
}

/** An option naming a sluice policy (a face's prefix), `dflt` when absent (options.ts). */
export function policyNameOption(dflt: string): OptionField<string> {
  return option.custom<string>(
    (v) => (typeof v === "string" && NAME.test(v) ? v : { problem: nameMessage(v) }),
    dflt,
  );
}

/** One Redis store per client, shared by every face built on it (one batch queue, one breaker). */
const stores = new WeakMap<object, RedisStore>();

/**
 * The sluice Redis store of a Redis client (ioredis, iovalkey or node-redis: standalone,
 * Sentinel or Cluster), made once per client. Instance counting is off: the faces' insurance is
 * the peer's own (`insuranceLimiter`).
 */
export function redisStoreOf(client: RedisClient): RedisStore {
  let store = stores.get(client);
  if (store === undefined) {
    store = new RedisStore({ client, heartbeatMs: 0 });
    stores.set(client, store);
  }
  return store;
}

/** Whether `x` is a sluice {@link Store} rather than a client. */
export function isStore(x: unknown): x is Store {
  return typeof x === "object" && hasShape(x, { decide: "function", kind: "string" });
}

/**
 * The options naming the store a face counts in (options.ts): `client`, a Redis client, or
 * `store`, a sluice store; neither: a memory store of its own. Their check across fields is
 * {@link storeAcross}; the store they name, {@link storeFrom}.
 */
export const STORE_OPTIONS = {
  client: option.custom<RedisClient | undefined>((v) => {
    const port = clientPort(v);
    return typeof port === "string" ? { problem: port } : (v as RedisClient);
  }, undefined),
  store: option.custom<Store | undefined>(
    (v) => (isStore(v) ? v : { problem: "must be a sluice store (memoryStore(), redisStore())" }),
    undefined,
  ),
};

/** The check across `client` and `store` (see {@link STORE_OPTIONS}). */
export function storeAcross(
  options: { readonly client?: unknown; readonly store?: unknown },
  fail: (path: string, message: string) => void,
): void {
  if (options.client !== undefined && options.store !== undefined)
    fail("store", "give either client or store, not both");
}

/**
 * The store a face counts in, from its checked `client` (sluice's Redis store of it, one per
 * client) or `store`, else a memory store of its own (`own`).
 */
export function storeFrom(options: {
  readonly client: RedisClient | undefined;
  readonly store: Store | undefined;
}): { store: Store; own: boolean } {
  if (options.store !== undefined) return { store: options.store, own: false };
  if (options.client !== undefined) return { store: redisStoreOf(options.client), own: false };
  return { store: new MemoryStore(), own: true };
}
