/**
 * `sluice/compat/upstash` judged by @upstash/ratelimit itself. The real library speaks HTTP, so
 * it runs through the Upstash REST fixture (test/support/upstash-rest.ts) in front of a
 * redis-server; the face runs on the same redis-server through ioredis (sluice's Redis store,
 * its time injected from the same faked Date), and in memory. The same calls go to both and
 * every field of every answer is compared.
 */
import { Ratelimit as Peer } from "@upstash/ratelimit";
import { Redis as UpstashRedis } from "@upstash/redis";
import fc from "fast-check";
import { Redis } from "ioredis";
import { redisStore, type RedisStore } from "sluice";
import { type Duration, Ratelimit } from "sluice/compat/upstash";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { type UpstashRest, startUpstashRest } from "../../../../test/support/upstash-rest.js";
import { op, wait } from "./ops.js";

let server: RedisServer;
let rest: UpstashRest;
let client: Redis;
let upstash: UpstashRedis;
const stores: RedisStore[] = [];
const run = Date.now().toString(36);
let seq = 0;

beforeAll(async () => {
  server = await startRedis();
  rest = await startUpstashRest({ redisUrl: server.url });
  client = new Redis(server.url);
  upstash = new UpstashRedis({
    url: rest.url,
    token: rest.token,
    retry: false,
    enableTelemetry: false,
  });
  await client.ping();
});

afterEach(() => vi.useRealTimers());

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  client?.disconnect();
  await rest?.stop();
  await server?.stop();
});

/** sluice's Redis store on the faked Date (keys' expiries stay on Redis's real clock, later). */
function sluiceRedis(): RedisStore {
  const s = redisStore({ client, now: () => Date.now(), heartbeatMs: 0 });
  stores.push(s);
  return s;
}

type Made = "fixedWindow" | "slidingWindow" | "tokenBucket" | "cachedFixedWindow";

/** The same limiter from both libraries, with a prefix of its own. */
function both(kind: Made, a: number, window: Duration, b = 0, cache = true) {
  const prefix = `up${run}-${++seq}`;
  const peerLimiter =
    kind === "tokenBucket" ? Peer.tokenBucket(a, window, b) : Peer[kind](a, window);
  const faceLimiter =
    kind === "tokenBucket" ? Ratelimit.tokenBucket(a, window, b) : Ratelimit[kind](a, window);
  const ephemeralCache = cache ? undefined : (false as const);
  return {
    prefix,
    peer: new Peer({ redis: upstash, limiter: peerLimiter, prefix, ephemeralCache }),
    face: new Ratelimit({ redis: sluiceRedis(), limiter: faceLimiter, prefix, ephemeralCache }),
    memory: new Ratelimit({ limiter: faceLimiter, prefix, ephemeralCache }),
  };
}

/**
 * Identifiers at the edges: empty (a key of its own in @upstash/ratelimit), NUL and two (what
 * sluice's empty key is made of), long, non-ASCII, braces and spaces.
 */
const EDGE_IDS = ["", "\u0000", "\u0000\u0000", "x".repeat(3000), "ключ🔑", "a b{c}"];

/** What a call came to: the response without `pending`, or that it rejected. */
async function settled<T extends { pending: Promise<unknown> }>(
  p: () => Promise<T>,
): Promise<Omit<T, "pending"> | "rejected"> {
  try {
    return view(await p());
  } catch {
    return "rejected";
  }
}

/** A response without `pending` (a promise). */
function view<T extends { pending: Promise<unknown> }>(r: T): Omit<T, "pending"> {
  const { pending, ...rest } = r;
  void pending;
  return rest;
}

