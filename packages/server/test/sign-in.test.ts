/**
 * Sign-in under attack and outage, through a started service: the per-IP limit behind a proxy
 * (spoofed `X-Forwarded-For`), scrypt at OWASP's floor with old hashes replaced, only failures
 * counted (per username and client IP), and sign-in while Redis is down.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SCRYPT_PARAMS, hashPassword } from "../src/secrets.js";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { type TestService, captureLogger, startService } from "./helpers.js";

/** A sign-in, as sent through a proxy that appends the address it saw to `X-Forwarded-For`. */
async function signIn(
  s: TestService,
  username: string,
  password: string,
  forwardedFor?: string,
): Promise<number> {
  const res = await fetch(`${s.url}/v1/admin/login`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(forwardedFor !== undefined ? { "x-forwarded-for": forwardedFor } : {}),
    },
    body: JSON.stringify({ username, password }),
  });
  await res.arrayBuffer();
  return res.status;
}

describe("the per-IP sign-in limit behind a proxy", () => {
  // The service is reached through loopback, so the socket's peer (127.0.0.1) plays the proxy,
  // which appended the real client (203.0.113.7) to what the client sent.
  it.each([
    ["a hop count", 1],
    ["the proxies' names", "loopback"],
    ["the proxies' CIDRs", ["127.0.0.0/8", "::1"]],
  ])(
    "with trustProxy as %s, spoofed left-most X-Forwarded-For entries do not escape it",
    async (_, trustProxy) => {
      const s = await startService({
        values: { trustProxy, loginLimitPerIp: 5, loginLimitPerUser: 100 },
      });
      try {
        const statuses: number[] = [];
        for (let i = 0; i < 8; i++)
          statuses.push(await signIn(s, `user${i}`, "guess", `198.51.100.${i}, 203.0.113.7`));
        expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429, 429]);
        // The limit is the client's, not the proxy's: another client behind it is not held up.
        expect(await signIn(s, "user9", "guess", "203.0.113.8")).toBe(401);
        expect(await signIn(s, "root", "root-password", "6.6.6.6, 203.0.113.9")).toBe(200);
      } finally {
        await s.close();
      }
    },
  );

  it("with no trusted proxy (the default), X-Forwarded-For is ignored", async () => {
    const s = await startService({ values: { loginLimitPerIp: 2, loginLimitPerUser: 100 } });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++)
        statuses.push(await signIn(s, `u${i}`, "guess", `198.51.100.${i}`));
      expect(statuses).toEqual([401, 401, 429]);
    } finally {
      await s.close();
    }
  });

  it("warns that trustProxy: true believes the left-most entry, which any client writes", async () => {
    const { logger, lines } = captureLogger();
    const s = await startService({ values: { trustProxy: true }, logger });
    try {
      expect(lines.some((l) => String(l.msg).startsWith("trustProxy is true"))).toBe(true);
    } finally {
      await s.close();
    }
  });
});

describe("passwords", () => {
  let s: TestService;
  beforeAll(async () => {
    // The real cost, not the suites' cheap one.
    s = await startService({ scrypt: SCRYPT_PARAMS });
  });
  afterAll(async () => {
    await s?.close();
  });

  const storedHash = async (username: string) =>
    (
      await s.service.context.repo.database.db
        .selectFrom("users")
        .select("password_hash")
        .where("username", "=", username)
        .executeTakeFirstOrThrow()
    ).password_hash;

  it("are hashed with scrypt at N=2^17, r=8, p=1", async () => {
    await s.service.context.repo.createUser(
      { username: "nina", password: "nina-password", role: "viewer", apps: [] },
      "test",
    );
    expect(await storedHash("nina")).toMatch(/^scrypt\$131072\$8\$1\$/);
    expect(await signIn(s, "nina", "nina-password")).toBe(200);
  });

  it("hashed with less work are replaced on the next successful sign-in", async () => {
    await s.service.context.repo.createUser(
      { username: "olga", password: "olga-password", role: "viewer", apps: [] },
      "test",
    );
    const legacy = await hashPassword("olga-password", { N: 2 ** 14, r: 8, p: 1 });
    await s.service.context.repo.database.db
      .updateTable("users")
      .set({ password_hash: legacy })
      .where("username", "=", "olga")
      .execute();
    // A wrong password changes nothing.
    expect(await signIn(s, "olga", "not-her-password")).toBe(401);
    expect(await storedHash("olga")).toBe(legacy);
    expect(await signIn(s, "olga", "olga-password")).toBe(200);
    const rehashed = await storedHash("olga");
    expect(rehashed).toMatch(/^scrypt\$131072\$8\$1\$/);
    expect(await signIn(s, "olga", "olga-password")).toBe(200);
    expect(await storedHash("olga")).toBe(rehashed);
  });
});

describe("the sign-in limits count failures only", () => {
  let s: TestService;
  beforeAll(async () => {
    s = await startService({
      values: { trustProxy: 1, loginLimitPerUser: 2, loginLimitPerIp: 100 },
    });
  });
  afterAll(async () => {
    await s?.close();
  });

  it("a user signs in more often than the limit", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push(await signIn(s, "root", "root-password", "192.0.2.1"));
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
  });

  it("failures lock a username out from that client IP only", async () => {
    const mallory = "203.0.113.66";
    expect([
      await signIn(s, "root", "guess-1", mallory),
      await signIn(s, "root", "guess-2", mallory),
      await signIn(s, "root", "guess-3", mallory),
    ]).toEqual([401, 401, 429]);
    // Even the right password waits there…
    expect(await signIn(s, "root", "root-password", mallory)).toBe(429);
    // …but the user signs in from anywhere else.
    expect(await signIn(s, "root", "root-password", "192.0.2.2")).toBe(200);
  });
});

describe("sign-in while Redis is down", () => {
  let redis: RedisServer;
  let s: TestService;
  const { logger, lines } = captureLogger();
  beforeAll(async () => {
    redis = await startRedis();
    s = await startService({
      redisUrl: redis.url,
      logger,
      values: { loginLimitPerUser: 2 },
    });
  });
  afterAll(async () => {
    await s?.close();
    await redis?.stop();
  });

  it("an admin signs in: the limits count on this node alone (insurance), and say so in the log", async () => {
    expect(await signIn(s, "root", "root-password")).toBe(200);
    redis.kill();
    expect(await signIn(s, "root", "root-password")).toBe(200);
    // Still limited, on this node. (Its own counter cannot give a success back, so it counts
    // every attempt: the sign-in above and one failure use up the limit of 2.)
    expect([await signIn(s, "root", "guess-1"), await signIn(s, "root", "guess-2")]).toEqual([
      401, 429,
    ]);
    const warning = lines.find((l) =>
      String(l.msg).includes("sign-in attempts are counted on this node only"),
    );
    expect(warning).toMatchObject({ level: 40, policy: "sluice.login.user" });
  });
});
