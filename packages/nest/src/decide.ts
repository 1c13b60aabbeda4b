/**
 * One decision over several policies, all or nothing: the request passes only if every policy
 * allows it, and then it is charged to all of them; a denial by one charges none of the others.
 *
 * A store decides one policy atomically (all its rules, `evaluate()`), not several. So:
 *
 * - Over stores that decide in this process (the memory store, the default), every policy is
 *   peeked and then — in the same synchronous run, which nothing can interleave — either all
 *   are charged or none is: exact.
 * - Over a remote store (Redis), every policy is peeked at once; if one would refuse, only it
 *   decides (its denial counts and starts its penalty block) and nothing is charged. Otherwise
 *   they are charged in order, and should one refuse after all (another instance took the last
 *   unit meanwhile), those already charged are refunded. Counts end as if the request had not
 *   come; a request deciding during that moment may see the charge.
 */
import { type Decision, type Limiter, type SyncLimiter, isSyncStore } from "sluice";

/** One policy's share of a request: its limiter, whom it counts for and what it costs. */
export interface Charge {
  readonly limiter: Limiter;
  readonly key: string;
  readonly cost: number;
}

/** What {@link decideAll} answers. */
export interface CombinedDecision {
  /** Whether every policy allowed the request. */
  readonly allowed: boolean;
  /**
   * When allowed, every policy's decision, in the order of the charges. When denied, only the
   * denials, the longest wait first.
   */
  readonly decisions: readonly Decision[];
}

function isSyncLimiter(limiter: Limiter): limiter is SyncLimiter {
  return (
    isSyncStore(limiter.store) && typeof (limiter as Partial<SyncLimiter>).limitSync === "function"
  );
}

/** Whether the store really charged this decision (and so a refund is owed if undone). */
export function charged(d: Decision): boolean {
  return d.allowed && d.reason === undefined;
}

function denied(decisions: readonly Decision[]): CombinedDecision {
  const list = decisions.filter((d) => !d.allowed).sort((a, b) => b.retryAfterMs - a.retryAfterMs);
  return { allowed: false, decisions: list };
}

/** Decides `charges` as one request (see the module's comment). */
export function decideAll(
  charges: readonly Charge[],
): CombinedDecision | Promise<CombinedDecision> {
  if (charges.length === 1) {
    const c = charges[0]!;
    if (isSyncLimiter(c.limiter)) return single(c.limiter.limitSync(c.key, { cost: c.cost }));
    return c.limiter.limit(c.key, { cost: c.cost }).then(single);
  }
  if (charges.every((c) => isSyncLimiter(c.limiter))) return decideSync(charges);
  return decideAsync(charges);
}

function single(d: Decision): CombinedDecision {
  return d.allowed ? { allowed: true, decisions: [d] } : { allowed: false, decisions: [d] };
}

function decideSync(charges: readonly Charge[]): CombinedDecision {
  const limiters = charges.map((c) => c.limiter as SyncLimiter);
  const peeks = charges.map((c, i) => limiters[i]!.peekSync(c.key, { cost: c.cost }));
  if (peeks.every((d) => d.allowed)) {
    const decisions = charges.map((c, i) => limiters[i]!.limitSync(c.key, { cost: c.cost }));
    // Nothing ran between the peeks and the charges; this guards only against a policy whose
    // peek and decision differ (none does today), keeping the all-or-nothing promise anyway.
    if (decisions.every((d) => d.allowed)) return { allowed: true, decisions };
    decisions.forEach((d, i) => {
      if (charged(d))
        limiters[i]!.store.adjustSync(limiters[i]!.policy, charges[i]!.key, -charges[i]!.cost);
    });
    return denied(decisions);
  }
  // Only the refusing policies decide: their denials count and start their penalty blocks.
  return denied(
    charges.flatMap((c, i) =>
      peeks[i]!.allowed ? [] : [limiters[i]!.limitSync(c.key, { cost: c.cost })],
    ),
  );
}

async function decideAsync(charges: readonly Charge[]): Promise<CombinedDecision> {
  const peeks = await Promise.all(charges.map((c) => c.limiter.peek(c.key, { cost: c.cost })));
  if (peeks.some((d) => !d.allowed)) {
    const refusing = charges.filter((_, i) => !peeks[i]!.allowed);
    const decisions = await Promise.all(
      refusing.map((c) => c.limiter.limit(c.key, { cost: c.cost })),
    );
    if (decisions.some((d) => !d.allowed)) {
      await refund(refusing, decisions);
      return denied(decisions);
    }
    // Every refusing peek was allowed by the time it decided (units came free): those are
    // charged now; charge the rest in order.
    return chargeInOrder(charges, new Map(refusing.map((c, i) => [c, decisions[i]!])));
  }
  return chargeInOrder(charges, new Map());
}

async function chargeInOrder(
  charges: readonly Charge[],
  done: ReadonlyMap<Charge, Decision>,
): Promise<CombinedDecision> {
  const decisions: Decision[] = [];
  for (const c of charges) {
    const d = done.get(c) ?? (await c.limiter.limit(c.key, { cost: c.cost }));
    decisions.push(d);
    if (!d.allowed) {
      // Undo what this request charged: those before, and those decided early that come after.
      const later = charges.slice(decisions.length).filter((c) => done.has(c));
      await refund(
        [...charges.slice(0, decisions.length), ...later],
        [...decisions, ...later.map((c) => done.get(c)!)],
      );
      return denied(decisions);
    }
  }
  return { allowed: true, decisions };
}

/** Gives back what the allowed decisions charged (their policies' share of a denied request). */
async function refund(charges: readonly Charge[], decisions: readonly Decision[]): Promise<void> {
  await Promise.all(
    decisions.flatMap((d, i) =>
      charged(d) ? [charges[i]!.limiter.refund(charges[i]!.key, charges[i]!.cost)] : [],
    ),
  );
}
