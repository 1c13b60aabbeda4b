/**
 * The client of a request, as the sign-in limits count it: sluice's own trusted-proxy walk
 * (`sluice/http`), the same one the middleware uses. It starts at the socket's peer and steps
 * left in `X-Forwarded-For` only while the current hop is a trusted proxy, so the client is the
 * right-most address that is not a proxy of yours: entries a client wrote on the left are never
 * reached, and a client that is not behind a trusted proxy cannot change its address with a
 * header at all. IPv6 clients count per /64 (one subscriber usually holds a whole /64).
 */
import type { IncomingMessage } from "node:http";
import { type TrustFn, compileTrust, ipIdentity, parseIp, resolveClientIp } from "sluice/http";
import type { ServerConfig } from "./config.js";

/** Finds a request's client from the configured `trustProxy`. */
export interface ClientIp {
  /** The client's identity for rate limits: `203.0.113.7`, `2001:db8:1:2::/64`; `unknown` when the peer has none. */
  identity(req: IncomingMessage): string;
  /** For Fastify's `trustProxy`, so `request.ip` (in logs) names the same client. */
  readonly fastifyTrust: (address: string, hop: number) => boolean;
}

/** Compiles `trustProxy` once. */
export function clientIp(trustProxy: ServerConfig["trustProxy"]): ClientIp {
  const trust: TrustFn = compileTrust(trustProxy);
  return {
    identity(req) {
      const header = req.headers["x-forwarded-for"];
      const forwarded = Array.isArray(header) ? header.join(",") : header;
      const ip = resolveClientIp(req.socket.remoteAddress, forwarded, trust);
      return ip === undefined ? "unknown" : ipIdentity(ip);
    },
    fastifyTrust(address, hop) {
      const ip = parseIp(address);
      return ip !== undefined && trust(ip, hop);
    },
  };
}
