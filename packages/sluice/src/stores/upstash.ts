/**
 * `sluice/upstash`: the Redis store over HTTP, in Upstash's REST protocol, for runtimes without
 * TCP sockets (Cloudflare Workers, Vercel Edge, Deno Deploy) or where Redis is only offered
 * that way. The client is `@upstash/redis`, passed in as ioredis is to `redisStore`:
 *
 * ```ts
 * import { Redis } from "@upstash/redis";
 * import { upstashStore } from "sluice/upstash";
 * const store = upstashStore({ redis: Redis.fromEnv() });
 * const limiter = createLimiter({ store, policy: { name: "api", rules: [{ limit: 100, period: "1m" }] } });
 * ```
 *
 * This is not a second store: {@link upstashClient} makes the HTTP client look like the client
 * `redisStore` takes, and the store is the same `RedisStore` — the same script (`sluice.lua`,
 * by EVALSHA, EVAL on NOSCRIPT), keys, batching, deadlines, breakers, deny cache and
 * `onStoreError` — so a key decided over HTTP is the key decided over TCP. Script calls made in
 * one tick travel together, as one `/pipeline` request.
 */
import { ValidationError } from "../errors.js";
import { CLIENT_NAME } from "./redis-client.js";
import { type RedisClientLike, RedisStore, type RedisStoreOptions } from "./redis.js";

/**
 * The part of an `@upstash/redis` client (`new Redis({ url, token })`, `Redis.fromEnv()`, from
 * `@upstash/redis`, `@upstash/redis/cloudflare` or `/fastly`, 1.35 or later) the store uses:
 * its pipelines. sluice never imports `@upstash/redis`.
 */
export interface UpstashRedisLike {
  /** A new pipeline (`redis.pipeline()`): commands sent as one HTTP request, in order. */
  pipeline(): UpstashPipelineLike;
}

/** The part of an `@upstash/redis` pipeline the store uses. */
export interface UpstashPipelineLike {
  /** Queues `EVALSHA sha1 numkeys keys… args…`. */
  evalsha(sha1: string, keys: string[], args: Array<string | number>): unknown;
  /** Queues `EVAL script numkeys keys… args…`. */
  eval(script: string, keys: string[], args: Array<string | number>): unknown;
  /** Sends the queued commands; each answer is its result or its error, in order. */
  exec(options: { keepErrors: true }): Promise<ReadonlyArray<{ result?: unknown; error?: string }>>;
}

/** An error a command of a pipeline answered (Redis's own text: `NOSCRIPT …`, `ERR …`). */
export class UpstashCommandError extends Error {
  override readonly name = "UpstashCommandError";
}

