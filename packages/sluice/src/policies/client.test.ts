/**
 * The policy client against a stand-in for the service (an injected `fetch` that answers as
 * `GET /v1/policies` and `POST /v1/policies/report` do), on the memory store and a manual clock:
 * swaps keep counters, 304s cost nothing, an unreachable service leaves the last good set in
 * force, the cache file, drafts and reports. The client against the real service, on Redis and
 * in real processes, is tested in packages/server/test/policy-client.test.ts and platform.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ManualTime } from "../../../../test/support/manual-time.js";
import { type SluiceError, ValidationError, isSluiceError } from "../errors.js";
import { createLimiter } from "../limiter.js";
import { MemoryStore } from "../stores/memory.js";
import { connectPolicies } from "./client.js";
import type {
  ConnectPoliciesOptions,
  PolicyClient,
  PolicyFetch,
  PolicyFetchInit,
  PolicyFetchResponse,
  PolicyUpdate,
} from "./types.js";

const KEY = `sk_0123456789abcdef_${"a".repeat(43)}`;
const URL_ = "http://sluice.test:8080";

interface Entry {
  version: number;
  document: Record<string, unknown>;
  draft?: { id: number; document: Record<string, unknown> };
}

interface Seen {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: Record<string, string>;
  body: unknown;
}

const response = (
  status: number,
  body: string,
  headers: Record<string, string> = {},
): PolicyFetchResponse => ({
  status,
  headers: { get: (n) => headers[n.toLowerCase()] ?? null },
  text: () => Promise.resolve(body),
});

/**
 * The service as the client sees it: the set, its ETag, long polls parked until a change or
 * their wait ends (on the manual clock), and reports kept. `mode` makes it fail.
 */
class FakeService {
  revision = 1;
  private tag = 1;
  policies: Entry[] = [];
  readonly seen: Seen[] = [];
  readonly reports: Record<string, unknown>[] = [];
  /**
   * `up`; `down` (connection refused); `hang` (never answers); `status` (answers `failStatus`);
   * `early` (long polls answered 304 at once).
   */
  mode: "up" | "down" | "hang" | "status" | "early" = "up";
  failStatus = 503;
  reportStatus = 200;
  private parked: Array<() => void> = [];

  constructor(private readonly time: ManualTime) {}

  get etag(): string {
    return `"set-${this.tag}"`;
  }

  /** Changes the set (a new revision and ETag) and answers the waiting long polls. */
  publish(change: (policies: Entry[]) => Entry[] | void): void {
    this.policies = change(this.policies) ?? this.policies;
    this.revision++;
    this.tag++;
    const parked = this.parked;
    this.parked = [];
    for (const answer of parked) answer();
  }

  /** A change of revision that leaves this app's set as it is. */
  bumpRevision(): void {
    this.revision++;
  }

  get waiting(): number {
    return this.parked.length;
  }

  private set(): PolicyFetchResponse {
    return response(
      200,
      JSON.stringify({ app: "web", revision: this.revision, policies: this.policies }),
      { etag: this.etag, "sluice-revision": String(this.revision) },
    );
  }

