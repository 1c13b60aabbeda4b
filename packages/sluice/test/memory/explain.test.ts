/**
 * "Why was I limited" (`limiter.explain`) over the memory store, its clock injected: the rule
 * that denies and when it frees (what `limit()` then reports), the rule that will deny first,
 * penalty blocks, shadow, nothing charged, bad input named by field; and a managed policy's
 * explanation (enabled, the draft's answer on its own keys).
 */
import { describe, expect, it } from "vitest";
import {
  type PolicyInput,
  type SyncLimiter,
  ValidationError,
  createLimiter,
  memoryStore,
} from "../../src/index.js";
import { buildLive, decideLive, explainLive, policyLiveKind } from "../../src/service.js";
import type { ManagedPolicyDocument } from "../../src/service.js";
import { ManagedLimiter } from "../../src/policies/managed-limiter.js";
import { SluiceError } from "../../src/errors.js";
import type { Store } from "../../src/store.js";

const T0 = 1_700_006_400_000;

function setup(policy: PolicyInput): { limiter: SyncLimiter; advance(ms: number): void } {
  let t = T0;
  const limiter = createLimiter({ store: memoryStore({ now: () => t }), policy });
  return { limiter, advance: (ms) => (t += ms) };
}

/** Two rules: 10 an hour, and 3 a minute (the second runs out first). */
const TWO_RULES: PolicyInput = {
  name: "two",
  algorithm: "fixed-window",
  rules: [
    { limit: 10, period: "1h" },
    { limit: 3, period: "1m" },
  ],
};

describe("limiter.explain", () => {
  it("names the rule that denies, and frees when limit() says it will", async () => {
    const { limiter } = setup(TWO_RULES);
    for (let i = 0; i < 3; i++) expect(limiter.limitSync("u").allowed).toBe(true);
    const ex = await limiter.explain("u");
    expect(ex).toMatchObject({
      policy: "two",
      key: "u",
      cost: 1,
      allowedNow: false,
      denyingRule: 1,
      denyingNow: true,
      blockedForMs: 0,
      answeredBy: "store",
    });
    expect(ex.reason).toBeUndefined();
    expect(ex.rules).toEqual([
      {
        index: 0,
        limit: 10,
        periodMs: 3_600_000,
        burst: 10,
        remaining: 7,
        resetAfterMs: expect.any(Number),
        retryAfterMs: 0,
        denies: false,
      },
      {
        index: 1,
        limit: 3,
        periodMs: 60_000,
        burst: 3,
        remaining: 0,
        resetAfterMs: expect.any(Number),
        retryAfterMs: expect.any(Number),
        denies: true,
      },
    ]);
    expect(ex.freesInMs).toBeGreaterThan(0);
    expect(ex.freesInMs).toBe(ex.rules[1]!.retryAfterMs);
    const d = await limiter.limit("u");
    expect(d.allowed).toBe(false);
    expect(ex.freesInMs).toBe(d.retryAfterMs);
    expect(d.rule).toBe(ex.denyingRule);
  });

  it("when every rule passes: the rule that will deny first (least remaining, ties to the longer period)", async () => {
    const { limiter } = setup(TWO_RULES);
    limiter.limitSync("u");
    const ex = await limiter.explain("u");
    expect(ex).toMatchObject({ allowedNow: true, denyingRule: 1, denyingNow: false, freesInMs: 0 });
    expect(ex.rules.map((r) => [r.remaining, r.denies])).toEqual([
      [9, false],
      [2, false],
    ]);
    // Ties go to the longer period.
    const tie = setup({
      name: "tie",
      algorithm: "fixed-window",
      rules: [
        { limit: 5, period: "1m" },
        { limit: 5, period: "1h" },
        { limit: 5, period: "1s" },
      ],
    });
    expect((await tie.limiter.explain("x")).denyingRule).toBe(1);
  });

  it("explains a cost: a rule with less left than the cost denies it", async () => {
    const { limiter } = setup(TWO_RULES);
    limiter.limitSync("u", { cost: 2 });
    expect(await limiter.explain("u")).toMatchObject({ allowedNow: true, freesInMs: 0 });
    const two = await limiter.explain("u", { cost: 2 });
    expect(two).toMatchObject({ cost: 2, allowedNow: false, denyingRule: 1, denyingNow: true });
    expect(two.freesInMs).toBe((await limiter.limit("u", { cost: 2 })).retryAfterMs);
  });

  it("charges nothing: peek and the count of limit() are unchanged", async () => {
    const { limiter } = setup(TWO_RULES);
    limiter.limitSync("u");
    limiter.limitSync("u");
    const before = limiter.peekSync("u");
    for (let i = 0; i < 10; i++) await limiter.explain("u", { cost: 1 + (i % 3) });
    expect(limiter.peekSync("u")).toEqual(before);
    // One left under the minute's rule, as before: the next passes, the one after is denied.
    expect(limiter.limitSync("u").allowed).toBe(true);
    expect(limiter.limitSync("u").allowed).toBe(false);
  });

  it("shows a penalty block and its end, and the rule state under it", async () => {
    const { limiter, advance } = setup({
      name: "boxed",
      algorithm: "fixed-window",
      rules: [{ limit: 1, period: "1m" }],
      blockDuration: "5m",
    });
    limiter.limitSync("b");
    expect(limiter.limitSync("b").allowed).toBe(false); // starts the block
    const ex = await limiter.explain("b");
    expect(ex).toMatchObject({
      allowedNow: false,
      reason: "blocked",
      blockedForMs: 300_000,
      freesInMs: 300_000,
      denyingRule: 0,
      denyingNow: true,
    });
    advance(120_000); // the window has turned: only the block denies now
    const later = await limiter.explain("b");
    expect(later).toMatchObject({
      allowedNow: false,
      reason: "blocked",
      blockedForMs: 180_000,
      freesInMs: 180_000,
      denyingNow: false,
    });
    expect(later.rules[0]).toMatchObject({ remaining: 1, denies: false });
    expect(later.freesInMs).toBe(limiter.peekSync("b").retryAfterMs);
    advance(180_000);
    expect(await limiter.explain("b")).toMatchObject({ allowedNow: true, blockedForMs: 0 });
  });

  it("a shadow policy: the request passes, the rule that would deny is named", async () => {
    const { limiter } = setup({ ...TWO_RULES, name: "quiet", shadow: true });
    for (let i = 0; i < 3; i++) limiter.limitSync("s");
    expect(await limiter.explain("s")).toMatchObject({
      allowedNow: true,
      reason: "shadow",
      denyingRule: 1,
      denyingNow: true,
      freesInMs: 0,
    });
  });

  it("refuses a bad key or cost, naming the field", async () => {
    const { limiter } = setup(TWO_RULES);
    const issue = async (p: Promise<unknown>) => {
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ValidationError);
      const v = err as ValidationError;
      return { code: v.code, path: v.issues[0]!.path, message: v.issues[0]!.message };
    };
    expect(await issue(limiter.explain(""))).toMatchObject({ code: "SLUICE_ERR_KEY", path: "key" });
    // @ts-expect-error: a key must be a string
    expect(await issue(limiter.explain(42))).toMatchObject({ path: "key" });
    for (const cost of [0, -1, 1.5, Number.NaN])
      expect(await issue(limiter.explain("k", { cost }))).toMatchObject({
        code: "SLUICE_ERR_COST",
        path: "cost",
      });
    expect(await issue(limiter.explain("k", { cost: 4 }))).toMatchObject({
      path: "cost",
      message: expect.stringContaining("can never fit"),
    });
  });
});