/** One command waiting for the tick's pipeline. */
interface Queued {
  readonly command: "EVALSHA" | "EVAL";
  readonly target: string;
  readonly keys: string[];
  readonly args: Array<string | number>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

const NO_EVENTS = (): undefined => undefined;

/**
 * Makes an `@upstash/redis` client look like the client `redisStore` takes: `call("EVALSHA",
 * [sha, numkeys, …keys, …args])` and `call("EVAL", …)`, the only commands the store sends, go
 * into a pipeline sent at the end of the tick; each call gets its own command's answer, and an
 * error answer rejects that call alone with Redis's text (so NOSCRIPT is seen as such). HTTP
 * has no connection: the status is always `ready`, and there are no connection events.
 *
 * Prefer {@link upstashStore}, which also picks the defaults that suit HTTP.
 */
export function upstashClient(redis: UpstashRedisLike): RedisClientLike {
  if (typeof (redis as Partial<UpstashRedisLike> | null)?.pipeline !== "function")
    throw invalid("upstashClient", [{ path: "redis", message: NOT_A_CLIENT }]);
  let queue: Queued[] = [];
  const flush = (): void => {
    const batch = queue;
    queue = [];
    const p = redis.pipeline();
    for (const q of batch) {
      if (q.command === "EVALSHA") p.evalsha(q.target, q.keys, q.args);
      else p.eval(q.target, q.keys, q.args);
    }
    p.exec({ keepErrors: true }).then(
      (answers) => {
        batch.forEach((q, i) => {
          const a = answers[i];
          if (a === undefined)
            q.reject(new UpstashCommandError(`no answer for command ${i + 1} of the pipeline`));
          else if (typeof a.error === "string") q.reject(new UpstashCommandError(a.error));
          else q.resolve(a.result);
        });
      },
      (err: unknown) => {
        for (const q of batch) q.reject(err);
      },
    );
  };
  const client: RedisClientLike & { [CLIENT_NAME]: string } = {
    [CLIENT_NAME]: "Upstash REST client",
    status: "ready",
    call(command, args) {
      const name = command.toUpperCase();
      if (name !== "EVALSHA" && name !== "EVAL")
        return Promise.reject(new TypeError(`upstashClient: ${command} is not supported`));
      // [script or sha, numkeys, …keys, …args], as EVAL/EVALSHA take them.
      const numKeys = Number(args[1]);
      const texts = args.map((a) => (typeof a === "number" ? a : String(a)));
      return new Promise((resolve, reject) => {
        if (queue.length === 0) queueMicrotask(flush);
        queue.push({
          command: name,
          target: String(texts[0]),
          keys: texts.slice(2, 2 + numKeys).map(String),
          args: texts.slice(2 + numKeys),
          resolve,
          reject,
        });
      });
    },
    on: NO_EVENTS,
    off: NO_EVENTS,
  };
  return client;
}

/** Options of {@link upstashStore}: those of `redisStore`, with `redis` in place of `client`. */
export interface UpstashStoreOptions extends Omit<
  RedisStoreOptions,
  "client" | "watchSentinels" | "connectTimeoutMs"
> {
  /** An `@upstash/redis` client: `new Redis({ url, token })` or `Redis.fromEnv()`. */
  redis: UpstashRedisLike;
  /**
   * How often this store records itself as live (ms), for the insurance limiter's count of
   * instances. Default 0 (off): serverless instances come and go with requests, and a timer
   * cannot run outside one on Workers; set `instances` instead, or a period on a long-lived
   * server (Deno, Bun).
   */
  heartbeatMs?: number;
}

/**
 * The Redis store over HTTP (Upstash's REST protocol): `redisStore` with an
 * {@link upstashClient}, heartbeats off unless asked for. Every other option and default is
 * `redisStore`'s (docs/redis.md; `timeoutMs` 500 counts the HTTP round trip).
 */
export function upstashStore(options: UpstashStoreOptions): RedisStore {
  if (typeof options !== "object" || options === null)
    throw invalid("upstashStore", [{ path: "", message: "must be an object" }]);
  // Options of a TCP client that mean nothing here are refused, not ignored.
  const foreign = (["client", "watchSentinels", "connectTimeoutMs"] as const).filter(
    (k) => k in options,
  );
  if (foreign.length > 0 || typeof options.redis?.pipeline !== "function")
    throw invalid("upstashStore", [
      ...(typeof options.redis?.pipeline !== "function"
        ? [{ path: "redis", message: NOT_A_CLIENT }]
        : []),
      ...foreign.map((k) => ({
        path: k,
        message: "not an option of upstashStore (no TCP client)",
      })),
    ]);
  const { redis, ...rest } = options;
  return new RedisStore({ heartbeatMs: 0, ...rest, client: upstashClient(redis) });
}

const NOT_A_CLIENT =
  "must be an @upstash/redis client (new Redis({ url, token }) or Redis.fromEnv()), 1.35 or later";

function invalid(what: string, issues: Array<{ path: string; message: string }>): ValidationError {
  return new ValidationError("SLUICE_ERR_OPTIONS", `Invalid ${what} options`, issues);
}
