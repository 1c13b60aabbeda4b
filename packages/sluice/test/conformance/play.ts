/**
 * Plays one scenario of the conformance table against a store, with nothing but the library:
 * no test framework, no Node API, so that the same player runs under vitest (`run.ts`) and
 * inside other runtimes (Deno, Bun, workerd, Vercel's Edge runtime: `test/runtimes`).
 */
import {
  type Decision,
  ALLOTMENT_ALGORITHMS,
  type Limiter,
  type Store,
  type SyncLimiter,
  createLimiter,
  isSluiceError,
} from "../../src/index.js";
import type { Expect, Scenario } from "./scenarios.js";

/** Day-aligned start time, so window boundaries fall on round offsets. */
export const T0 = 1_700_006_400_000;

/**
 * Why a scenario's policy cannot take leases (docs/leases.md), or `undefined` when it can: the
 * lease dimension plays the others with {@link withLeases}.
 */
export function leaseRefusal(scenario: Scenario): string | undefined {
  const alg = scenario.policy.algorithm ?? "gcra";
  if (!ALLOTMENT_ALGORITHMS.includes(alg)) return `no leases for ${alg}`;
  if (scenario.policy.blockDuration !== undefined) return "no leases with blockDuration";
  if (scenario.policy.windowStart === "first-request")
    return "no leases with first-request windows";
  if (scenario.policy.refill === "interval") return "no leases with interval refills";
  if (scenario.policy.rules.some((r) => r.calendar !== undefined))
    return "no leases with calendar windows";
  return undefined;
}

/**
 * The scenario under the lease dimension: `lease: { hotAfter: 1, ttl: 1 }`, a lease from the
 * first decision, spent within the same millisecond of the injected clock. Play it with
 * `leased` true.
 */
export function withLeases(scenario: Scenario): Scenario {
  return { ...scenario, policy: { ...scenario.policy, lease: { hotAfter: 1, ttl: 1 } } };
}

/** Plays one scenario; fails with the step number and what differed. */
export async function play(
  scenario: Scenario,
  policyName: string,
  makeStore: (now: () => number) => Store | Promise<Store>,
  sync = false,
  leased = false,
): Promise<void> {
  const t0 = scenario.t0 ?? T0;
  let t = t0;
  const store = await makeStore(() => t);
  // A store failure is answered by the policy's onStoreError, not thrown: kept to say why a
  // decision differed.
  const storeErrors: unknown[] = [];
  const limiter: Limiter = createLimiter({
    store,
    policy: { ...scenario.policy, name: policyName },
    onError: (err) => storeErrors.push(err),
  });
  const leases = new Map<string, string>();
  for (const [i, step] of scenario.steps.entries()) {
    t = t0 + step.at;
    const where = `step ${i} (at ${step.at}, ${step.op ?? "limit"}${step.cost !== undefined ? ` cost ${step.cost}` : ""})`;
    const key = step.key ?? "k";
    let decision: Decision | undefined;
    try {
      switch (step.op ?? "limit") {
        case "limit":
          decision = sync
            ? syncLimiter(limiter).limitSync(
                key,
                step.cost !== undefined ? { cost: step.cost } : undefined,
              )
            : await limiter.limit(key, step.cost !== undefined ? { cost: step.cost } : undefined);
          if (step.lease && decision.leaseId) leases.set(step.lease, decision.leaseId);
          break;
        case "peek":
          decision = sync ? syncLimiter(limiter).peekSync(key) : await limiter.peek(key);
          break;
        case "reset":
          await limiter.reset(key);
          break;
        case "refund":
          await limiter.refund(key, step.cost ?? 1);
          break;
        case "adjust":
          await store.adjust(limiter.policy, key, step.cost ?? 1);
          break;
        case "setCount":
          await limiter.setCount(
            key,
            step.count ?? 0,
            step.windowMs !== undefined ? { windowMs: step.windowMs } : undefined,
          );
          break;
        case "release":
          await limiter.release(key, leases.get(step.lease ?? "") ?? "unknown-lease");
          break;
      }
    } catch (err) {
      if (step.throws && isSluiceError(err) && err.code === step.throws) continue;
      throw new Error(`${scenario.name}: ${where} threw ${String(err)}`, { cause: err });
    }
    if (step.throws)
      throw new Error(`${scenario.name}: ${where} should have thrown ${step.throws}`);
    if (step.expect && decision) {
      // Under leases, an allowed decision reports what the lease knows; a concurrency node's
      // slots are one member of the set, so its denials' waits are the member's.
      const loose =
        leased &&
        (step.op ?? "limit") === "limit" &&
        (decision.allowed || scenario.policy.algorithm === "concurrency");
      const e = loose ? { allowed: step.expect.allowed, reason: step.expect.reason } : step.expect;
      const failures =
        storeErrors.length > 0
          ? ` (the store failed ${storeErrors.length} time(s), answered by onStoreError; first: ${String(storeErrors[0])})`
          : "";
      check(decision, e, `${scenario.name}: ${where}`, failures);
    }
  }
}

/** The limiter as a {@link SyncLimiter} (it is one over a store that decides in-process). */
function syncLimiter(limiter: Limiter): SyncLimiter {
  const l = limiter as Partial<SyncLimiter>;
  if (typeof l.limitSync !== "function") throw new Error("the limiter has no limitSync");
  return l as SyncLimiter;
}

function check(d: Decision, e: Expect, where: string, failures: string): void {
  const got: Record<string, unknown> = {};
  const want: Record<string, unknown> = {};
  for (const f of [
    "allowed",
    "remaining",
    "retryAfterMs",
    "resetAfterMs",
    "limit",
    "rule",
  ] as const) {
    if (e[f] !== undefined) {
      got[f] = d[f];
      want[f] = e[f];
    }
  }
  if (e.reason !== undefined) {
    got.reason = d.reason ?? null;
    want.reason = e.reason;
  }
  e.rules?.forEach((r, i) => {
    if (!r) return;
    for (const [k, v] of Object.entries(r)) {
      got[`rules.${i}.${k}`] = (d.rules[i] as unknown as Record<string, unknown> | undefined)?.[k];
      want[`rules.${i}.${k}`] = v;
    }
  });
  const differ = Object.keys(want).filter((k) => !Object.is(got[k], want[k]));
  if (differ.length > 0)
    throw new Error(
      `${where}: ${differ.map((k) => `${k} is ${String(got[k])}, expected ${String(want[k])}`).join("; ")}${failures}`,
    );
  for (const f of ["remaining", "retryAfterMs", "resetAfterMs"] as const) {
    const v = d[f];
    if (!Number.isInteger(v) || v < 0) throw new Error(`${where}: ${f} ${v} is not an integer ≥ 0`);
  }
}