describe("fixedWindow and cachedFixedWindow against @upstash/ratelimit (faked Date: exact)", () => {
  it.each(["fixedWindow", "cachedFixedWindow"] as const)(
    "%s: random sequences of limits, refunds, looks, resets and time give the same answers",
    async (kind) => {
      let compared = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.oneof(
              op(6, "limit", {
                id: fc.constantFrom("a", "b", "a", "b", ""),
                rate: fc.constantFrom(1, 1, 1, 2, 0, -1),
              }),
              op(1, "remaining", { id: fc.constantFrom("a", "b") }),
              op(1, "reset", { id: fc.constantFrom("a", "b") }),
              wait(2, 4000),
            ),
            { minLength: 3, maxLength: 30 },
          ),
          async (ops) => {
            vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
            try {
              const { peer, face, memory } = both(kind, 3, "5 s");
              // The count per identifier and window, to keep refunds from taking it below 0
              // (Upstash's INCRBY goes negative; sluice stops at 0: docs/migrating.md).
              const used = new Map<string, number>();
              const at = (id: string) => `${id}:${Math.floor(Date.now() / 5000)}`;
              for (const [i, o] of ops.entries()) {
                const where = `op ${i} of ${JSON.stringify(ops.slice(0, i + 1))}`;
                if (o.op === "wait") vi.advanceTimersByTime(o.ms);
                else if (o.op === "reset") {
                  await peer.resetUsedTokens(o.id);
                  await face.resetUsedTokens(o.id);
                  await memory.resetUsedTokens(o.id);
                  for (const k of [...used.keys()]) if (k.startsWith(`${o.id}:`)) used.delete(k);
                } else if (o.op === "remaining") {
                  const x = await peer.getRemaining(o.id);
                  expect(await face.getRemaining(o.id), where).toEqual(x);
                  expect(await memory.getRemaining(o.id), where).toEqual(x);
                } else {
                  const n = used.get(at(o.id)) ?? 0;
                  if (o.rate < 0 && n + o.rate < 0) continue;
                  const x = view(await peer.limit(o.id, { rate: o.rate }));
                  const y = view(await face.limit(o.id, { rate: o.rate }));
                  const z = view(await memory.limit(o.id, { rate: o.rate }));
                  expect(y, where).toEqual(x);
                  expect(z, where).toEqual(x);
                  if (x.reason === undefined) used.set(at(o.id), n + o.rate);
                  compared++;
                }
              }
            } finally {
              vi.useRealTimers();
            }
          },
        ),
        { numRuns: 40 },
      );
      // Comparisons did run (fast-check favours short sequences: 155–232 in 12 runs, 136 once).
      expect(compared).toBeGreaterThan(60);
    },
  );

  it.each(["fixedWindow", "cachedFixedWindow", "slidingWindow", "tokenBucket"] as const)(
    "%s: edge identifiers and rates (0, 2) give the same answers",
    async (kind) => {
      // Early in a window, so that a sliding window's previous one weighs nothing.
      vi.useFakeTimers({ toFake: ["Date"], now: Math.ceil(Date.now() / 60_000) * 60_000 + 10 });
      // (A bucket of 5, 1 more a minute.)
      const { peer, face, memory } =
        kind === "tokenBucket" ? both(kind, 1, "60 s", 5) : both(kind, 5, "60 s");
      for (const [i, id] of EDGE_IDS.entries())
        for (const rate of [1, ...Array.from({ length: i }, () => 1), 2, 0]) {
          const where = `id ${i} rate ${rate}`;
          const x = await settled(() => peer.limit(id, { rate }));
          expect(await settled(() => face.limit(id, { rate })), where).toEqual(x);
          expect(await settled(() => memory.limit(id, { rate })), where).toEqual(x);
          vi.advanceTimersByTime(1);
        }
      for (const id of EDGE_IDS) {
        const x = await peer.getRemaining(id);
        expect(await face.getRemaining(id)).toEqual(x);
        expect(await memory.getRemaining(id)).toEqual(x);
      }
      // "" and "\u0000" are two identifiers, never one.
      await face.resetUsedTokens("");
      expect((await face.getRemaining("")).remaining).toBe(5);
      expect((await face.getRemaining("\u0000")).remaining).toBeLessThan(5);
    },
  );

  it("differs on purpose: a fractional rate is refused, naming it (Upstash's scripts refuse it at INCRBY)", async () => {
    for (const kind of ["fixedWindow", "slidingWindow", "cachedFixedWindow"] as const) {
      const { peer, face, memory } = both(kind, 5, "60 s");
      await expect(peer.limit("k", { rate: 1.5 })).rejects.toThrow(/not an integer/);
      await expect(face.limit("k", { rate: 1.5 })).rejects.toThrow(
        /rate: must be a whole number \(got 1\.5\)/,
      );
      await expect(memory.limit("k", { rate: 1.5 })).rejects.toThrow(
        /rate: must be a whole number/,
      );
    }
    // A blocked identifier is answered from the cache first, whatever the rate, on both.
    const { peer, face } = both("fixedWindow", 1, "60 s");
    for (const r of [peer, face]) {
      await r.limit("b", { rate: 2 });
      expect((await r.limit("b", { rate: 1.5 })).reason).toBe("cacheBlock");
    }
  });

  it("many concurrent requests at a small limit: exactly the limit succeeds on both", async () => {
    const { peer, face } = both("fixedWindow", 5, "60 s");
    const ok = async (r: { limit: (id: string) => Promise<{ success: boolean }> }) =>
      (await Promise.all(Array.from({ length: 100 }, () => r.limit("hot")))).filter(
        (x) => x.success,
      ).length;
    expect(await ok(peer)).toBe(5);
    expect(await ok(face)).toBe(5);
  });
});

