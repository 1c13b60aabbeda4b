/**
 * The generic live document, on a kind of its own (a document is a number; its live form says
 * which build made it): what is kept by version and by draft id, what a document that cannot
 * be built keeps, and how the shadow counts are taken. The two real kinds (policies, Envoy
 * domains) are held to the same behaviour by their own suites.
 */
import { describe, expect, it } from "vitest";
import {
  type LiveDocument,
  type LiveKind,
  type LiveSource,
  buildLive,
  buildLiveSet,
  draftPolicyName,
  draftPolicyPrefix,
  emptyDraftStats,
  restoreDraftStats,
  shadowDraft,
  takeDraftStats,
} from "./live-document.js";

interface Form {
  readonly value: number;
  readonly build: number;
}

/** A kind whose documents are numbers: a negative one does not validate. */
function numbers(): LiveKind<number, Form> & { builds: string[] } {
  const builds: string[] = [];
  const form = (doc: number, what: string): Form => {
    if (doc < 0) throw new Error(`${what} ${doc} is negative`);
    builds.push(`${what} ${doc}`);
    return { value: doc, build: builds.length };
  };
  return {
    builds,
    live: (doc) => form(doc, "live"),
    draft: (doc, id) => form(doc, `draft#${id}`),
  };
}

const source = (
  doc: number,
  version: number,
  draft?: LiveSource<number>["draft"],
): LiveSource<number> => ({ name: "n", doc, version, draft });

describe("the draft's names", () => {
  it("are spelled under one prefix: sluice.draft.<id>, and sluice.draft.<kind>.<id>. for a kind of several", () => {
    expect(draftPolicyName(7)).toBe("sluice.draft.7");
    expect(draftPolicyPrefix("envoy", 7)).toBe("sluice.draft.envoy.7.");
  });
});

describe("buildLive", () => {
  it("builds a version once: the same version and draft give back the same live document", () => {
    const kind = numbers();
    const first = buildLive(kind, source(1, 1, { id: 5, doc: 2 }), undefined);
    expect(first).toMatchObject({ value: 1, version: 1, draft: { value: 2, id: 5 } });
    expect(first.draft!.stats).toEqual(emptyDraftStats());
    expect(buildLive(kind, source(1, 1, { id: 5, doc: 2 }), first)).toBe(first);
    expect(kind.builds).toEqual(["live 1", "draft#5 2"]);
  });

  it("a new version is built anew and keeps the draft of the same id, counts and all", () => {
    const kind = numbers();
    const first = buildLive(kind, source(1, 1, { id: 5, doc: 2 }), undefined);
    first.draft!.stats.evaluated = 3;
    const second = buildLive(kind, source(10, 2, { id: 5, doc: 2 }), first);
    expect(second).toMatchObject({ value: 10, version: 2 });
    expect(second.draft).toBe(first.draft);
    expect(kind.builds).toEqual(["live 1", "draft#5 2", "live 10"]);
  });

  it("a new draft beside the same version keeps the version's form and starts from zero counts", () => {
    const kind = numbers();
    const first = buildLive(kind, source(1, 1, { id: 5, doc: 2 }), undefined);
    first.draft!.stats.evaluated = 3;
    const second = buildLive(kind, source(1, 1, { id: 6, doc: 3 }), first);
    expect(second).not.toBe(first);
    expect(second.build).toBe(first.build);
    expect(second.draft).toMatchObject({ id: 6, value: 3, stats: emptyDraftStats() });
    const without = buildLive(kind, source(1, 1), second);
    expect(without.draft).toBeUndefined();
    expect(without.build).toBe(first.build);
  });

  it('"keep" keeps the draft the document ran before (its record could not be read)', () => {
    const kind = numbers();
    const first = buildLive(kind, source(1, 1, { id: 5, doc: 2 }), undefined);
    expect(buildLive(kind, source(1, 1, "keep"), first)).toBe(first);
    expect(buildLive(kind, source(4, 2, "keep"), first).draft).toBe(first.draft);
    expect(buildLive(kind, source(4, 2, "keep"), undefined).draft).toBeUndefined();
  });

  it("throws when the version or the draft cannot be built", () => {
    const kind = numbers();
    expect(() => buildLive(kind, source(-1, 1), undefined)).toThrow("live -1 is negative");
    expect(() => buildLive(kind, source(1, 1, { id: 5, doc: -2 }), undefined)).toThrow(
      "draft#5 -2 is negative",
    );
  });
});