  readonly fetch: PolicyFetch = (url, init: PolicyFetchInit) => {
    const u = new URL(url);
    this.seen.push({
      method: init.method,
      path: u.pathname,
      query: u.searchParams,
      headers: init.headers,
      body: init.body === undefined ? undefined : JSON.parse(init.body),
    });
    if (this.mode === "down") return Promise.reject(new TypeError("fetch failed"));
    if (this.mode === "hang") return new Promise(() => {});
    if (this.mode === "status")
      return Promise.resolve(
        response(
          this.failStatus,
          JSON.stringify({ error: { code: "x", message: `failing with ${this.failStatus}` } }),
        ),
      );
    if (init.headers.authorization !== `Bearer ${KEY}`)
      return Promise.resolve(
        response(
          401,
          JSON.stringify({
            error: { code: "unauthorized", message: "unknown or revoked API key" },
          }),
        ),
      );
    if (u.pathname === "/v1/policies/report") {
      if (this.reportStatus !== 200)
        return Promise.resolve(
          response(this.reportStatus, '{"error":{"code":"x","message":"no"}}'),
        );
      this.reports.push(JSON.parse(init.body!) as Record<string, unknown>);
      return Promise.resolve(
        response(200, JSON.stringify({ revision: this.revision, ignored: [] })),
      );
    }
    const wait = Number(u.searchParams.get("wait") ?? 0);
    if (init.headers["if-none-match"] !== this.etag) return Promise.resolve(this.set());
    if (wait === 0 || this.mode === "early")
      return Promise.resolve(
        response(304, "", { etag: this.etag, "sluice-revision": String(this.revision) }),
      );
    return new Promise((resolve, reject) => {
      const answer = () => {
        this.time.timers.clearTimeout(timer);
        resolve(
          init.headers["if-none-match"] === this.etag
            ? response(304, "", { etag: this.etag, "sluice-revision": String(this.revision) })
            : this.set(),
        );
      };
      const timer = this.time.timers.setTimeout(() => {
        this.parked = this.parked.filter((p) => p !== answer);
        answer();
      }, wait);
      this.parked.push(answer);
      init.signal?.addEventListener("abort", () => {
        this.time.timers.clearTimeout(timer);
        this.parked = this.parked.filter((p) => p !== answer);
        reject(new Error("aborted"));
      });
    });
  };

  /** The long polls asked for so far. */
  get polls(): Seen[] {
    return this.seen.filter((s) => s.path === "/v1/policies");
  }
}

const policy = (name: string, limit: number, extra: Record<string, unknown> = {}) => ({
  name,
  description: "",
  algorithm: "fixed-window",
  rules: [{ limit, period: "1m" }],
  shadow: false,
  enabled: true,
  ...extra,
});

let time: ManualTime;
let service: FakeService;
let store: MemoryStore;
let errors: SluiceError[];
let updates: PolicyUpdate[];
let clients: PolicyClient[];

beforeEach(() => {
  time = new ManualTime();
  service = new FakeService(time);
  service.policies = [{ version: 1, document: policy("api", 5) }];
  store = new MemoryStore({ now: time.now });
  errors = [];
  updates = [];
  clients = [];
});
afterEach(async () => {
  for (const c of clients) await c.close();
});

async function connect(over: Partial<ConnectPoliciesOptions> = {}): Promise<PolicyClient> {
  const c = await connectPolicies({
    url: URL_,
    apiKey: KEY,
    store,
    host: "test-host",
    fetch: service.fetch,
    clock: time.now,
    timers: time.timers,
    random: () => 1,
    onError: (e) => errors.push(e),
    onUpdate: (u) => updates.push(u),
    ...over,
  });
  clients.push(c);
  await time.advance(0);
  return c;
}

/** Lets the client take an answer (no time passes). */
const settle = () => time.advance(0);

