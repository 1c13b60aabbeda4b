/**
 * Who is calling: apps by their API key (the decision API and the embedded clients' API) and
 * admin users by their session token (the admin API), both as `Authorization: Bearer …`; the
 * admin roles; and sign-in attempts counted by sluice itself. Every route module takes its
 * callers from here.
 */
import type { FastifyRequest } from "fastify";
import type { IncomingHttpHeaders } from "node:http";
import type { ServiceContext } from "../context.js";
import { ApiError } from "../errors.js";
import type { Role } from "@sluice/api";
import type { Registry } from "../registry.js";
import type { UserRecord } from "../repository.js";

/** The signed-in user of a request. */
export interface Session {
  readonly user: UserRecord;
  readonly sessionId: string;
}

/** A 403 with its reason. */
export const forbidden = (message: string): ApiError => new ApiError("forbidden", message);

/** A request as far as authentication reads it: a Fastify request or a node:http one. */
export interface Credentials {
  readonly headers: IncomingHttpHeaders;
}

/** The bearer token of a request, or undefined. */
export function bearer(req: Credentials): string | undefined {
  const h = req.headers.authorization;
  if (typeof h !== "string") return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m?.[1];
}

/**
 * Why a request carries no bearer token, in words: no `Authorization` header, or one with
 * another scheme (`Basic …`), or a `Bearer` with no token. `what` names the token expected.
 */
export function missingBearer(req: Credentials, what: string): string {
  const h = req.headers.authorization;
  if (typeof h !== "string" || h.trim() === "")
    return `missing Authorization: send Authorization: Bearer <${what}>`;
  const scheme = /^\S+/.exec(h.trim())?.[0] ?? "";
  if (scheme.toLowerCase() === "bearer")
    return `Authorization: Bearer carries no token: send Authorization: Bearer <${what}>`;
  return `Authorization uses the ${JSON.stringify(scheme)} scheme, not Bearer: send Authorization: Bearer <${what}>`;
}

/** The app whose API key the request carries; 401 without a known key. */
export function appOfRequest(req: Credentials, registry: Registry): string {
  const token = bearer(req);
  const name = token === undefined ? undefined : registry.appForKey(token);
  if (!name) {
    throw new ApiError(
      "unauthorized",
      token === undefined ? missingBearer(req, "api key") : "unknown or revoked API key",
      {
        headers: { "WWW-Authenticate": 'Bearer realm="sluice"' },
      },
    );
  }
  return name;
}

/** How admin routes find the signed-in user and check their role. */
export interface AuthHelpers {
  /** The session of a request; 401 without a valid one. */
  session(req: FastifyRequest): Promise<Session>;
  /** The session, if its role is one of `allowed`; 403 otherwise. */
  role(req: FastifyRequest, ...allowed: Role[]): Promise<Session>;
  /**
   * Runs a password check counted like a sign-in (failures only, per username and client IP,
   * and per client IP): 429 when too many failed; `check` resolves to whether it succeeded.
   */
  passwordAttempt(
    req: FastifyRequest,
    username: string,
    check: () => Promise<boolean>,
  ): Promise<boolean>;
}

/** Builds the {@link AuthHelpers} of a service. */
export function authHelpers(ctx: ServiceContext): AuthHelpers {
  const { repo } = ctx;
  const session = async (req: FastifyRequest): Promise<Session> => {
    const token = bearer(req);
    const s = token === undefined ? undefined : await repo.authenticateSession(token);
    if (!s) {
      throw new ApiError(
        "unauthorized",
        token === undefined
          ? req.headers.authorization === undefined
            ? "sign in first: POST /v1/admin/login, then send Authorization: Bearer <token>"
            : `${missingBearer(req, "session token")} (from POST /v1/admin/login)`
          : "session expired or unknown; sign in again",
        {
          headers: { "WWW-Authenticate": 'Bearer realm="sluice-admin"' },
        },
      );
    }
    return s;
  };
  const role = async (req: FastifyRequest, ...allowed: Role[]): Promise<Session> => {
    const s = await session(req);
    if (!allowed.includes(s.user.role))
      throw forbidden(`this needs role ${allowed.join(" or ")}; you are ${s.user.role}`);
    return s;
  };
  const passwordAttempt = async (
    req: FastifyRequest,
    username: string,
    check: () => Promise<boolean>,
  ): Promise<boolean> => {
    // Counted by sluice itself, failures only: per username from one client IP (so nobody can
    // lock a user out from elsewhere), and per client IP. Each attempt is charged first — so
    // concurrent guesses cannot slip past the limit — and given back unless it fails.
    const ip = ctx.clientIp.identity(req.raw);
    const { user: perUser, ip: perIp } = ctx.loginLimiters;
    const userKey = `${ip}|${username.toLowerCase()}`;
    const [byUser, byIp] = await Promise.all([perUser.limit(userKey), perIp.limit(ip)]);
    // Only a charge made on the shared store is given back: an insurance decision (the store
    // is down) counted on this node, and the store would refund what it never charged.
    const giveBack = async () => {
      await Promise.all([
        byUser.allowed && byUser.reason === undefined ? perUser.refund(userKey) : undefined,
        byIp.allowed && byIp.reason === undefined ? perIp.refund(ip) : undefined,
      ]).catch((err: unknown) =>
        req.log.warn({ err }, "could not give back a sign-in attempt to the counter store"),
      );
    };
    if (!byUser.allowed || !byIp.allowed) {
      await giveBack();
      const retry = Math.max(
        byUser.allowed ? 0 : byUser.retryAfterMs,
        byIp.allowed ? 0 : byIp.retryAfterMs,
      );
      throw new ApiError("too_many_requests", "too many failed sign-in attempts; retry later", {
        headers: { "Retry-After": String(Math.max(1, Math.ceil(retry / 1000))) },
      });
    }
    let ok: boolean;
    try {
      ok = await check();
    } catch (err) {
      await giveBack(); // not the caller's failure
      throw err;
    }
    if (ok) await giveBack();
    else req.log.warn({ username, ip }, "failed sign-in");
    return ok;
  };
  return { session, role, passwordAttempt };
}
