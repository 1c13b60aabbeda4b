/**
 * One set of admin routes for every kind of versioned document (../repository/documents.ts),
 * registered once per kind under the kind's own paths — `/v1/admin/policies/…` and
 * `/v1/admin/envoy/domains/…` — with what differs given by the kind's {@link AdminKind}: its
 * formats (JSON, a policy file, the reference service's YAML), its answers, and who may change
 * what. For each kind, with `<c>` its collection:
 *
 * | route                                   | what it does                                        |
 * | --------------------------------------- | --------------------------------------------------- |
 * | `GET <c>`                               | every document (the kind's list answer)             |
 * | `POST <c>`                              | creates one (kinds that name it in the body)        |
 * | `GET`, `PUT`, `DELETE <c>/{name}`       | one document; a change is a new version             |
 * | `GET <c>/{name}/versions[/{version}]`   | every kept version, or one                          |
 * | `POST <c>/{name}/versions/{v}/restore`  | makes a version the enforced one again              |
 * | `GET`, `PUT`, `DELETE <c>/{name}/draft` | the draft, evaluated in shadow, with its counts     |
 * | `POST <c>/{name}/draft/promote`         | the draft becomes the enforced version              |
 * | `GET <files>/export`, `POST …/import`   | every document as a file; an all-or-nothing import  |
 *
 * Every signed-in user reads; the kind says which roles write and what each may change; only an
 * admin imports.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { type Role, promoteRequestSchema, versionParamSchema } from "@sluice/api";
import { z } from "zod";
import type { ServiceContext } from "../context.js";
import type { ValidationIssue } from "sluice";
import { ApiError, invalid, parseOr400, prefixIssues } from "../errors.js";
import type {
  DocumentRecord,
  DocumentRepository,
  DraftRecord,
  VersionRecord,
} from "../repository/documents.js";
import type { UserRecord } from "../repository.js";
import type { AuthHelpers } from "./auth.js";

/** A document of a write, with what the writer saw (optimistic concurrency). */
export interface Written<D> {
  readonly doc: D;
  /** The version the writer edited (drafts: the enforced version it is based on). */
  readonly expectVersion?: number | undefined;
  /** For drafts: the draft it replaces. */
  readonly draftId?: number | undefined;
}

/** The documents of an import and how to apply them. */
export interface Imported<D> {
  readonly docs: readonly D[];
  readonly prune: boolean;
  readonly dryRun: boolean;
}

/**
 * What the admin routes need to know of a kind of document, beside its storage
 * ({@link DocumentRepository.kind}): its strategy. A new kind is one of these.
 */
export interface AdminKind<D> {
  /** The kind's documents. */
  repository(ctx: ServiceContext): DocumentRepository<D>;
  /** The collection's path: `/v1/admin/policies`. */
  readonly collection: string;
  /** Where its export and import are: `<files>/export`, `<files>/import`. */
  readonly files: string;
  /** The field that names the document in version and draft answers: `name`, `domain`. */
  readonly nameField: string;
  /**
   * The status of a `PUT` that created the document: 201 (domains), or 200 as for a
   * replacement (policies, which are created with `POST`; kept as it always was).
   */
  readonly putCreated: 200 | 201;
  /** Roles that may change documents of this kind (and then only as {@link authorize} says). */
  readonly writers: readonly Role[];
  /** Refuses (throws 403) a change `user` may not make, from `before` to `after` (either absent). */
  authorize(
    user: Pick<UserRecord, "role" | "apps">,
    before: D | undefined,
    after: D | undefined,
  ): void;
  /** The answer for one document. */
  view(ctx: ServiceContext, rec: DocumentRecord<D>, hasDraft: boolean): unknown;
  /** The answer for the list (whether a document has a draft: as this node runs it). */
  listView(ctx: ServiceContext, list: readonly DocumentRecord<D>[]): unknown;
  /**
   * What a valid document asks that this node will not do as written, each naming its field
   * (`lease` on memory counters): answered as `warnings` beside the document, the write made all
   * the same. Absent: the kind has none.
   */
  warnings?(ctx: ServiceContext, doc: D): ValidationIssue[];
  /** The field of an import's JSON body that lists its documents: `policies`, `domains`. */
  readonly importField: string;
  /** A write's document from its request, named by the URL; 400 naming every problem. */
  written(req: FastifyRequest, name: string, options: { draft: boolean }): Written<D>;
  /** `POST <collection>`: the document to create, named in its body. Absent: PUT creates. */
  created?(req: FastifyRequest): D;
  /** An import's documents from a JSON body (a YAML file is {@link parseFile}'s). */
  imported(body: unknown): Imported<D>;
  /** The documents of a file (YAML, which includes JSON), or every problem. */
  parseFile(text: string): { docs: D[] } | { issues: { path: string; message: string }[] };
  /** Answers the export of `list`, as the request asks. */
  exported(req: FastifyRequest, reply: FastifyReply, list: readonly D[]): unknown;
}

