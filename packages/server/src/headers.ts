/**
 * Rate-limit headers of a decision, exactly as the middleware sends them: GitHub's
 * `X-RateLimit-*` and the IETF draft's `RateLimit-Policy` / `RateLimit` (sluice/http's
 * builders, format `both`), plus `Retry-After` when denied.
 */
import type { AlgorithmName, Decision } from "sluice";
import { type HeaderList, rateLimitHeaders, retryAfterSeconds } from "sluice/http";

/** The headers for a decision (both formats; `Retry-After` when denied). */
export function decisionHeaders(d: Decision, algorithm: AlgorithmName, nowMs: number): HeaderList {
  const out = rateLimitHeaders("both", d, { nowMs, algorithm });
  if (!d.allowed) out.push(["Retry-After", String(retryAfterSeconds(d))]);
  return out;
}
