/**
 * Who a request counts against. A key function maps a request to an identifier; the limiter's
 * policy name keeps identifiers of different policies apart, so keys need no policy prefix.
 */
import { sha256Base64url } from "../hash.js";
import type { HttpRequest, KeyFn } from "./types.js";

/** A short, stable digest: secrets (API keys, tokens) never reach the store or logs in clear. */
export function digest(value: string): string {
  return sha256Base64url(value).slice(0, 27);
}

/** Key helpers for the common identities. Compose them: `keys.route(keys.user(...))`. */
export const keys = {
  /** The client IP (after the trusted-proxy walk, IPv6 grouped by prefix): `ip:203.0.113.7`, `ip:2001:db8:1:2::/64`. The default. */
  ip<Raw = unknown>(): KeyFn<Raw> {
    return (_req, http) => `ip:${http.ip}`;
  },
  /**
   * An authenticated user id, from the framework's request: `keys.user((req) => req.user?.id)`
   * gives `user:42`. Anonymous requests (`undefined`, `null`, `""`) fall back to the client IP.
   */
  user<Raw = unknown>(
    id: (req: Raw, http: HttpRequest<Raw>) => string | number | undefined | null,
  ): KeyFn<Raw> {
    return (req, http) => {
      const v = id(req, http);
      return v === undefined || v === null || v === "" ? undefined : `user:${String(v)}`;
    };
  },
  /**
   * An API key read from a request header (default `x-api-key`), stored as a SHA-256 digest:
   * `apikey:<27 chars>`. Requests without the header fall back to the client IP.
   */
  apiKey<Raw = unknown>(header = "x-api-key"): KeyFn<Raw> {
    return (_req, http) => {
      const v = http.header(header);
      return v === undefined || v === "" ? undefined : `apikey:${digest(v)}`;
    };
  },
  /**
   * Scopes another identity (default: the client IP) to the route: `route:GET /users/:id|ip:1.2.3.4`.
   * Uses the framework's route pattern when it knows one (Express route middleware, Fastify,
   * Hono, koa-router), else the path — beware that raw paths with ids make one key per id.
   */
  route<Raw = unknown>(inner?: KeyFn<Raw>): KeyFn<Raw> {
    return async (req, http) => {
      const who = (inner ? await inner(req, http) : undefined) || `ip:${http.ip}`;
      return `route:${http.method} ${http.route ?? http.path}|${who}`;
    };
  },
  /** The first identity that is present: `keys.first(keys.apiKey(), keys.user(...))` (then the IP). */
  first<Raw = unknown>(...fns: KeyFn<Raw>[]): KeyFn<Raw> {
    return async (req, http) => {
      for (const fn of fns) {
        const v = await fn(req, http);
        if (v) return v;
      }
      return undefined;
    };
  },
  /** Any function of the request; an identity function, here for symmetry and type inference. */
  custom<Raw = unknown>(fn: KeyFn<Raw>): KeyFn<Raw> {
    return fn;
  },
} as const;
