/**
 * A versioned document as it is enforced, whatever its kind: the kind's live form of the
 * enforced version (built once per version and kept while the version stands), and beside it
 * the draft's, built on counters of its own and counting what it would have changed. A policy
 * (policies/live.ts: its limiter) and an Envoy domain (the server's envoy/live.ts: its compiled
 * tree of limits) are two kinds of it; each supplies only how a document becomes its live form
 * ({@link LiveKind}) and whether an answer allows ({@link shadowDraft}), and everything else —
 * reuse by version, the draft beside it, the shadow counts and their reporting — is here, once.
 */

/**
 * Drafts count on keys of their own, under this reserved prefix and the draft's id
 * (`sluice.draft.7`, {@link draftPolicyName}), so that a draft never charges the enforced
 * version.
 */
export const DRAFT_POLICY_PREFIX = "sluice.draft.";

/** The policy name a draft of a policy counts under: `sluice.draft.<id>`. */
export function draftPolicyName(draftId: number): string {
  return `${DRAFT_POLICY_PREFIX}${draftId}`;
}

/**
 * The prefix of the policy names of a draft that holds several policies (an Envoy domain's
 * limits): `sluice.draft.<kind>.<id>.`, so its counters are its own.
 */
export function draftPolicyPrefix(kind: string, draftId: number): string {
  return `${DRAFT_POLICY_PREFIX}${kind}.${draftId}.`;
}

/** What a draft would have done on live traffic. */
export interface DraftStats {
  /** Requests evaluated against the draft. */
  evaluated: number;
  /** Requests the draft would have denied. */
  wouldDeny: number;
  /** Of those, how many the enforced version allowed (the change in behaviour). */
  wouldDenyNewly: number;
  /** Requests the draft would have allowed but the enforced version denied. */
  wouldAllowNewly: number;
}

/** Zero counts. */
export function emptyDraftStats(): DraftStats {
  return { evaluated: 0, wouldDeny: 0, wouldDenyNewly: 0, wouldAllowNewly: 0 };
}

/** A draft as it is read: its id (unique over every kind) and its document. */
export interface DraftSource<D = unknown> {
  readonly id: number;
  readonly doc: D;
}

/** A draft as it runs: the kind's live form `DF`, with its id and the counts not yet reported. */
export type LiveDocumentDraft<DF> = DF & {
  readonly id: number;
  /** This process's counts not yet added to the shared totals (see {@link takeDraftStats}). */
  readonly stats: DraftStats;
};

/**
 * A document as it is enforced: the kind's live form `F` of its version, with the version and
 * the draft running beside it (its live form `DF`).
 */
export type LiveDocument<F, DF = F> = F & {
  /** The document's version (a new one for every change of the document). */
  readonly version: number;
  readonly draft: LiveDocumentDraft<DF> | undefined;
};

/** What a kind supplies to be live: how its document becomes its live form, enforced or drafted. */
export interface LiveKind<D, F, DF = F> {
  /** The live form of an enforced version; throws when the document does not validate. */
  live(doc: D): F;
  /**
   * The live form of a draft, on counters of its own ({@link draftPolicyName}); throws when the
   * document does not validate.
   */
  draft(doc: D, draftId: number): DF;
  /**
   * Optional: what a new version's form takes over from the form of the version before it
   * (a policy's per-key overrides), called once the new form is built.
   */
  carry?(next: F, previous: F): void;
}

/** One document as it is read, for {@link buildLive}. */
export interface LiveSource<D> {
  /** The document's name (its key within the kind). */
  readonly name: string;
  readonly doc: D;
  readonly version: number;
  /**
   * Its draft, if any; `"keep"` when the draft's record could not be read (the draft the
   * document ran before, if any, stays).
   */
  readonly draft: DraftSource<D> | "keep" | undefined;
}

/**
 * The live form of one document. What did not change is kept from `previous` (the same
 * document's last live form): the enforced version's form while the version stands, the
 * draft's while its id does, and `previous` itself when both do. A new form is made by the
 * kind; a new draft starts with zero counts. Throws when the kind cannot build the document
 * (or its draft); the caller keeps its last good form then.
 */
export function buildLive<D, F, DF>(
  kind: LiveKind<D, F, DF>,
  source: LiveSource<D>,
  previous: LiveDocument<F, DF> | undefined,
): LiveDocument<F, DF> {
  const reuse = previous !== undefined && previous.version === source.version;
  const form: F = reuse ? previous : kind.live(source.doc);
  if (!reuse && previous !== undefined) kind.carry?.(form, previous);
  const draft = liveDraft(kind, source.draft, previous?.draft);
  if (reuse && draft === previous.draft) return previous;
  return { ...form, version: source.version, draft };
}

function liveDraft<D, F, DF>(
  kind: LiveKind<D, F, DF>,
  source: LiveSource<D>["draft"],
  previous: LiveDocumentDraft<DF> | undefined,
): LiveDocumentDraft<DF> | undefined {
  if (source === "keep") return previous;
  if (source === undefined) return undefined;
  if (previous?.id === source.id) return previous;
  return { ...kind.draft(source.doc, source.id), id: source.id, stats: emptyDraftStats() };
}

