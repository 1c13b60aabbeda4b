/**
 * The admin API client: JSON over fetch with the session's bearer token. Errors become
 * {@link ApiError}s carrying the service's `code` and, for 400s, the `issues` that name fields.
 */
import type * as schemas from "@sluice/api";
import type { z } from "zod";

/** One validation problem: a dotted field path (`rules.0.limit`) and a message. */
export type Issue = NonNullable<z.infer<typeof schemas.errorSchema>["error"]["issues"]>[number];

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

// The API's types come from the contract the service validates with (@sluice/api, the zod
// schemas of packages/api), which a server test checks every answer against, so they cannot
// drift. The imports are type-only: no schema code reaches the browser bundle (eslint refuses a
// value import of @sluice/api here, and any import of the server).

/** Admin roles, as the service names them. */
export type Role = z.infer<typeof schemas.sessionUserSchema>["role"];

/** The signed-in user. */
export type SessionUser = z.infer<typeof schemas.sessionUserSchema>;

/** A user, as the user routes answer. */
export type User = z.infer<typeof schemas.userSchema>;

/** A rule as written: `limit` per `period` (ms or "1m"), with `burst` for gcra/token-bucket. */
export type Rule = z.input<typeof schemas.namedSchemas.Rule>;

/** A policy document, as the page writes it (fields left out take the service's defaults). */
export type PolicyDoc = z.input<typeof schemas.namedSchemas.PolicyDocument>;

/** A stored policy: its document flattened with its bookkeeping. */
export type PolicyRecord = z.infer<typeof schemas.policyRecordSchema>;

/** A draft: evaluated in shadow beside the enforced version until promoted or discarded. */
export type DraftRecord = z.infer<typeof schemas.draftSchema>;

/** A per-key override of a policy: rules that replace the policy's for one key. */
export type OverrideRecord = z.infer<typeof schemas.overrideSchema>;

/** `GET /v1/admin/policies/:name/overrides`: one page of a policy's overrides, by key. */
export type OverridePage = z.infer<typeof schemas.overrideListSchema>;

/** An app that calls the decision API. */
export type AppRecord = z.infer<typeof schemas.appSchema>;

/** An app just created or re-keyed, with its API key (shown once). */
export type AppWithKey = z.infer<typeof schemas.appWithKeySchema>;

/** One audit log entry. */
export type AuditRecord = z.infer<typeof schemas.auditEntrySchema>;

/** An embedded policy client (connectPolicies), as its last report described it. */
export type ClientRecord = z.infer<typeof schemas.clientSchema>;

/** `GET /v1/admin/clients`: the clients seen in the last day, and the service's revision. */
export type ClientList = z.infer<typeof schemas.clientListSchema>;

/** The session: a bearer token and who it belongs to. Kept in sessionStorage. */
export type Session = z.infer<typeof schemas.loginResponseSchema>;

/** The body of `POST /v1/admin/users`. */
export type UserCreate = z.input<typeof schemas.userCreateSchema>;

/** The body of `PATCH /v1/admin/users/:username`. */
export type UserUpdate = z.input<typeof schemas.userUpdateSchema>;

/** Every policy with its traffic, in order of attention. */
export type TrafficOverview = z.infer<typeof schemas.trafficOverviewSchema>;

/** One row of the overview. */
export type OverviewPolicy = TrafficOverview["policies"][number];

/** A traffic history: allowed / denied / shadow per bucket, summed over every node. */
export type TrafficHistory = z.infer<typeof schemas.trafficHistorySchema>;

/** Allowed / denied / shadow would-deny. */
export type Counts = TrafficHistory["totals"];

/** A history window. */
export type TrafficWindow = NonNullable<z.input<typeof schemas.trafficQuerySchema>["window"]>;

/** The heaviest keys of a policy. */
export type TopKeys = z.infer<typeof schemas.topKeysSchema>;

/** A top-keys window. */
export type KeyWindow = NonNullable<z.input<typeof schemas.topKeysQuerySchema>["window"]>;

/** What a key has left under a policy (and its draft). */
export type KeyState = z.infer<typeof schemas.keyStateSchema>;

/** Why a key is (or is not) limited under a policy, with the draft's answer. */
export type Explanation = z.infer<typeof schemas.explanationSchema>;

/** A decision of the library, as the service sends it. */
export type Decision = z.infer<typeof schemas.decisionSchema>;

/** What a draft would have done on live traffic, over every node. */
export type DraftStats = z.infer<typeof schemas.draftStatsSchema>;

/** `GET /v1/admin/envoy/domains`: every domain, and whether this node serves Envoy. */
export type EnvoyDomainList = z.infer<typeof schemas.envoyDomainListSchema>;

/** An Envoy domain with its bookkeeping and its limits as the node runs them. */
export type EnvoyDomainRecord = z.infer<typeof schemas.envoyDomainRecordSchema>;

/** A domain's document: the reference rate limit service's file, as JSON. */
export type EnvoyDomainDoc = EnvoyDomainRecord["doc"];

/** A descriptor limit as the node runs it. */
export type EnvoyLimit = z.infer<typeof schemas.envoyLimitSchema>;

