/**
 * The console's API on every SQL database: traffic history and top keys shared by two nodes on
 * one database and one Redis (each node counts in memory and adds its counts to the database;
 * both answer the same), the retention sweep, looking up and unblocking a key (roles, audit),
 * the first admin made with the setup token, changing one's own password, the audit log's
 * filters and its before → after details. The nodes' clock is injected.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { flatLoad } from "../../../test/support/flat-load.js";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { forEachDatabase } from "./databases.js";
import { TrafficRecorder } from "../src/index.js";
import { type TestService, call, startService } from "./helpers.js";

/** A whole minute (epoch ms), where the nodes' clock starts. */
const T0 = 1_800_000_000_000;
const S0 = T0 / 1000;

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

forEachDatabase((database) => {
  let now = T0;
  let a: TestService;
  let b: TestService;
  let dataDir: string;
  let key: string;
  let viewer: string;
  let owner: string;
  let otherOwner: string;

  beforeAll(async () => {
    const flush = new Redis(redis.url);
    await flush.flushall();
    flush.disconnect();
    dataDir = mkdtempSync(join(tmpdir(), "sluice-console-"));
    const databaseUrl = await database().fresh();
    const common = {
      dataDir,
      redisUrl: redis.url,
      now: () => now,
      ...(databaseUrl ? { databaseUrl } : {}),
    };
    a = await startService({ ...common, nodeId: "node-a" });
    b = await startService({ ...common, nodeId: "node-b" });
    key = await a.createApp("web");
    await a.createApp("billing");
    await a.createPolicy({ name: "api", rules: [{ limit: 3, period: "1m" }], apps: ["web"] });
    await a.createPolicy({
      name: "search",
      rules: [{ limit: 1, period: "1m" }],
      shadow: true,
      apps: ["web"],
    });
    await a.createPolicy({ name: "idle", rules: [{ limit: 1, period: "1s" }], apps: ["web"] });
    await a.createPolicy({
      name: "flat",
      rules: [{ limit: 1_000_000, period: "1m" }],
      apps: ["web"],
    });
    await a.createPolicy({
      name: "bills",
      rules: [{ limit: 1, period: "1m" }],
      apps: ["billing"],
    });
    viewer = await a.createUser("vera", "viewer");
    owner = await a.createUser("olga", "owner", ["web"]);
    otherOwner = await a.createUser("bob", "owner", ["billing"]);
    await b.sync();
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const decide = (node: TestService, policy: string, k: string) =>
    call(node.url, "POST", "/v1/limit", { token: key, body: { policy, key: k } });
  const flushBoth = async () => {
    await a.service.context.traffic.flush();
    await b.service.context.traffic.flush();
  };

  describe("traffic history, shared by two nodes", () => {
    it("counts allowed, denied and shadow would-denials per second, summed over both nodes", async () => {
      // Node a: 3 allowed, 1 denied. Node b, on the same Redis: 2 denied.
      for (let i = 0; i < 4; i++) await decide(a, "api", "u1");
      now += 1000;
      for (let i = 0; i < 2; i++) expect((await decide(b, "api", "u1")).body.allowed).toBe(false);
      // A shadow policy of limit 1: one allowed, one allowed only because of shadow mode.
      for (let i = 0; i < 2; i++) expect((await decide(b, "search", "u2")).body.allowed).toBe(true);
      await flushBoth();

      const fromA = await a.call("GET", "/v1/admin/traffic?policy=api&window=5m");
      const fromB = await b.call("GET", "/v1/admin/traffic?policy=api&window=5m", {
        token: viewer,
      });
      expect(fromA.status).toBe(200);
      expect(fromB.body).toEqual(fromA.body);
      expect(fromA.body).toMatchObject({
        policy: "api",
        window: "5m",
        stepSec: 1,
        totals: { allowed: 3, denied: 3, shadow: 0 },
        by: [{ name: "web", counts: { allowed: 3, denied: 3, shadow: 0 } }],
      });
      const points = fromA.body.points as { at: number; allowed: number; denied: number }[];
      expect(points).toHaveLength(300);
      expect(points.find((p) => p.at === S0)).toMatchObject({ allowed: 3, denied: 1 });
      expect(points.find((p) => p.at === S0 + 1)).toMatchObject({ allowed: 0, denied: 2 });

      const shadow = await b.call("GET", "/v1/admin/traffic?policy=search&window=15m");
      expect(shadow.body).toMatchObject({
        stepSec: 5,
        totals: { allowed: 1, denied: 0, shadow: 1 },
      });
      // Per app, over every policy.
      const web = await a.call("GET", "/v1/admin/traffic?app=web&window=1h");
      expect(web.body.totals).toEqual({ allowed: 4, denied: 3, shadow: 1 });
      expect(web.body.by.map((x: { name: string }) => x.name)).toEqual(["api", "search"]);
    });

    it("shows every policy in the overview, denials first, idle ones last", async () => {
      now += 2000;
      const o = await a.call("GET", "/v1/admin/traffic/overview");
      expect(o.status).toBe(200);
      expect((await b.call("GET", "/v1/admin/traffic/overview")).body).toEqual(o.body);
      expect(o.body.policies.map((p: { name: string }) => p.name)).toEqual([
        "api",
        "search",
        "bills",
        "flat",
        "idle",
      ]);
      const [api, search, bills] = o.body.policies;
      expect(api).toMatchObject({
        rate: 0.6, // 6 decisions in the last 10 s
        recent: { allowed: 3, denied: 3, shadow: 0 },
        shadow: false,
        apps: ["web"],
      });
      expect(search).toMatchObject({ shadow: true, recent: { allowed: 1, shadow: 1 } });
      expect(bills).toMatchObject({ rate: 0, recent: { allowed: 0, denied: 0, shadow: 0 } });
      expect(api.spark).toHaveLength(30);
      expect(api.spark.reduce((t: number, p: { denied: number }) => t + p.denied, 0)).toBe(3);
    });

    it("finds the busiest and most denied keys, merged over both nodes", async () => {
      for (let i = 0; i < 5; i++) await decide(a, "search", "hot");
      for (let i = 0; i < 4; i++) await decide(b, "search", "hot");
      await decide(a, "search", "cold");
      await flushBoth();
      const top = await b.call("GET", "/v1/admin/traffic/keys?policy=search&window=5m", {
        token: viewer,
      });
      expect(top.status).toBe(200);
      expect((await a.call("GET", "/v1/admin/traffic/keys?policy=search")).body).toEqual(top.body);
      expect(top.body.busiest.slice(0, 3)).toEqual([
        { key: "hot", count: 9, overcount: 0 },
        { key: "u2", count: 2, overcount: 0 },
        { key: "cold", count: 1, overcount: 0 },
      ]);
      // A shadow policy denies nothing: its would-denials are apart, every "hot" but its first.
      expect(top.body.denied).toEqual([]);
      expect(top.body.shadow[0]).toEqual({ key: "hot", count: 8, overcount: 0 });
      const bad = await a.call("GET", "/v1/admin/traffic/keys?policy=search&window=2m");
      expect(bad.status).toBe(400);
      expect(bad.body.error.issues).toEqual([
        { path: "window", message: "must be one of 1m, 5m, 15m, 1h" },
      ]);
      expect((await a.call("GET", "/v1/admin/traffic/keys")).status).toBe(400);
    });

    it("keeps per-second counts an hour and per-minute counts a day, then sweeps them", async () => {
      const rows = async (span: number) =>
        Number(
          (
            await a.service.context.repo.database.db
              .selectFrom("traffic")
              .select((eb) => eb.fn.countAll().as("n"))
              .where("span", "=", span)
              .executeTakeFirstOrThrow()
          ).n,
        );
      expect(await rows(1)).toBeGreaterThan(0);
      now = T0 + 2 * 3_600_000;
      await a.service.context.traffic.flush();
      expect(await rows(1)).toBe(0);
      expect(await rows(60)).toBeGreaterThan(0);
      // The day window reads the per-minute rows.
      const day = await a.call("GET", "/v1/admin/traffic?policy=api&window=24h");
      expect(day.body).toMatchObject({ stepSec: 300, totals: { allowed: 3, denied: 3 } });
      now = T0 + 26 * 3_600_000;
      await a.service.context.traffic.flush();
      expect(await rows(60)).toBe(0);
      const keys = await a.service.context.repo.database.db
        .selectFrom("traffic_keys")
        .select((eb) => eb.fn.countAll().as("n"))
        .executeTakeFirstOrThrow();
      expect(Number(keys.n)).toBe(0);
    });
  });

  describe("the busiest keys of a flat load (issue 32)", () => {
    it("names the true top ten, and no row claims more than twice its key's count", async () => {
      // Five whole minutes of the load, each cut between the two nodes, then the minute after.
      const load = flatLoad(10);
      const start = Math.ceil(now / 60_000) * 60_000 + 60_000;
      for (const [p, part] of load.parts.entries()) {
        now = start + Math.floor(p / 2) * 60_000 + 1000;
        const node = p % 2 === 0 ? a : b;
        for (let i = 0; i < part.length; i += 1000) {
          const requests = part.slice(i, i + 1000).map((k) => ({ policy: "flat", key: k }));
          const r = await call(node.url, "POST", "/v1/limit/batch", {
            token: key,
            body: { requests },
          });
          expect(r.status, JSON.stringify(r.body)).toBe(200);
        }
        await node.service.context.traffic.flush();
      }
      now = start + 5 * 60_000 + 1000;
      const top = await a.call("GET", "/v1/admin/traffic/keys?policy=flat&window=5m");
      expect(top.status).toBe(200);
      const rows = top.body.busiest as { key: string; count: number; overcount: number }[];
      expect(rows).toHaveLength(20);
      expect(new Set(rows.slice(0, 10).map((r) => r.key))).toEqual(
        new Set(load.ranked.slice(0, 10).map((r) => r.key)),
      );
      for (const r of rows) {
        const truth = load.truth.get(r.key)!;
        expect(r.count, r.key).toBeLessThanOrEqual(2 * truth);
        // The bounds hold: count − overcount ≤ truth ≤ count.
        expect(r.count, r.key).toBeGreaterThanOrEqual(truth);
        expect(r.count - r.overcount, r.key).toBeLessThanOrEqual(truth);
      }
      // At most 1,000 keys per node and minute, so counted exactly: the true ranking itself.
      expect(rows).toEqual(load.ranked.slice(0, 20).map((r) => ({ ...r, overcount: 0 })));
    });

    it("keeps one row per slot of a node's sketch, however many keys pass through it", async () => {
      // A node whose sketches watch 4 keys, written to the real tables: a hot key and 200
      // others, one at a time, flushed after every tenth.
      const churn = new TrafficRecorder({
        sink: a.service.context.repo.traffic,
        nodeId: "churn",
        now: () => now,
        keyCapacity: 4,
      });
      const truth = new Map<string, number>();
      for (let i = 0; i < 200; i++) {
        for (const k of [`c${i}`, "hot"]) {
          churn.record("churn", "web", "allowed", k);
          truth.set(k, (truth.get(k) ?? 0) + 1);
        }
        if (i % 10 === 9) await churn.flush();
      }
      const stored = await a.service.context.repo.database.db
        .selectFrom("traffic_keys")
        .select(["slot", "ident"])
        .where("node", "=", "churn")
        .execute();
      expect(stored.map((r) => Number(r.slot)).sort()).toEqual([0, 1, 2, 3]);
      const top = await a.call("GET", "/v1/admin/traffic/keys?policy=churn&window=1m");
      const rows = top.body.busiest as { key: string; count: number; overcount: number }[];
      expect(rows).toHaveLength(4);
      expect(rows[0]).toMatchObject({ key: "hot", count: 200 });
      for (const r of rows) {
        const t = truth.get(r.key)!;
        expect(r.count, r.key).toBeGreaterThanOrEqual(t);
        expect(r.count - r.overcount, r.key).toBeLessThanOrEqual(t);
      }
    });
  });

  describe("a key: look it up, unblock it", () => {
    it("peeks what a key has left, on any node (shared counters)", async () => {
      for (let i = 0; i < 3; i++) await decide(a, "api", "blocked-user");
      const peek = await b.call("GET", "/v1/admin/policies/api/key?key=blocked-user", {
        token: viewer,
      });
      expect(peek.status).toBe(200);
      expect(peek.body).toMatchObject({
        policy: "api",
        key: "blocked-user",
        counters: "redis",
        decision: { allowed: false, remaining: 0 },
      });
      expect(peek.body.decision.retryAfterMs).toBeGreaterThan(0);
      expect((await a.call("GET", "/v1/admin/policies/nope/key?key=x")).status).toBe(404);
      const noKey = await a.call("GET", "/v1/admin/policies/api/key");
      expect(noKey.status).toBe(400);
      expect(noKey.body.error.issues[0].path).toBe("key");
    });

    it("unblocks it (admins, and owners of a granted app), audited", async () => {
      const reset = (token: string) =>
        call(a.url, "POST", "/v1/admin/policies/api/key/reset", {
          token,
          body: { key: "blocked-user" },
        });
      expect((await reset(viewer)).status).toBe(403);
      const other = await reset(otherOwner);
      expect(other.status).toBe(403);
      expect(other.body.error.message).toContain("not granted to an app you own");
      const ok = await reset(owner);
      expect(ok.status).toBe(200);
      expect(ok.body).toMatchObject({ reset: true, decision: { allowed: true, remaining: 3 } });
      // On the other node too: the counters are shared.
      expect(
        (await b.call("GET", "/v1/admin/policies/api/key?key=blocked-user")).body.decision,
      ).toMatchObject({ allowed: true, remaining: 3 });
      expect((await decide(a, "api", "blocked-user")).body.allowed).toBe(true);
      const entry = (await a.call("GET", "/v1/admin/audit?action=key&limit=1")).body.entries[0];
      expect(entry).toMatchObject({
        actor: "olga",
        action: "key.reset",
        targetType: "policy",
        target: "api",
        detail: {
          key: "blocked-user",
          counters: "redis",
          before: { allowed: false, remaining: 0 },
          after: { allowed: true, remaining: 3, retryAfterMs: 0 },
        },
      });
    });
  });

  describe("audit log", () => {
    it("filters by actor, action (or its prefix), object (substring) and time", async () => {
      const entries = async (q: string) => {
        const r = await a.call("GET", `/v1/admin/audit?limit=500&${q}`);
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        return r.body.entries as { actor: string; action: string; target: string; at: string }[];
      };
      const byOlga = await entries("actor=olga");
      expect(byOlga.length).toBeGreaterThan(0);
      expect(byOlga.every((e) => e.actor === "olga")).toBe(true);
      const policies = await entries("action=policy");
      expect(policies.length).toBeGreaterThanOrEqual(4);
      expect(policies.every((e) => e.action.startsWith("policy."))).toBe(true);
      expect((await entries("action=policy.create")).map((e) => e.target).sort()).toEqual([
        "api",
        "bills",
        "flat",
        "idle",
        "search",
      ]);
      // Not a prefix unless it ends at a dot.
      expect(await entries("action=pol")).toEqual([]);
      expect((await entries("object=ILL")).map((e) => e.target)).toContain("bills");
      expect((await entries("object=ILL")).every((e) => /ill/i.test(e.target))).toBe(true);
      // LIKE's wildcards are taken literally.
      expect(await entries("object=%25")).toEqual([]);
      expect(await entries("object=_")).toEqual([]);
      const all = await entries("");
      const middle = all[Math.floor(all.length / 2)]!.at;
      const since = await entries(`since=${encodeURIComponent(middle)}`);
      const until = await entries(`until=${encodeURIComponent(middle)}`);
      expect(since.every((e) => e.at >= middle)).toBe(true);
      expect(until.every((e) => e.at < middle)).toBe(true);
      expect(since.length + until.length).toBe(all.length);
      const bad = await a.call("GET", "/v1/admin/audit?since=yesterday");
      expect(bad.status).toBe(400);
      expect(bad.body.error.issues).toEqual([
        { path: "since", message: "must be an ISO 8601 time, e.g. 2026-03-01T12:00:00Z" },
      ]);
    });

    it("keeps both sides of a change: drafts, discards and users", async () => {
      const doc = { rules: [{ limit: 2, period: "1m" }], apps: ["web"] };
      expect((await a.call("PUT", "/v1/admin/policies/idle/draft", { body: doc })).status).toBe(
        200,
      );
      const last = async (action: string) =>
        (await a.call("GET", `/v1/admin/audit?action=${action}&limit=1`)).body.entries[0].detail;
      expect(await last("policy.draft")).toMatchObject({
        before: { name: "idle", rules: [{ limit: 1, period: "1s" }] },
        after: { name: "idle", rules: [{ limit: 2, period: "1m" }] },
      });
      expect((await a.call("DELETE", "/v1/admin/policies/idle/draft")).status).toBe(204);
      expect(await last("policy.draft.discard")).toMatchObject({
        before: { rules: [{ limit: 2, period: "1m" }] },
      });
      expect(
        (await a.call("PATCH", "/v1/admin/users/bob", { body: { apps: ["billing", "web"] } }))
          .status,
      ).toBe(200);
      expect(await last("user.update")).toEqual({
        before: { role: "owner", apps: ["billing"] },
        after: { role: "owner", apps: ["billing", "web"] },
      });
    });
  });

  describe("your own password", () => {
    it("changes with the current one; your other sessions end, this one stays", async () => {
      const other = (
        await call(a.url, "POST", "/v1/admin/login", {
          body: { username: "vera", password: "vera-password" },
        })
      ).body.token as string;
      const wrong = await call(a.url, "POST", "/v1/admin/me/password", {
        token: viewer,
        body: { currentPassword: "nope-nope", newPassword: "vera-new-password" },
      });
      expect(wrong.status).toBe(400);
      expect(wrong.body.error.issues).toEqual([
        { path: "currentPassword", message: "is not your current password" },
      ]);
      const short = await call(a.url, "POST", "/v1/admin/me/password", {
        token: viewer,
        body: { currentPassword: "vera-password", newPassword: "short" },
      });
      expect(short.body.error.issues).toEqual([
        { path: "newPassword", message: "must be at least 8 characters" },
      ]);
      const ok = await call(a.url, "POST", "/v1/admin/me/password", {
        token: viewer,
        body: { currentPassword: "vera-password", newPassword: "vera-new-password" },
      });
      expect(ok.status).toBe(204);
      expect((await call(a.url, "GET", "/v1/admin/me", { token: viewer })).status).toBe(200);
      expect((await call(a.url, "GET", "/v1/admin/me", { token: other })).status).toBe(401);
      const login = await call(a.url, "POST", "/v1/admin/login", {
        body: { username: "vera", password: "vera-new-password" },
      });
      expect(login.status).toBe(200);
      const entry = (await a.call("GET", "/v1/admin/audit?target=vera&action=user.update&limit=1"))
        .body.entries[0];
      expect(entry).toMatchObject({
        actor: "vera",
        action: "user.update",
        detail: { via: "self-service", password: "changed" },
      });
    });
  });

  describe("first run: the setup token", () => {
    let s: TestService;
    let clock = T0;
    beforeAll(async () => {
      const databaseUrl = await database().fresh();
      s = await startService({
        noAdmin: true,
        now: () => clock,
        ...(databaseUrl ? { databaseUrl } : {}),
      });
    });
    afterAll(async () => {
      await s?.close();
    });
    const setup = (body: unknown) => call(s.url, "POST", "/v1/admin/setup", { body });

    it("creates the first admin once, with a token that expires", async () => {
      expect((await call(s.url, "GET", "/v1/admin/setup")).body).toEqual({
        needed: true,
        tokenActive: false,
      });
      const none = await setup({ token: "su_x", username: "ada", password: "ada-password" });
      expect(none.status).toBe(401);
      expect(none.body.error.message).toContain("this node issued no setup token");

      const first = s.service.context.setup.issue().token;
      clock += 3_600_000;
      const expired = await setup({ token: first, username: "ada", password: "ada-password" });
      expect(expired.status).toBe(401);
      expect(expired.body.error.message).toContain("the setup token has expired");

      const { token } = s.service.context.setup.issue();
      expect((await call(s.url, "GET", "/v1/admin/setup")).body.tokenActive).toBe(true);
      expect(
        (await setup({ token: first, username: "ada", password: "ada-password" })).body.error
          .message,
      ).toContain("wrong setup token");
      const invalid = await setup({ token, username: "a b", password: "short" });
      expect(invalid.status).toBe(400);
      expect(invalid.body.error.issues.map((i: { path: string }) => i.path)).toEqual([
        "username",
        "password",
      ]);

      // Two at once with the right token: one admin, one refusal.
      const [x, y] = await Promise.all([
        setup({ token, username: "ada", password: "ada-password" }),
        setup({ token, username: "max", password: "max-password" }),
      ]);
      expect([x.status, y.status].sort()).toEqual([200, 409]);
      const won = x.status === 200 ? x : y;
      expect(won.body.user).toMatchObject({ role: "admin" });
      const me = await call(s.url, "GET", "/v1/admin/me", { token: won.body.token });
      expect(me.body.role).toBe("admin");
      expect(await s.service.context.repo.countAdmins()).toBe(1);

      const again = await setup({ token, username: "eve", password: "eve-password" });
      expect(again.status).toBe(409);
      expect(again.body.error.message).toBe("an admin already exists: sign in instead");
      expect((await call(s.url, "GET", "/v1/admin/setup")).body).toEqual({
        needed: false,
        tokenActive: false,
      });
      const entry = (
        await call(s.url, "GET", "/v1/admin/audit?action=user.create", { token: won.body.token })
      ).body.entries[0];
      expect(entry).toMatchObject({
        actor: won.body.user.username,
        detail: { via: "setup", after: { role: "admin" } },
      });
    });
  });
});
