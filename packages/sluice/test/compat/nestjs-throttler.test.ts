/**
 * `SluiceThrottlerStorage` judged by @nestjs/throttler itself: the same sequences of
 * `increment` calls against its own ThrottlerStorageService and against the face, every field
 * compared (on a faked Date: exact), then two real Nest apps (ThrottlerGuard over each
 * storage) answering the same requests, and the face on a redis-server under concurrency.
 */
import "reflect-metadata";
import type { AddressInfo } from "node:net";
import { Controller, Get, type INestApplication, Module } from "@nestjs/common";
import { APP_GUARD, NestFactory } from "@nestjs/core";
import {
  type ThrottlerStorage,
  ThrottlerGuard,
  ThrottlerModule,
  ThrottlerStorageService,
} from "@nestjs/throttler";
import fc from "fast-check";
import { SluiceThrottlerStorage } from "sluice/compat/nestjs-throttler";
import { afterEach, describe, expect, it, vi } from "vitest";
import { redisForSuite } from "../../../../test/support/redis-suite.js";

/** A record as compared: timeToBlockExpire only when blocked (see docs/migrating.md). */
function view(r: Awaited<ReturnType<ThrottlerStorage["increment"]>>): unknown {
  return {
    totalHits: r.totalHits,
    timeToExpire: r.timeToExpire,
    isBlocked: r.isBlocked,
    ...(r.isBlocked ? { timeToBlockExpire: r.timeToBlockExpire } : {}),
  };
}

/** Throttler settings: ttl, limit, blockDuration (ms), as the guard passes them. */
const SETTINGS = [
  { name: "default", ttl: 10_000, limit: 3, block: 10_000 },
  { name: "noblock", ttl: 5_000, limit: 2, block: 0 },
  { name: "long", ttl: 2_000, limit: 3, block: 7_000 },
  // A block shorter than ttl: totalHits while it runs differs (see the test below).
  { name: "short", ttl: 8_000, limit: 3, block: 2_000, blockedHits: false },
];

/**
 * Keys at the edges (the guard hashes its keys, but the storage takes any): empty, NUL and two
 * (what sluice's empty key is made of), long, non-ASCII, braces and spaces.
 */
const EDGE_KEYS = ["", "\u0000", "\u0000\u0000", "x".repeat(3000), "ключ🔑", "a b{c}"];

describe("SluiceThrottlerStorage against ThrottlerStorageService (faked Date: exact)", () => {
  afterEach(() => vi.useRealTimers());

  it.each(SETTINGS)("random sequences give the same records: %o", async (s) => {
    let compared = 0;
    let blocked = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.oneof(
            { weight: 5, arbitrary: fc.record({ key: fc.constantFrom("k1", "k2") }) },
            { weight: 1, arbitrary: fc.record({ key: fc.constantFrom(...EDGE_KEYS) }) },
            { weight: 2, arbitrary: fc.record({ wait: fc.integer({ min: 1, max: 4000 }) }) },
          ),
          { minLength: 3, maxLength: 40 },
        ),
        async (ops) => {
          vi.useFakeTimers({ toFake: ["Date"], now: 1_700_000_000_000 });
          const a = new ThrottlerStorageService();
          const b = new SluiceThrottlerStorage();
          try {
            for (const [i, o] of ops.entries()) {
              if ("wait" in o) {
                vi.advanceTimersByTime(o.wait);
                continue;
              }
              const x = view(await a.increment(o.key, s.ttl, s.limit, s.block, s.name));
              const y = view(await b.increment(o.key, s.ttl, s.limit, s.block, s.name));
              if (s.blockedHits === false && (x as { isBlocked: boolean }).isBlocked)
                (y as { totalHits: number }).totalHits = (x as { totalHits: number }).totalHits;
              expect(y, `op ${i} of ${JSON.stringify(ops.slice(0, i + 1))}`).toEqual(x);
              compared++;
              if ((x as { isBlocked: boolean }).isBlocked) blocked++;
            }
          } finally {
            a.onApplicationShutdown();
            vi.useRealTimers();
          }
        },
      ),
      { numRuns: 80 },
    );
    expect(compared).toBeGreaterThan(300);
    expect(blocked).toBeGreaterThan(30);
  });

  it("a block shorter than ttl forgets the hits when it ends, as @nestjs/throttler's does", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: 1_700_000_000_000 });
    const a = new ThrottlerStorageService();
    const b = new SluiceThrottlerStorage();
    const hit = async (s: ThrottlerStorage) =>
      (await s.increment("k", 60_000, 2, 1_000, "t")).isBlocked;
    for (const s of [a, b])
      expect([await hit(s), await hit(s), await hit(s)]).toEqual([false, false, true]);
    vi.advanceTimersByTime(1_000);
    // Fresh after the 1 s block (so up to 4 within the minute at a limit of 2, as theirs allows).
    for (const s of [a, b])
      expect([await hit(s), await hit(s), await hit(s)]).toEqual([false, false, true]);
    a.onApplicationShutdown();
  });

  it("differs: while such a block runs, totalHits counts only the hit that started it", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: 1_700_000_000_000 });
    const a = new ThrottlerStorageService();
    const b = new SluiceThrottlerStorage();
    for (const s of [a, b])
      for (let i = 0; i < 3; i++) await s.increment("k", 60_000, 2, 5_000, "t");
    vi.advanceTimersByTime(1_000);
    expect((await a.increment("k", 60_000, 2, 5_000, "t")).totalHits).toBe(3);
    expect((await b.increment("k", 60_000, 2, 5_000, "t")).totalHits).toBe(1);
    a.onApplicationShutdown();
  });

  it("refuses a throttler it cannot apply, naming the field", async () => {
    const b = new SluiceThrottlerStorage();
    await expect(b.increment("k", 1000, 0, 0, "t")).rejects.toThrow(
      /Invalid throttler "t": limit: must be a positive integer \(got 0\)/,
    );
    await expect(b.increment("k", -5, 1, 0, "t")).rejects.toThrow(/ttl: must be a positive number/);
    await expect(b.increment("k", 1000, 1, 0, "a b")).rejects.toThrow(
      /throttler name: must be 1–128/,
    );
    expect(() => new SluiceThrottlerStorage({ prefix: "" })).toThrow(/prefix/);
  });
});