describe("buildLiveSet", () => {
  it("builds each document from its previous form; one that cannot be built keeps it, and is told", () => {
    const kind = numbers();
    const before = buildLiveSet(
      kind,
      [
        { name: "a", doc: 1, version: 1, draft: undefined },
        { name: "b", doc: 2, version: 1, draft: undefined },
      ],
      new Map(),
      () => {},
    );
    const told: string[] = [];
    const after = buildLiveSet(
      kind,
      [
        { name: "a", doc: 1, version: 1, draft: undefined },
        { name: "b", doc: -2, version: 2, draft: undefined },
        { name: "c", doc: -3, version: 1, draft: undefined },
      ],
      before,
      (err, s, kept) => told.push(`${s.name} ${String(err)} ${kept?.version ?? "none"}`),
    );
    expect(after.get("a")).toBe(before.get("a"));
    expect(after.get("b")).toBe(before.get("b"));
    expect(after.has("c")).toBe(false);
    expect(told).toEqual(["b Error: live -2 is negative 1", "c Error: live -3 is negative none"]);
  });
});

describe("shadowDraft", () => {
  const allows = (answer: string) => answer === "ok";

  it("answers the enforced verdict and counts what the draft would have changed", async () => {
    const stats = emptyDraftStats();
    const verdicts: boolean[] = [];
    const hooks = { onDraft: (allowed: boolean) => verdicts.push(allowed) };
    const pairs: Array<[string, string]> = [
      ["ok", "ok"],
      ["ok", "over"],
      ["over", "ok"],
      ["over", "over"],
      ["ok", "over"],
    ];
    for (const [enforced, draft] of pairs)
      expect(await shadowDraft(stats, Promise.resolve(enforced), () => draft, allows, hooks)).toBe(
        enforced,
      );
    expect(stats).toEqual({ evaluated: 5, wouldDeny: 3, wouldDenyNewly: 2, wouldAllowNewly: 1 });
    expect(verdicts).toEqual([true, false, true, false, false]);
  });

  it("a draft that throws or rejects counts nothing, is told, and never fails the answer", async () => {
    const stats = emptyDraftStats();
    const errors: unknown[] = [];
    const hooks = {
      onDraftError: (err: unknown) => {
        errors.push(err);
        throw new Error("a hook that throws");
      },
    };
    const thrown = new Error("thrown");
    const rejected = new Error("rejected");
    expect(
      await shadowDraft(
        stats,
        "ok",
        () => {
          throw thrown;
        },
        allows,
        hooks,
      ),
    ).toBe("ok");
    expect(await shadowDraft(stats, "over", () => Promise.reject(rejected), allows, hooks)).toBe(
      "over",
    );
    expect(stats).toEqual(emptyDraftStats());
    expect(errors).toContain(thrown);
    expect(errors).toContain(rejected);
  });

  it("a failing enforced answer fails the request", async () => {
    const stats = emptyDraftStats();
    await expect(
      shadowDraft(stats, Promise.reject(new Error("store down")), () => "ok", allows),
    ).rejects.toThrow("store down");
  });
});

describe("takeDraftStats and restoreDraftStats", () => {
  it("take the counts of every draft that has some, zeroing them, and put them back", () => {
    const kind = numbers();
    const docs: LiveDocument<Form>[] = [
      buildLive(kind, source(1, 1, { id: 5, doc: 2 }), undefined),
      buildLive(kind, source(1, 1, { id: 6, doc: 2 }), undefined),
      buildLive(kind, source(1, 1), undefined),
    ];
    docs[0]!.draft!.stats.evaluated = 4;
    docs[0]!.draft!.stats.wouldDeny = 1;
    const taken = takeDraftStats(docs);
    expect(taken.map((t) => [t.policy, t.draft.id, t.delta])).toEqual([
      [docs[0], 5, { evaluated: 4, wouldDeny: 1, wouldDenyNewly: 0, wouldAllowNewly: 0 }],
    ]);
    expect(docs[0]!.draft!.stats).toEqual(emptyDraftStats());
    docs[0]!.draft!.stats.evaluated = 1;
    restoreDraftStats(taken);
    expect(docs[0]!.draft!.stats).toEqual({
      evaluated: 5,
      wouldDeny: 1,
      wouldDenyNewly: 0,
      wouldAllowNewly: 0,
    });
  });
});
