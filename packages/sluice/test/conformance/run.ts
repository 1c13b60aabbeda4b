/**
 * Runs the conformance table against a store. Every store's test file calls
 * `runConformance("memory", (now) => memoryStore({ now }))` (or its own factory): the same
 * scenarios, the same expectations, time injected.
 */
import { afterAll, describe, expect, it } from "vitest";
import { LEASE_ALGORITHMS, type Store, ValidationError, definePolicy } from "../../src/index.js";
import { play } from "./play.js";
import { type Scenario, scenarios } from "./scenarios.js";

export { T0, play } from "./play.js";

/** Options of {@link runConformance}. */
export interface ConformanceOptions {
  /** Called after all scenarios (close clients, stop servers). */
  teardown?: () => Promise<void>;
  /** Decide through `limitSync` / `peekSync` (stores that decide in-process). */
  sync?: boolean;
  /**
   * The lease dimension: every scenario whose policy can take leases runs with
   * `lease: { hotAfter: 1, ttl: 1 }` (a lease from the first decision, spent within the same
   * millisecond of the injected clock). Allowed decisions are checked for `allowed` and
   * `reason` (a lease reports what it knows of `remaining` and resets: docs/leases.md);
   * denials, which always come from the store, are checked in full. The others check that such
   * a policy with `lease` is refused, naming the field.
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
      if (options.lease) {
        const alg = scenario.policy.algorithm ?? "gcra";
        const why = !LEASE_ALGORITHMS.includes(alg)
          ? `no leases for ${alg}`
          : scenario.policy.blockDuration !== undefined
            ? "no leases with blockDuration"
            : scenario.policy.windowStart === "first-request"
              ? "no leases with first-request windows"
              : scenario.policy.refill === "interval"
                ? "no leases with interval refills"
                : undefined;
        if (why !== undefined) {
          // Not leased: such a policy is refused, naming the field (docs/leases.md).
          it(`${scenario.name} (leases refused: ${why})`, () => {
            let error: unknown;
            try {
              definePolicy({ ...scenario.policy, name: "leased", lease: true });
            } catch (e) {
              error = e;
            }
            expect(error).toBeInstanceOf(ValidationError);
            expect((error as ValidationError).issues.map((i) => i.path)).toContain("lease");
          });
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
