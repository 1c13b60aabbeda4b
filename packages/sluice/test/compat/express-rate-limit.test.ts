/**
 * `SluiceStore` judged by express-rate-limit itself: two real Express apps behind
 * express-rate-limit, one with the peer's store (its MemoryStore; rate-limit-redis on a
 * redis-server) and one with `SluiceStore`, get the same requests; their statuses, every rate
 * limit header and the bodies must be the same. In memory both read a faked Date (exact); on
 * Redis the clock is real, so reset times may differ by a second (they are whole seconds).
 */
import type { AddressInfo } from "node:net";
import express from "express";
import {
  type Options,
  type RateLimitRequestHandler,
  type Store,
  rateLimit,
} from "express-rate-limit";
import fc from "fast-check";
import { RedisStore } from "rate-limit-redis";
import { SluiceStore } from "sluice/compat/express-rate-limit";
import { afterEach, describe, expect, it, vi } from "vitest";
import { deadRedisClient } from "../../../../test/support/redis.js";
import { redisForSuite } from "../../../../test/support/redis-suite.js";
import { op, wait } from "./ops.js";

interface App {
  readonly url: string;
  readonly limiter: RateLimitRequestHandler;
  /** Resolves once the store has taken back `n` hits (`decrement` calls finished) in all. */
  takenBack(n: number): Promise<void>;
  close(): Promise<void>;
}

