/**
 * The memory store's fast paths against its reference. The store decides a one-rule policy in
 * place (runSingle, runSingleVar: no KeyState, no copied log) and counts the drop-in faces'
 * counters without building a decision (countSync); `evaluate()` — what the Redis script is a
 * port of — is the semantics. Random policies and operations with an injected clock must give
 * what `evaluate()` over a plain map of key states gives, and countSync what decideSync gives.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ruleDecisions } from "../../src/decision.js";
import {
  type KeyState,
  adjustState,
  evaluate,
  releaseState,
  setCountState,
} from "../../src/evaluate.js";
import {
  ALGORITHMS,
  type AlgorithmName,
  type Policy,
  type StoreDecision,
  definePolicy,
  memoryStore,
  policyCapacity,
} from "../../src/index.js";
import { MAX_LIMIT } from "../../src/policy.js";
import type { WindowCount } from "../../src/stores/memory.js";
import { policyOfCase, storeCaseArb, storeOpArb, strip } from "../store-cases.js";

/** The reference: evaluate() and friends over a map of key states (no fast path). */
class Reference {
  private readonly keys = new Map<string, { e: number; s: KeyState }>();
  private leaseSeq = 0;

  constructor(private readonly now: () => number) {}

  private current(key: string): KeyState | undefined {
    const entry = this.keys.get(key);
    return entry !== undefined && entry.e > this.now() ? entry.s : undefined;
  }

  private write(key: string, s: KeyState, ttlMs: number): void {
    if (ttlMs > 0) this.keys.set(key, { e: this.now() + ttlMs, s });
    else this.keys.delete(key);
  }

  decide(policy: Policy, key: string, cost: number, commit: boolean): StoreDecision {
    const leaseId = policy.algorithm === "concurrency" && commit ? ++this.leaseSeq : 0;
    const ev = evaluate(policy, this.current(key), this.now(), cost, commit, leaseId);
    if (commit && ev.changed) this.write(key, ev.next, ev.ttlMs);
    const out = {
      allowed: ev.allowed,
      rules: ruleDecisions(policy, ev.rules),
      blockedForMs: ev.blockedForMs,
    };
    return leaseId > 0 && ev.allowed && cost > 0 ? { ...out, leaseId: String(leaseId) } : out;
  }

  adjust(policy: Policy, key: string, delta: number): void {
    const a = adjustState(policy, this.current(key), this.now(), delta);
    this.write(key, a.next, a.ttlMs);
  }

  release(key: string, leaseId: string): boolean {
    const cur = this.current(key);
    if (cur === undefined) return false;
    const r = releaseState(cur, this.now(), Number(leaseId));
    if (r.released) this.write(key, r.next, r.ttlMs);
    return r.released;
  }

  reset(key: string): void {
    this.keys.delete(key);
  }

  setCount(policy: Policy, key: string, count: number, windowMs: number): void {
    const a = setCountState(policy, this.current(key), this.now(), count, windowMs);
    this.write(key, a.next, a.ttlMs);
  }
}