/**
 * The live forms of a set of documents read anew, by name, each built from its previous form
 * in `previous` ({@link buildLive}). A document that cannot be built keeps its previous form
 * (when it had one), and `onError` is told.
 */
export function buildLiveSet<D, F, DF>(
  kind: LiveKind<D, F, DF>,
  sources: Iterable<LiveSource<D>>,
  previous: ReadonlyMap<string, LiveDocument<F, DF>>,
  onError: (error: unknown, source: LiveSource<D>, kept: LiveDocument<F, DF> | undefined) => void,
): Map<string, LiveDocument<F, DF>> {
  const next = new Map<string, LiveDocument<F, DF>>();
  for (const source of sources) {
    const before = previous.get(source.name);
    try {
      next.set(source.name, buildLive(kind, source, before));
    } catch (err) {
      onError(err, source, before);
      if (before) next.set(source.name, before);
    }
  }
  return next;
}

/** What {@link shadowDraft} tells its caller of the draft. */
export interface DraftHooks {
  /** The draft's verdict for this request (after its counts were taken). */
  onDraft?: (allowed: boolean) => void;
  /**
   * The draft could not be evaluated (a store error); the request is decided by the enforced
   * version alone and the draft counts nothing.
   */
  onDraftError?: (error: unknown) => void;
}

/** No hooks. */
export const NO_DRAFT_HOOKS: DraftHooks = Object.freeze({});

/** The draft's answer when it could not be evaluated. */
const FAILED: unique symbol = Symbol("draft failed");

/**
 * Answers a request with the enforced version while the draft answers it beside it, on its own
 * counters: the draft's answer is only counted in `stats` (by `allows`, the same measure for
 * both) and told to `hooks.onDraft`. A draft that throws or rejects counts nothing and is told
 * to `hooks.onDraftError`; neither the draft nor a hook ever changes or fails the answer.
 */
export function shadowDraft<T, U = T>(
  stats: DraftStats,
  enforced: T | Promise<T>,
  draft: () => U | Promise<U>,
  allows: (answer: T | U) => boolean,
  hooks: DraftHooks = NO_DRAFT_HOOKS,
): Promise<T> {
  let drafted: Promise<U>;
  try {
    drafted = Promise.resolve(draft());
  } catch (err) {
    drafted = Promise.reject(err);
  }
  const settled = drafted.catch((err: unknown): typeof FAILED => {
    tell(hooks.onDraftError, err);
    return FAILED;
  });
  return Promise.all([enforced, settled]).then(([answer, draftAnswer]) => {
    if (draftAnswer === FAILED) return answer;
    const draftAllows = allows(draftAnswer);
    countDraft(stats, allows(answer), draftAllows);
    tell(hooks.onDraft, draftAllows);
    return answer;
  });
}

/** Calls a hook; a hook must not turn a decision into a failure. */
function tell<A>(hook: ((arg: A) => void) | undefined, arg: A): void {
  try {
    hook?.(arg);
  } catch {
    // Ignored, as the hook's caller is answering a request.
  }
}

/** Counts one request the draft evaluated. */
function countDraft(s: DraftStats, enforcedAllows: boolean, draftAllows: boolean): void {
  s.evaluated++;
  if (!draftAllows) s.wouldDeny++;
  if (!draftAllows && enforcedAllows) s.wouldDenyNewly++;
  if (draftAllows && !enforcedAllows) s.wouldAllowNewly++;
}

/** Anything that may have a draft whose counts are taken: a live document of any kind. */
export interface WithDraft {
  readonly draft?: { readonly id: number; readonly stats: DraftStats } | undefined;
}

/** One draft's counts taken by {@link takeDraftStats}. */
export interface TakenDraftStats<P extends WithDraft = WithDraft> {
  /** The live document the draft belongs to: a policy, or another kind's (an Envoy domain). */
  readonly policy: P;
  readonly draft: NonNullable<P["draft"]>;
  /** The counts taken (the draft's own were zeroed). */
  readonly delta: DraftStats;
}

/**
 * Takes the unreported counts of every draft that has some, zeroing them, for the caller to
 * add to the shared totals; when that fails, {@link restoreDraftStats} puts them back for the
 * next time.
 */
export function takeDraftStats<P extends WithDraft>(live: Iterable<P>): TakenDraftStats<P>[] {
  const taken: TakenDraftStats<P>[] = [];
  for (const doc of live) {
    const draft = doc.draft as NonNullable<P["draft"]> | undefined;
    if (!draft || draft.stats.evaluated === 0) continue;
    const s = draft.stats;
    taken.push({ policy: doc, draft, delta: { ...s } });
    s.evaluated = s.wouldDeny = s.wouldDenyNewly = s.wouldAllowNewly = 0;
  }
  return taken;
}

/** Adds counts taken by {@link takeDraftStats} back to their drafts (their report failed). */
export function restoreDraftStats(taken: Iterable<TakenDraftStats>): void {
  for (const { draft, delta } of taken) {
    const s = draft.stats;
    s.evaluated += delta.evaluated;
    s.wouldDeny += delta.wouldDeny;
    s.wouldDenyNewly += delta.wouldDenyNewly;
    s.wouldAllowNewly += delta.wouldAllowNewly;
  }
}
