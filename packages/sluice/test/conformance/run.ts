/**
 * Runs the conformance table against a store. Every store's test file calls
 * `runConformance("memory", (now) => memoryStore({ now }))` (or its own factory): the same
 * scenarios, the same expectations, time injected.
 */
import { afterAll, describe, it } from "vitest";
import type { Store } from "../../src/index.js";
import { play } from "./play.js";
import { scenarios } from "./scenarios.js";

export { T0, play } from "./play.js";

/** Options of {@link runConformance}. */
export interface ConformanceOptions {
  /** Scenarios this store cannot run, each with the reason (shown in the test name). */
  skip?: Array<{ reason: string; scenarios: string[] }>;
  /** Called after all scenarios (close clients, stop servers). */
  teardown?: () => Promise<void>;
  /** Decide through `limitSync` / `peekSync` (stores that decide in-process). */
  sync?: boolean;
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
      it(scenario.name, async () => {
        await play(scenario, `c${run}-${index}`, makeStore, options.sync === true);
      });
    });
  });
}
