/**
 * Property-based tests of the algorithms' invariants (fast-check), through the limiter and the
 * memory store with an injected clock.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ALGORITHMS,
  type AlgorithmName,
  type Decision,
  createLimiter,
  memoryStore,
} from "../../src/index.js";

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

  for (const algorithm of ALGORITHMS.filter((a) => a !== "concurrency")) {
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

/**
 * A token bucket refilled by interval, written out as @upstash/ratelimit's token bucket script
 * reads (a hash of `tokens` and `refilledAt` with a TTL), step by step: the model the memory
 * store's `refill: "interval"` must decide exactly as. Where sluice chooses otherwise it says so
 * (a refund stops at `burst`; a key is never written without an expiry).
 */
class IntervalBucketModel {
  private key: { tokens: number; refilledAt: number; expiresAt: number } | undefined;

  constructor(
    private readonly limit: number,
    private readonly period: number,
    private readonly burst: number,
  ) {}

  /** The bucket at `now`: the stored one caught up (unless it expired), else a full one. */
  private read(now: number): { tokens: number; refilledAt: number; stored: boolean } {
    if (this.key !== undefined && now >= this.key.expiresAt) this.key = undefined;
    if (this.key === undefined) return { tokens: this.burst, refilledAt: now, stored: false };
    let { tokens, refilledAt } = this.key;
    if (now >= refilledAt + this.period) {
      const refills = Math.floor((now - refilledAt) / this.period);
      tokens = Math.min(this.burst, tokens + refills * this.limit);
      refilledAt += refills * this.period;
    }
    return { tokens, refilledAt, stored: true };
  }

  /** Periods until `missing` tokens are back. */
  private steps(missing: number): number {
    return Math.ceil(missing / this.limit) * this.period;
  }

  /** One request of `cost`; `commit` false: a look that writes nothing. */
  decide(now: number, cost: number, commit: boolean) {
    const { tokens, refilledAt } = this.read(now);
    if (tokens < cost)
      return {
        allowed: false,
        remaining: Math.max(0, tokens),
        retryAfterMs: refilledAt + this.steps(cost - tokens) - now,
        resetAfterMs: refilledAt + this.steps(this.burst - tokens) - now,
      };
    const left = tokens - cost;
    if (commit && cost > 0)
      this.key = { tokens: left, refilledAt, expiresAt: now + this.steps(this.burst - left) };
    return {
      allowed: true,
      remaining: left,
      retryAfterMs: 0,
      resetAfterMs: refilledAt + this.steps(this.burst - left) - now,
    };
  }

  /** Upstash's negative (refund) or forced rate: the caught-up bucket written back. */
  adjust(now: number, delta: number): void {
    const { tokens, refilledAt, stored } = this.read(now);
    const left = Math.min(this.burst, tokens - delta);
    const ttl = this.steps(this.burst - left);
    // PEXPIRE only when the bucket is not full: a full one keeps the expiry it had.
    if (ttl > 0) this.key = { tokens: left, refilledAt, expiresAt: now + ttl };
    else if (stored) this.key = { ...this.key!, tokens: left, refilledAt };
  }

  reset(): void {
    this.key = undefined;
  }
}

describe("token-bucket with refill interval", () => {
  it("the memory store decides as the direct model (@upstash/ratelimit's script, written out)", async () => {
    const op = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          kind: fc.constant("limit" as const),
          dt: fc.integer({ min: 0, max: 1500 }),
          cost: fc.integer({ min: 1, max: 6 }),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant("peek" as const),
          dt: fc.integer({ min: 0, max: 1500 }),
          cost: fc.integer({ min: 1, max: 6 }),
        }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant("adjust" as const),
          dt: fc.integer({ min: 0, max: 1500 }),
          cost: fc.integer({ min: -8, max: 4 }),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant("wait" as const),
          // Long enough for a key to expire (ceil(burst/limit) periods at most).
          dt: fc.integer({ min: 0, max: 40_000 }),
          cost: fc.constant(0),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant("reset" as const),
          dt: fc.integer({ min: 0, max: 1500 }),
          cost: fc.constant(0),
        }),
      },
    );
    const seen = new Set<string>();
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 5 }),
        fc.constantFrom(1000, 333, 2500, 7),
        fc.integer({ min: 1, max: 8 }),
        fc.array(op, { minLength: 1, maxLength: 80 }),
        async (limit, period, burst, ops) => {
          let t = 1_700_006_400_000;
          const store = memoryStore({ now: () => t });
          const limiter = createLimiter({
            store,
            policy: {
              name: "p",
              algorithm: "token-bucket",
              refill: "interval",
              rules: [{ limit, period, burst }],
            },
          });
          const model = new IntervalBucketModel(limit, period, burst);
          for (const [i, o] of ops.entries()) {
            t += o.dt;
            const where = `limit ${limit} period ${period} burst ${burst}, op ${i} ${JSON.stringify(o)}`;
            const cost = Math.min(o.cost, burst);
            if (o.kind === "limit" || o.kind === "peek") {
              const d =
                o.kind === "limit"
                  ? limiter.limitSync("k", { cost })
                  : limiter.peekSync("k", { cost });
              const m = model.decide(t, cost, o.kind === "limit");
              // A peek that would pass reports what is left before the charge.
              if (o.kind === "peek" && m.allowed) m.remaining += cost;
              expect(
                {
                  allowed: d.allowed,
                  remaining: d.remaining,
                  retryAfterMs: d.retryAfterMs,
                  resetAfterMs: d.resetAfterMs,
                },
                where,
              ).toEqual(m);
              wellFormed(d);
              seen.add(`${o.kind} ${d.allowed}`);
            } else if (o.kind === "adjust") {
              await store.adjust(limiter.policy, "k", o.cost);
              model.adjust(t, o.cost);
            } else if (o.kind === "reset") {
              await limiter.reset("k");
              model.reset();
            }
          }
        },
      ),
      { numRuns: 400 },
    );
    for (const s of ["limit true", "limit false", "peek true", "peek false"])
      expect(seen).toContain(s);
  });
});