describe("slidingWindow against @upstash/ratelimit", () => {
  it("within a window (nothing in the previous one): the same answers", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Math.ceil(Date.now() / 10_000) * 10_000 + 10 });
    const { peer, face, memory } = both("slidingWindow", 4, "10 s");
    for (const [wait, rate] of [
      [0, 1],
      [100, 2],
      [100, 1],
      [100, 1],
      [1000, 1],
      [0, 0],
      [100, -2],
      [100, 2],
    ] as const) {
      vi.advanceTimersByTime(wait);
      const x = view(await peer.limit("k", { rate }));
      expect(view(await face.limit("k", { rate })), `${wait} ${rate}`).toEqual(x);
      expect(view(await memory.limit("k", { rate })), `${wait} ${rate}`).toEqual(x);
    }
    expect(await face.getRemaining("k")).toEqual(await peer.getRemaining("k"));
  });

  it("a refused rate the window has room for is counted, as Upstash counts it; later answers agree", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Math.ceil(Date.now() / 10_000) * 10_000 + 10 });
    // (Without the ephemeral cache, so that every call reaches the counts.)
    const { peer, face, memory } = both("slidingWindow", 5, "10 s", 0, false);
    for (const [id, rate] of [
      ["k", 1],
      ["k", 1],
      ["k", 1],
      ["k", 1],
      // 4 of 5 counted: a rate of 3 is refused, and counted (7 of 5).
      ["k", 3],
      ["k", 1],
      ["k", 0],
      ["k", -2],
      ["k", 0],
      ["k", 1],
      // At the limit exactly: refused, not counted.
      ["k", 1],
      ["k", -1],
      ["k", 1],
      // More than the limit, with room: refused, counted.
      ["l", 9],
      ["l", 1],
      ["l", -9],
      ["l", 1],
    ] as const) {
      vi.advanceTimersByTime(10);
      const x = view(await peer.limit(id, { rate }));
      expect(view(await face.limit(id, { rate })), `${id} ${rate}`).toEqual(x);
      expect(view(await memory.limit(id, { rate })), `${id} ${rate}`).toEqual(x);
    }
    expect(await face.getRemaining("k")).toEqual(await peer.getRemaining("k"));
    expect(await memory.getRemaining("l")).toEqual(await peer.getRemaining("l"));
  });

  it("differs on purpose in the next window: the previous window's share is not rounded down", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Math.ceil(Date.now() / 10_000) * 10_000 });
    const { peer, memory } = both("slidingWindow", 10, "10 s");
    for (let i = 0; i < 10; i++) {
      await peer.limit("k");
      await memory.limit("k");
    }
    // 35% into the next window the previous 10 weigh 6.5: Upstash counts floor(6.5) = 6 and
    // admits 4 more; sluice counts 6.5 and admits 3 (the estimate never passes the limit).
    vi.advanceTimersByTime(13_500);
    const admitted = async (r: Ratelimit | Peer) => {
      let n = 0;
      for (let i = 0; i < 6; i++) if ((await r.limit("k")).success) n++;
      return n;
    };
    expect(await admitted(peer)).toBe(4);
    expect(await admitted(memory)).toBe(3);
  });
});

