/**
 * Runs the conformance table against a store. Every store's test file calls
 * `runConformance("memory", (now) => memoryStore({ now }))` (or its own factory): the same
 * scenarios, the same expectations, time injected.
 */
import { afterAll, describe, expect, it } from "vitest";
import {
  type Decision,
  type Limiter,
  type Store,
  type SyncLimiter,
  LEASE_ALGORITHMS,
  createLimiter,
  isSluiceError,
} from "../../src/index.js";
import { type Expect, type Scenario, scenarios } from "./scenarios.js";

/** Day-aligned start time, so window boundaries fall on round offsets. */
export const T0 = 1_700_006_400_000;

/** Options of {@link runConformance}. */
export interface ConformanceOptions {
  /** Scenarios this store cannot run, each with the reason (shown in the test name). */
  skip?: Array<{ reason: string; scenarios: string[] }>;
  /** Called after all scenarios (close clients, stop servers). */
  teardown?: () => Promise<void>;
  /** Decide through `limitSync` / `peekSync` (stores that decide in-process). */
  sync?: boolean;
  /**
   * The lease dimension: every scenario whose policy can take leases runs with
   * `lease: { hotAfter: 1, ttl: 1 }` (a lease from the first decision, spent within the same
   * millisecond of the injected clock). Allowed decisions are checked for `allowed` and
   * `reason` (a lease reports what it knows of `remaining` and resets: docs/leases.md);
   * denials, which always come from the store, are checked in full. The others are skipped.
   */
  lease?: boolean;
}

/** Declares one vitest test per scenario against stores made by `makeStore`. */
export function runConformance(
  label: string,
  makeStore: (now: () => number) => Store | Promise<Store>,
  options: ConformanceOptions = {},
): void {
  const run = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  describe(`conformance: ${label}`, () => {
    if (options.teardown) afterAll(options.teardown);
    scenarios.forEach((scenario, index) => {
      const skip = options.skip?.find((s) => s.scenarios.includes(scenario.name));
      if (skip) {
        it.skip(`${scenario.name} (skipped: ${skip.reason})`, () => {});
        return;
      }
      if (options.lease) {
        const alg = scenario.policy.algorithm ?? "gcra";
        const why = !LEASE_ALGORITHMS.includes(alg)
          ? `no leases for ${alg}`
          : scenario.policy.blockDuration !== undefined
            ? "no leases with blockDuration"
            : scenario.policy.windowStart === "first-request"
              ? "no leases with first-request windows"
              : undefined;
        if (why !== undefined) {
          it.skip(`${scenario.name} (skipped: ${why})`, () => {});
          return;
        }
        const leased: Scenario = {
          ...scenario,
          policy: { ...scenario.policy, lease: { hotAfter: 1, ttl: 1 } },
        };
        it(`${scenario.name} (leases)`, async () => {
          await play(leased, `c${run}-${index}`, makeStore, options.sync === true, true);
        });
        return;
      }
      it(scenario.name, async () => {
        await play(scenario, `c${run}-${index}`, makeStore, options.sync === true);
      });
    });
  });
}

/** Plays one scenario; fails with the step number and what differed. */
export async function play(
  scenario: Scenario,
  policyName: string,
  makeStore: (now: () => number) => Store | Promise<Store>,
  sync = false,
  leased = false,
): Promise<void> {
  let t = T0;
  const store = await makeStore(() => t);
  const limiter: Limiter = createLimiter({
    store,
    policy: { ...scenario.policy, name: policyName },
  });
  const leases = new Map<string, string>();
  for (const [i, step] of scenario.steps.entries()) {
    t = T0 + step.at;
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
      check(decision, e, `${scenario.name}: ${where}`);
    }
  }
}

/** The limiter as a {@link SyncLimiter} (it is one over a store that decides in-process). */
function syncLimiter(limiter: Limiter): SyncLimiter {
  const l = limiter as Partial<SyncLimiter>;
  if (typeof l.limitSync !== "function") throw new Error("the limiter has no limitSync");
  return l as SyncLimiter;
}

function check(d: Decision, e: Expect, where: string): void {
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
  expect(got, where).toEqual(want);
  expect(
    Number.isInteger(d.remaining) && d.remaining >= 0,
    `${where}: remaining ${d.remaining}`,
  ).toBe(true);
  expect(
    Number.isInteger(d.retryAfterMs) && d.retryAfterMs >= 0,
    `${where}: retryAfterMs ${d.retryAfterMs}`,
  ).toBe(true);
  expect(
    Number.isInteger(d.resetAfterMs) && d.resetAfterMs >= 0,
    `${where}: resetAfterMs ${d.resetAfterMs}`,
  ).toBe(true);
}
