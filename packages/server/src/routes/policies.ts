/**
 * The API for embedded clients (`connectPolicies` in the library), which decide in their own
 * process with the policies the service manages:
 *
 * - `GET /v1/policies`: the policies granted to the app (documents without their grants,
 *   versions, drafts), the revision, and an `ETag` of the set. With `If-None-Match` it answers
 *   304 while the set is unchanged; with `?wait=ms` too, it is a long poll: the answer waits
 *   until the set changes or the wait ends. Waiting costs no query: every waiting request
 *   hangs on this node's registry, which already polls the database's revision (so a change
 *   made on another node wakes it within one poll).
 * - `POST /v1/policies/report`: the client's counts since its last report (drafts, decisions:
 *   added to the draft totals, the metrics and the console's traffic history) and its heartbeat
 *   (app, host, version, revision) for the admin's list of clients.
 *
 * Long poll rather than server-sent events: each answer is a whole, consistent set (no stream of
 * changes to replay after a reconnect), it is an ordinary request through any proxy or balancer
 * (no buffering proxy holds events back), and a client that lost its node just asks another.
 */
import { createHash } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";
import { policiesQuerySchema, policyReportSchema } from "@sluice/api";
import { parseOr400 } from "../errors.js";
import type { PolicyDocument } from "../model.js";
import type { LivePolicy, Registry } from "../registry.js";
import type { ServiceContext } from "../context.js";
import { trafficOutcome } from "../traffic/recorder.js";
import { appOfRequest } from "./auth.js";

/** A policy document as an app receives it: without the apps granted it. */
type ServedDocument = Omit<PolicyDocument, "apps">;

/** `GET /v1/policies`. */
interface PolicySet {
  readonly app: string;
  readonly revision: number;
  readonly policies: readonly {
    readonly version: number;
    readonly document: ServedDocument;
    readonly draft?: { readonly id: number; readonly document: ServedDocument };
  }[];
  /**
   * The per-key overrides of these policies the client does not have yet: every one (`whole`:
   * a client without a revision, or further behind than this node remembers), or those changed
   * since its revision. Made per request (see {@link PolicySetRoute.answer}).
   */
  readonly overrides?: ReturnType<Registry["overridesSince"]>;
}

/** An app's set, with its ETag. */
interface View {
  readonly set: PolicySet;
  readonly etag: string;
}

const served = (doc: PolicyDocument): ServedDocument => {
  const { apps: _apps, ...rest } = doc;
  return rest;
};

/**
 * Each app's set, built once per snapshot the registry loads (however many clients ask), and
 * dropped when the next one loads.
 */
class Views {
  private generation = -1;
  private readonly byApp = new Map<string, View>();

  constructor(private readonly registry: Registry) {}

  of(app: string): View {
    if (this.registry.generation !== this.generation) {
      this.byApp.clear();
      this.generation = this.registry.generation;
    }
    let view = this.byApp.get(app);
    if (!view) {
      view = build(this.registry, app);
      this.byApp.set(app, view);
    }
    return view;
  }
}

function build(registry: Registry, app: string): View {
  const all = registry.all();
  const revision = registry.currentRevision;
  const policies = all
    .filter((live) => live.apps.has(app))
    .sort((a, b) => (a.doc.name < b.doc.name ? -1 : a.doc.name > b.doc.name ? 1 : 0))
    .map((live) => ({
      version: live.version,
      document: served(live.doc),
      ...(live.draft ? { draft: { id: live.draft.id, document: served(live.draft.doc) } } : {}),
    }));
  // The ETag covers the app's policies alone, and the revision of each one's last override
  // change: a change elsewhere (another app's policy) is no change for this app, and its
  // clients keep waiting.
  const stamps = policies.map((p) => registry.overrideStamp(p.document.name));
  const etag = `"${createHash("sha256")
    .update(JSON.stringify([policies, stamps]))
    .digest("base64url")
    .slice(0, 27)}"`;
  return { set: { app, revision, policies }, etag };
}