describe("ThrottlerGuard in a real Nest app, over each storage", () => {
  const apps: INestApplication[] = [];
  afterEach(async () => {
    vi.useRealTimers();
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  async function nest(storage: ThrottlerStorage): Promise<string> {
    class HelloController {
      hello(): string {
        return "hello";
      }
    }
    Controller()(HelloController);
    Get()(
      HelloController.prototype,
      "hello",
      Object.getOwnPropertyDescriptor(HelloController.prototype, "hello")!,
    );
    class AppModule {}
    Module({
      imports: [
        ThrottlerModule.forRoot({
          throttlers: [
            { name: "short", ttl: 1_000, limit: 2 },
            { name: "long", ttl: 10_000, limit: 4 },
          ],
          storage,
        }),
      ],
      controllers: [HelloController],
      providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
    })(AppModule);
    const app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, "127.0.0.1");
    apps.push(app);
    const { port } = app.getHttpServer().address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  const HEADERS = [
    "x-ratelimit-limit-short",
    "x-ratelimit-remaining-short",
    "x-ratelimit-reset-short",
    "x-ratelimit-limit-long",
    "x-ratelimit-remaining-long",
    "x-ratelimit-reset-long",
    "retry-after-short",
    "retry-after-long",
  ];

  async function get(base: string) {
    const res = await fetch(base + "/");
    const headers: Record<string, string> = {};
    for (const h of HEADERS) {
      const v = res.headers.get(h);
      if (v !== null) headers[h] = v;
    }
    return { status: res.status, headers, body: await res.text() };
  }

  it("the same statuses, headers and bodies, through two throttlers and their blocks", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: 1_700_000_000_000 });
    const a = await nest(new ThrottlerStorageService());
    const b = await nest(new SluiceThrottlerStorage());
    const statuses: number[] = [];
    for (const wait of [0, 0, 0, 300, 800, 0, 0, 1000, 2000, 0, 0, 10_000, 0]) {
      vi.advanceTimersByTime(wait);
      const [x, y] = [await get(a), await get(b)];
      expect(y, `after ${wait} ms`).toEqual(x);
      statuses.push(x.status);
    }
    expect(statuses).toContain(429);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(4);
  });
});

describe("SluiceThrottlerStorage on a redis-server", () => {
  const redis = redisForSuite();
  const run = Date.now().toString(36);

  it("many concurrent hits at a small limit: exactly the limit passes", async () => {
    const b = new SluiceThrottlerStorage({ client: redis.client, prefix: `n${run}` });
    const rs = await Promise.all(
      Array.from({ length: 300 }, () => b.increment("hot", 60_000, 5, 60_000, "default")),
    );
    expect(rs.filter((r) => !r.isBlocked)).toHaveLength(5);
    expect(rs.filter((r) => r.isBlocked).every((r) => r.timeToBlockExpire === 60)).toBe(true);
    // sluice's sliding log: one member per millisecond, "<t>" or "<t>:<hits>".
    const members = await redis.client.zrange(`sl:n${run}:default:{hot}:l0`, "0", "-1");
    expect(members.reduce((n, m) => n + Number(m.split(":")[1] ?? 1), 0)).toBe(5);
  });

  it("edge keys (empty, NUL, long, non-ASCII): each counted on its own, as ThrottlerStorageService", async () => {
    const a = new ThrottlerStorageService();
    const b = new SluiceThrottlerStorage({ client: redis.client, prefix: `e${run}` });
    for (const [i, key] of EDGE_KEYS.entries())
      for (let n = 0; n <= i; n++) {
        const x = await a.increment(key, 20_000, 10, 30_000, "default");
        const y = await b.increment(key, 20_000, 10, 30_000, "default");
        expect({ ...y, timeToExpire: 0, timeToBlockExpire: 0 }, `key ${i} hit ${n}`).toEqual({
          ...x,
          timeToExpire: 0,
          timeToBlockExpire: 0,
        });
        expect(x.totalHits).toBe(n + 1);
      }
    a.onApplicationShutdown();
  });

  it("answers as ThrottlerStorageService does (times within a second: real clocks)", async () => {
    const a = new ThrottlerStorageService();
    const b = new SluiceThrottlerStorage({ client: redis.client, prefix: `m${run}` });
    for (let i = 0; i < 6; i++) {
      const x = await a.increment("k", 20_000, 3, 30_000, "default");
      const y = await b.increment("k", 20_000, 3, 30_000, "default");
      expect({ ...y, timeToExpire: 0, timeToBlockExpire: 0 }).toEqual({
        ...x,
        timeToExpire: 0,
        timeToBlockExpire: 0,
      });
      expect(Math.abs(y.timeToExpire - x.timeToExpire)).toBeLessThanOrEqual(1);
      if (x.isBlocked)
        expect(Math.abs(y.timeToBlockExpire - x.timeToBlockExpire)).toBeLessThanOrEqual(1);
    }
    a.onApplicationShutdown();
  });
});
