/**
 * The Redis store's deny cache: a key Redis denied is answered locally, for the same policy and
 * cost, until its retry time — nothing changes in Redis meanwhile, as a denial consumes nothing
 * (docs/redis.md, "Deny cache"). A reset or an adjustment through the store forgets the key.
 */
import type { Clock } from "../clock.js";
import type { RuleDecision } from "../decision.js";
import type { Policy } from "../policy.js";
import type { StoreDecision } from "../store.js";

interface DenyEntry {
  readonly policy: Policy;
  readonly cost: number;
  readonly at: number;
  readonly until: number;
  readonly rules: readonly RuleDecision[];
}

/**
 * Whether the deny cache may answer a policy's decisions: not concurrency (a permit's release
 * frees it at any time) and not a policy with a penalty block (a denial may start one).
 */
export function denyCacheable(policy: Policy): boolean {
  return policy.algorithm !== "concurrency" && policy.blockMs === 0;
}

/** The cache; see the file's comment. */
export class DenyCache {
  private readonly denied = new Map<string, DenyEntry>();
  /** Counts resets and adjustments made through the store (a denial read before one is stale). */
  private forgets = 0;

  constructor(
    private readonly now: Clock,
    private readonly capacity: number,
  ) {}

  /** How many keys are remembered. */
  get size(): number {
    return this.denied.size;
  }

  /** The forget count now (taken when a decision is sent; see {@link DenyCache.remember}). */
  get generation(): number {
    return this.forgets;
  }

  /** The cached denial of this request, or undefined. */
  answer(policy: Policy, key: string, cost: number): StoreDecision | undefined {
    if (this.denied.size === 0) return undefined;
    const id = `${policy.name}\u0000${key}`;
    const e = this.denied.get(id);
    if (e === undefined) return undefined;
    const now = this.now();
    if (e.policy !== policy || now >= e.until || now < e.at) {
      if (e.policy !== policy || now >= e.until) this.denied.delete(id);
      return undefined;
    }
    // Only the same cost: a larger one is denied too, but its wait would be longer.
    if (cost !== e.cost) return undefined;
    const elapsed = now - e.at;
    const rules = e.rules.map((r): RuleDecision => {
      const retry = Math.max(0, r.retryAfterMs - elapsed);
      return {
        limit: r.limit,
        periodMs: r.periodMs,
        burst: r.burst,
        allowed: r.allowed || retry === 0,
        remaining: r.remaining,
        resetAfterMs: Math.max(0, r.resetAfterMs - elapsed),
        retryAfterMs: retry,
      };
    });
    return { allowed: false, rules, blockedForMs: 0, reason: "deny-cache" };
  }

  /**
   * Whether {@link DenyCache.answer} would answer this request now; unlike it, changes nothing
   * (an entry that has run out is left for `answer` to drop).
   */
  wouldAnswer(policy: Policy, key: string, cost: number): boolean {
    if (this.denied.size === 0) return false;
    const e = this.denied.get(`${policy.name}\u0000${key}`);
    if (e === undefined || e.policy !== policy || e.cost !== cost) return false;
    const now = this.now();
    return now >= e.at && now < e.until;
  }

  /**
   * Remembers a denial Redis answered to a decision sent at `at` (by {@link DenyCache.now}),
   * unless a reset or adjustment came since it was sent (`generation` then).
   */
  remember(
    policy: Policy,
    key: string,
    cost: number,
    rules: readonly RuleDecision[],
    at: number,
    generation: number,
  ): void {
    if (generation !== this.forgets) return;
    let retry = 0;
    for (const r of rules) if (!r.allowed && r.retryAfterMs > retry) retry = r.retryAfterMs;
    if (retry <= 0) return;
    const id = `${policy.name}\u0000${key}`;
    this.denied.delete(id);
    if (this.denied.size >= this.capacity) {
      const oldest = this.denied.keys().next();
      if (!oldest.done) this.denied.delete(oldest.value);
    }
    this.denied.set(id, { policy, cost, at, until: at + retry, rules });
  }

  /** Forgets the key (a reset or adjustment through the store). */
  forget(policy: Policy, key: string): void {
    this.forgets++;
    if (this.denied.size > 0) this.denied.delete(`${policy.name}\u0000${key}`);
  }

  clear(): void {
    this.denied.clear();
  }
}
