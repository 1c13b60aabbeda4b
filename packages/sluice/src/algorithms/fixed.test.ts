import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type FixedAlgorithm, type StepFigures, isFixedAlgorithm } from "./types.js";
import {
  fixedWindow,
  fixedWindowFromFirstRequest,
  gcra,
  slidingWindow,
  tokenBucket,
  tokenBucketInterval,
} from "./index.js";

const FIXED = {
  gcra,
  tokenBucket,
  tokenBucketInterval,
  fixedWindow,
  fixedWindowFromFirstRequest,
  slidingWindow,
};

describe("fixed-size algorithms in place", () => {
  it("decideAt answers as decide does, on state at any offset, and leaves the state alone", () => {
    const T0 = 1_700_006_400_000;
    fc.assert(
      fc.property(
        fc.constantFrom(...(Object.keys(FIXED) as Array<keyof typeof FIXED>)),
        fc.record({
          limit: fc.integer({ min: 1, max: 50 }),
          periodMs: fc.integer({ min: 1, max: 100_000 }),
          extra: fc.integer({ min: 0, max: 20 }),
        }),
        // A key's history: charges (dt, cost) that build its state, then the request asked.
        fc.array(fc.tuple(fc.integer({ min: 0, max: 50_000 }), fc.integer({ min: 0, max: 5 })), {
          maxLength: 12,
        }),
        fc.tuple(fc.integer({ min: 0, max: 100_000 }), fc.integer({ min: 0, max: 5 })),
        fc.integer({ min: 0, max: 7 }),
        (name, r, history, [dt, askedCost], at) => {
          const alg: FixedAlgorithm = FIXED[name] as FixedAlgorithm;
          expect(isFixedAlgorithm(alg)).toBe(true);
          const rule = { limit: r.limit, periodMs: r.periodMs, burst: r.limit + r.extra };
          const capacity = alg.capacity(rule);
          let t = T0;
          let state: number[] | undefined;
          for (const [gap, c] of history) {
            t += gap;
            const step = alg.decide(state, t, rule, Math.min(c, capacity));
            if (step.allowed && Math.min(c, capacity) > 0) state = step.next ?? undefined;
          }
          t += dt;
          const cost = Math.min(askedCost, capacity);
          const expected = alg.decide(state, t, rule, cost);
          // The state inside numbers of other keys (NaN and stray values around it).
          const data = new Float64Array(at + alg.stateSize + 3).fill(NaN);
          for (let i = 0; i < data.length; i++) if (i % 2 === 1) data[i] = T0 * 1000 + i;
          if (state !== undefined) data.set(state, at);
          const before = Array.from(data);
          const out: StepFigures = {
            allowed: !expected.allowed,
            remaining: -1,
            resetAfterMs: -1,
            retryAfterMs: -1,
            ttlMs: -1,
          };
          const next = new Array<number>(alg.stateSize).fill(-1);
          const kept = alg.decideAt(data, at, state !== undefined, t, rule, cost, out, next);
          const { next: expectedNext, ...figures } = expected;
          expect(out).toEqual(figures);
          expect(kept).toBe(expected.allowed && expectedNext !== null);
          if (kept) expect(next).toEqual(expectedNext);
          expect(Array.from(data)).toEqual(before);
        },
      ),
      { numRuns: 3000 },
    );
  });
});