/** An Express app limited by express-rate-limit over `store`: `/` answers 200, `/fail` 500. */
async function app(store: Store, config: Partial<Options>): Promise<App> {
  // express-rate-limit takes a failed request back once its response has finished, which may
  // be after the client has read it: count the take-backs, for tests to wait for them.
  let takenBack = 0;
  const waiting: Array<{ n: number; resolve: () => void }> = [];
  const decrement = store.decrement.bind(store);
  store.decrement = async (key: string) => {
    await decrement(key);
    takenBack++;
    for (const w of waiting.splice(0)) {
      if (takenBack >= w.n) w.resolve();
      else waiting.push(w);
    }
  };
  const limiter = rateLimit({
    windowMs: 10_000,
    limit: 3,
    standardHeaders: "draft-7",
    legacyHeaders: true,
    keyGenerator: (req) => String(req.headers["x-user"] ?? "anon"),
    validate: { keyGeneratorIpFallback: false },
    ...config,
    store,
  });
  const a = express();
  a.use(limiter);
  a.get("/", (_req, res) => {
    res.send("ok");
  });
  a.get("/fail", (_req, res) => {
    res.status(500).send("failed");
  });
  const server = a.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    limiter,
    takenBack: (n) =>
      takenBack >= n ? Promise.resolve() : new Promise((resolve) => waiting.push({ n, resolve })),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const HEADERS = [
  "ratelimit-policy",
  "ratelimit",
  "ratelimit-limit",
  "ratelimit-remaining",
  "ratelimit-reset",
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "retry-after",
];

interface Seen {
  status: number;
  headers: Record<string, string>;
  body: string;
}

async function hit(base: string, path = "/", user = "u1"): Promise<Seen> {
  const res = await fetch(base + path, { headers: { "x-user": user } });
  const headers: Record<string, string> = {};
  for (const h of HEADERS) {
    const v = res.headers.get(h);
    if (v !== null) headers[h] = v;
  }
  return { status: res.status, headers, body: await res.text() };
}

/**
 * Keys at the edges, as a client sends them in `x-user` (percent-encoded; the edge apps'
 * keyGenerator decodes it): empty (a key of its own for express-rate-limit's stores), NUL and
 * two NULs (what sluice's empty key is made of), long, non-ASCII, braces and spaces.
 */
const EDGE_USERS = [
  "",
  "%00",
  "%00%00",
  "x".repeat(3000),
  encodeURIComponent("ключ🔑"),
  "a%20b%7Bc%7D",
];

/** A keyGenerator reading `x-user` percent-decoded, "" when absent (as `req.get(h) || ""`). */
const edgeKey: Partial<Options> = {
  keyGenerator: (req) => decodeURIComponent(req.get("x-user") || ""),
};

/** Each edge user's hits, user after user (the i-th user hits i + 1 times), then each again. */
async function edgeScript(a: App, b: App, compare: (y: Seen, x: Seen, what: string) => void) {
  for (const [i, user] of EDGE_USERS.entries())
    for (let n = 0; n <= i; n++) {
      const [x, y] = [await hit(a.url, "/", user), await hit(b.url, "/", user)];
      compare(y, x, `user ${i} hit ${n}`);
    }
  for (const [i, user] of EDGE_USERS.entries()) {
    const [x, y] = [await hit(a.url, "/", user), await hit(b.url, "/", user)];
    compare(y, x, `user ${i} again`);
    // The i-th user has hit i + 2 times: over the limit of 2 from the second user on.
    expect(x.status, `user ${i}`).toBe(i === 0 ? 200 : 429);
  }
}

/** How many of 100 concurrent requests to `base` passed (status 200). */
async function passed(base: string): Promise<number> {
  const rs = await Promise.all(Array.from({ length: 100 }, () => hit(base)));
  return rs.filter((r) => r.status === 200).length;
}

/** Reset figures (seconds, or epoch seconds) of `got` taken from `want` when within 1 s. */
function withinASecond(got: Seen, want: Seen): Seen {
  const headers = { ...got.headers };
  const near = (a: string | undefined, b: string | undefined) =>
    a !== undefined && b !== undefined && Math.abs(Number(a) - Number(b)) <= 1;
  for (const h of ["ratelimit-reset", "x-ratelimit-reset", "retry-after"])
    if (near(headers[h], want.headers[h])) headers[h] = want.headers[h]!;
  const reset = (v: string | undefined) => /r=(\d+)/.exec(v ?? "")?.[1];
  if (near(reset(headers.ratelimit), reset(want.headers.ratelimit)))
    headers.ratelimit = want.headers.ratelimit!;
  return { ...got, headers };
}

describe("SluiceStore against express-rate-limit's MemoryStore (faked Date: exact)", () => {
  const apps: App[] = [];
  afterEach(async () => {
    vi.useRealTimers();
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  async function pair(config: Partial<Options> = {}, sluice: SluiceStore = new SluiceStore()) {
    const { MemoryStore } = await import("express-rate-limit");
    const a = await app(new MemoryStore(), config);
    const b = await app(sluice, config);
    apps.push(a, b);
    return { a, b };
  }

  it.each(["draft-6", "draft-7", "draft-8"] as const)(
    "the same statuses, %s and legacy headers and bodies through a window and the next",
    async (standardHeaders) => {
      vi.useFakeTimers({ toFake: ["Date"], now: 1_700_000_000_000 });
      const { a, b } = await pair({ standardHeaders });
      const step = async (path = "/", user = "u1") => {
        const [x, y] = [await hit(a.url, path, user), await hit(b.url, path, user)];
        expect(y, `${path} ${user} at ${Date.now()}`).toEqual(x);
        return y;
      };
      for (let i = 0; i < 3; i++) expect((await step()).status).toBe(200);
      vi.advanceTimersByTime(4_000);
      expect((await step()).status).toBe(429);
      expect((await step("/", "u2")).status).toBe(200);
      vi.advanceTimersByTime(5_999);
      expect((await step()).headers["retry-after"]).toBe("1");
      // The window opened by the first hit (10 s ago) is over: a new one opens.
      vi.advanceTimersByTime(1);
      expect((await step()).status).toBe(200);
      await step("/", "u2");
    },
  );

  it("random sequences of hits, failures, resets and time give the same answers", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: 1_700_000_000_000 });
    let compared = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          limit: fc.integer({ min: 1, max: 4 }),
          skipFailedRequests: fc.boolean(),
          ops: fc.array(
            fc.oneof(
              op(6, "hit", {
                path: fc.constantFrom("/", "/", "/fail"),
                user: fc.constantFrom("a", "b", ""),
              }),
              op(1, "reset", { user: fc.constantFrom("a", "b") }),
              op(1, "get", { user: fc.constantFrom("a", "b") }),
              wait(2, 7000),
            ),
            { minLength: 3, maxLength: 25 },
          ),
        }),
        async ({ limit, skipFailedRequests, ops }) => {
          const { a, b } = await pair({ limit, skipFailedRequests, windowMs: 5_000 });
          let failed = 0;
          try {
            for (const o of ops) {
              if (o.op === "wait") vi.advanceTimersByTime(o.ms);
              else if (o.op === "reset") {
                // Typed void, but the store's promise (both stores answer one).
                await Promise.resolve(a.limiter.resetKey(o.user));
                await Promise.resolve(b.limiter.resetKey(o.user));
              } else if (o.op === "get") {
                expect(await b.limiter.getKey(o.user)).toEqual(await a.limiter.getKey(o.user));
              } else {
                const [x, y] = [await hit(a.url, o.path, o.user), await hit(b.url, o.path, o.user)];
                expect(y, JSON.stringify(o)).toEqual(x);
                // A failed request is taken back once its response has finished: let both land.
                if (skipFailedRequests && x.status >= 400) {
                  failed++;
                  await Promise.all([a.takenBack(failed), b.takenBack(failed)]);
                }
                compared++;
              }
            }
          } finally {
            await Promise.all(apps.splice(0).map((x) => x.close()));
          }
        },
      ),
      { numRuns: 60 },
    );
    expect(compared).toBeGreaterThan(150);
  });

  it("many concurrent requests at a small limit: exactly the limit passes on both", async () => {
    const { a, b } = await pair({ limit: 5, windowMs: 60_000 });
    expect(await passed(a.url)).toBe(5);
    expect(await passed(b.url)).toBe(5);
  });

  it("edge keys (empty, NUL, long, non-ASCII): each counted on its own, the same answers", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: 1_700_000_000_000 });
    const { a, b } = await pair({ ...edgeKey, limit: 2 });
    await edgeScript(a, b, (y, x, what) => expect(y, what).toEqual(x));
  });

  it('a keyGenerator answering "" (req.get(h) || ""): 200, then 429 at the limit, as its MemoryStore', async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: 1_700_000_000_000 });
    const { a, b } = await pair({ keyGenerator: (req) => req.get("x-api-key") || "", limit: 2 });
    const statuses = async (url: string) => {
      const out: number[] = [];
      for (let i = 0; i < 3; i++) out.push((await fetch(url)).status);
      return out;
    };
    expect(await statuses(a.url)).toEqual([200, 200, 429]);
    expect(await statuses(b.url)).toEqual([200, 200, 429]);
    expect(await b.limiter.getKey("")).toEqual(await a.limiter.getKey(""));
    await Promise.resolve(b.limiter.resetKey(""));
    expect((await fetch(b.url)).status).toBe(200);
  });

  it("refuses bad options with an error naming them", async () => {
    expect(() => new SluiceStore({ prefix: "a b" })).toThrow(/prefix: must be 1–128/);
    expect(() => new SluiceStore({ burst: 5 } as never)).toThrow(/burst: applies only/);
    expect(() => new SluiceStore({ algorithm: "concurrency" } as never)).toThrow(
      /algorithm: must be one of/,
    );
    expect(() => new SluiceStore({ windowMs: 5 } as never)).toThrow(/windowMs: unknown option/);
    expect(() => new SluiceStore().init({ windowMs: 0 })).toThrow(
      /windowMs: must be a positive number/,
    );
    expect(() =>
      new SluiceStore({ algorithm: "gcra" }).init({ windowMs: 1000, limit: () => 5 }),
    ).toThrow(
      /limit: must be a positive integer when SluiceStore decides with algorithm "gcra" \(got a function\)/,
    );
    await expect(new SluiceStore({ algorithm: "gcra" }).increment("k")).rejects.toThrow(
      /not initialised/,
    );
    // Counting, it works before init too (express-rate-limit's default window, one minute).
    const early = await new SluiceStore().increment("k");
    expect(early.totalHits).toBe(1);
    expect(early.resetTime!.getTime() - Date.now()).toBeGreaterThan(59_000);
  });
});

