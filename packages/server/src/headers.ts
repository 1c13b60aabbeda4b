/**
 * Rate-limit headers of a decision: GitHub's `X-RateLimit-*` and the IETF draft's
 * `RateLimit-Policy` / `RateLimit`, plus `Retry-After` when denied.
 *
 * A local copy of the formats in `packages/sluice/src/http/headers.ts` (`headerBuilders.both`),
 * which `sluice` does not export yet; replace with the library's builder once it does.
 */
import type { AlgorithmName, Decision } from "sluice";

/** Header name/value pairs in the order they are set. */
export type HeaderList = Array<readonly [name: string, value: string]>;

const count = (n: number) => (Number.isFinite(n) && n > 0 ? Math.floor(n) : 0);
const ceilSeconds = (ms: number) => (Number.isFinite(ms) && ms > 0 ? Math.ceil(ms / 1000) : 0);
const sfString = (s: string) =>
  `"${s.replace(/[^\x20-\x7e]/g, "").replace(/[\\"]/g, (c) => `\\${c}`)}"`;

/** The headers for a decision (both formats; `Retry-After` when denied). */
export function decisionHeaders(d: Decision, algorithm: AlgorithmName, nowMs: number): HeaderList {
  const out: HeaderList = [["X-RateLimit-Limit", String(count(d.limit))]];
  const known = d.reason !== "store-error";
  const concurrency = algorithm === "concurrency";
  if (known) {
    const r = d.rules[d.rule];
    out.push(["X-RateLimit-Remaining", String(count(d.remaining))]);
    if (!concurrency)
      out.push([
        "X-RateLimit-Reset",
        String(Math.ceil((nowMs + Math.max(0, d.resetAfterMs)) / 1000)),
      ]);
    out.push([
      "X-RateLimit-Used",
      String(count((r?.burst ?? d.limit) - (r?.remaining ?? d.remaining))),
    ]);
  }
  const item = (i: number) => sfString(d.rules.length === 1 ? d.policy : `${d.policy}-${i}`);
  out.push([
    "RateLimit-Policy",
    d.rules
      .map((r, i) => {
        const base = `${item(i)};q=${count(r.limit)}`;
        if (concurrency) return `${base};qu="concurrent-requests"`;
        return `${base};w=${Math.max(1, ceilSeconds(r.periodMs))}${r.burst !== r.limit ? `;sluice-burst=${count(r.burst)}` : ""}`;
      })
      .join(", "),
  ]);
  if (known) {
    out.push([
      "RateLimit",
      d.rules
        .map(
          (r, i) =>
            `${item(i)};r=${count(r.remaining)}${concurrency ? "" : `;t=${ceilSeconds(r.resetAfterMs)}`}`,
        )
        .join(", "),
    ]);
  }
  if (!d.allowed) out.push(["Retry-After", String(Math.max(1, ceilSeconds(d.retryAfterMs)))]);
  return out;
}
