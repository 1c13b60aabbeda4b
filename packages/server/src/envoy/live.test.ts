/**
 * The Envoy domain kind of the live document: the enforced limits count on `envoy.…` policy
 * names and a draft's on `sluice.draft.envoy.<id>.…` (the layout the counters of a running
 * service are kept under, so it must not move), Envoy's overrides decided in a draft count on
 * the draft's names too, and a draft's shadow counts are taken as a policy draft's are.
 */
import { type Limiter, type Policy, createLimiter, memoryStore } from "sluice";
import { buildLive } from "sluice/service";
import { describe, expect, it } from "vitest";
import { parseEnvoyFile } from "./config.js";
import { type LimitUse, envoyDomainLiveKind } from "./live.js";
import { CODE, RateLimitService, type RlsRequest } from "./rls.js";

const NOW = Date.UTC(2030, 0, 1, 0, 0, 30);

function domain(requestsPerDay: number) {
  const parsed = parseEnvoyFile(`
domain: api
descriptors:
  - key: remote_address
    rate_limit: { unit: day, requests_per_unit: ${requestsPerDay} }
`);
  if (!("docs" in parsed)) throw new Error(JSON.stringify(parsed.issues));
  return parsed.docs[0]!;
}

/** The kind over one memory store, and every limiter it made with what it was for. */
function kindOnOneStore() {
  const store = memoryStore({ now: () => NOW });
  const made: Array<{ name: string; use: LimitUse }> = [];
  const kind = envoyDomainLiveKind((policy: Policy, use: LimitUse): Limiter => {
    made.push({ name: policy.name, use });
    return createLimiter({ store, policy });
  });
  return { store, made, kind };
}

const ask = (descriptor: RlsRequest["descriptors"][number]): RlsRequest => ({
  domain: "api",
  descriptors: [descriptor],
  hitsAddend: 1,
});

describe("the Envoy domain kind", () => {
  it("compiles the enforced limits on envoy.… names and a draft's on sluice.draft.envoy.<id>.…", () => {
    const { made, kind } = kindOnOneStore();
    const live = buildLive(
      kind,
      { name: "api", doc: domain(2), version: 3, draft: { id: 9, doc: domain(1) } },
      undefined,
    );
    expect(live.compiled.prefix).toBe("envoy.");
    expect(live.draft!.compiled.prefix).toBe("sluice.draft.envoy.9.");
    expect(made).toEqual([
      {
        name: expect.stringMatching(/^envoy\.api\.remote_address:[0-9a-f]{12}$/),
        use: { domain: "api", draft: false },
      },
      {
        name: expect.stringMatching(/^sluice\.draft\.envoy\.9\.api\.remote_address:[0-9a-f]{12}$/),
        use: { domain: "api", draft: true },
      },
    ]);
    // The same path hashes alike: only the prefix tells the draft's counters apart.
    expect(made[1]!.name.slice("sluice.draft.envoy.9.".length)).toBe(
      made[0]!.name.slice("envoy.".length),
    );
  });

  it("a draft decides beside the enforced domain on counters of its own, and counts what it would change", async () => {
    const { store, kind } = kindOnOneStore();
    const live = buildLive(
      kind,
      { name: "api", doc: domain(2), version: 1, draft: { id: 9, doc: domain(1) } },
      undefined,
    );
    const errors: unknown[] = [];
    const service = new RateLimitService({
      domain: (name) => (name === "api" ? live : undefined),
      store,
      headers: false,
      now: () => NOW,
      onDraftError: (err) => errors.push(err),
    });
    const codes: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await service.answer(ask({ entries: [{ key: "remote_address", value: "a" }] }));
      codes.push(res.overallCode);
    }
    // Enforced: 2 a day, charged as without a draft; the draft (1 a day) would deny the 2nd too.
    expect(codes).toEqual([CODE.OK, CODE.OK, CODE.OVER_LIMIT]);
    expect(live.draft!.stats).toEqual({
      evaluated: 3,
      wouldDeny: 2,
      wouldDenyNewly: 1,
      wouldAllowNewly: 0,
    });
    expect(errors).toEqual([]);
  });

  it("Envoy's overrides decided in a draft count on the draft's names, never the enforced ones", async () => {
    const { store, kind } = kindOnOneStore();
    const live = buildLive(
      kind,
      { name: "api", doc: domain(2), version: 1, draft: { id: 9, doc: domain(1) } },
      undefined,
    );
    const service = new RateLimitService({
      domain: (name) => (name === "api" ? live : undefined),
      store,
      headers: false,
      now: () => NOW,
    });
    // A descriptor no limit matches, with an override of 2 a minute: were the draft to count
    // on the enforced override's counter, the second request would find it spent.
    const override = {
      entries: [{ key: "tenant", value: "t" }],
      limit: { requestsPerUnit: 2, unit: 2 },
    };
    const codes: number[] = [];
    for (let i = 0; i < 3; i++) codes.push((await service.answer(ask(override))).overallCode);
    expect(codes).toEqual([CODE.OK, CODE.OK, CODE.OVER_LIMIT]);
    expect(live.draft!.stats).toEqual({
      evaluated: 3,
      wouldDeny: 1,
      wouldDenyNewly: 0,
      wouldAllowNewly: 0,
    });
  });
});