/** Whether an `If-None-Match` header names `etag` (or is `*`); weak tags compare equal. */
export function matchesEtag(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header
    .split(",")
    .map((t) => t.trim().replace(/^W\//, ""))
    .some((t) => t === "*" || t === etag);
}

/** Why a long poll stopped waiting. */
type Wake = "change" | "timeout" | "gone" | "closing";

/**
 * `GET /v1/policies` on this node: each app's set (built once per snapshot), and the long polls
 * waiting on it, woken by one listener on the registry.
 */
class PolicySetRoute {
  private readonly views: Views;
  private readonly waiters = new Set<(why: Wake) => void>();
  private closing = false;

  constructor(private readonly registry: Registry) {
    this.views = new Views(registry);
  }

  /** Wakes every waiting request: the set may have changed, or the node is closing. */
  wake(why: "change" | "closing"): void {
    if (why === "closing") this.closing = true;
    for (const wake of [...this.waiters]) wake(why);
  }

  /** Answers the app's set, its ETag and revision; 304 while unchanged, after the long poll. */
  async answer(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const appName = appOfRequest(req, this.registry);
    const q = parseOr400(policiesQuerySchema, req.query ?? {}, "Invalid query");
    // A client that saw a later revision (on another node) gets nothing older from this one
    // than the database has now.
    if (q.revision !== undefined && q.revision > this.registry.currentRevision)
      await this.registry.poll();
    const inm = req.headers["if-none-match"];
    let view = this.views.of(appName);
    if (q.wait > 0 && matchesEtag(inm, view.etag))
      view = await this.waitForNewSet(req, reply, inm, q.wait, view);
    void reply.header("ETag", view.etag);
    void reply.header("Sluice-Revision", String(this.registry.currentRevision));
    void reply.header("Cache-Control", "no-cache");
    // While this node shuts down, the client's next request goes to a new connection (to
    // another node, behind a balancer), and this one does not hold the shutdown up.
    if (this.closing) void reply.header("Connection", "close");
    if (matchesEtag(inm, view.etag)) return reply.status(304).send();
    // The overrides the client lacks: those changed since its revision, or every one.
    const overrides = this.registry.overridesSince(
      view.set.policies.map((p) => p.document.name),
      q.revision,
    );
    if (!overrides.whole && overrides.items.length === 0) return view.set;
    return { ...view.set, overrides };
  }

  /**
   * The long poll: the app's set once it no longer matches `inm`, or as it is when `waitMs` has
   * passed, the node closes or the client goes away.
   */
  private async waitForNewSet(
    req: FastifyRequest,
    reply: FastifyReply,
    inm: string | undefined,
    waitMs: number,
    seen: View,
  ): Promise<View> {
    let view = seen;
    const deadline = Date.now() + waitMs;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0 || this.closing) return view;
      const why = await this.waitForChange(left, reply);
      // Gone: the answer goes nowhere, and that is all that is left to do.
      if (why === "gone") return view;
      // The key may have been revoked meanwhile (401), and the set may have changed.
      view = this.views.of(appOfRequest(req, this.registry));
      if (why !== "change" || !matchesEtag(inm, view.etag)) return view;
    }
  }

  /** Resolves when the registry changes, `ms` pass, the client goes away or the node closes. */
  private waitForChange(ms: number, reply: FastifyReply): Promise<Wake> {
    return new Promise((resolve) => {
      const finish = (why: Wake) => {
        clearTimeout(timer);
        this.waiters.delete(finish);
        reply.raw.off("close", gone);
        resolve(why);
      };
      const gone = () => finish("gone");
      const timer = setTimeout(() => finish("timeout"), ms);
      this.waiters.add(finish);
      // The response's "close": the client went away (or the answer was sent).
      reply.raw.once("close", gone);
    });
  }
}

/** A client's report, as its schema reads it. */
type PolicyReport = z.infer<typeof policyReportSchema>;

/** The counts of a report that are taken: those of policies (and drafts) the app has. */
interface TakenCounts {
  readonly drafts: { draftId: number; policy: string; stats: PolicyReport["drafts"][number] }[];
  readonly decisions: PolicyReport["decisions"];
  /** Those left out, each naming its field and why. */
  readonly ignored: { path: string; message: string }[];
}