describe("SluiceStore with a sluice algorithm (sluice decides; no peer has it)", () => {
  const apps: App[] = [];
  afterEach(async () => {
    vi.useRealTimers();
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  it("gcra: 429 with Retry-After the exact wait, headers from sluice's decision", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: 1_700_000_000_000 });
    const b = await app(new SluiceStore({ algorithm: "gcra", prefix: "g" }), {
      limit: 4,
      windowMs: 8_000,
    });
    apps.push(b);
    const seen = [];
    for (let i = 0; i < 5; i++) seen.push(await hit(b.url));
    expect(seen.map((s) => s.status)).toEqual([200, 200, 200, 200, 429]);
    expect(seen.map((s) => s.headers["x-ratelimit-remaining"])).toEqual(["3", "2", "1", "0", "0"]);
    // One cell every 2 s: the fifth may retry in 2 s.
    expect(seen[4]!.headers["retry-after"]).toBe("2");
    vi.advanceTimersByTime(2_000);
    expect((await hit(b.url)).status).toBe(200);
  });

  it("skipFailedRequests: a 429 taken back refunds nothing (denials are not counted)", async () => {
    const store = new SluiceStore({ algorithm: "sliding-log", prefix: "sl" });
    const b = await app(store, { limit: 2, windowMs: 60_000, skipFailedRequests: true });
    apps.push(b);
    expect((await hit(b.url)).status).toBe(200);
    expect((await hit(b.url)).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await hit(b.url)).status).toBe(429);
    // Taken back once each response has finished: wait for the three 429s' before looking.
    await b.takenBack(3);
    expect((await hit(b.url)).status).toBe(429);
    expect(await store.get("u1")).toMatchObject({ totalHits: 2 });
  });
});

