import { describe, expect, it } from "vitest";
import * as pure from "./entry.js";
import { type KeyState, definePolicy, evaluate } from "./entry.js";

describe("sluice/algorithms", () => {
  it("runs the example of its documentation", () => {
    const policy = definePolicy({ name: "api", rules: [{ limit: 2, period: "1s" }] });
    let state: KeyState | undefined;
    const seen: Array<[number, boolean]> = [];
    for (const t of [0, 10, 20, 1000]) {
      const ev = evaluate(policy, state, t, 1, true);
      if (ev.changed) state = ev.next;
      seen.push([t, ev.allowed]);
    }
    expect(seen).toEqual([
      [0, true],
      [10, true],
      [20, false],
      [1000, true],
    ]);
  });

  it("exports the pure functions and what building a policy needs, and nothing stateful", () => {
    expect(Object.keys(pure).sort()).toEqual([
      "ADAPTIVE_ALGORITHMS",
      "ALGORITHMS",
      "ALLOTMENT_ALGORITHMS",
      "CALENDARS",
      "ERROR_CODES",
      "LEASE_ALGORITHMS",
      "SluiceError",
      "ValidationError",
      "algorithms",
      "concurrency",
      "definePolicy",
      "evaluate",
      "fixedWindow",
      "fixedWindowFromFirstRequest",
      "formatDuration",
      "gcra",
      "isSluiceError",
      "parseDuration",
      "policyCapacity",
      "policyToInput",
      "ruleToInput",
      "slidingLog",
      "slidingWindow",
      "tokenBucket",
      "tokenBucketInterval",
    ]);
  });
});