describe("a managed policy's explanation", () => {
  function managed(doc: ManagedPolicyDocument, draft?: ManagedPolicyDocument) {
    let t = T0;
    const store = memoryStore({ now: () => t });
    const kind = policyLiveKind((policy) => createLimiter({ store, policy }));
    const live = buildLive(
      kind,
      { name: doc.name, doc, version: 1, draft: draft ? { id: 7, doc: draft } : undefined },
      undefined,
    );
    return { live, store, advance: (ms: number) => (t += ms) };
  }
  const api = (
    limit: number,
    more: Partial<ManagedPolicyDocument> = {},
  ): ManagedPolicyDocument => ({
    name: "api",
    algorithm: "fixed-window",
    rules: [{ limit, period: "1m" }],
    ...more,
  });

  it("gives the draft's answer beside the live one, the draft peeked on its own keys", async () => {
    const { live } = managed(api(3), api(1));
    await decideLive(live, "k", 1);
    const ex = await explainLive(live, "k");
    expect(ex).toMatchObject({
      policy: "api",
      enabled: true,
      allowedNow: true,
      rules: [{ remaining: 2, denies: false }],
      draft: {
        id: 7,
        allowedNow: false,
        explanation: {
          policy: "sluice.draft.7",
          allowedNow: false,
          denyingRule: 0,
          denyingNow: true,
          rules: [{ limit: 1, remaining: 0, denies: true }],
        },
      },
    });
    expect(ex.draft!.explanation!.freesInMs).toBe(
      (await live.draft!.limiter.peek("k")).retryAfterMs,
    );
    // Nothing charged, on either set of keys.
    expect((await live.limiter.peek("k")).remaining).toBe(2);
    expect((await live.draft!.limiter.peek("k")).allowed).toBe(false);
  });

  it("a cost the draft can never fit: the draft denies, without an explanation", async () => {
    const { live } = managed(api(3), api(1));
    const ex = await explainLive(live, "k", { cost: 2 });
    expect(ex.allowedNow).toBe(true);
    expect(ex.draft).toEqual({ id: 7, allowedNow: false });
  });

  it("a disabled policy allows; its counters are shown as they stand", async () => {
    const { live } = managed(api(1));
    await live.limiter.limit("k");
    const off = managed(api(1, { enabled: false }));
    await off.live.limiter.limit("k");
    const ex = await explainLive(off.live, "k");
    expect(ex).toMatchObject({
      enabled: false,
      allowedNow: true,
      reason: "disabled",
      freesInMs: 0,
      rules: [{ remaining: 0, denies: true }],
    });
    expect(ex.draft).toBeUndefined();
    await expect(explainLive(off.live, "")).rejects.toMatchObject({ code: "SLUICE_ERR_KEY" });
  });

  it("ManagedLimiter.explain is the current version's, and refuses a policy no longer granted", async () => {
    const { live, store } = managed(api(2), api(5));
    let set = new Map([["api", live]]);
    const limiter = new ManagedLimiter(
      {
        get live() {
          return set;
        },
        store: store as Store,
        hooks: {},
        notFound: (name) => new SluiceError("SLUICE_ERR_POLICY_NOT_FOUND", `no ${name}`),
      },
      "api",
      live,
    );
    await limiter.limit("k");
    await limiter.limit("k");
    expect(await limiter.explain("k")).toMatchObject({
      allowedNow: false,
      enabled: true,
      denyingRule: 0,
      draft: { id: 7, allowedNow: true, explanation: { rules: [{ remaining: 3 }] } },
    });
    set = new Map();
    await expect(limiter.explain("k")).rejects.toMatchObject({
      code: "SLUICE_ERR_POLICY_NOT_FOUND",
    });
  });
});
