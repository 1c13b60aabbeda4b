/**
 * Per-key overrides, asserted alike on every store: a key with an override gets its rules and
 * every other key the policy's; the override counts on the key's own state (set, changed and
 * deleted between decisions, the key keeps its counts); `explain` says so.
 */
import { expect, it } from "vitest";
import { type Limiter, type PolicyInput, type Store, createLimiter } from "../../src/index.js";

/** A store of the suite's kind with time injected (`time.t`), and a fresh policy name. */
export type StoreAt = () => { store: Store; time: { t: number }; name: string };

export function overrideCases(storeAt: StoreAt): void {
  const policy = (name: string): PolicyInput => ({
    name,
    algorithm: "fixed-window",
    rules: [{ limit: 2, period: "1m" }],
  });
  const allowed = async (limiter: Limiter, key: string, n: number) => {
    const out: boolean[] = [];
    for (let i = 0; i < n; i++) out.push((await limiter.limit(key)).allowed);
    return out.filter(Boolean).length;
  };

  it("a key with an override gets its rules; every other key the policy's", async () => {
    const { store, name } = storeAt();
    const limiter = createLimiter({
      store,
      policy: policy(name),
      overrides: { "tenant:big": { rules: [{ limit: 5, period: "1m" }] } },
    });
    expect(await allowed(limiter, "tenant:big", 8)).toBe(5);
    expect(await allowed(limiter, "tenant:small", 8)).toBe(2);
    const d = await limiter.limit("tenant:big");
    expect(d).toMatchObject({ allowed: false, limit: 5, policy: name });
    expect(limiter.override("tenant:big")).toEqual([{ limit: 5, period: 60_000 }]);
    expect(limiter.override("tenant:small")).toBeUndefined();
  });

  it("set, changed and deleted live, on the key's own state (its counts kept)", async () => {
    const { store, name } = storeAt();
    const limiter = createLimiter({ store, policy: policy(name) });
    expect(await allowed(limiter, "acme", 3)).toBe(2);
    limiter.setOverride("acme", [{ limit: 4, period: "1m" }]);
    // Two already counted in this window: two more pass under the override's 4.
    expect(await allowed(limiter, "acme", 5)).toBe(2);
    limiter.setOverride("acme", [{ limit: 6, period: "1m" }]);
    expect(await allowed(limiter, "acme", 5)).toBe(2);
    expect(limiter.deleteOverride("acme")).toBe(true);
    expect(limiter.deleteOverride("acme")).toBe(false);
    expect((await limiter.limit("acme")).limit).toBe(2);
    expect(await allowed(limiter, "acme", 1)).toBe(0);
  });

  it("explain says when a key's answer comes from an override", async () => {
    const { store, name } = storeAt();
    const limiter = createLimiter({ store, policy: policy(name) });
    limiter.setOverride("acme", [{ limit: 9, period: "1m" }]);
    await limiter.limit("acme");
    const e = await limiter.explain("acme");
    expect(e.override).toBe(true);
    expect(e.rules[0]).toMatchObject({ limit: 9, remaining: 8 });
    const other = await limiter.explain("other");
    expect(other.override).toBeUndefined();
    expect(other.rules[0]).toMatchObject({ limit: 2, remaining: 2 });
  });

  it("a cost is checked against the key's override", async () => {
    const { store, name } = storeAt();
    const limiter = createLimiter({ store, policy: policy(name) });
    limiter.setOverride("acme", [{ limit: 10, period: "1m" }]);
    expect((await limiter.limit("acme", { cost: 7 })).allowed).toBe(true);
    await expect(limiter.limit("other", { cost: 7 })).rejects.toMatchObject({
      code: "SLUICE_ERR_COST",
    });
    // A refund and a reset act on the key's state under its override.
    await limiter.refund("acme", 7);
    expect((await limiter.peek("acme")).remaining).toBe(10);
    await limiter.limit("acme", { cost: 10 });
    await limiter.reset("acme");
    expect((await limiter.peek("acme")).remaining).toBe(10);
  });

  it("refuses a bad override naming the field, and keeps the good one", async () => {
    const { store, name } = storeAt();
    expect(() =>
      createLimiter({
        store,
        policy: policy(name),
        overrides: { "tenant:big": { rules: [{ limit: -1, period: "1m" }] } },
      }),
    ).toThrow(/overrides\.tenant:big\.rules\.0\.limit/);
    const limiter = createLimiter({
      store,
      policy: policy(name),
      overrides: { acme: { rules: [{ limit: 3, period: "1m" }] } },
    });
    let caught: unknown;
    try {
      limiter.setOverride("acme", [{ limit: 3, period: "soon" as never }]);
    } catch (err) {
      caught = err;
    }
    expect(caught).toMatchObject({
      code: "SLUICE_ERR_POLICY",
      issues: [{ path: "overrides.acme.rules.0.period" }],
    });
    // burst is not a fixed-window field: refused as the policy would refuse it.
    expect(() => limiter.setOverride("acme", [{ limit: 3, period: "1m", burst: 9 }])).toThrow(
      /overrides\.acme\.rules\.0/,
    );
    expect(() => limiter.setOverride("acme", [])).toThrow(/overrides\.acme\.rules/);
    expect(limiter.override("acme")).toEqual([{ limit: 3, period: 60_000 }]);
    expect(await allowed(limiter, "acme", 5)).toBe(3);
  });
}