describe("SluiceStore against rate-limit-redis, on one redis-server", () => {
  const redis = redisForSuite();
  const apps: App[] = [];
  const run = Date.now().toString(36);
  let n = 0;

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  async function pair(config: Partial<Options>) {
    n++;
    const a = await app(
      new RedisStore({
        sendCommand: (...args: string[]) => redis.client.call(args[0]!, ...args.slice(1)) as never,
        prefix: `rl${run}${n}:`,
      }),
      config,
    );
    const b = await app(new SluiceStore({ client: redis.client, prefix: `s${run}${n}` }), config);
    apps.push(a, b);
    return { a, b };
  }

  it("the same statuses and headers (resets within a second), failures taken back", async () => {
    const { a, b } = await pair({ limit: 3, windowMs: 20_000, skipFailedRequests: true });
    const script: Array<[string, string]> = [
      ["/", "u"],
      ["/fail", "u"],
      ["/", "u"],
      ["/", "v"],
      ["/", "u"],
      ["/", "u"],
      ["/fail", "u"],
      ["/", "u"],
      ["/", "v"],
    ];
    let failed = 0;
    for (const [path, user] of script) {
      const [x, y] = [await hit(a.url, path, user), await hit(b.url, path, user)];
      expect(withinASecond(y, x), `${path} ${user}`).toEqual(x);
      if (x.status >= 400) {
        failed++;
        await Promise.all([a.takenBack(failed), b.takenBack(failed)]);
      }
    }
    await Promise.resolve(a.limiter.resetKey("u"));
    await Promise.resolve(b.limiter.resetKey("u"));
    expect(withinASecond(await hit(b.url), await hit(a.url))).toMatchObject({ status: 200 });
  });

  it("a window opened by the first hit ends windowMs later (real time, 1 s)", async () => {
    const { a, b } = await pair({ limit: 1, windowMs: 1_000 });
    for (const base of [a.url, b.url]) {
      expect((await hit(base)).status).toBe(200);
      expect((await hit(base)).status).toBe(429);
    }
    await new Promise((r) => setTimeout(r, 1_100));
    expect((await hit(b.url)).status).toBe((await hit(a.url)).status);
  });

  it("many concurrent requests at a small limit: exactly the limit passes on both", async () => {
    const { a, b } = await pair({ limit: 5, windowMs: 60_000 });
    expect(await passed(a.url)).toBe(5);
    expect(await passed(b.url)).toBe(5);
    expect(await redis.client.get(`sl:s${run}${n}:{u1}:f0`)).toBe("100");
  });

  it("edge keys (empty, NUL, long, non-ASCII): each counted on its own, the same answers", async () => {
    const { a, b } = await pair({ ...edgeKey, limit: 2, windowMs: 60_000 });
    await edgeScript(a, b, (y, x, what) => expect(withinASecond(y, x), what).toEqual(x));
  });

  it("getKey: hits and reset time of a key; undefined once nothing is counted", async () => {
    const { b } = await pair({ limit: 5, windowMs: 30_000 });
    await hit(b.url, "/", "g");
    await hit(b.url, "/", "g");
    const info = await b.limiter.getKey("g");
    expect(info?.totalHits).toBe(2);
    expect(info!.resetTime!.getTime() - Date.now()).toBeGreaterThan(29_000);
    expect(await b.limiter.getKey("nobody")).toBeUndefined();
  });

  it("a Redis failure is the store's error: express-rate-limit's passOnStoreError decides", async () => {
    const dead = deadRedisClient();
    try {
      // express-rate-limit logs the store's error; the test needs only the status.
      const quiet = { error: () => undefined, warn: () => undefined };
      const open = await app(new SluiceStore({ client: dead, prefix: `d${run}` }), {
        passOnStoreError: true,
        logger: quiet,
      });
      const closed = await app(new SluiceStore({ client: dead, prefix: `e${run}` }), {
        passOnStoreError: false,
        logger: quiet,
      });
      apps.push(open, closed);
      expect((await hit(open.url)).status).toBe(200);
      expect((await hit(closed.url)).status).toBe(500);
    } finally {
      dead.disconnect();
    }
  });
});
