/**
 * Property-based tests of the algorithms' invariants (fast-check), through the limiter and the
 * memory store with an injected clock.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type AlgorithmName, type Decision, createLimiter, memoryStore } from "../../src/index.js";

interface Req {
  dt: number;
  cost: number;
}

const reqs = (maxCost: number, maxDt: number) =>
  fc.array(
    fc.record({
      dt: fc.integer({ min: 0, max: maxDt }),
      cost: fc.integer({ min: 1, max: maxCost }),
    }),
    {
      minLength: 1,
      maxLength: 150,
    },
  );

/** Plays the requests against a fresh limiter; returns each request's time and decision. */
async function play(
  algorithm: AlgorithmName,
  rules: Array<{ limit: number; period: number; burst?: number }>,
  seq: Req[],
): Promise<Array<{ t: number; cost: number; d: Decision }>> {
  let t = 1_700_006_400_000;
  const limiter = createLimiter({
    store: memoryStore({ now: () => t }),
    policy: { name: "p", algorithm, rules },
  });
  const out: Array<{ t: number; cost: number; d: Decision }> = [];
  for (const r of seq) {
    t += r.dt;
    out.push({ t, cost: r.cost, d: await limiter.limit("k", { cost: r.cost }) });
  }
  return out;
}

function wellFormed(d: Decision): void {
  expect(Number.isInteger(d.remaining) && d.remaining >= 0).toBe(true);
  expect(Number.isInteger(d.retryAfterMs) && d.retryAfterMs >= 0).toBe(true);
  expect(Number.isInteger(d.resetAfterMs) && d.resetAfterMs >= 0).toBe(true);
  expect(d.allowed ? d.retryAfterMs === 0 : d.retryAfterMs > 0).toBe(true);
}

const limitArb = fc.integer({ min: 1, max: 20 });
const periodArb = fc.integer({ min: 10, max: 5000 });

describe("properties", () => {
  it("sliding-log never admits more than limit in any interval of length period", async () => {
    await fc.assert(
      fc.asyncProperty(limitArb, periodArb, reqs(5, 400), async (limit, period, seq) => {
        const log = await play(
          "sliding-log",
          [{ limit, period }],
          seq.map((r) => ({ ...r, cost: Math.min(r.cost, limit) })),
        );
        const admitted = log.filter((e) => e.d.allowed);
        // The heaviest interval (t − P, t] ends at an admission.
        for (const end of admitted) {
          const inWindow = admitted
            .filter((e) => e.t > end.t - period && e.t <= end.t)
            .reduce((s, e) => s + e.cost, 0);
          expect(inWindow).toBeLessThanOrEqual(limit);
        }
        log.forEach((e) => wellFormed(e.d));
      }),
      { numRuns: 150 },
    );
  });

  it("fixed-window never admits more than limit per aligned window", async () => {
    await fc.assert(
      fc.asyncProperty(limitArb, periodArb, reqs(5, 400), async (limit, period, seq) => {
        const log = await play(
          "fixed-window",
          [{ limit, period }],
          seq.map((r) => ({ ...r, cost: Math.min(r.cost, limit) })),
        );
        const perWindow = new Map<number, number>();
        for (const e of log) {
          if (!e.d.allowed) continue;
          const w = Math.floor(e.t / period);
          perWindow.set(w, (perWindow.get(w) ?? 0) + e.cost);
        }
        for (const n of perWindow.values()) expect(n).toBeLessThanOrEqual(limit);
        log.forEach((e) => wellFormed(e.d));
      }),
      { numRuns: 150 },
    );
  });

  for (const algorithm of ["token-bucket", "gcra"] as const) {
    it(`${algorithm} never admits more than burst + rate·t over any span t`, async () => {
      await fc.assert(
        fc.asyncProperty(
          limitArb,
          periodArb,
          fc.integer({ min: 1, max: 20 }),
          reqs(5, 300),
          async (limit, period, burst, seq) => {
            const log = await play(
              algorithm,
              [{ limit, period, burst }],
              seq.map((r) => ({ ...r, cost: Math.min(r.cost, burst) })),
            );
            const admitted = log.filter((e) => e.d.allowed);
            const rate = limit / period;
            for (let i = 0; i < admitted.length; i++) {
              let sum = 0;
              for (let j = i; j < admitted.length; j++) {
                sum += admitted[j]!.cost;
                const span = admitted[j]!.t - admitted[i]!.t;
                expect(sum).toBeLessThanOrEqual(burst + rate * span + 1e-6);
              }
            }
            log.forEach((e) => wellFormed(e.d));
          },
        ),
        { numRuns: 100 },
      );
    });
  }

  for (const algorithm of [
    "gcra",
    "token-bucket",
    "fixed-window",
    "sliding-window",
    "sliding-log",
  ] as const) {
    it(`${algorithm}: denied requests change no state (dropping them changes no other decision)`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.record({ limit: limitArb, period: periodArb }), {
            minLength: 1,
            maxLength: 3,
          }),
          reqs(3, 200),
          async (rules, seq) => {
            const minLimit = Math.min(...rules.map((r) => r.limit));
            const capped = seq.map((r) => ({ ...r, cost: Math.min(r.cost, minLimit) }));
            const full = await play(algorithm, rules, capped);
            // Replay only the allowed requests, at the same times.
            const kept: Req[] = [];
            let last = 0;
            let prevT = full[0]!.t - capped[0]!.dt;
            for (const e of full) {
              if (e.d.allowed) {
                kept.push({ dt: e.t - prevT + last, cost: e.cost });
                prevT = e.t;
                last = 0;
              }
            }
            const replay = await play(algorithm, rules, kept);
            const allowedFull = full.filter((e) => e.d.allowed);
            expect(replay.map((e) => e.d.allowed)).toEqual(allowedFull.map(() => true));
            expect(replay.map((e) => e.d.remaining)).toEqual(allowedFull.map((e) => e.d.remaining));
          },
        ),
        { numRuns: 100 },
      );
    });
  }

  it("waiting exactly retryAfterMs lets the same request pass (gcra, token-bucket, fixed-window, sliding-log, sliding-window)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<AlgorithmName>(
          "gcra",
          "token-bucket",
          "fixed-window",
          "sliding-log",
          "sliding-window",
        ),
        limitArb,
        periodArb,
        reqs(3, 100),
        async (algorithm, limit, period, seq) => {
          let t = 1_700_006_400_000;
          const store = memoryStore({ now: () => t });
          const limiter = createLimiter({
            store,
            policy: { name: "p", algorithm, rules: [{ limit, period }] },
          });
          for (const r of seq) {
            t += r.dt;
            const cost = Math.min(r.cost, limit);
            const d = await limiter.limit("k", { cost });
            if (!d.allowed) {
              const at = t;
              t = at + d.retryAfterMs - 1;
              // 1 ms early is still too early (every algorithm here has an exact wait)…
              expect((await limiter.peek("k", { cost })).allowed).toBe(false);
              t = at + d.retryAfterMs;
              // …and exactly on time passes.
              expect((await limiter.limit("k", { cost })).allowed).toBe(true);
            }
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
