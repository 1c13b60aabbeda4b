/**
 * HTTP on Express and on Fastify: a real Nest app per platform on 127.0.0.1, asked with fetch.
 * Time is the memory store's injected clock; nothing waits.
 */
import { Controller, Get, Inject, Module, Req, UseGuards } from "@nestjs/common";
import { describe, expect, it } from "vitest";
import { ManualTime } from "../../../test/support/manual-time.js";
import { RateLimit, SkipRateLimit, SluiceGuard, SluiceLimits, SluiceModule } from "../src/index.js";
import { PLATFORMS, get, startApp } from "./support.js";

const time = new ManualTime();

@Controller()
class AppController {
  constructor(@Inject(SluiceLimits) readonly limits: SluiceLimits) {}

  @Get("three")
  @RateLimit("three")
  three(): string {
    return "ok";
  }

  @Get("health")
  @SkipRateLimit()
  health(): string {
    return "up";
  }

  /** Limited by the module's default policies only. */
  @Get("work")
  work(): string {
    return "done";
  }

  @Get("both")
  @RateLimit("wide")
  @RateLimit("narrow")
  both(): string {
    return "both";
  }

  @Get("wide")
  @RateLimit("wide")
  wide(@Req() req: { url?: string }): string {
    return String(req.url);
  }
}

/**
 * The guard named on the controller while the module's is global: Nest runs both on each call
 * (as Nest 12 does on a gateway whose guide names it). One call is one charge.
 */
@Controller("named")
@UseGuards(SluiceGuard)
class NamedGuardController {
  @Get("three")
  @RateLimit("three")
  three(): string {
    return "ok";
  }
}

@Module({
  imports: [
    SluiceModule.forRoot({
      policies: [
        { name: "three", algorithm: "fixed-window", rules: [{ limit: 3, period: "1m" }] },
        { name: "burst", algorithm: "gcra", rules: [{ limit: 8, period: "1m" }] },
        { name: "sustained", algorithm: "sliding-window", rules: [{ limit: 20, period: "1h" }] },
        { name: "wide", algorithm: "fixed-window", rules: [{ limit: 5, period: "1m" }] },
        { name: "narrow", algorithm: "fixed-window", rules: [{ limit: 2, period: "1m" }] },
      ],
      defaultPolicies: ["burst", "sustained"],
      // Each scenario its own client, so the default policies' counts do not meet.
      key: (ctx) =>
        ctx.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers["x-user"],
      clock: time.now,
    }),
  ],
  controllers: [AppController, NamedGuardController],
})
class AppModule {}

describe.each(PLATFORMS)("on %s", (platform) => {
  it("answers a handler at limit 3 with 3 × 200, then 429 with Retry-After, RateLimit and problem+json", async () => {
    const { url } = await startApp(AppModule, platform);
    const who = { "x-user": `three-${platform}` };
    for (let i = 0; i < 3; i++) {
      const ok = await get(`${url}/three`, who);
      expect(ok.status).toBe(200);
      expect(ok.body).toBe("ok");
      expect(ok.headers.get("ratelimit")).toContain(`"three";r=${2 - i};t=`);
      expect(ok.headers.get("ratelimit-policy")).toContain(`"three";q=3;w=60`);
    }
    const denied = await get(`${url}/three`, who);
    expect(denied.status).toBe(429);
    const retryAfter = Number(denied.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(denied.headers.get("ratelimit")).toMatch(/^"three";r=0;t=\d+$/);
    expect(denied.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    const problem = JSON.parse(denied.body) as Record<string, unknown>;
    expect(problem).toMatchObject({
      type: "https://iana.org/assignments/http-problem-types#quota-exceeded",
      status: 429,
      "violated-policies": ["three"],
      retryAfter,
    });
    // The window ends on the store's clock: the handler answers again.
    await time.advance(60_000);
    expect((await get(`${url}/three`, who)).status).toBe(200);
  });

  it("never limits a @SkipRateLimit() route while two named default policies limit the others", async () => {
    const { url } = await startApp(AppModule, platform);
    for (let i = 0; i < 30; i++) {
      const health = await get(`${url}/health`, { "x-user": `health-${platform}` });
      expect(health.status).toBe(200);
      expect(health.headers.get("ratelimit")).toBeNull();
    }
    // The same defaults limit a route without decorators: both are in force.
    const who = { "x-user": `work-${platform}` };
    for (let i = 0; i < 8; i++) {
      const ok = await get(`${url}/work`, who);
      expect(ok.status).toBe(200);
      expect(ok.headers.get("ratelimit")).toMatch(/"burst";r=\d+;t=\d+, "sustained";r=\d+;t=\d+/);
    }
    const denied = await get(`${url}/work`, who);
    expect(denied.status).toBe(429);
    expect(
      (JSON.parse(denied.body) as { "violated-policies": string[] })["violated-policies"],
    ).toEqual(["burst"]);
  });

  it("decides two @RateLimit on one handler all or nothing: a denial by one leaves the other's count untouched", async () => {
    const { app, url } = await startApp(AppModule, platform);
    const limits = app.get(SluiceLimits);
    const user = `both-${platform}`;
    const who = { "x-user": user };
    expect((await get(`${url}/both`, who)).status).toBe(200);
    expect((await get(`${url}/both`, who)).status).toBe(200);
    // "narrow" (limit 2) is spent: the next requests are refused by it alone…
    for (let i = 0; i < 3; i++) {
      const denied = await get(`${url}/both`, who);
      expect(denied.status).toBe(429);
      expect(
        (JSON.parse(denied.body) as { "violated-policies": string[] })["violated-policies"],
      ).toEqual(["narrow"]);
    }
    // …and "wide" (limit 5) was charged for the two that passed only.
    expect((await limits.limiter("wide").peek(user)).remaining).toBe(3);
    for (let i = 0; i < 3; i++) expect((await get(`${url}/wide`, who)).status).toBe(200);
    expect((await get(`${url}/wide`, who)).status).toBe(429);
  });

  it("charges a call once where the guard is both global and named on its controller", async () => {
    const { app, url } = await startApp(AppModule, platform);
    const user = `named-${platform}`;
    const who = { "x-user": user };
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await get(`${url}/named/three`, who)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    // The default policies too: one unit each per call that passed (burst allows 8).
    expect((await app.get(SluiceLimits).limiter("burst").peek(user)).remaining).toBe(8 - 3);
  });
});