/**
 * Sorts a report's counts: those of policies granted to the app (drafts: still their policy's
 * draft) are taken, the others ignored, saying why; counts of nothing are dropped.
 */
function takenCounts(registry: Registry, appName: string, body: PolicyReport): TakenCounts {
  const ignored: { path: string; message: string }[] = [];
  const granted = (policy: string, path: string): LivePolicy | undefined => {
    const live = registry.get(policy);
    if (live?.apps.has(appName)) return live;
    ignored.push({ path, message: `policy "${policy}" is not granted to app "${appName}"` });
    return undefined;
  };
  const drafts: TakenCounts["drafts"] = [];
  for (const [i, d] of body.drafts.entries()) {
    const live = granted(d.policy, `drafts.${i}.policy`);
    if (!live) continue;
    if (live.draft?.id !== d.draftId) {
      ignored.push({
        path: `drafts.${i}.draftId`,
        message: `draft ${d.draftId} is no longer the draft of policy "${d.policy}" (it was replaced, promoted or discarded)`,
      });
      continue;
    }
    if (d.evaluated > 0) drafts.push({ draftId: d.draftId, policy: d.policy, stats: d });
  }
  const decisions = body.decisions.filter(
    (d, i) => granted(d.policy, `decisions.${i}.policy`) !== undefined && d.count > 0,
  );
  return { drafts, decisions, ignored };
}

/** Adds a recorded report's counts to the metrics and the console's traffic history. */
function countReported(ctx: ServiceContext, appName: string, counts: TakenCounts): void {
  const { metrics, traffic } = ctx;
  for (const d of counts.drafts) {
    const denied = d.stats.wouldDeny;
    if (denied > 0) metrics.draftDecisions.inc({ policy: d.policy, outcome: "denied" }, denied);
    const allowed = d.stats.evaluated - denied;
    if (allowed > 0) metrics.draftDecisions.inc({ policy: d.policy, outcome: "allowed" }, allowed);
  }
  for (const d of counts.decisions) {
    metrics.decisions.inc(
      { policy: d.policy, outcome: d.allowed ? "allowed" : "denied", reason: d.reason ?? "" },
      d.count,
    );
    // The console's history, as the service's own decisions count there (without keys).
    traffic.recordCount(d.policy, appName, trafficOutcome(d), d.count);
  }
}

/** `POST /v1/policies/report`: a client's heartbeat and counts, recorded, then counted. */
async function reportRoute(
  ctx: ServiceContext,
  req: FastifyRequest,
): Promise<{ revision: number; ignored: TakenCounts["ignored"] }> {
  const appName = appOfRequest(req, ctx.registry);
  const body = parseOr400(policyReportSchema, req.body, "Invalid report");
  const counts = takenCounts(ctx.registry, appName, body);
  await ctx.repo.recordClientReport(
    {
      app: appName,
      instance: body.instance,
      host: body.host,
      version: body.client,
      revision: body.revision,
    },
    counts.drafts.map((d) => ({
      draftId: d.draftId,
      stats: {
        evaluated: d.stats.evaluated,
        wouldDeny: d.stats.wouldDeny,
        wouldDenyNewly: d.stats.wouldDenyNewly,
        wouldAllowNewly: d.stats.wouldAllowNewly,
      },
    })),
  );
  // Counted once the report is recorded (a report that failed is sent again).
  countReported(ctx, appName, counts);
  return { revision: ctx.registry.currentRevision, ignored: counts.ignored };
}

/** Registers `GET /v1/policies` and `POST /v1/policies/report`. */
export function policyRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const sets = new PolicySetRoute(ctx.registry);
  // One listener on the registry for every waiting request of this node.
  const unsubscribe = ctx.registry.onChange(() => sets.wake("change"));
  // A node shutting down answers its long polls at once (they would hold the shutdown up);
  // their clients ask again, and reach another node.
  app.addHook("preClose", (done) => {
    sets.wake("closing");
    done();
  });
  app.addHook("onClose", (_app, done) => {
    unsubscribe();
    done();
  });
  app.get("/v1/policies", (req, reply) => sets.answer(req, reply));
  app.post("/v1/policies/report", (req) => reportRoute(ctx, req));
}
