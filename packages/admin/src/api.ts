/**
 * The admin API client: JSON over fetch with the session's bearer token. Errors become
 * {@link ApiError}s carrying the service's `code` and, for 400s, the `issues` that name fields.
 */

/** One validation problem: a dotted field path (`rules.0.limit`) and a message. */
export interface Issue {
  readonly path: string;
  readonly message: string;
}

/** An error answer of the service (`{ error: { code, message, issues? } }`), or a network failure. */
export class ApiError extends Error {
  /** HTTP status; 0 when the service could not be reached. */
  readonly status: number;
  /** The service's error code (e.g. `invalid_request`, `forbidden`), or `network`. */
  readonly code: string;
  /** For `invalid_request`: every problem, each naming its field. */
  readonly issues: readonly Issue[];
  constructor(status: number, code: string, message: string, issues: readonly Issue[] = []) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.issues = issues;
  }
}

/** Admin roles, as the service names them. */
export type Role = "viewer" | "owner" | "admin";

/** The signed-in user. */
export interface User {
  readonly username: string;
  readonly role: Role;
  /** For owners: the apps they own. */
  readonly apps: readonly string[];
  readonly createdAt?: string;
  readonly updatedAt?: string;
}

/** A rule as written: `limit` per `period` (ms or "1m"), with `burst` for gcra/token-bucket. */
export interface Rule {
  limit: number;
  period: number | string;
  burst?: number;
}

/** A policy document, as the API exchanges it. */
export interface PolicyDoc {
  name: string;
  description?: string;
  algorithm?: string;
  rules: Rule[];
  blockDuration?: number | string;
  onStoreError?: "allow" | "deny" | "insurance";
  insuranceInstances?: number;
  shadow?: boolean;
  apps?: string[];
  enabled?: boolean;
}

/** A stored policy: its document flattened with its bookkeeping. */
export interface PolicyRecord extends PolicyDoc {
  readonly version: number;
  readonly createdBy: string;
  readonly updatedBy: string;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** In lists: whether a draft is being evaluated in shadow. */
  readonly hasDraft?: boolean;
}

/** One kept version of a policy. */
export interface VersionRecord {
  readonly name?: string;
  readonly version: number;
  readonly doc: PolicyDoc;
  readonly action: string;
  readonly createdBy: string;
  readonly createdAt: string;
}

/** A draft: evaluated in shadow beside the enforced version until promoted or discarded. */
export interface DraftRecord {
  /** The draft's id: replacing or promoting it names it, so nobody acts on a draft they did not see. */
  readonly id: number;
  readonly doc: PolicyDoc;
  readonly baseVersion: number;
  readonly createdBy: string;
  readonly createdAt: string;
  /** What the draft would have done on this node since it was loaded. */
  readonly stats?: {
    readonly evaluated: number;
    readonly wouldDeny: number;
    readonly wouldDenyNewly: number;
    readonly wouldAllowNewly: number;
  };
}

/** An app that calls the decision API. */
export interface AppRecord {
  readonly name: string;
  readonly description: string;
  readonly keyId: string;
  readonly createdBy: string;
  readonly createdAt: string;
  /** Policies granted to this app. */
  readonly policies?: readonly string[];
}

/** An app just created or re-keyed, with its API key (shown once). */
export interface AppWithKey extends AppRecord {
  readonly apiKey: string;
}

/** One audit log entry. */
export interface AuditRecord {
  readonly id: number;
  readonly at: string;
  readonly actor: string;
  readonly action: string;
  readonly targetType: string;
  readonly target: string;
  readonly detail: unknown;
}

/** The session: a bearer token and who it belongs to. Kept in sessionStorage. */
export interface Session {
  readonly token: string;
  readonly expiresAt: string;
  readonly user: User;
}

const SESSION_KEY = "sluice.admin.session";

/** The stored session, if any (and not expired). */
export function loadSession(): Session | undefined {
  try {
    const raw = sessionStorage.getItem(SESSION_KEY);
    if (!raw) return undefined;
    const s = JSON.parse(raw) as Session;
    if (typeof s.token !== "string" || Date.parse(s.expiresAt) <= Date.now()) return undefined;
    return s;
  } catch {
    return undefined;
  }
}

/** Stores (or, with `undefined`, forgets) the session. */
export function saveSession(s: Session | undefined): void {
  if (s) sessionStorage.setItem(SESSION_KEY, JSON.stringify(s));
  else sessionStorage.removeItem(SESSION_KEY);
}

/** Picks the array out of a list answer, whether bare or wrapped (`{ policies: [...] }`). */
function list<T>(body: unknown, key: string): T[] {
  if (Array.isArray(body)) return body as T[];
  const v = (body as Record<string, unknown> | null)?.[key];
  return Array.isArray(v) ? (v as T[]) : [];
}

const enc = encodeURIComponent;

/** The admin API, under `/v1/admin`. */
export class Api {
  /** Called when the service answers 401 (expired or revoked session). */
  onUnauthorized: () => void = () => {};

  constructor(
    public token: string | undefined = undefined,
    private readonly base = "/v1/admin",
  ) {}

