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

/** The query of `GET <files>/export`: `format`, YAML unless JSON is asked for (a kind may extend it). */
export const exportQuery = z.strictObject({
  format: z.enum(["yaml", "json"], { error: "must be yaml or json" }).default("yaml"),
});

/** Answers an export as a YAML file. */
export function sendYaml(reply: FastifyReply, text: string): FastifyReply {
  return reply.type("application/yaml; charset=utf-8").send(text);
}

const nameParam = z.object({ name: z.string().min(1).max(128) });
const fileQuery = z.strictObject({
  prune: z.enum(["true", "false"]).optional(),
  dryRun: z.enum(["true", "false"]).optional(),
});

/**
 * The handlers of one kind's routes, each named for what it answers, with what they share: the
 * kind's repository and strategy, and how a request names a document and its version.
 */
class DocumentHandlers<D> {
  private readonly repo: DocumentRepository<D>;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly auth: AuthHelpers,
    private readonly kind: AdminKind<D>,
  ) {
    this.repo = kind.repository(ctx);
  }

  /** `GET <c>`: every document. */
  async list(req: FastifyRequest): Promise<unknown> {
    await this.auth.session(req);
    return this.kind.listView(this.ctx, await this.repo.list());
  }

  /** `GET <files>/export`: every document as a file, as the request asks. */
  async exportFile(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    await this.auth.session(req);
    const docs = (await this.repo.list()).map((r) => r.doc);
    return this.kind.exported(req, reply, docs);
  }

  /** `POST <files>/import`: every document of a file or a JSON body, all or nothing (admins). */
  async importFile(req: FastifyRequest): Promise<unknown> {
    const s = await this.auth.role(req, "admin");
    const input = this.imported(req);
    const warnings = input.docs.flatMap((doc, i) =>
      prefixIssues(this.warningsOf(doc), `${this.kind.importField}.${i}`),
    );
    const plan = input.dryRun
      ? await this.repo.planImport(input.docs, input.prune)
      : await this.repo.import(input.docs, s.user.username, { prune: input.prune });
    return { dryRun: input.dryRun, plan, ...(warnings.length > 0 ? { warnings } : {}) };
  }

  /** `GET <c>/{name}`: one document, and whether it has a draft. */
  async get(req: FastifyRequest): Promise<unknown> {
    await this.auth.session(req);
    const name = this.nameOf(req);
    const [r, draft] = await Promise.all([this.repo.get(name), this.repo.getDraft(name)]);
    if (!r)
      throw new ApiError(
        this.repo.kind.notFound,
        `${this.repo.kind.noun} "${name}" does not exist`,
      );
    return this.warned(this.kind.view(this.ctx, r, draft !== undefined), r.doc);
  }

  /** `POST <c>`: creates the document its body names (201), refused when it exists. */
  async create(
    created: (req: FastifyRequest) => D,
    req: FastifyRequest,
    reply: FastifyReply,
  ): Promise<unknown> {
    const s = await this.writer(req);
    const doc = created(req);
    const rec = await this.repo.put(doc, s.user.username, {
      mustNotExist: true,
      check: () => this.kind.authorize(s.user, undefined, doc),
    });
    return reply.status(201).send(await this.view(rec));
  }

  /** `PUT <c>/{name}`: creates or replaces the document (a new version unless nothing changed). */
  async put(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const s = await this.writer(req);
    const { doc, expectVersion } = this.kind.written(req, this.nameOf(req), { draft: false });
    let existed = true;
    const rec = await this.repo.put(doc, s.user.username, {
      expectVersion,
      check: (before) => {
        existed = before !== undefined;
        this.kind.authorize(s.user, before?.doc, doc);
      },
    });
    return reply.status(existed ? 200 : this.kind.putCreated).send(await this.view(rec));
  }

  /** `DELETE <c>/{name}` (its versions are kept). */
  async delete(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const s = await this.writer(req);
    await this.repo.delete(this.nameOf(req), s.user.username, (before) =>
      this.kind.authorize(s.user, before.doc, undefined),
    );
    return reply.status(204).send();
  }

  /** `GET <c>/{name}/versions`: every kept version. */
  async versions(req: FastifyRequest): Promise<unknown> {
    await this.auth.session(req);
    const name = this.nameOf(req);
    const versions = await this.repo.listVersions(name);
    if (versions.length === 0)
      throw new ApiError(
        this.repo.kind.notFound,
        `${this.repo.kind.noun} "${name}" has no versions`,
      );
    return { versions: versions.map((v: VersionRecord<D>) => this.named(v)) };
  }

  /** `GET <c>/{name}/versions/{version}`: one kept version. */
  async version(req: FastifyRequest): Promise<unknown> {
    await this.auth.session(req);
    const name = this.nameOf(req);
    const version = this.versionOf(req);
    const v = await this.repo.getVersion(name, version);
    if (!v)
      throw new ApiError("not_found", `${this.repo.kind.noun} "${name}" has no version ${version}`);
    return this.named(v);
  }

  /** `POST <c>/{name}/versions/{v}/restore`: a kept version becomes the enforced one again. */
  async restore(req: FastifyRequest): Promise<unknown> {
    const s = await this.writer(req);
    const rec = await this.repo.restore(
      this.nameOf(req),
      this.versionOf(req),
      s.user.username,
      (before, doc) => this.kind.authorize(s.user, before?.doc, doc),
    );
    return this.view(rec);
  }

  /** `GET <c>/{name}/draft`: the draft, with its counts over every node. */
  async draft(req: FastifyRequest): Promise<unknown> {
    await this.auth.session(req);
    const name = this.nameOf(req);
    const d = await this.repo.getDraft(name);
    if (!d) throw new ApiError("not_found", `${this.repo.kind.noun} "${name}" has no draft`);
    // Totals over every node; this node's latest counts are added first.
    await this.ctx.registry.flushDraftStats();
    return this.warned({ ...this.named(d), stats: await this.ctx.repo.getDraftStats(d.id) }, d.doc);
  }

  /** `PUT <c>/{name}/draft`: writes the draft (evaluated in shadow from then on). */
  async putDraft(req: FastifyRequest): Promise<unknown> {
    const s = await this.writer(req);
    const { doc, expectVersion, draftId } = this.kind.written(req, this.nameOf(req), {
      draft: true,
    });
    const d: DraftRecord<D> = await this.repo.putDraft(doc, s.user.username, {
      expectVersion,
      draftId,
      check: (before) => this.kind.authorize(s.user, before.doc, doc),
    });
    return this.warned(this.named(d), d.doc);
  }

  /** `DELETE <c>/{name}/draft`: discards the draft. */
  async deleteDraft(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const s = await this.writer(req);
    await this.repo.deleteDraft(this.nameOf(req), s.user.username, (before) =>
      this.kind.authorize(s.user, before.doc, before.doc),
    );
    return reply.status(204).send();
  }

  /** `POST <c>/{name}/draft/promote`: the draft becomes the enforced version (refused when stale). */
  async promote(req: FastifyRequest): Promise<unknown> {
    const s = await this.writer(req);
    const body = parseOr400(promoteRequestSchema, req.body ?? {}, "Invalid promote request");
    const rec = await this.repo.promoteDraft(this.nameOf(req), s.user.username, {
      expectVersion: body.expectVersion,
      draftId: body.draftId,
      check: (before, draft) => this.kind.authorize(s.user, before.doc, draft),
    });
    return this.warned(this.kind.view(this.ctx, rec, false), rec.doc);
  }

  /** An import's documents and how to apply them: from a YAML file and its query, or JSON. */
  private imported(req: FastifyRequest): Imported<D> {
    if (typeof req.body !== "string") return this.kind.imported(req.body);
    const r = this.kind.parseFile(req.body);
    if ("issues" in r) throw invalid("Import refused, nothing was changed", r.issues);
    const q = parseOr400(fileQuery, req.query, "Invalid query");
    return { docs: r.docs, prune: q.prune === "true", dryRun: q.dryRun === "true" };
  }

  /** The session of a request that may change documents of this kind (403 otherwise). */
  private writer(req: FastifyRequest) {
    return this.auth.role(req, ...this.kind.writers);
  }

  /** The document the URL names (`{name}`). */
  private nameOf(req: FastifyRequest): string {
    return parseOr400(nameParam, req.params, "Invalid path").name;
  }

  /** The version the URL names (`{version}`). */
  private versionOf(req: FastifyRequest): number {
    return parseOr400(
      versionParamSchema,
      (req.params as { version?: unknown }).version,
      "Invalid path",
      "version",
    );
  }

  /** A version or draft record with its name under the kind's field (`name`, `domain`). */
  private named<T extends { name: string }>(r: T) {
    const { name, ...rest } = r;
    return { [this.kind.nameField]: name, ...rest };
  }

  /** The kind's warnings about `doc` (none when the kind has none). */
  private warningsOf(doc: D): ValidationIssue[] {
    return this.kind.warnings?.(this.ctx, doc) ?? [];
  }

  /** An answer about `doc`, with the kind's warnings about it when there are any. */
  private warned(answer: unknown, doc: D): unknown {
    const warnings = this.warningsOf(doc);
    return warnings.length > 0 ? { ...(answer as object), warnings } : answer;
  }

  /** The answer for a document just written (whether it has a draft read again). */
  private async view(rec: DocumentRecord<D>): Promise<unknown> {
    const hasDraft = (await this.repo.getDraft(this.repo.kind.nameOf(rec.doc))) !== undefined;
    return this.warned(this.kind.view(this.ctx, rec, hasDraft), rec.doc);
  }
}

