/**
 * Rate-limit response headers, built from a {@link Decision} — never from a framework's
 * response object — so every middleware (and any other server) reuses them.
 *
 * Formats are data: {@link HEADER_FORMATS} lists them and {@link headerBuilders} holds one
 * small function per format. Every value is a whole, non-negative number: counts are rounded
 * down, times are rounded up (a client that waits the time shown is never early).
 */
import type { AlgorithmName } from "../algorithms/index.js";
import type { Decision } from "../decision.js";

/** The header sets a middleware can send: GitHub's `X-RateLimit-*`, the IETF draft's `RateLimit-Policy`/`RateLimit`, or both. */
export const HEADER_FORMATS = ["github", "ietf", "both"] as const;

/** One of {@link HEADER_FORMATS}. */
export type HeaderFormat = (typeof HEADER_FORMATS)[number];

/** Header name/value pairs, in the order they should be set. Names are unique within a list. */
export type HeaderList = Array<readonly [name: string, value: string]>;

/** The draft this module follows for `RateLimit-Policy` / `RateLimit` (structured-field lists). */
export const IETF_DRAFT = "draft-ietf-httpapi-ratelimit-headers-11";

/** A whole, non-negative count (rounded down). */
function count(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}

/** Whole seconds from ms, rounded up: waiting this long is always enough. */
export function ceilSeconds(ms: number): number {
  return Number.isFinite(ms) && ms > 0 ? Math.ceil(ms / 1000) : 0;
}

/** True when the decision's numbers say nothing about the counters (the store failed and `onStoreError` allowed or denied). */
export function numbersUnknown(d: Decision): boolean {
  return d.reason === "store-error";
}

/**
 * The IETF item name of rule `i`: the policy name for a single-rule policy, `"<policy>-<i>"`
 * (0-based, in policy order, as in `decision.rules`) when the policy has several rules.
 */
export function ruleItemName(d: Pick<Decision, "policy" | "rules">, i: number): string {
  return d.rules.length === 1 ? d.policy : `${d.policy}-${i}`;
}

/** A structured-field String (RFC 9651 §3.3.3): quoted, with `\` and `"` escaped, non-ASCII dropped. */
export function sfString(s: string): string {
  const printable = s.replace(/[^\x20-\x7e]/g, "");
  return `"${printable.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/** What a header builder needs besides the decision. */
export interface HeaderContext {
  /** Now, in epoch ms (for `X-RateLimit-Reset`). */
  readonly nowMs: number;
  /**
   * The policy's algorithm. `concurrency` rules have no window (their period is a permit
   * lifetime), so no reset time or window is sent for them.
   */
  readonly algorithm?: AlgorithmName;
}

/**
 * GitHub style: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (epoch
 * seconds, rounded up) and `X-RateLimit-Used`, for the decision's reported rule (the one with
 * the least remaining when allowed, the longest wait when denied); `Remaining` is the least over
 * all rules. When the store failed (`reason: "store-error"`) only `X-RateLimit-Limit` is sent.
 */
export function githubHeaders(d: Decision, ctx: HeaderContext): HeaderList {
  const out: HeaderList = [["X-RateLimit-Limit", String(count(d.limit))]];
  if (numbersUnknown(d)) return out;
  const r = d.rules[d.rule];
  const remaining = count(d.remaining);

  out.push(["X-RateLimit-Remaining", String(remaining)]);
  if (ctx.algorithm !== "concurrency")
    out.push([
      "X-RateLimit-Reset",
      String(Math.ceil((ctx.nowMs + Math.max(0, d.resetAfterMs)) / 1000)),
    ]);
  // Units in use out of the reported rule's capacity (its burst; equal to its limit for most algorithms).
  const capacity = r?.burst ?? d.limit;
  out.push(["X-RateLimit-Used", String(count(capacity - (r?.remaining ?? remaining)))]);
  return out;
}

/**
 * The quota policy items, one per rule: `"<name>";q=<limit>;w=<period s>`, plus
 * `sluice-burst=<n>` when a rule's burst differs from its limit and `qu="concurrent-requests"`
 * (no `w`) for a concurrency policy. A period that is not a whole number of seconds is rounded up
 * (the advertised rate is then slightly lower than the true one: clients err on the slow side).
 */
export function ratelimitPolicyValue(
  d: Decision,
  ctx: Pick<HeaderContext, "algorithm"> = {},
): string {
  return d.rules
    .map((r, i) => {
      let item = `${sfString(ruleItemName(d, i))};q=${count(r.limit)}`;
      if (ctx.algorithm === "concurrency") return `${item};qu="concurrent-requests"`;
      item += `;w=${Math.max(1, ceilSeconds(r.periodMs))}`;
      if (r.burst !== r.limit) item += `;sluice-burst=${count(r.burst)}`;
      return item;
    })
    .join(", ");
}

/** The service limit items, one per rule: `"<name>";r=<remaining>;t=<seconds until replenished>` (`t` omitted for concurrency). */
export function ratelimitValue(d: Decision, ctx: Pick<HeaderContext, "algorithm"> = {}): string {
  return d.rules
    .map((r, i) => {
      const item = `${sfString(ruleItemName(d, i))};r=${count(r.remaining)}`;
      return ctx.algorithm === "concurrency" ? item : `${item};t=${ceilSeconds(r.resetAfterMs)}`;
    })
    .join(", ");
}

/**
 * The IETF draft's fields ({@link IETF_DRAFT}): `RateLimit-Policy` (every rule of the policy)
 * and `RateLimit` (every rule's available quota and effective window). When the store failed
 * (`reason: "store-error"`) only `RateLimit-Policy` is sent: the policy is known, the counters are not.
 */
export function ietfHeaders(d: Decision, ctx: Pick<HeaderContext, "algorithm"> = {}): HeaderList {
  const out: HeaderList = [["RateLimit-Policy", ratelimitPolicyValue(d, ctx)]];
  if (!numbersUnknown(d)) out.push(["RateLimit", ratelimitValue(d, ctx)]);
  return out;
}

/** One function per {@link HEADER_FORMATS} entry (`both` combines the other two). */
export const headerBuilders: Readonly<
  Record<HeaderFormat, (d: Decision, ctx: HeaderContext) => HeaderList>
> = Object.freeze({
  github: githubHeaders,
  ietf: ietfHeaders,
  both: (d: Decision, ctx: HeaderContext) => [...githubHeaders(d, ctx), ...ietfHeaders(d, ctx)],
});

/** The headers of `format` for a decision; an empty list for `false`. */
export function rateLimitHeaders(
  format: HeaderFormat | false,
  d: Decision,
  ctx: HeaderContext,
): HeaderList {
  return format === false ? [] : headerBuilders[format](d, ctx);
}

/** `Retry-After` in whole seconds, rounded up (at least 1): a retry after that long passes if nothing else happened. */
export function retryAfterSeconds(d: Decision): number {
  return Math.max(1, ceilSeconds(d.retryAfterMs));
}

/** The IETF item names of the rules that denied this request (the reported rule if none is marked). */
export function violatedPolicies(d: Decision): string[] {
  const names = d.rules.flatMap((r, i) => (r.allowed ? [] : [ruleItemName(d, i)]));
  return names.length > 0 ? names : [ruleItemName(d, d.rule)];
}
