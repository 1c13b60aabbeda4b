/**
 * The policy kind of the live document: what a policy's live form holds, the draft's own keys,
 * and the draft's shadow counts under `decideLive`.
 */
import { describe, expect, it } from "vitest";
import { type Limiter, createLimiter } from "../limiter.js";
import type { Policy } from "../policy.js";
import { MemoryStore } from "../stores/memory.js";
import { buildLive, emptyDraftStats } from "./live-document.js";
import { type ManagedPolicyDocument, decideLive, policyLiveKind } from "./live.js";

const doc = (limit: number, extra: Partial<ManagedPolicyDocument> = {}): ManagedPolicyDocument => ({
  name: "api",
  rules: [{ limit, period: "1m" }],
  ...extra,
});

/** Limiters on one memory store, with the names of the policies they were made for. */
function limiters(): { made: string[]; limiterFor: (policy: Policy) => Limiter } {
  const store = new MemoryStore();
  const made: string[] = [];
  return {
    made,
    limiterFor: (policy) => {
      made.push(policy.name);
      return createLimiter({ store, policy });
    },
  };
}

describe("the policy kind", () => {
  it("holds the limiter, enabled and the apps; a draft counts on sluice.draft.<id>, never in shadow", () => {
    const { made, limiterFor } = limiters();
    const live = buildLive(
      policyLiveKind(limiterFor),
      {
        name: "api",
        doc: doc(2, { apps: ["web"], enabled: false }),
        version: 3,
        draft: { id: 9, doc: doc(1, { shadow: true }) },
      },
      undefined,
    );
    expect(made).toEqual(["api", "sluice.draft.9"]);
    expect(live.enabled).toBe(false);
    expect([...live.apps]).toEqual(["web"]);
    expect(live.policy.name).toBe("api");
    expect(live.draft!.limiter.policy).toMatchObject({ name: "sluice.draft.9", shadow: false });
    expect(live.draft!.stats).toEqual(emptyDraftStats());
  });

  it("decideLive counts the draft beside the enforced limiter; a cost the draft can never fit is a denial", async () => {
    const { limiterFor } = limiters();
    const live = buildLive(
      policyLiveKind(limiterFor),
      { name: "api", doc: doc(5), version: 1, draft: { id: 2, doc: doc(1) } },
      undefined,
    );
    const drafts: boolean[] = [];
    const hooks = { onDraft: (allowed: boolean) => drafts.push(allowed) };
    expect((await decideLive(live, "k", 1, hooks)).allowed).toBe(true);
    expect((await decideLive(live, "k", 1, hooks)).allowed).toBe(true);
    expect((await decideLive(live, "k", 3, hooks)).allowed).toBe(true);
    expect(drafts).toEqual([true, false, false]);
    expect(live.draft!.stats).toEqual({
      evaluated: 3,
      wouldDeny: 2,
      wouldDenyNewly: 2,
      wouldAllowNewly: 0,
    });
  });
});
