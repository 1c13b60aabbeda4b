/**
 * Every adapter through a real server on loopback with real HTTP requests. One scenario
 * table, five frameworks (as hono runs one router case file against every router).
 */
import { afterEach, describe, expect, it } from "vitest";
import { type PolicyInput, type Store, createLimiter, memoryStore } from "sluice";
import type { DecisionEvent } from "../../src/http/index.js";
import {
  MiddlewareError,
  type MiddlewareStage,
  QUOTA_EXCEEDED_TYPE,
  invalidKeyProblem,
  middlewareErrorProblem,
} from "../../src/http/index.js";
import { ManualTime } from "../../../../test/support/manual-time.js";
import { type HarnessOptions, type Running, harnesses, releaseHold } from "./harness.js";

const T0 = 1_700_000_000_000;

/** A memory store on an injected clock, and limiters over it. */
function clocked() {
  let t = T0;
  const store = memoryStore({ now: () => t });
  return {
    store,
    now: () => t,
    advance: (ms: number) => (t += ms),
    limiter: (policy: PolicyInput) => createLimiter({ store, policy }),
  };
}

/** A store whose every call fails, as an unreachable Redis would. */
const brokenStore: Store = {
  kind: "broken",
  decide: () => Promise.reject(new Error("connection refused")),
  peek: () => Promise.reject(new Error("connection refused")),
  adjust: () => Promise.reject(new Error("connection refused")),
  release: () => Promise.reject(new Error("connection refused")),
  reset: () => Promise.reject(new Error("connection refused")),
};

const RATE_HEADERS = [
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "x-ratelimit-used",
  "ratelimit-policy",
  "ratelimit",
  "retry-after",
];

function rateHeaders(res: Response): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of RATE_HEADERS) {
    const v = res.headers.get(h);
    if (v !== null) out[h] = v;
  }
  return out;
}