describe("tokenBucket against @upstash/ratelimit (faked Date: exact)", () => {
  /**
   * The peer's key expires on Redis's own clock, which the faked Date does not move: the test
   * deletes it when the faked clock reaches its expiry, as Redis would have. `expiry` is read
   * back (PTTL) after each write that set it: a whole number of intervals from the write.
   */
  function peerExpiry(prefix: string, intervalMs: number) {
    const expiries = new Map<string, number>();
    const keyOf = (id: string) => `${prefix}:${id}`;
    return {
      /** After a peer call that set the key's expiry (a charge, or a look that left it short). */
      async wrote(id: string): Promise<void> {
        const pttl = await client.pttl(keyOf(id));
        expect(pttl, `the peer's key ${keyOf(id)} has an expiry`).toBeGreaterThan(0);
        expiries.set(id, Date.now() + Math.ceil(pttl / intervalMs) * intervalMs);
      },
      /** Deletes the peer's keys whose expiry the faked clock has reached. */
      async expire(): Promise<void> {
        for (const [id, at] of expiries)
          if (Date.now() >= at) {
            await client.del(keyOf(id));
            expiries.delete(id);
          }
      },
      exists: async (id: string) => (await client.exists(keyOf(id))) === 1,
      forget: (id: string) => expiries.delete(id),
    };
  }

  it("random sequences of rates (more than the bucket too), looks, refunds, getRemaining, resets and time give the same answers", async () => {
    let compared = 0;
    const seen = new Set<string>();
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            op(8, "limit", {
              id: fc.constantFrom("a", "b", "a", ""),
              rate: fc.constantFrom(1, 1, 1, 2, 3, 5),
            }),
            op(2, "refund", { id: fc.constantFrom("a", "b"), rate: fc.constantFrom(0, -1, -2) }),
            op(1, "remaining", { id: fc.constantFrom("a", "b", "c") }),
            op(1, "reset", { id: fc.constantFrom("a", "b") }),
            wait(4, 2600),
          ),
          { minLength: 3, maxLength: 40 },
        ),
        async (ops) => {
          vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
          try {
            // 4 at once, 2 more every second; a key lives at most 2 s after a write.
            const { prefix, peer, face, memory } = both("tokenBucket", 2, "1 s", 4, false);
            const expiry = peerExpiry(prefix, 1000);
            const same = async (
              id: string,
              rate: number,
              where: string,
            ): Promise<Omit<Awaited<ReturnType<Peer["limit"]>>, "pending">> => {
              const x = view(await peer.limit(id, { rate }));
              expect(view(await face.limit(id, { rate })), where).toEqual(x);
              expect(view(await memory.limit(id, { rate })), where).toEqual(x);
              // Upstash sets the expiry when it takes tokens, or leaves a look or refund short.
              if ((rate > 0 && x.success) || (rate <= 0 && x.remaining < 4)) await expiry.wrote(id);
              compared++;
              seen.add(`${rate > 0 ? "limit" : rate === 0 ? "look" : "refund"} ${x.success}`);
              return x;
            };
            for (const [i, o] of ops.entries()) {
              const where = `op ${i} of ${JSON.stringify(ops.slice(0, i + 1))}`;
              if (o.op === "wait") {
                vi.advanceTimersByTime(o.ms);
                await expiry.expire();
              } else if (o.op === "reset") {
                await peer.resetUsedTokens(o.id);
                await face.resetUsedTokens(o.id);
                await memory.resetUsedTokens(o.id);
                expiry.forget(o.id);
              } else if (o.op === "remaining") {
                // Caught up first (a look), so that Upstash's stored bucket is the current one.
                if (await expiry.exists(o.id)) await same(o.id, 0, where);
                const x = await peer.getRemaining(o.id);
                expect(await face.getRemaining(o.id), where).toEqual(x);
                expect(await memory.getRemaining(o.id), where).toEqual(x);
                compared++;
              } else if (o.op === "refund") {
                // Only where Upstash keeps a bucket (a look or refund at none writes a key that
                // never expires: docs/migrating.md), and within its maxTokens.
                if (!(await expiry.exists(o.id))) continue;
                const look = await same(o.id, 0, where);
                if (o.rate < 0 && look.remaining - o.rate <= 4) await same(o.id, o.rate, where);
              } else await same(o.id, o.rate, where);
            }
          } finally {
            vi.useRealTimers();
          }
        },
      ),
      { numRuns: 40 },
    );
    // (fast-check favours short sequences: 220 comparisons in one run of 40.)
    expect(compared).toBeGreaterThan(120);
    for (const s of ["limit true", "limit false", "look true", "refund true"])
      expect(seen).toContain(s);
  }, 120_000);

  // @upstash/ratelimit's own burst tests (its src/ratelimit.test.ts, run by its TestHarness):
  // tokenBucket(16, "4 s", 16) attacked for 8 s at load × 2 windows' worth of requests, each of
  // `rate`, evenly spaced; it passes when the successes are within 0.5–1.5× of the expected
  // min(2 × 16 / rate, requests). Here on the faked clock, cache on (the harness's default).
  it.each([
    [0.8, 1],
    [0.8, 3],
    [1.6, 1],
    [1.6, 3],
  ] as const)(
    "the peer's burst test (load %s, rate %s): the same answers, within the peer's own bounds",
    async (load, rate) => {
      vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
      const { peer, face, memory } = both("tokenBucket", 16, "4 s", 16);
      const requests = 2 * 16 * load; // windowCount × limit × load
      const perSecond = requests / 8;
      const expected = Math.min((2 * 16) / rate, requests);
      const t0 = Date.now();
      let sent = 0;
      const admitted = { peer: 0, face: 0, memory: 0 };
      // The harness: for each of 8 seconds, requests r = 0, 1, … while r < perSecond, each
      // followed by a wait of 1000 / perSecond ms.
      for (let second = 0; second < 8; second++)
        for (let r = 0; r < perSecond; r++) {
          vi.setSystemTime(t0 + Math.floor((sent * 1000) / perSecond));
          const x = view(await peer.limit("attacker", { rate }));
          const y = view(await face.limit("attacker", { rate }));
          const z = view(await memory.limit("attacker", { rate }));
          expect(y, `request ${sent}`).toEqual(x);
          expect(z, `request ${sent}`).toEqual(x);
          admitted.peer += x.success ? 1 : 0;
          admitted.face += y.success ? 1 : 0;
          admitted.memory += z.success ? 1 : 0;
          sent++;
        }
      expect(admitted.face).toBe(admitted.peer);
      expect(admitted.memory).toBe(admitted.peer);
      expect(admitted.face).toBeLessThanOrEqual(expected * 1.5);
      expect(admitted.face).toBeGreaterThanOrEqual(expected * 0.5);
      // Admitted, peer and face alike (in real time the peer admitted 14 and 36 of the two
      // tests whose bounds are 16 and 48; sluice's continuous bucket had admitted 18 and 50).
      expect(admitted.face).toBe(
        { "0.8,1": 32, "0.8,3": 15, "1.6,1": 36, "1.6,3": 14 }[`${load},${rate}`],
      );
    },
  );

  it("a rate larger than the bucket is refused without taking anything, as Upstash answers it", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    const { peer, face, memory } = both("tokenBucket", 1, "10 s", 3, false);
    for (const [rate, wait] of [
      [5, 0],
      [3, 100],
      [5, 100],
      [1, 100],
      [4, 10_000],
    ] as const) {
      vi.advanceTimersByTime(wait);
      const x = view(await peer.limit("k", { rate }));
      expect(view(await face.limit("k", { rate })), `rate ${rate}`).toEqual(x);
      expect(view(await memory.limit("k", { rate })), `rate ${rate}`).toEqual(x);
    }
    expect(view(await face.limit("k"))).toMatchObject({ success: true, remaining: 0 });
  });

  it("differs on purpose: getRemaining answers what is left now (Upstash: what the last request left)", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    const { peer, face, memory } = both("tokenBucket", 2, "1 s", 4, false);
    for (const r of [peer, face, memory]) await r.limit("k", { rate: 3 });
    const t = Date.now();
    // Within the interval: the same.
    vi.advanceTimersByTime(500);
    const before = await peer.getRemaining("k");
    expect(before).toEqual({ remaining: 1, reset: t + 1000, limit: 4 });
    expect(await face.getRemaining("k")).toEqual(before);
    // One refill later: Upstash still reports its stored bucket, and a reset in the past.
    vi.advanceTimersByTime(1000);
    expect(await peer.getRemaining("k")).toEqual({ remaining: 1, reset: t + 1000, limit: 4 });
    for (const r of [face, memory])
      expect(await r.getRemaining("k")).toEqual({ remaining: 3, reset: t + 2000, limit: 4 });
  });

  it("differs on purpose: a look or refund at an identifier without a bucket keeps none (Upstash keeps one that never expires)", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    const { prefix, peer, face } = both("tokenBucket", 1, "1 s", 2, false);
    const t = Date.now();
    for (const r of [peer, face])
      expect(view(await r.limit("k", { rate: 0 }))).toEqual({
        success: true,
        limit: 2,
        remaining: 2,
        reset: t + 1000,
      });
    // Upstash wrote a bucket anchored at t, without an expiry.
    expect(await client.pttl(`${prefix}:k`)).toBe(-1);
    vi.advanceTimersByTime(1500);
    // Upstash's refills keep the phase of that look; sluice's bucket is anchored by the charge.
    expect(view(await peer.limit("k", { rate: 2 }))).toMatchObject({ reset: t + 2000 });
    expect(view(await face.limit("k", { rate: 2 }))).toMatchObject({ reset: t + 2500 });
    // So sluice's next token comes later, never sooner.
    vi.advanceTimersByTime(500);
    expect((await peer.limit("k")).success).toBe(true);
    expect((await face.limit("k")).success).toBe(false);
    await client.del(`${prefix}:k`);
  });
});