  /** Sends one request; resolves to the parsed JSON body (undefined for 204). */
  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let res: Response;
    try {
      res = await fetch(this.base + path, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
    } catch (err) {
      throw new ApiError(0, "network", `cannot reach the service: ${String(err)}`);
    }
    const text = await res.text();
    let data: unknown = undefined;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = undefined;
      }
    }
    if (!res.ok) {
      const e = (data as { error?: { code?: string; message?: string; issues?: Issue[] } } | null)
        ?.error;
      const err = new ApiError(
        res.status,
        e?.code ?? `http_${res.status}`,
        e?.message ?? (text || res.statusText),
        e?.issues ?? [],
      );
      if (res.status === 401 && path !== "/login") this.onUnauthorized();
      throw err;
    }
    return data as T;
  }

  /** Signs in; the answer holds the token. */
  login(username: string, password: string): Promise<Session> {
    return this.request<Session>("POST", "/login", { username, password });
  }
  /** Ends the session on the service. */
  logout(): Promise<void> {
    return this.request<void>("POST", "/logout");
  }

  async policies(): Promise<PolicyRecord[]> {
    return list<PolicyRecord>(await this.request("GET", "/policies"), "policies");
  }
  policy(name: string): Promise<PolicyRecord> {
    return this.request("GET", `/policies/${enc(name)}`);
  }
  /** Creates or replaces a policy; `expectVersion` guards against a concurrent edit (409). */
  putPolicy(doc: PolicyDoc, expectVersion?: number): Promise<PolicyRecord> {
    return this.request("PUT", `/policies/${enc(doc.name)}`, {
      ...doc,
      ...(expectVersion !== undefined ? { expectVersion } : {}),
    });
  }
  /** Creates a policy (refused with 409 when the name is taken). */
  createPolicy(doc: PolicyDoc): Promise<PolicyRecord> {
    return this.request("POST", "/policies", doc);
  }
  deletePolicy(name: string): Promise<void> {
    return this.request("DELETE", `/policies/${enc(name)}`);
  }
  async versions(name: string): Promise<VersionRecord[]> {
    return list<VersionRecord>(
      await this.request("GET", `/policies/${enc(name)}/versions`),
      "versions",
    );
  }
  restore(name: string, version: number): Promise<PolicyRecord> {
    return this.request("POST", `/policies/${enc(name)}/versions/${version}/restore`);
  }
  /** The policy's draft, or undefined when it has none. */
  async draft(name: string): Promise<DraftRecord | undefined> {
    try {
      return await this.request<DraftRecord>("GET", `/policies/${enc(name)}/draft`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return undefined;
      throw err;
    }
  }
  /**
   * Writes the draft, based on `expectVersion` (the enforced version edited); replacing a draft
   * takes its `draftId`. The service answers 409 when either moved meanwhile.
   */
  putDraft(
    doc: PolicyDoc,
    seen: { expectVersion?: number; draftId?: number | undefined } = {},
  ): Promise<DraftRecord> {
    return this.request("PUT", `/policies/${enc(doc.name)}/draft`, {
      ...doc,
      ...(seen.expectVersion !== undefined ? { expectVersion: seen.expectVersion } : {}),
      ...(seen.draftId !== undefined ? { draftId: seen.draftId } : {}),
    });
  }
  deleteDraft(name: string): Promise<void> {
    return this.request("DELETE", `/policies/${enc(name)}/draft`);
  }
  /**
   * Promotes the draft that was reviewed (`draftId`) over the version it was shown beside
   * (`expectVersion`); 409 when the draft was made from an older version, or either moved.
   */
  promoteDraft(
    name: string,
    seen: { expectVersion?: number; draftId?: number } = {},
  ): Promise<PolicyRecord> {
    return this.request("POST", `/policies/${enc(name)}/draft/promote`, seen);
  }

  async apps(): Promise<AppRecord[]> {
    return list<AppRecord>(await this.request("GET", "/apps"), "apps");
  }
  /** Creates an app; the answer holds its API key, shown this once. */
  createApp(name: string, description: string): Promise<AppWithKey> {
    return this.request("POST", "/apps", { name, ...(description ? { description } : {}) });
  }
  rotateApp(name: string): Promise<AppWithKey> {
    return this.request("POST", `/apps/${enc(name)}/rotate-key`);
  }
  deleteApp(name: string): Promise<void> {
    return this.request("DELETE", `/apps/${enc(name)}`);
  }

  async users(): Promise<User[]> {
    return list<User>(await this.request("GET", "/users"), "users");
  }
  createUser(u: { username: string; password: string; role: Role; apps: string[] }): Promise<User> {
    return this.request("POST", "/users", u);
  }
  updateUser(
    username: string,
    change: { role?: Role; apps?: string[]; password?: string },
  ): Promise<User> {
    return this.request("PATCH", `/users/${enc(username)}`, change);
  }
  deleteUser(username: string): Promise<void> {
    return this.request("DELETE", `/users/${enc(username)}`);
  }

  async audit(
    q: { limit?: number; before?: number; target?: string } = {},
  ): Promise<AuditRecord[]> {
    const p = new URLSearchParams();
    if (q.limit) p.set("limit", String(q.limit));
    if (q.before) p.set("before", String(q.before));
    if (q.target) p.set("target", q.target);
    const qs = p.toString();
    return list<AuditRecord>(await this.request("GET", `/audit${qs ? `?${qs}` : ""}`), "entries");
  }

  /** The service's Prometheus metrics (outside `/v1/admin`). */
  async metricsText(): Promise<string> {
    const res = await fetch("/metrics", {
      headers: this.token ? { authorization: `Bearer ${this.token}` } : {},
    });
    if (!res.ok)
      throw new ApiError(res.status, `http_${res.status}`, `GET /metrics: ${res.status}`);
    return res.text();
  }
}