async function get(
  url: string,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Response & { text_: string }> {
  const res = await fetch(url, { headers, signal });
  const text_ = await res.text();
  return Object.assign(res, { text_ });
}

describe.each(harnesses)("$name adapter", (h) => {
  let running: Running | undefined;
  const start = async (o: HarnessOptions) => (running = await h.start(o));
  /**
   * An app whose limiter over `policy` decides on manual time and waits by `strategy`; every
   * decision's event is in `events`.
   */
  const waiting = async (policy: PolicyInput, strategy: HarnessOptions["strategy"]) => {
    const time = new ManualTime();
    const limiter = createLimiter({ store: memoryStore({ now: time.now }), policy });
    const events: DecisionEvent[] = [];
    const { url } = await start({
      limiter,
      clock: time.now,
      timers: time.timers,
      strategy,
      onDecision: (e) => events.push(e as DecisionEvent),
    });
    return { time, limiter, events, url };
  };
  afterEach(async () => {
    releaseHold();
    await running?.close();
    running = undefined;
  });

  it("sends exact headers, 429 after the limit, and Retry-After that a retry honours", async () => {
    const c = clocked();
    const limiter = c.limiter({ name: "api", rules: [{ limit: 2, period: "10s" }] });
    const { url } = await start({ limiter, clock: c.now });

    const a = await get(url);
    expect(a.status).toBe(200);
    expect(a.text_).toBe("ok");
    expect(rateHeaders(a)).toEqual({
      "x-ratelimit-limit": "2",
      "x-ratelimit-remaining": "1",
      "x-ratelimit-reset": String((T0 + 5000) / 1000),
      "x-ratelimit-used": "1",
      "ratelimit-policy": '"api";q=2;w=10',
      ratelimit: '"api";r=1;t=5',
    });
    const b = await get(url);
    expect(rateHeaders(b)).toMatchObject({
      "x-ratelimit-remaining": "0",
      ratelimit: '"api";r=0;t=10',
    });

    const denied = await get(url);
    expect(denied.status).toBe(429);
    expect(denied.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(rateHeaders(denied)).toEqual({
      "x-ratelimit-limit": "2",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-reset": String((T0 + 10_000) / 1000),
      "x-ratelimit-used": "2",
      "ratelimit-policy": '"api";q=2;w=10',
      ratelimit: '"api";r=0;t=10',
      "retry-after": "5",
    });
    expect(JSON.parse(denied.text_)).toEqual({
      type: QUOTA_EXCEEDED_TYPE,
      title: "Request cannot be satisfied as assigned quota has been exceeded",
      status: 429,
      detail: "Rate limit exceeded (api); retry in 5 s.",
      "violated-policies": ["api"],
      retryAfter: 5,
    });

    c.advance(5000 - 1);
    expect((await get(url)).status).toBe(429);
    c.advance(1);
    const retried = await get(url);
    expect(retried.status).toBe(200);
    expect(rateHeaders(retried)["x-ratelimit-remaining"]).toBe("0");
  });

  it("lists every rule of a multi-rule policy and names the violated one", async () => {
    const c = clocked();
    const limiter = c.limiter({
      name: "api",
      algorithm: "fixed-window",
      rules: [
        { limit: 1, period: "1s" },
        { limit: 3, period: "1m" },
      ],
    });
    const { url } = await start({ limiter, headers: "ietf", clock: c.now });
    const a = await get(url);
    expect(rateHeaders(a)).toEqual({
      "ratelimit-policy": '"api-0";q=1;w=1, "api-1";q=3;w=60',
      ratelimit: '"api-0";r=0;t=1, "api-1";r=2;t=40',
    });
    const b = await get(url);
    expect(b.status).toBe(429);
    expect(JSON.parse(b.text_)["violated-policies"]).toEqual(["api-0"]);
    expect(rateHeaders(b)).toMatchObject({
      "ratelimit-policy": '"api-0";q=1;w=1, "api-1";q=3;w=60',
      "retry-after": "1",
    });
    expect(rateHeaders(b).ratelimit).toMatch(/^"api-0";r=0;t=1, "api-1";r=\d;t=40$/);
  });

  it("sends no rate-limit headers with headers: false, but Retry-After on a 429", async () => {
    const c = clocked();
    const limiter = c.limiter({ name: "api", rules: [{ limit: 1, period: "1m" }] });
    const { url } = await start({ limiter, headers: false, clock: c.now });
    expect(rateHeaders(await get(url))).toEqual({});
    expect(rateHeaders(await get(url))).toEqual({ "retry-after": "60" });
  });

  it("ignores a spoofed X-Forwarded-For without trusted proxies", async () => {
    const c = clocked();
    const limiter = c.limiter({ name: "api", rules: [{ limit: 1, period: "1m" }] });
    const keys: string[] = [];
    const { url } = await start({ limiter, clock: c.now, onDecision: (e) => keys.push(e.key) });
    expect((await get(url, { "x-forwarded-for": "198.51.100.1" })).status).toBe(200);
    expect(
      (await get(url, { "x-forwarded-for": "198.51.100.2", forwarded: "for=198.51.100.3" })).status,
    ).toBe(429);
    expect(keys).toEqual(["ip:127.0.0.1", "ip:127.0.0.1"]);
  });

  it("believes X-Forwarded-For from a trusted proxy", async () => {
    const c = clocked();
    const limiter = c.limiter({ name: "api", rules: [{ limit: 1, period: "1m" }] });
    const keys: string[] = [];
    const { url } = await start({
      limiter,
      clock: c.now,
      trustProxy: ["loopback"],
      onDecision: (e) => keys.push(e.key),
    });
    expect((await get(url, { "x-forwarded-for": "6.6.6.6, 198.51.100.1" })).status).toBe(200);
    expect((await get(url, { "x-forwarded-for": "198.51.100.2" })).status).toBe(200);
    expect((await get(url, { "x-forwarded-for": "7.7.7.7, 198.51.100.1" })).status).toBe(429);
    expect(keys).toEqual(["ip:198.51.100.1", "ip:198.51.100.2", "ip:198.51.100.1"]);
  });

  it("groups IPv6 clients by /64 (peer on ::1 is a trusted proxy)", async () => {
    const c = clocked();
    const limiter = c.limiter({ name: "api", rules: [{ limit: 1, period: "1m" }] });
    const keys: string[] = [];
    const { url } = await start({
      limiter,
      clock: c.now,
      host: "::1",
      trustProxy: ["::1"],
      onDecision: (e) => keys.push(e.key),
    });
    expect((await get(url, { "x-forwarded-for": "2001:db8:1:2::1" })).status).toBe(200);
    expect((await get(url, { "x-forwarded-for": "2001:db8:1:2:ffff:ffff:ffff:fffe" })).status).toBe(
      429,
    );
    expect((await get(url, { "x-forwarded-for": "2001:DB8:1:3::1" })).status).toBe(200);
    expect((await get(url, { "x-forwarded-for": "::ffff:203.0.113.9" })).status).toBe(200);
    expect((await get(url, { "x-forwarded-for": "203.0.113.9" })).status).toBe(429);
    expect(keys).toEqual([
      "ip:2001:db8:1:2::/64",
      "ip:2001:db8:1:2::/64",
      "ip:2001:db8:1:3::/64",
      "ip:203.0.113.9",
      "ip:203.0.113.9",
    ]);
  });

  it("keys a direct IPv6 peer by its /64", async () => {
    const c = clocked();
    const limiter = c.limiter({ name: "api", rules: [{ limit: 5, period: "1m" }] });
    const events: DecisionEvent[] = [];
    const { url } = await start({
      limiter,
      clock: c.now,
      host: "::1",
      onDecision: (e) => events.push(e as DecisionEvent),
    });
    await get(url, { "x-forwarded-for": "2001:db8::1" });
    expect(events.map((e) => [e.key, e.request.address, e.request.peer])).toEqual([
      ["ip:::/64", "::1", "::1"],
    ]);
  });

  it("wait: holds requests in arrival order, each exactly until it may pass", async () => {
    // 1 request per 100 ms, no burst: on the injected clock the 2nd waits 100 ms, the 3rd 200 ms.
    const { time, events, url } = await waiting(
      { name: "wait", rules: [{ limit: 10, period: "1s", burst: 1 }] },
      { type: "wait", maxWaitMs: 2000 },
    );
    const done: number[] = [];
    const send = (i: number) => get(url).then((r) => (done.push(i), r));
    const first = await send(0);
    expect(first.status).toBe(200);
    // The 2nd asks, is told 100 ms, and sleeps (its deadline timer and its retry timer).
    const second = send(1);
    await time.until(() => time.pending === 2);
    expect(time.dueIn()).toEqual([100, 2001]);
    // The 3rd finds the line busy and joins it without asking (one more deadline timer).
    const third = send(2);
    await time.until(() => time.pending === 3);
    await time.advance(99);
    expect(events.map((e) => e.action)).toEqual(["allowed"]);
    await time.advance(1);
    expect((await second).status).toBe(200);
    await time.advance(99);
    expect(events.map((e) => e.action)).toEqual(["allowed", "waited"]);
    await time.advance(1);
    expect((await third).status).toBe(200);
    expect(done).toEqual([0, 1, 2]);
    expect(events.map((e) => [e.action, e.waitedMs])).toEqual([
      ["allowed", 0],
      ["waited", 100],
      ["waited", 200],
    ]);
    expect(time.pending).toBe(0);
  });

  it("wait: rejects with 429 when the wait would exceed maxWaitMs", async () => {
    // 1 request per 250 ms: the 2nd waits 250 ms (within 300); the 3rd would wait until 500 ms.
    const { time, events, url } = await waiting(
      { name: "wait", rules: [{ limit: 4, period: "1s", burst: 1 }] },
      { type: "wait", maxWaitMs: 300 },
    );
    expect((await get(url)).status).toBe(200);
    const second = get(url);
    await time.until(() => time.pending === 2);
    const third = get(url);
    await time.until(() => time.pending === 3);
    await time.advance(250);
    // The 2nd passes at 250 ms; the 3rd, now at the head, asks, is told 250 ms more: past its
    // deadline (300 ms), so it is refused at once rather than at the deadline.
    expect((await second).status).toBe(200);
    const refused = await third;
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(events.map((e) => [e.action, e.waitedMs])).toEqual([
      ["allowed", 0],
      ["waited", 250],
      ["rejected", 250],
    ]);
    expect(time.pending).toBe(0);

    // A wait known to be too long is refused at once: no timer is even set.
    const slow = createLimiter({
      store: memoryStore({ now: time.now }),
      policy: { name: "slow", rules: [{ limit: 1, period: "1m" }] },
    });
    await running?.close();
    const again = await start({
      limiter: slow,
      clock: time.now,
      timers: time.timers,
      strategy: { type: "wait", maxWaitMs: 150 },
    });
    expect((await get(again.url)).status).toBe(200);
    const r = await get(again.url);
    expect(r.status).toBe(429);
    expect(r.headers.get("retry-after")).toBe("60");
    expect(time.pending).toBe(0);
  });

  it("wait: a request still queued at its deadline is refused then; a full line refuses at once", async () => {
    const { time, limiter, events, url } = await waiting(
      { name: "jobs", algorithm: "concurrency", rules: [{ limit: 1, period: "30s" }] },
      { type: "wait", maxWaitMs: 1000, maxQueue: 1 },
    );
    const held = get(`${url}/hold`);
    await settle(() => limiter.peek("ip:127.0.0.1").then((d) => !d.allowed));
    const queued = get(url);
    await time.until(() => time.pending === 2);
    // The line holds one (maxQueue 1): another request is refused at once.
    const full = await get(url);
    expect(full.status).toBe(429);
    // The slot stays taken; the head polls every 100 ms and is refused at its deadline.
    await time.advance(999);
    expect(events.map((e) => [e.action, e.waitedMs])).toEqual([
      ["allowed", 0],
      ["rejected", 0],
    ]);
    await time.advance(1);
    expect((await queued).status).toBe(429);
    expect(events.map((e) => [e.action, e.waitedMs])).toEqual([
      ["allowed", 0],
      ["rejected", 0],
      ["rejected", 1000],
    ]);
    expect(time.pending).toBe(0);
    releaseHold();
    expect((await held).status).toBe(200);
  });

  it("wait: gives up when the client disconnects, and nothing is charged for it", async () => {
    const time = new ManualTime();
    const limiter = createLimiter({
      store: memoryStore({ now: time.now }),
      policy: { name: "wait", rules: [{ limit: 1, period: "2s" }] },
    });
    let aborted!: () => void;
    const gone = new Promise<void>((r) => (aborted = r));
    const events: DecisionEvent[] = [];
    const { url } = await start({
      limiter,
      clock: time.now,
      timers: time.timers,
      strategy: { type: "wait", maxWaitMs: 5000 },
      onDecision: (e) => {
        events.push(e as DecisionEvent);
        if (e.action === "aborted") aborted();
      },
    });
    expect((await get(url)).status).toBe(200);
    const ac = new AbortController();
    const pending = get(url, {}, ac.signal).catch((e: unknown) => e);
    await time.until(() => time.pending === 2);
    ac.abort();
    await pending;
    await gone;
    expect(events.map((e) => e.action)).toEqual(["allowed", "aborted"]);
    expect(time.pending).toBe(0);
    // After the first request's 2 s, exactly one more passes: the aborted one took nothing.
    await time.advance(2000);
    expect((await limiter.peek("ip:127.0.0.1")).remaining).toBe(1);
  });

  it("wait: a concurrency slot released by a finished response lets the next waiter in at once", async () => {
    const { time, limiter, events, url } = await waiting(
      { name: "jobs", algorithm: "concurrency", rules: [{ limit: 1, period: "30s" }] },
      { type: "wait", maxWaitMs: 5000 },
    );
    const held = get(`${url}/hold`);
    await settle(() => limiter.peek("ip:127.0.0.1").then((d) => !d.allowed));
    const queued = get(url);
    // Waiting: a deadline timer and a poll (another process could free the slot) in 100 ms.
    await time.until(() => time.pending === 2);
    expect(time.dueIn()).toEqual([100, 5001]);
    releaseHold();
    expect((await held).status).toBe(200);
    // Woken by the release, not by the poll: no time has passed.
    expect((await queued).status).toBe(200);
    expect(events.map((e) => [e.action, e.waitedMs])).toEqual([
      ["allowed", 0],
      ["waited", 0],
    ]);
  });

  it("degrade: calls the fallback with the headers set", async () => {
    const c = clocked();
    const limiter = c.limiter({ name: "api", rules: [{ limit: 1, period: "1m" }] });
    const { url } = await start({ limiter, clock: c.now, strategy: "degrade" });
    expect((await get(url)).text_).toBe("ok");
    const d = await get(url);
    expect(d.status).toBe(200);
    expect(d.text_).toBe("degraded");
    expect(d.headers.get("x-degraded")).toBe("1");
    expect(rateHeaders(d)).toMatchObject({
      "x-ratelimit-remaining": "0",
      ratelimit: '"api";r=0;t=60',
    });
    expect(d.headers.get("retry-after")).toBeNull();
  });

  it("shadow: lets denied requests pass and reports them", async () => {
    const c = clocked();
    const limiter = c.limiter({ name: "api", rules: [{ limit: 1, period: "1m" }] });
    const denied: DecisionEvent[] = [];
    const actions: string[] = [];
    const { url } = await start({
      limiter,
      clock: c.now,
      strategy: { type: "shadow", onDeny: (e) => denied.push(e as DecisionEvent) },
      onDecision: (e) => actions.push(e.action),
    });
    expect((await get(url)).status).toBe(200);
    const second = await get(url);
    expect(second.status).toBe(200);
    expect(second.text_).toBe("ok");
    expect(second.headers.get("retry-after")).toBeNull();
    expect(denied).toHaveLength(1);
    expect(denied[0]!.decision.allowed).toBe(false);
    expect(denied[0]!.decision.retryAfterMs).toBe(60_000);
    expect(actions).toEqual(["allowed", "shadowed"]);
  });

  it("countOnly: failed refunds successful responses", async () => {
    const c = clocked();
    const limiter = c.limiter({
      name: "api",
      algorithm: "fixed-window",
      rules: [{ limit: 2, period: "1m" }],
    });
    const { url } = await start({ limiter, clock: c.now, countOnly: "failed" });
    for (let i = 0; i < 4; i++) {
      expect((await get(url)).status).toBe(200);
      await settle(() => limiter.peek("ip:127.0.0.1").then((d) => d.remaining === 2));
    }
    expect((await get(`${url}/fail`)).status).toBe(500);
    expect((await get(`${url}/fail`)).status).toBe(500);
    await settle(() => limiter.peek("ip:127.0.0.1").then((d) => d.remaining === 0));
    expect((await get(url)).status).toBe(429);
  });

  it("countOnly: successful refunds failed responses", async () => {
    const c = clocked();
    const limiter = c.limiter({
      name: "api",
      algorithm: "fixed-window",
      rules: [{ limit: 1, period: "1m" }],
    });
    const { url } = await start({ limiter, clock: c.now, countOnly: "successful" });
    for (let i = 0; i < 3; i++) {
      expect((await get(`${url}/fail`)).status).toBe(500);
      await settle(() => limiter.peek("ip:127.0.0.1").then((d) => d.remaining === 1));
    }
    expect((await get(url)).status).toBe(200);
    expect((await get(url)).status).toBe(429);
  });

  it("concurrency: holds a slot until the response ends", async () => {
    const limiter = createLimiter({
      policy: { name: "jobs", algorithm: "concurrency", rules: [{ limit: 1, period: "30s" }] },
    });
    const { url } = await start({ limiter });
    const held = get(`${url}/hold`);
    await settle(() => limiter.peek("ip:127.0.0.1").then((d) => !d.allowed));
    const busy = await get(url);
    expect(busy.status).toBe(429);
    expect(rateHeaders(busy)).toMatchObject({
      "ratelimit-policy": '"jobs";q=1;qu="concurrent-requests"',
      ratelimit: '"jobs";r=0',
    });
    releaseHold();
    const first = await held;
    expect(first.status).toBe(200);
    expect(rateHeaders(first)).toEqual({
      "x-ratelimit-limit": "1",
      "x-ratelimit-remaining": "0",
      "x-ratelimit-used": "1",
      "ratelimit-policy": '"jobs";q=1;qu="concurrent-requests"',
      ratelimit: '"jobs";r=0',
    });
    await settle(() => limiter.peek("ip:127.0.0.1").then((d) => d.allowed));
    expect((await get(url)).status).toBe(200);
  });

  it("store failure, onStoreError deny: 503 with only true headers", async () => {
    const limiter = createLimiter({
      store: brokenStore,
      policy: { name: "api", rules: [{ limit: 10, period: "1m" }], onStoreError: "deny" },
    });
    const { url } = await start({ limiter });
    const r = await get(url);
    expect(r.status).toBe(503);
    expect(rateHeaders(r)).toEqual({
      "x-ratelimit-limit": "10",
      "ratelimit-policy": '"api";q=10;w=60',
    });
    expect(JSON.parse(r.text_)).toMatchObject({
      status: 503,
      type: "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",
    });
  });

  it("store failure, onStoreError allow: passes with only true headers", async () => {
    const limiter = createLimiter({
      store: brokenStore,
      policy: { name: "api", rules: [{ limit: 10, period: "1m" }], onStoreError: "allow" },
    });
    const actions: string[] = [];
    const { url } = await start({
      limiter,
      onDecision: (e) => actions.push(`${e.action}:${e.decision.reason}`),
    });
    const r = await get(url);
    expect(r.status).toBe(200);
    expect(rateHeaders(r)).toEqual({
      "x-ratelimit-limit": "10",
      "ratelimit-policy": '"api";q=10;w=60',
    });
    expect(actions).toEqual(["allowed:store-error"]);
  });

  it("skip and allowList leave requests unlimited and without headers", async () => {
    const c = clocked();
    const limiter = c.limiter({ name: "api", rules: [{ limit: 1, period: "1m" }] });
    const { url } = await start({ limiter, clock: c.now, allowList: ["127.0.0.0/8"] });
    for (let i = 0; i < 3; i++) expect(rateHeaders(await get(url))).toEqual({});
    await running?.close();
    const again = await start({
      limiter,
      clock: c.now,
      skip: (_req, http) => http.path === "/users/1",
    });
    for (let i = 0; i < 3; i++) expect((await get(`${again.url}/users/1`)).status).toBe(200);
    expect((await get(again.url)).status).toBe(200);
    expect((await get(again.url)).status).toBe(429);
  });

  it("tiers: authenticated users by id, anonymous callers by IP", async () => {
    const c = clocked();
    const authed = createLimiter({
      store: c.store,
      policy: { name: "authed", rules: [{ limit: 3, period: "1h" }] },
    });
    const anon = createLimiter({
      store: c.store,
      policy: { name: "anon", rules: [{ limit: 1, period: "1h" }] },
    });
    const { url } = await start({
      clock: c.now,
      limiter: (_req, http) => {
        const user = http.header("x-user");
        return user ? { limiter: authed, key: () => `user:${user}` } : anon;
      },
    });
    expect((await get(url)).status).toBe(200);
    expect((await get(url)).status).toBe(429);
    const alice = await get(url, { "x-user": "alice" });
    expect(alice.status).toBe(200);
    expect(rateHeaders(alice)["x-ratelimit-limit"]).toBe("3");
    expect((await get(url, { "x-user": "alice" })).status).toBe(200);
    expect((await get(url, { "x-user": "alice" })).status).toBe(200);
    expect((await get(url, { "x-user": "alice" })).status).toBe(429);
    expect((await get(url, { "x-user": "bob" })).status).toBe(200);
  });

  it("custom cost and API-key identity", async () => {
    const c = clocked();
    const limiter = c.limiter({
      name: "api",
      algorithm: "fixed-window",
      rules: [{ limit: 10, period: "1m" }],
    });
    const { keys } = await import("../../src/http/index.js");
    const seen: string[] = [];
    const { url } = await start({
      limiter,
      clock: c.now,
      key: keys.apiKey(),
      cost: (_req, http) => (http.path.startsWith("/users") ? 4 : 1),
      onDecision: (e) => seen.push(e.key),
    });
    const a = await get(`${url}/users/1`, { "x-api-key": "secret-1" });
    expect(rateHeaders(a)["x-ratelimit-remaining"]).toBe("6");
    const b = await get(url, { "x-api-key": "secret-2" });
    expect(rateHeaders(b)["x-ratelimit-remaining"]).toBe("9");
    expect(seen[0]).toMatch(/^apikey:[\w-]{27}$/);
    expect(seen[0]).not.toContain("secret");
    expect(seen[0]).not.toBe(seen[1]);
  });

  it("answers a problem+json 500 (never passes, never a stack trace) when a function of the options fails", async () => {
    const limiter = createLimiter({ policy: { name: "api", rules: [{ limit: 1, period: "1m" }] } });
    const heard: Array<{ error: MiddlewareError; req: unknown }> = [];
    const onError = (error: MiddlewareError, req: unknown) => heard.push({ error, req });
    const cases: Array<[HarnessOptions, MiddlewareStage, RegExp]> = [
      [
        {
          limiter,
          onError,
          key: () => {
            throw new Error("boom at /srv/app/secret.js:12");
          },
        },
        "key",
        /^the key function threw: boom/,
      ],
      [
        { limiter, onError, skip: () => Promise.reject(new Error("flag service down")) },
        "skip",
        /^the skip function threw: flag service down$/,
      ],
      [{ limiter, onError, cost: () => 5 }, "decision", /^the limiter failed: .*can never fit/],
    ];
    for (const [options, stage, message] of cases) {
      heard.length = 0;
      const { url } = await start(options);
      const r = await get(url);
      expect(r.status).toBe(500);
      expect(r.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(r.text_)).toEqual(middlewareErrorProblem(stage));
      expect(r.text_).not.toMatch(/boom|secret|flag service|at .*:\d+/);
      expect(heard).toHaveLength(1);
      expect(heard[0]!.error).toBeInstanceOf(MiddlewareError);
      expect(heard[0]!.error.code).toBe("SLUICE_ERR_MIDDLEWARE");
      expect(heard[0]!.error.stage).toBe(stage);
      expect(heard[0]!.error.message).toMatch(message);
      expect(heard[0]!.req).toBeTypeOf("object");
      expect(heard[0]!.error.status).toBe(500);
      await running?.close();
      running = undefined;
    }
  });

  it("answers a problem+json 400 when the key function returns what is not a string", async () => {
    const limiter = createLimiter({ policy: { name: "api", rules: [{ limit: 1, period: "1m" }] } });
    const heard: MiddlewareError[] = [];
    for (const [result, kind, described] of [
      [["a", "b"], "an array", "an array (2 items)"],
      [{ x: "1" }, "an object", "an object"],
      [42, "a number", "a number (42)"],
    ] as const) {
      heard.length = 0;
      const { url } = await start({
        limiter,
        onError: (e) => heard.push(e),
        key: () => result as unknown as string,
      });
      const r = await get(url);
      expect(r.status).toBe(400);
      expect(r.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(r.text_)).toEqual(invalidKeyProblem(result));
      expect(JSON.parse(r.text_).detail).toContain(`returned ${kind}, not a string`);
      expect(r.text_).not.toContain("42");
      expect(heard).toHaveLength(1);
      expect(heard[0]!.code).toBe("SLUICE_ERR_MIDDLEWARE");
      expect(heard[0]!.stage).toBe("key");
      expect(heard[0]!.status).toBe(400);
      expect(heard[0]!.message).toContain(`the key function returned ${described}, not a string`);
      await running?.close();
      running = undefined;
    }
  });

  it("logs the failure with console.error when no onError is given", async () => {
    const limiter = createLimiter({ policy: { name: "api", rules: [{ limit: 1, period: "1m" }] } });
    const { url } = await start({
      limiter,
      key: () => {
        throw new Error("boom");
      },
    });
    const logged: unknown[][] = [];
    const err = console.error;
    console.error = (...args: unknown[]) => void logged.push(args);
    try {
      expect((await get(url)).status).toBe(500);
    } finally {
      console.error = err;
    }
    expect(logged).toHaveLength(1);
    expect(String(logged[0]![0])).toMatch(/^sluice: rate limiting failed, answered 500/);
    expect((logged[0]![1] as MiddlewareError).cause).toEqual(new Error("boom"));
  });
});

/** Polls until the response-finished side effects (refund, release) have landed. */
async function settle(probe: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await probe()) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error("condition never held");
}