const nameParam = z.object({ name: z.string().min(1).max(128) });
const fileQuery = z.strictObject({
  prune: z.enum(["true", "false"]).optional(),
  dryRun: z.enum(["true", "false"]).optional(),
});

/** Registers the routes of one kind (inside the admin scope). */
export function documentRoutes<D>(
  app: FastifyInstance,
  ctx: ServiceContext,
  auth: AuthHelpers,
  kind: AdminKind<D>,
): void {
  const repo = kind.repository(ctx);
  const { notFound, noun } = repo.kind;
  const { session, role } = auth;
  const c = kind.collection;
  const nameOf = (req: FastifyRequest) => parseOr400(nameParam, req.params, "Invalid path").name;
  const versionOf = (req: FastifyRequest) =>
    parseOr400(
      versionParamSchema,
      (req.params as { version?: unknown }).version,
      "Invalid path",
      "version",
    );
  const writer = (req: FastifyRequest) => role(req, ...kind.writers);
  const named = <T extends { name: string }>(r: T) => {
    const { name, ...rest } = r;
    return { [kind.nameField]: name, ...rest };
  };
  const hasDraft = async (name: string) => (await repo.getDraft(name)) !== undefined;
  /** An answer about `doc`, with the kind's warnings about it when there are any. */
  const warned = (answer: unknown, doc: D): unknown => {
    const warnings = kind.warnings?.(ctx, doc) ?? [];
    return warnings.length > 0 ? { ...(answer as object), warnings } : answer;
  };
  const view = async (rec: DocumentRecord<D>) =>
    warned(kind.view(ctx, rec, await hasDraft(repo.kind.nameOf(rec.doc))), rec.doc);

  app.get(c, async (req) => {
    await session(req);
    return kind.listView(ctx, await repo.list());
  });

  app.get(`${kind.files}/export`, async (req, reply) => {
    await session(req);
    return kind.exported(
      req,
      reply,
      (await repo.list()).map((r) => r.doc),
    );
  });

  app.post(`${kind.files}/import`, async (req) => {
    const s = await role(req, "admin");
    let input: Imported<D>;
    if (typeof req.body === "string") {
      const r = kind.parseFile(req.body);
      if ("issues" in r) throw invalid("Import refused, nothing was changed", r.issues);
      const q = parseOr400(fileQuery, req.query, "Invalid query");
      input = { docs: r.docs, prune: q.prune === "true", dryRun: q.dryRun === "true" };
    } else input = kind.imported(req.body);
    const warnings = input.docs.flatMap((doc, i) =>
      prefixIssues(kind.warnings?.(ctx, doc) ?? [], `${kind.importField}.${i}`),
    );
    const plan = input.dryRun
      ? await repo.planImport(input.docs, input.prune)
      : await repo.import(input.docs, s.user.username, { prune: input.prune });
    return { dryRun: input.dryRun, plan, ...(warnings.length > 0 ? { warnings } : {}) };
  });

  app.get(`${c}/:name`, async (req) => {
    await session(req);
    const name = nameOf(req);
    const [r, draft] = await Promise.all([repo.get(name), repo.getDraft(name)]);
    if (!r) throw new ApiError(notFound, `${noun} "${name}" does not exist`);
    return warned(kind.view(ctx, r, draft !== undefined), r.doc);
  });

  const created = kind.created;
  if (created)
    app.post(c, async (req, reply) => {
      const s = await writer(req);
      const doc = created(req);
      const rec = await repo.put(doc, s.user.username, {
        mustNotExist: true,
        check: () => kind.authorize(s.user, undefined, doc),
      });
      return reply.status(201).send(await view(rec));
    });

  // Creates or replaces the document: a new version unless nothing changed.
  app.put(`${c}/:name`, async (req, reply) => {
    const s = await writer(req);
    const { doc, expectVersion } = kind.written(req, nameOf(req), { draft: false });
    let existed = true;
    const rec = await repo.put(doc, s.user.username, {
      expectVersion,
      check: (before) => {
        existed = before !== undefined;
        kind.authorize(s.user, before?.doc, doc);
      },
    });
    return reply.status(existed ? 200 : kind.putCreated).send(await view(rec));
  });

  app.delete(`${c}/:name`, async (req, reply) => {
    const s = await writer(req);
    await repo.delete(nameOf(req), s.user.username, (before) =>
      kind.authorize(s.user, before.doc, undefined),
    );
    return reply.status(204).send();
  });

  app.get(`${c}/:name/versions`, async (req) => {
    await session(req);
    const name = nameOf(req);
    const versions = await repo.listVersions(name);
    if (versions.length === 0) throw new ApiError(notFound, `${noun} "${name}" has no versions`);
    return { versions: versions.map((v: VersionRecord<D>) => named(v)) };
  });

  app.get(`${c}/:name/versions/:version`, async (req) => {
    await session(req);
    const name = nameOf(req);
    const version = versionOf(req);
    const v = await repo.getVersion(name, version);
    if (!v) throw new ApiError("not_found", `${noun} "${name}" has no version ${version}`);
    return named(v);
  });

  app.post(`${c}/:name/versions/:version/restore`, async (req) => {
    const s = await writer(req);
    const rec = await repo.restore(nameOf(req), versionOf(req), s.user.username, (before, doc) =>
      kind.authorize(s.user, before?.doc, doc),
    );
    return view(rec);
  });

  app.get(`${c}/:name/draft`, async (req) => {
    await session(req);
    const name = nameOf(req);
    const d = await repo.getDraft(name);
    if (!d) throw new ApiError("not_found", `${noun} "${name}" has no draft`);
    // Totals over every node; this node's latest counts are added first.
    await ctx.registry.flushDraftStats();
    return warned({ ...named(d), stats: await ctx.repo.getDraftStats(d.id) }, d.doc);
  });

  app.put(`${c}/:name/draft`, async (req) => {
    const s = await writer(req);
    const { doc, expectVersion, draftId } = kind.written(req, nameOf(req), { draft: true });
    const d: DraftRecord<D> = await repo.putDraft(doc, s.user.username, {
      expectVersion,
      draftId,
      check: (before) => kind.authorize(s.user, before.doc, doc),
    });
    return warned(named(d), d.doc);
  });

  app.delete(`${c}/:name/draft`, async (req, reply) => {
    const s = await writer(req);
    await repo.deleteDraft(nameOf(req), s.user.username, (before) =>
      kind.authorize(s.user, before.doc, before.doc),
    );
    return reply.status(204).send();
  });

  app.post(`${c}/:name/draft/promote`, async (req) => {
    const s = await writer(req);
    const body = parseOr400(promoteRequestSchema, req.body ?? {}, "Invalid promote request");
    const rec = await repo.promoteDraft(nameOf(req), s.user.username, {
      expectVersion: body.expectVersion,
      draftId: body.draftId,
      check: (before, draft) => kind.authorize(s.user, before.doc, draft),
    });
    return warned(kind.view(ctx, rec, false), rec.doc);
  });
}
