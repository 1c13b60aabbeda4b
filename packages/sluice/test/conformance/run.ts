/**
 * Runs the conformance table against a store. Every store's test file calls
 * `runConformance("memory", (now) => memoryStore({ now }))` (or its own factory): the same
 * scenarios, the same expectations, time injected.
 */
import { afterAll, describe, it } from "vitest";
import { LEASE_ALGORITHMS, type Store } from "../../src/index.js";
import { play } from "./play.js";
import { type Scenario, scenarios } from "./scenarios.js";

export { T0, play } from "./play.js";

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