/** What a descriptor's counter holds (peek), or that it was reset. */
export type EnvoyCounterAnswer = z.infer<typeof schemas.envoyCounterAnswerSchema>;

/** What an import of Envoy domains did (or would do). */
export type EnvoyImportResult = z.infer<typeof schemas.envoyImportResultSchema>;

/** Whether the first admin is still to be made. */
export type SetupStatus = z.infer<typeof schemas.setupStatusSchema>;

/** Filters of the audit log. */
export type AuditQuery = Omit<z.input<typeof schemas.auditQuerySchema>, "limit" | "before"> & {
  limit?: number;
  before?: number;
};

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
      // A refused password or setup token is the caller's mistake, not an ended session.
      if (res.status === 401 && path !== "/login" && path !== "/setup") this.onUnauthorized();
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
  /** Whether the first admin is still to be made (no session needed). */
  setupStatus(): Promise<SetupStatus> {
    return this.request("GET", "/setup");
  }
  /** Creates the first admin with the setup token; the answer is a session. */
  setup(token: string, username: string, password: string): Promise<Session> {
    return this.request("POST", "/setup", { token, username, password });
  }
  /** Changes the signed-in user's password (the current one is checked). */
  changePassword(currentPassword: string, newPassword: string): Promise<void> {
    return this.request("POST", "/me/password", { currentPassword, newPassword });
  }

  /** Every policy with its current rate, recent totals and sparkline. */
  trafficOverview(): Promise<TrafficOverview> {
    return this.request("GET", "/traffic/overview");
  }
  /** The history of a policy or an app over a window. */
  traffic(q: { policy?: string; app?: string; window: TrafficWindow }): Promise<TrafficHistory> {
    const p = new URLSearchParams({ window: q.window });
    if (q.policy) p.set("policy", q.policy);
    if (q.app) p.set("app", q.app);
    return this.request("GET", `/traffic?${p.toString()}`);
  }
  /** The busiest and most denied keys of a policy. */
  topKeys(policy: string, window: KeyWindow): Promise<TopKeys> {
    const p = new URLSearchParams({ policy, window });
    return this.request("GET", `/traffic/keys?${p.toString()}`);
  }
  /** What a key has left under a policy (charges nothing). */
  keyState(policy: string, key: string): Promise<KeyState> {
    return this.request("GET", `/policies/${enc(policy)}/key?key=${enc(key)}`);
  }
  /** Why a key is (or is not) limited under a policy, now (charges nothing). */
  explain(policy: string, key: string, cost?: number): Promise<Explanation> {
    const p = new URLSearchParams({ policy, key });
    if (cost !== undefined) p.set("cost", String(cost));
    return this.request("GET", `/explain?${p.toString()}`);
  }
  /** Unblocks a key: resets its counters (audited). */
  resetKey(policy: string, key: string): Promise<KeyState> {
    return this.request("POST", `/policies/${enc(policy)}/key/reset`, { key });
  }

  /** A page of a policy's per-key overrides, by key (`after`: the previous page's `next`). */
  overrides(
    policy: string,
    q: { after?: string | undefined; prefix?: string | undefined; limit?: number } = {},
  ): Promise<OverridePage> {
    const p = new URLSearchParams();
    if (q.after !== undefined) p.set("after", q.after);
    if (q.prefix) p.set("prefix", q.prefix);
    if (q.limit !== undefined) p.set("limit", String(q.limit));
    const qs = p.toString();
    return this.request("GET", `/policies/${enc(policy)}/overrides${qs ? `?${qs}` : ""}`);
  }
  /** Sets a key's override (audited); the service refuses rules the policy would refuse. */
  putOverride(policy: string, key: string, rules: Rule[]): Promise<OverrideRecord> {
    return this.request("PUT", `/policies/${enc(policy)}/overrides/${enc(key)}`, { rules });
  }
  /** Deletes a key's override (audited). */
  deleteOverride(policy: string, key: string): Promise<void> {
    return this.request("DELETE", `/policies/${enc(policy)}/overrides/${enc(key)}`);
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
  /** The policy's draft, or undefined when it has none. */
  draft(name: string): Promise<DraftRecord | undefined> {
    return this.draftAt(`/policies/${enc(name)}`);
  }
  /** The draft of the versioned document at `path` (`/policies/api`), or undefined. */
  async draftAt<T>(path: string): Promise<T | undefined> {
    try {
      return await this.request<T>("GET", `${path}/draft`);
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
  createUser(u: UserCreate): Promise<User> {
    return this.request("POST", "/users", u);
  }
  updateUser(username: string, change: UserUpdate): Promise<User> {
    return this.request("PATCH", `/users/${enc(username)}`, change);
  }
  deleteUser(username: string): Promise<void> {
    return this.request("DELETE", `/users/${enc(username)}`);
  }

  /** The audit log, newest first, filtered (see {@link AuditQuery}). */
  async audit(q: AuditQuery = {}): Promise<AuditRecord[]> {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== "") p.set(k, String(v));
    const qs = p.toString();
    return list<AuditRecord>(await this.request("GET", `/audit${qs ? `?${qs}` : ""}`), "entries");
  }

  /** The embedded policy clients seen in the last day. */
  clients(): Promise<ClientList> {
    return this.request("GET", "/clients");
  }
}