describe("refunds past what was used (rate −1000): the same answer from every algorithm", () => {
  it.each([
    ["fixedWindow", 4, "60 s", 0],
    ["cachedFixedWindow", 4, "60 s", 0],
    ["slidingWindow", 4, "60 s", 0],
    ["tokenBucket", 1, "60 s", 4],
  ] as const)(
    "%s: success, the count back to 0 (never below: remaining is the limit)",
    async (kind, a, window, b) => {
      vi.useFakeTimers({ toFake: ["Date"], now: Math.ceil(Date.now() / 60_000) * 60_000 + 10 });
      const { peer, face, memory } = both(kind, a, window, b, kind === "cachedFixedWindow");
      for (const r of [peer, face, memory]) for (let i = 0; i < 3; i++) await r.limit("k");
      // Upstash takes its count below 0 (its bucket above maxTokens): success, more than the limit left.
      const x = await peer.limit("k", { rate: -1000 });
      expect(x.success).toBe(true);
      expect(x.remaining).toBeGreaterThan(4);
      for (const r of [face, memory]) {
        expect(view(await r.limit("k", { rate: -1000 }))).toMatchObject({
          success: true,
          limit: 4,
          remaining: 4,
        });
        // Then exactly the limit passes again.
        const passed = [];
        for (let i = 0; i < 5; i++) passed.push((await r.limit("k")).success);
        expect(passed).toEqual([true, true, true, true, false]);
        expect((await r.getRemaining("k")).remaining).toBe(0);
      }
    },
  );

  it("cachedFixedWindow: a refund from the cache never leaves more than the limit", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: Math.ceil(Date.now() / 60_000) * 60_000 + 10 });
    const { face, memory } = both("cachedFixedWindow", 4, "60 s");
    for (const r of [face, memory]) {
      await r.limit("k");
      // Cached now: the refund is answered from this process's count.
      const back = await r.limit("k", { rate: -3 });
      await back.pending;
      expect(view(back)).toMatchObject({ success: true, remaining: 4 });
      expect(await r.getRemaining("k")).toMatchObject({ remaining: 4 });
      const passed = [];
      for (let i = 0; i < 5; i++) passed.push((await r.limit("k")).success);
      expect(passed).toEqual([true, true, true, true, false]);
    }
  });
});

