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
import { ValidationError, type ValidationIssue } from "../errors.js";
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
  return definePolicy({
    name,
    algorithm: "fixed-window",
    windowStart: "first-request",
    rules: [{ limit: COUNTER_LIMIT, period: periodMs }],
  });
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

/** `name` as a policy name, or a {@link ValidationError} naming `field`. */
export function policyName(name: unknown, field: string, subject: string): string {
  if (typeof name === "string" && NAME.test(name)) return name;
  throw new ValidationError("SLUICE_ERR_OPTIONS", subject, [
    {
      path: field,
      message: `must be 1–128 letters, digits, '.', '_', '-' or ':' (it names the sluice policy; got ${JSON.stringify(name)})`,
    },
  ]);
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
  return (
    typeof x === "object" &&
    x !== null &&
    typeof (x as Store).decide === "function" &&
    typeof (x as Store).kind === "string"
  );
}

/**
 * The store a face counts in, from its `client` (a Redis client: sluice's Redis store of it)
 * or `store` (a sluice store), else a memory store of its own. Problems go to `issues`, each
 * naming its option; the answer is then a memory store that will not be used.
 */
export function storeOf(
  options: { client?: unknown; store?: unknown },
  issues: ValidationIssue[],
): { store: Store; own: boolean } {
  const { client, store } = options;
  if (client !== undefined && store !== undefined)
    issues.push({ path: "store", message: "give either client or store, not both" });
  if (store !== undefined) {
    if (isStore(store)) return { store, own: false };
    issues.push({ path: "store", message: "must be a sluice store (memoryStore(), redisStore())" });
  } else if (client !== undefined) {
    const port = clientPort(client);
    if (typeof port !== "string") return { store: redisStoreOf(client as RedisClient), own: false };
    issues.push({ path: "client", message: port });
  }
  return { store: new MemoryStore(), own: true };
}