describe("connectPolicies", () => {
  it("loads the granted set and decides locally, then waits on a long poll with the set's ETag", async () => {
    const c = await connect();
    expect(c.names()).toEqual(["api"]);
    expect(c.status()).toMatchObject({ revision: 1, source: "service", connected: true });
    const d = await c.limit("api", "user:42");
    expect(d).toMatchObject({ allowed: true, policy: "api", limit: 5, remaining: 4 });
    // First the set; then a long poll that sends the ETag, the wait and the revision seen.
    expect(service.polls.map((p) => p.query.toString())).toEqual(["", "wait=25000&revision=1"]);
    expect(service.polls[1]!.headers["if-none-match"]).toBe('"set-1"');
    expect(service.polls[1]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(service.waiting).toBe(1);
    expect(updates).toEqual([
      { revision: 1, source: "service", policies: ["api"], changed: ["api"], removed: [] },
    ]);
  });

  it("swaps a changed policy in whole and keeps its counters; the limiter handed out follows", async () => {
    const c = await connect();
    const limiter = c.limiter("api");
    for (let i = 0; i < 3; i++) await limiter.limit("k");
    expect((await limiter.peek("k")).remaining).toBe(2);

    service.publish(() => [{ version: 2, document: policy("api", 7) }]);
    await settle();
    expect(c.limiter("api")).toBe(limiter); // the same object, now on version 2
    expect(limiter.policy.rules[0]!.limit).toBe(7);
    // The three charged under version 1 still count: 7 - 3 - 1.
    expect(await limiter.limit("k")).toMatchObject({ allowed: true, limit: 7, remaining: 3 });
    expect(updates.at(-1)).toMatchObject({ revision: 2, changed: ["api"], removed: [] });
    // And the next long poll carries the new ETag at once.
    expect(service.polls.at(-1)!.headers["if-none-match"]).toBe('"set-2"');
  });

  it("an unchanged set costs a 304 and changes nothing; a revision elsewhere is only noted", async () => {
    const c = await connect();
    const limiter = c.limiter("api");
    await limiter.limit("k");
    service.bumpRevision();
    await time.advance(25_000); // the wait ends: 304
    expect(service.polls).toHaveLength(3);
    expect(service.polls[2]!.query.get("revision")).toBe("2");
    expect(updates).toHaveLength(1);
    expect(c.status().revision).toBe(2);
    expect((await limiter.peek("k")).remaining).toBe(4);
  });

  it("a policy no longer granted is SLUICE_ERR_POLICY_NOT_FOUND, never an allow", async () => {
    service.policies.push({ version: 1, document: policy("search", 2) });
    const c = await connect();
    const limiter = c.limiter("search");
    expect(() => c.limiter("ghost")).toThrow(
      expect.objectContaining({ code: "SLUICE_ERR_POLICY_NOT_FOUND" }),
    );
    await expect(c.limit("ghost", "k")).rejects.toMatchObject({
      code: "SLUICE_ERR_POLICY_NOT_FOUND",
      message: expect.stringContaining('policy "ghost" is not granted to this app'),
    });

    service.publish((p) => p.filter((e) => e.document.name !== "search"));
    await settle();
    expect(updates.at(-1)).toMatchObject({ removed: ["search"], policies: ["api"] });
    const err: unknown = await c.limit("search", "k").catch((e: unknown) => e);
    expect(isSluiceError(err, "SLUICE_ERR_POLICY_NOT_FOUND")).toBe(true);
    await expect(limiter.limit("k")).rejects.toMatchObject({ code: "SLUICE_ERR_POLICY_NOT_FOUND" });
    // Its policy is still there to read (the middleware's headers), but nothing is decided.
    expect(limiter.policy.name).toBe("search");

    service.publish((p) => [...p, { version: 2, document: policy("search", 2) }]);
    await settle();
    expect((await limiter.limit("k")).allowed).toBe(true);
  });

  it("a disabled policy allows without counting, as the service does; bad input is still an error", async () => {
    service.policies = [{ version: 1, document: policy("api", 1, { enabled: false }) }];
    const c = await connect();
    for (let i = 0; i < 3; i++)
      expect(await c.limit("api", "k")).toMatchObject({
        allowed: true,
        reason: "disabled",
        remaining: 1,
      });
    await expect(c.limit("api", "k", { cost: 2 })).rejects.toMatchObject({
      code: "SLUICE_ERR_COST",
    });
    await expect(c.limit("api", "")).rejects.toMatchObject({ code: "SLUICE_ERR_KEY" });
    service.publish(() => [{ version: 2, document: policy("api", 1) }]);
    await settle();
    // Nothing was counted while it was disabled.
    expect((await c.limit("api", "k")).allowed).toBe(true);
    expect((await c.limit("api", "k")).allowed).toBe(false);
  });

  it("shadow mode: everything passes, the would-be denials say so", async () => {
    service.policies = [{ version: 1, document: policy("api", 1, { shadow: true }) }];
    const c = await connect();
    expect(await c.limit("api", "k")).toMatchObject({ allowed: true });
    expect(await c.limit("api", "k")).toMatchObject({ allowed: true, reason: "shadow" });
  });

  it("runs a draft in shadow on its own keys (sluice.draft.<id>) and reports its counts and the decisions", async () => {
    service.policies = [
      { version: 1, document: policy("api", 5), draft: { id: 7, document: policy("api", 2) } },
    ];
    const c = await connect();
    expect(service.reports).toHaveLength(1); // the first report goes out at once (a heartbeat)
    for (let i = 0; i < 3; i++) expect((await c.limit("api", "k")).allowed).toBe(true);
    // The draft counted on its own keys, the enforced policy on its own.
    const draftKeys = createLimiter({
      store,
      policy: {
        name: "sluice.draft.7",
        algorithm: "fixed-window",
        rules: [{ limit: 2, period: "1m" }],
      },
    });
    expect((await draftKeys.peek("k")).allowed).toBe(false);
    expect((await c.limiter("api").peek("k")).remaining).toBe(2);

    await time.advance(10_000);
    expect(service.reports).toHaveLength(2);
    expect(service.reports[1]).toMatchObject({
      host: "test-host",
      client: expect.stringMatching(/^sluice\/\d+\.\d+\.\d+$/),
      revision: 1,
      drafts: [
        {
          policy: "api",
          draftId: 7,
          evaluated: 3,
          wouldDeny: 1,
          wouldDenyNewly: 1,
          wouldAllowNewly: 0,
        },
      ],
      decisions: [{ policy: "api", allowed: true, count: 3 }],
    });
    expect(service.reports[1]!.instance).toBe(service.reports[0]!.instance);

    // A report that fails keeps its counts for the next one.
    await c.limit("api", "k");
    service.reportStatus = 503;
    await time.advance(10_000);
    expect(errors.at(-1)?.message).toContain("POST /v1/policies/report with 503");
    service.reportStatus = 200;
    await time.advance(10_000);
    expect(service.reports.at(-1)).toMatchObject({
      drafts: [{ draftId: 7, evaluated: 1, wouldDeny: 1, wouldDenyNewly: 1 }],
      decisions: [{ policy: "api", allowed: true, count: 1 }],
    });
  });

  it("keeps enforcing the last good set while the service is unreachable, retrying with growing waits", async () => {
    const c = await connect();
    const limiter = c.limiter("api");
    await limiter.limit("k");
    service.mode = "down";
    await time.advance(25_000); // the long poll ends; the next request fails
    expect(errors.at(-1)).toMatchObject({
      code: "SLUICE_ERR_POLICY_SOURCE",
      message: expect.stringContaining(
        `could not reach the sluice service at ${URL_}: fetch failed`,
      ),
    });
    expect(c.status()).toMatchObject({ connected: false, failures: 1 });
    const at = () => service.polls.length;
    const before = at();
    // Waits of 500, 1000, 2000 ms (random() = 1: no spread).
    await time.advance(499);
    expect(at()).toBe(before);
    await time.advance(1);
    expect(at()).toBe(before + 1);
    await time.advance(999);
    expect(at()).toBe(before + 1);
    await time.advance(1);
    expect(at()).toBe(before + 2);
    await time.advance(2000);
    expect(at()).toBe(before + 3);
    // Decisions go on with the last good set and its counters.
    for (let i = 0; i < 4; i++) expect((await limiter.limit("k")).allowed).toBe(true);
    expect((await limiter.limit("k")).allowed).toBe(false);

    service.mode = "up";
    service.publish(() => [{ version: 2, document: policy("api", 9) }]);
    await time.advance(4000);
    expect(c.status()).toMatchObject({ connected: true, failures: 0, revision: 2 });
    expect(limiter.policy.rules[0]!.limit).toBe(9);
  });

  it("gives up a request that hangs after its wait plus timeoutMs", async () => {
    const c = await connect({ timeoutMs: 2000 });
    service.mode = "hang";
    await time.advance(25_000); // the parked poll answers 304; the next one hangs
    const polls = service.polls.length;
    const gets = () => errors.filter((e) => e.message.includes("GET"));
    await time.advance(26_999);
    expect(gets()).toHaveLength(0);
    await time.advance(1);
    expect(gets().map((e) => e.message)).toEqual([
      `the sluice service at ${URL_} did not answer GET /v1/policies within 27000 ms`,
    ]);
    expect(c.status().connected).toBe(false);
    expect(service.polls.length).toBe(polls);
    service.mode = "up";
  });

  it("an answer that is not a policy set, or a document that does not validate, changes nothing", async () => {
    const c = await connect();
    service.mode = "status";
    service.failStatus = 500;
    await time.advance(25_000);
    expect(errors.at(-1)?.message).toContain(
      "answered GET /v1/policies with 500: failing with 500",
    );
    service.mode = "up";
    service.publish(() => [
      { version: 2, document: policy("api", 5, { rules: [{ limit: 0, period: "1m" }] }) },
      { version: 1, document: policy("new", 0) },
    ]);
    await time.advance(500);
    expect(errors.map((e) => e.message)).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^policy "api" \(version 2\) from the service does not validate; keeping version 1: Invalid policy "api": rules\.0\.limit/,
        ),
        expect.stringMatching(
          /^policy "new" \(version 1\) from the service does not validate; it is left out/,
        ),
      ]),
    );
    expect(c.names()).toEqual(["api"]);
    expect(c.limiter("api").policy.rules[0]!.limit).toBe(5);
  });

  it("a long poll that comes back early with nothing new does not make the client ask again at once", async () => {
    await connect();
    // A proxy cutting long polls short: 304 at once.
    service.mode = "early";
    await time.advance(25_000);
    const polls = service.polls.length;
    await time.advance(499);
    expect(service.polls.length).toBe(polls);
    await time.advance(1);
    expect(service.polls.length).toBe(polls + 1);
    expect(errors).toEqual([]);
  });

  describe("options", () => {
    it("are checked: every problem named by its option", async () => {
      const err: unknown = await connectPolicies({
        url: "ftp://x",
        apiKey: "",
        store: undefined as never,
        waitMs: 10,
        bogus: 1,
      } as never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).issues.map((i) => i.path)).toEqual([
        "bogus",
        "url",
        "apiKey",
        "store",
        "waitMs",
      ]);
      expect((err as ValidationError).code).toBe("SLUICE_ERR_OPTIONS");
    });

    it("are checked across fields too, with every other problem", async () => {
      const err: unknown = await connectPolicies({
        url: "http://sluice.internal:8080/?x=1",
        apiKey: "sk 1",
        store: new MemoryStore(),
        cacheFile: "/tmp/p.json",
        cache: { load: () => Promise.resolve(undefined) },
        retryMinMs: 5000,
        retryMaxMs: 1000,
        timers: { setTimeout: () => 1 },
        random: 0.5,
      } as never).catch((e: unknown) => e);
      expect((err as ValidationError).issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
        "url: must be the service's base URL, without a query or fragment",
        "apiKey: must not contain spaces or line breaks",
        "cache: must be an object with load() and save(text)",
        "timers: must be an object with setTimeout(callback, ms) and clearTimeout(handle)",
        "random: must be a function",
        "cache: give cacheFile or cache, not both",
        "retryMaxMs: must be at least retryMinMs (5000)",
      ]);
    });

    it("an API key the service refuses at start is an options error naming apiKey", async () => {
      const err: unknown = await connect({ apiKey: `sk_ffffffffffffffff_${"b".repeat(43)}` }).catch(
        (e: unknown) => e,
      );
      expect(err).toMatchObject({
        code: "SLUICE_ERR_OPTIONS",
        issues: [
          { path: "apiKey", message: "the service refused it (401): unknown or revoked API key" },
        ],
      });
    });

    it("no service and no cache: SLUICE_ERR_POLICY_SOURCE, saying so", async () => {
      service.mode = "down";
      const err: unknown = await connect().catch((e: unknown) => e);
      expect(err).toMatchObject({
        code: "SLUICE_ERR_POLICY_SOURCE",
        message: `could not reach the sluice service at ${URL_}: fetch failed; and there is no cached policy set to start from (set cacheFile to keep one)`,
      });
    });
  });

  describe("the cache file", () => {
    let dir: string;
    let file: string;
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), "sluice-policy-cache-"));
      file = join(dir, "policies.json");
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    it("is written in a directory that did not exist yet", async () => {
      const nested = join(dir, "app", "cache", "policies.json");
      const c = await connect({ cacheFile: nested });
      await c.close();
      expect(errors).toEqual([]);
      expect(JSON.parse(readFileSync(nested, "utf8"))).toMatchObject({
        format: "sluice-policy-cache",
      });
    });

    it("is written with each new set and started from when the service cannot be reached", async () => {
      service.policies = [
        { version: 3, document: policy("api", 2), draft: { id: 4, document: policy("api", 1) } },
      ];
      const first = await connect({ cacheFile: file });
      await first.close();
      const saved = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
      expect(saved).toMatchObject({
        format: "sluice-policy-cache",
        url: URL_,
        keyId: "0123456789abcdef",
        etag: '"set-1"',
        set: { revision: 1, policies: [{ version: 3 }] },
      });
      expect(JSON.stringify(saved)).not.toContain(KEY);

      service.mode = "down";
      const c = await connect({ cacheFile: file });
      expect(c.status()).toMatchObject({ source: "cache", connected: false, revision: 1 });
      expect(updates.at(-1)).toMatchObject({ source: "cache", policies: ["api"] });
      expect(errors[0]!.message).toContain("fetch failed");
      expect((await c.limit("api", "k")).allowed).toBe(true);
      expect((await c.limit("api", "k")).allowed).toBe(true);
      expect((await c.limit("api", "k")).allowed).toBe(false);

      // The service back: its set replaces the cache's, and the poll starts from the cached ETag.
      service.mode = "up";
      await time.advance(500);
      expect(service.polls.at(-1)!.headers["if-none-match"]).toBe('"set-1"');
      expect(service.waiting).toBe(1);
      service.publish(() => [{ version: 4, document: policy("api", 3) }]);
      await settle();
      expect(c.status()).toMatchObject({ source: "service", connected: true, revision: 2 });
    });

    it("is not used when written for another API key or when it is not a cache", async () => {
      writeFileSync(
        file,
        JSON.stringify({
          format: "sluice-policy-cache",
          version: 1,
          url: URL_,
          keyId: "ffffffffffffffff",
          savedAt: new Date(0).toISOString(),
          set: { app: "web", revision: 1, policies: [] },
        }),
      );
      service.mode = "down";
      await expect(connect({ cacheFile: file })).rejects.toMatchObject({
        code: "SLUICE_ERR_POLICY_SOURCE",
      });
      expect(errors.map((e) => e.message)).toContain(
        "the policy cache was written for another API key; not used",
      );

      writeFileSync(file, "{ not json");
      await expect(connect({ cacheFile: file })).rejects.toMatchObject({
        code: "SLUICE_ERR_POLICY_SOURCE",
      });
      expect(errors.at(-1)!.message).toMatch(
        /^the policy cache is not a policy set sluice wrote: /,
      );
    });
  });

  it("close gives up a report in flight without calling it an error, and sends the counts again", async () => {
    // Reports hang (a slow service) once `slow` is set; close() comes meanwhile.
    let slow = false;
    let hung = 0;
    const c = await connect({
      fetch: (url, init) => {
        if (slow && new URL(url).pathname === "/v1/policies/report" && hung++ === 0)
          return new Promise((_, reject) =>
            init.signal?.addEventListener("abort", () => reject(new Error("aborted"))),
          );
        return service.fetch(url, init);
      },
    });
    await c.limit("api", "k");
    const reports = service.reports.length;
    slow = true;
    await time.advance(10_000);
    expect(hung).toBe(1);
    await c.close();
    expect(errors).toEqual([]);
    expect(service.reports.length).toBe(reports + 1);
    expect(service.reports.at(-1)).toMatchObject({
      decisions: [{ policy: "api", allowed: true, count: 1 }],
    });
  });

  it("close stops the long poll and sends a last report", async () => {
    const c = await connect();
    await c.limit("api", "k");
    expect(service.waiting).toBe(1);
    await c.close();
    expect(service.waiting).toBe(0);
    expect(time.pending).toBe(0);
    expect(service.reports.at(-1)).toMatchObject({
      decisions: [{ policy: "api", allowed: true, count: 1 }],
    });
    const polls = service.polls.length;
    await time.advance(60_000);
    expect(service.polls.length).toBe(polls);
    // Decisions go on with the last set.
    expect((await c.limit("api", "k")).allowed).toBe(true);
  });
});