describe("memory store fast paths", () => {
  it("every policy decides as evaluate() over a map of key states does", () => {
    let t = 1_700_006_400_000;
    let seq = 0;
    const seen = new Set<string>();
    fc.assert(
      fc.property(storeCaseArb, (c) => {
        const policy = policyOfCase(c, `p${++seq}`);
        if (policy === undefined) return;
        const cap = policyCapacity(policy);
        const mem = memoryStore({ now: () => t });
        const ref = new Reference(() => t);
        const leases: string[] = [];
        const key = "k";
        const shape = `${policy.algorithm}${policy.refill === "interval" ? " interval" : ""}${policy.rules.length === 1 ? " one rule" : ""}`;
        for (const [i, op] of c.ops.entries()) {
          t += op.dt;
          const where = `${policy.algorithm} ${JSON.stringify(policy.rules)} block ${policy.blockMs} reset ${policy.resetOnBlock}, op ${i} ${JSON.stringify(op)}`;
          switch (op.kind) {
            case "limit": {
              const cost = Math.min(op.cost, cap);
              const a = mem.decideSync(policy, key, cost);
              const b = ref.decide(policy, key, cost, true);
              expect(strip(a, true), where).toEqual(strip(b, true));
              if (a.leaseId !== undefined) leases.push(a.leaseId);
              if (!a.allowed) seen.add(`${shape} denied${a.blockedForMs > 0 ? " blocked" : ""}`);
              break;
            }
            case "peek":
              expect(strip(mem.peekSync(policy, key, 1)), where).toEqual(
                strip(ref.decide(policy, key, 1, false)),
              );
              break;
            case "adjust":
              mem.adjustSync(policy, key, op.delta);
              ref.adjust(policy, key, op.delta);
              break;
            case "reset":
              mem.resetSync(policy, key);
              ref.reset(key);
              break;
            case "setCount":
              // Only first-request fixed windows have it (the limiter refuses the others).
              if (policy.windowStart !== "first-request") break;
              mem.setCountSync(policy, key, op.count, op.windowMs);
              ref.setCount(policy, key, op.count, op.windowMs);
              break;
            case "release": {
              if (policy.algorithm !== "concurrency") break;
              const id = leases[op.lease % Math.max(1, leases.length)] ?? "0";
              expect(mem.releaseSync(policy, key, id), where).toBe(ref.release(key, id));
              break;
            }
          }
        }
      }),
      { numRuns: 1200 },
    );
    // The runs went through the one-rule fast paths' denials and penalty blocks.
    for (const alg of ALGORITHMS) expect(seen).toContain(`${alg} one rule denied`);
    expect(seen).toContain("token-bucket interval one rule denied");
    expect(seen).toContain("token-bucket interval denied");
    for (const alg of ["sliding-log", "concurrency", "gcra", "fixed-window"])
      expect(seen).toContain(`${alg} one rule denied blocked`);
  });

  it("countSync counts as decideSync decides, and leaves the same state", () => {
    let t = 1_700_006_400_000;
    let seq = 0;
    let counted = 0;
    let refused = 0;
    const policyArb = fc.record({
      /** A counting policy (the faces'), a small limit to reach, or another algorithm. */
      kind: fc.constantFrom("counter", "small", "other"),
      limit: fc.integer({ min: 1, max: 8 }),
      period: fc.integer({ min: 5, max: 3000 }),
      algorithm: fc.constantFrom<AlgorithmName>("gcra", "sliding-log", "fixed-window"),
    });
    const countOps = fc.array(storeOpArb, { minLength: 3, maxLength: 40 });
    fc.assert(
      fc.property(policyArb, countOps, (p, ops) => {
        const policy = definePolicy(
          p.kind === "other"
            ? {
                name: `c${++seq}`,
                algorithm: p.algorithm,
                rules: [{ limit: p.limit, period: p.period }],
              }
            : {
                name: `c${++seq}`,
                algorithm: "fixed-window",
                windowStart: "first-request",
                rules: [
                  {
                    limit: p.kind === "counter" ? MAX_LIMIT : p.limit,
                    period: p.period,
                  },
                ],
              },
        );
        const rule = policy.rules[0]!;
        const counting = memoryStore({ now: () => t });
        const deciding = memoryStore({ now: () => t });
        const out: WindowCount = { allowed: false, count: -1, resetAfterMs: -1, nowMs: -1 };
        for (const [i, op] of ops.entries()) {
          t += op.dt;
          const where = `${JSON.stringify(p)} op ${i} ${JSON.stringify(op)}`;
          switch (op.kind) {
            case "limit": {
              const cost = Math.min(op.cost, policyCapacity(policy));
              counting.countSync(policy, "k", cost, out);
              const d = deciding.decideSync(policy, "k", cost);
              const r = d.rules[0]!;
              expect(out, where).toEqual({
                allowed: d.allowed,
                count: r.limit - r.remaining,
                resetAfterMs: Math.max(r.resetAfterMs, d.blockedForMs),
                nowMs: t,
              });
              if (d.allowed) counted++;
              else refused++;
              break;
            }
            case "adjust":
              counting.adjustSync(policy, "k", op.delta);
              deciding.adjustSync(policy, "k", op.delta);
              break;
            case "setCount":
              counting.setCountSync(policy, "k", op.count, op.windowMs);
              deciding.setCountSync(policy, "k", op.count, op.windowMs);
              break;
            case "reset":
              counting.resetSync(policy, "k");
              deciding.resetSync(policy, "k");
              break;
          }
          // The same state: every cost's peek agrees.
          for (let cost = 0; cost <= Math.min(3, rule.limit); cost++)
            expect(counting.peekSync(policy, "k", cost), where).toEqual(
              deciding.peekSync(policy, "k", cost),
            );
        }
      }),
      { numRuns: 400 },
    );
    expect(counted).toBeGreaterThan(1000);
    expect(refused).toBeGreaterThan(50);
  });
});