describe("Ratelimit's own behaviour (documented by Upstash)", () => {
  it("the ephemeral cache answers a blocked identifier locally (reason cacheBlock)", async () => {
    const { peer, face } = both("fixedWindow", 1, "30 s");
    for (const r of [peer, face]) {
      expect((await r.limit("k")).success).toBe(true);
      expect((await r.limit("k")).reason).toBeUndefined();
      expect((await r.limit("k")).reason).toBe("cacheBlock");
    }
  });

  it("timeout: a slow store is answered success with reason timeout", async () => {
    const paused = await startRedis();
    const c = new Redis(paused.url);
    try {
      await c.ping();
      const r = new Ratelimit({
        redis: redisStore({ client: c, heartbeatMs: 0, timeoutMs: 5_000 }),
        limiter: Ratelimit.fixedWindow(1, "10 s"),
        timeout: 200,
      });
      paused.pause();
      const t0 = Date.now();
      expect(view(await r.limit("k"))).toEqual({
        success: true,
        limit: 0,
        remaining: 0,
        reset: 0,
        reason: "timeout",
      });
      expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    } finally {
      paused.resume();
      c.disconnect();
      await paused.stop();
    }
  });

  it("blockUntilReady waits for the window's end, or gives up at the timeout", async () => {
    vi.useFakeTimers({ toFake: ["Date", "setTimeout"], now: Math.ceil(Date.now() / 1000) * 1000 });
    const r = new Ratelimit({ limiter: Ratelimit.fixedWindow(1, "1 s"), ephemeralCache: false });
    await r.limit("k");
    const waited = r.blockUntilReady("k", 5_000);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await waited).toMatchObject({ success: true, remaining: 0 });
    const gaveUp = r.blockUntilReady("k", 300);
    await vi.advanceTimersByTimeAsync(400);
    expect(await gaveUp).toMatchObject({ success: false });
    await expect(r.blockUntilReady("k", 0)).rejects.toThrow("timeout must be positive");
  });

  it("keys are sluice's: sl:<policy from the prefix>:{<identifier>}:f0", async () => {
    const r = new Ratelimit({ redis: client, limiter: Ratelimit.fixedWindow(5, "1 m") });
    await r.limit(`user-${run}`, { rate: 2 });
    expect(await client.get(`sl:upstash.ratelimit:{user-${run}}:f0`)).toBe("2");
  });

  it("refuses what it does not do, naming the option", () => {
    const limiter = Ratelimit.fixedWindow(1, "1 s");
    expect(() => new Ratelimit({ limiter, analytics: true })).toThrow(
      /analytics: is not supported/,
    );
    expect(() => new Ratelimit({ limiter, enableProtection: true })).toThrow(/enableProtection/);
    expect(() => new Ratelimit({ limiter, redis: {} as never })).toThrow(
      /redis: must be an @upstash\/redis client, a sluice store, or a Redis client: ioredis 5 or 6/,
    );
    expect(() => Ratelimit.fixedWindow(1, "soon" as Duration)).toThrow(
      /window: must be a duration/,
    );
    expect(() => Ratelimit.slidingWindow(0, "1 s")).toThrow(/tokens: must be a positive integer/);
    expect(
      () =>
        new Ratelimit({ limiter: Ratelimit.cachedFixedWindow(1, "1 s"), ephemeralCache: false }),
    ).toThrow(/cachedFixedWindow needs the ephemeral cache/);
  });
});
