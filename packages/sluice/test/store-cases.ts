/**
 * Random policies and operation sequences for the differential tests of the stores (memory vs
 * Redis, memory fast paths vs `evaluate()`): every algorithm, one to three rules, penalties
 * with and without `resetOnBlock`, first-request windows, token buckets refilled by interval,
 * and every store operation.
 */
import fc from "fast-check";
import {
  ALGORITHMS,
  type AlgorithmName,
  type Policy,
  type StoreDecision,
  ValidationError,
  definePolicy,
} from "../src/index.js";

const ruleArb = fc.record({
  limit: fc.integer({ min: 1, max: 12 }),
  period: fc.oneof(fc.integer({ min: 7, max: 5000 }), fc.constantFrom(1000, 60_000, 333, 1001)),
  burstExtra: fc.integer({ min: -3, max: 6 }),
});

const dt = (max = 700) => fc.integer({ min: 0, max });

/** One store operation, `dt` ms after the previous one. */
export const storeOpArb = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant("limit" as const),
      dt: dt(),
      cost: fc.integer({ min: 0, max: 4 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("peek" as const), dt: dt() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("adjust" as const),
      dt: dt(),
      delta: fc.integer({ min: -4, max: 4 }).filter((d) => d !== 0),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("reset" as const), dt: dt(3000) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("setCount" as const),
      dt: dt(),
      count: fc.nat(15),
      windowMs: fc.integer({ min: 0, max: 4000 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("release" as const), dt: dt(), lease: fc.nat(5) }),
  },
);

/** A random policy's makings and the operations to play on one key. */
export const storeCaseArb = fc.record({
  algorithm: fc.constantFrom<AlgorithmName>(...ALGORITHMS),
  rules: fc.array(ruleArb, { minLength: 1, maxLength: 3 }),
  /** Keep only the first rule (one-rule policies have paths of their own). */
  oneRule: fc.boolean(),
  block: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3000 })),
  /** With a block: the block forgets the counts. */
  resetOnBlock: fc.boolean(),
  /** For fixed-window: windows started by the first request. */
  firstRequest: fc.boolean(),
  /** For token-bucket: refilled by whole intervals from each key's anchor. */
  intervalRefill: fc.boolean(),
  ops: fc.array(storeOpArb, { minLength: 5, maxLength: 40 }),
});

/** A generated case. */
export type StoreCase = typeof storeCaseArb extends fc.Arbitrary<infer T> ? T : never;

/** The policy named `name` of a generated case, or undefined when it is not a valid policy. */
export function policyOfCase(c: StoreCase, name: string): Policy | undefined {
  const usesBurst = c.algorithm === "gcra" || c.algorithm === "token-bucket";
  const rules = (c.oneRule || c.algorithm === "concurrency" ? c.rules.slice(0, 1) : c.rules).map(
    (r) => ({
      limit: r.limit,
      period: r.period,
      ...(usesBurst ? { burst: Math.max(1, r.limit + r.burstExtra) } : {}),
    }),
  );
  try {
    return definePolicy({
      name,
      algorithm: c.algorithm,
      rules,
      ...(c.block > 0 ? { blockDuration: c.block } : {}),
      ...(c.block > 0 && c.resetOnBlock && c.algorithm !== "concurrency"
        ? { resetOnBlock: true }
        : {}),
      ...(c.firstRequest && c.algorithm === "fixed-window"
        ? { windowStart: "first-request" as const }
        : {}),
      ...(c.intervalRefill && c.algorithm === "token-bucket"
        ? { refill: "interval" as const }
        : {}),
    });
  } catch (err) {
    if (err instanceof ValidationError) return undefined;
    throw err;
  }
}

/**
 * What two stores must agree on in a decision; the lease id only with `lease` (its text is
 * each store's own).
 */
export function strip(d: StoreDecision, lease = false): unknown {
  const out = { allowed: d.allowed, rules: d.rules, blockedForMs: d.blockedForMs };
  return lease ? { ...out, leaseId: d.leaseId } : out;
}
