import { describe, expect, it } from "vitest";
import { createLimiter } from "sluice";
import { RateLimitCore, type RequestInput } from "../../src/http/core.js";
import { ManualTime, flushPromises } from "../../../../test/support/manual-time.js";

const request = (tier: string): RequestInput<{ tier: number }> => ({
  method: "GET",
  path: "/",
  route: undefined,
  header: () => undefined,
  peer: "10.0.0.1",
  raw: { tier: Number(tier) },
});

function adaptiveCore(time: ManualTime, strategy?: { type: "wait"; maxWaitMs: number }) {
  const limiter = createLimiter({
    policy: {
      name: "backend",
      algorithm: "concurrency",
      rules: [{ limit: 100, period: "1m" }],
      adaptive: { min: 2, max: 2, initial: 2 },
    },
    clock: time.now,
    timers: time.timers,
  });
  const core = new RateLimitCore<{ tier: number }>({
    limiter,
    key: () => "backend",
    priority: (raw) => raw.tier,
    clock: time.now,
    timers: time.timers,
    ...(strategy ? { strategy } : {}),
  });
  return { limiter, core };
}

describe("the middleware over an adaptive concurrency policy", () => {
  it("answers 503 (not 429) with Retry-After when the limit has no room for the request's tier", async () => {
    const time = new ManualTime();
    const { core } = adaptiveCore(time);
    const first = await core.handle(request("3"));
    expect(first.kind).toBe("pass");
    // Tier 3 sees 80% of 2: one permit; tier 0 sees both.
    const shed = await core.handle(request("3"));
    expect(shed).toMatchObject({ kind: "reject", status: 503 });
    if (shed.kind !== "reject") throw new Error("not rejected");
    expect(shed.headers.find(([n]) => n === "Retry-After")).toBeDefined();
    expect(JSON.parse(shed.body)).toMatchObject({
      status: 503,
      "violated-policies": expect.any(Array),
    });
    expect((await core.handle(request("0"))).kind).toBe("pass");
  });

  it("reports a 503 or 504 response as a drop, which backs the limit off", async () => {
    const time = new ManualTime();
    const limiter = createLimiter({
      policy: {
        name: "backend",
        algorithm: "concurrency",
        rules: [{ limit: 100, period: "1m" }],
        adaptive: { initial: 40 },
      },
      clock: time.now,
      timers: time.timers,
    });
    const core = new RateLimitCore<{ tier: number }>({
      limiter,
      key: () => "k",
      clock: time.now,
      timers: time.timers,
    });
    for (let round = 0; round < 3; round++) {
      const passed = await Promise.all(Array.from({ length: 30 }, () => core.handle(request("1"))));
      await time.advance(110);
      for (const p of passed) if (p.kind === "pass") p.finish(504);
      await flushPromises();
    }
    expect(limiter.adaptiveState()!.limit).toBeLessThan(40);
  });

  it("with the wait strategy, a request waits in the priority line for a released permit", async () => {
    const time = new ManualTime();
    const { core } = adaptiveCore(time, { type: "wait", maxWaitMs: 100 });
    const held = [await core.handle(request("0")), await core.handle(request("0"))];
    const waiting = core.handle(request("0"));
    await flushPromises();
    await time.advance(10);
    const h = held[0]!;
    if (h.kind !== "pass") throw new Error("not passed");
    h.finish(200);
    expect((await waiting).kind).toBe("pass");
    const late = core.handle(request("0"));
    await flushPromises();
    await time.advance(100);
    expect(await late).toMatchObject({ kind: "reject", status: 503 });
  });

  it("a priority function that gives a bad tier is a 500 naming priority", async () => {
    const time = new ManualTime();
    const { limiter } = adaptiveCore(time);
    const heard: string[] = [];
    const core = new RateLimitCore<{ tier: number }>({
      limiter,
      priority: (raw) => raw.tier,
      onError: (e) => heard.push(`${e.stage}: ${e.message}`),
    });
    const r = await core.handle(request("7"));
    expect(r).toMatchObject({ kind: "error", status: 500 });
    expect(heard).toEqual([
      "priority: the priority function returned a number (7), not a tier 0–3",
    ]);
  });
});