/** Registers the routes of one kind (inside the admin scope), as the table above lists them. */
export function documentRoutes<D>(
  app: FastifyInstance,
  ctx: ServiceContext,
  auth: AuthHelpers,
  kind: AdminKind<D>,
): void {
  const h = new DocumentHandlers(ctx, auth, kind);
  const c = kind.collection;
  app.get(c, (req) => h.list(req));
  app.get(`${kind.files}/export`, (req, reply) => h.exportFile(req, reply));
  app.post(`${kind.files}/import`, (req) => h.importFile(req));
  app.get(`${c}/:name`, (req) => h.get(req));
  const created = kind.created;
  if (created) app.post(c, (req, reply) => h.create(created, req, reply));
  app.put(`${c}/:name`, (req, reply) => h.put(req, reply));
  app.delete(`${c}/:name`, (req, reply) => h.delete(req, reply));
  app.get(`${c}/:name/versions`, (req) => h.versions(req));
  app.get(`${c}/:name/versions/:version`, (req) => h.version(req));
  app.post(`${c}/:name/versions/:version/restore`, (req) => h.restore(req));
  app.get(`${c}/:name/draft`, (req) => h.draft(req));
  app.put(`${c}/:name/draft`, (req) => h.putDraft(req));
  app.delete(`${c}/:name/draft`, (req, reply) => h.deleteDraft(req, reply));
  app.post(`${c}/:name/draft/promote`, (req) => h.promote(req));
}
