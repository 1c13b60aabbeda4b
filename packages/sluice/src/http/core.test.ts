import { describe, expect, it } from "vitest";
import { type MiddlewareError, ValidationError } from "../errors.js";
import { createLimiter } from "../limiter.js";
import { MemoryStore } from "../stores/memory.js";
import { ManualTime } from "../../../../test/support/manual-time.js";
import { readFileSync } from "node:fs";
import { RateLimitCore, type RequestInput } from "./core.js";
import { OPTIONS } from "./options.js";
import type { RateLimitOptions } from "./types.js";

const limiter = createLimiter({
  store: new MemoryStore({ now: () => 0 }),
  policy: { name: "api", rules: [{ limit: 1, period: "1m" }] },
});

function issues(options: unknown): string[] {
  try {
    new RateLimitCore(options as RateLimitOptions);
  } catch (err) {
    if (err instanceof ValidationError) return err.issues.map((i) => `${i.path}: ${i.message}`);
    throw err;
  }
  return [];
}

const input = (peer: string, headers: Record<string, string> = {}): RequestInput<null> => ({
  method: "GET",
  path: "/",
  route: undefined,
  header: (n) => headers[n.toLowerCase()],
  peer,
  raw: null,
});

describe("option validation", () => {
  it("accepts a minimal configuration", () => {
    expect(issues({ limiter })).toEqual([]);
  });

  it("names every bad option", () => {
    expect(
      issues({
        limiter: 42,
        headers: "draft-7",
        trustProxy: ["10.0.0.0/8", "not-an-ip"],
        strategy: { type: "wait", maxWaitMs: -1 },
        countOnly: "sometimes",
        ipv6Prefix: 200,
        key: "ip",
        colour: "blue",
      }),
    ).toEqual([
      "colour: unknown option",
      "limiter: is required: a limiter from createLimiter(), or a function of the request returning one",
      "key: must be a function",
      "headers: must be one of github, ietf, both or false",
      'countOnly: must be "failed" or "successful"',
      "ipv6Prefix: must be a whole number 0–128 (got 200)",
      "strategy.maxWaitMs: must be a positive number of ms (got -1)",
      'trustProxy.1: "not-an-ip" is not an IP address, a CIDR or one of loopback, linklocal, uniquelocal',
    ]);
  });

  it("knows exactly the options docs/http.md documents (besides the adapters' own)", () => {
    const doc = readFileSync(new URL("../../../../docs/http.md", import.meta.url), "utf8");
    const table = doc.slice(doc.indexOf("## Options reference"));
    const documented = [...table.matchAll(/^\| `(\w+)` +\|/gm)].map((m) => m[1]!);
    const adapterOnly = ["global", "peer"]; // Fastify's and Hono's, taken out before the core
    expect(documented.filter((k) => !adapterOnly.includes(k)).sort()).toEqual(
      Object.keys(OPTIONS).sort(),
    );
    for (const k of Object.keys(OPTIONS).filter((k) => k !== "limiter"))
      expect(issues({ limiter, [k]: undefined })).toEqual([]);
  });

  it("checks injected timers", () => {
    expect(issues({ limiter, timers: { setTimeout: () => 1 } })).toEqual([
      "timers: must be an object with setTimeout(callback, ms) and clearTimeout(handle)",
    ]);
  });

  it("rejects countOnly with a concurrency policy and unknown strategies", () => {
    const conc = createLimiter({
      policy: { name: "c", algorithm: "concurrency", rules: [{ limit: 1, period: "1m" }] },
    });
    expect(issues({ limiter: conc, countOnly: "failed" })).toEqual([
      "countOnly: does not apply to a concurrency policy (its slots are released when the response ends)",
    ]);
    expect(issues({ limiter, strategy: "queue" })).toEqual([
      'strategy: must be "reject", "shadow", or an object with type reject | wait | degrade | shadow',
    ]);
    expect(issues({ limiter, strategy: { type: "degrade" } })).toEqual([
      "strategy.fallback: must be a function (the fallback handler)",
    ]);
  });

  it("names every problem inside strategy, trustProxy and allowList by its path", () => {
    expect(
      issues({
        limiter,
        strategy: { type: "wait", maxWaitMs: 0, maxQueue: 0 },
        trustProxy: -1,
        allowList: ["10.0.0.0/8", "loopback", "nowhere"],
      }),
    ).toEqual([
      "strategy.maxWaitMs: must be a positive number of ms (got 0)",
      "strategy.maxQueue: must be a positive integer (got 0)",
      "trustProxy: a hop count must be a whole number ≥ 0 (got -1)",
      'allowList.2: "nowhere" is not an IP address, a CIDR or one of loopback, linklocal, uniquelocal',
    ]);
    expect(issues({ limiter, strategy: { type: "later" }, allowList: "10.0.0.0/8" })).toEqual([
      "strategy.type: must be reject, wait, degrade or shadow",
      "allowList: must be a list of IPs, CIDRs or names (loopback, linklocal, uniquelocal)",
    ]);
    expect(issues(null)).toEqual([": must be an object with at least `limiter`"]);
  });
});

describe("RateLimitCore.handle", () => {
  it("falls back to the IP when the key function has no identity", async () => {
    const core = new RateLimitCore<null>({ limiter, key: () => undefined });
    const a = await core.handle(input("198.51.100.4"));
    const b = await core.handle(input("198.51.100.4"));
    expect([a.kind, b.kind]).toEqual(["pass", "reject"]);
  });

  it("skips requests whose limiter selector returns undefined", async () => {
    const core = new RateLimitCore<null>({ limiter: () => undefined });
    expect((await core.handle(input("198.51.100.5"))).kind).toBe("skip");
  });

  it("never calls hooks in a way that can break a response", async () => {
    const core = new RateLimitCore<null>({
      limiter,
      onDecision: () => {
        throw new Error("metrics down");
      },
    });
    expect((await core.handle(input("198.51.100.6"))).kind).toBe("pass");
  });

  it("answers an invalid cost with an error outcome naming the limiter, the cause kept", async () => {
    const heard: MiddlewareError[] = [];
    const core = new RateLimitCore<null>({
      limiter,
      cost: () => 5,
      onError: (e) => heard.push(e),
    });
    const o = await core.handle(input("198.51.100.7"));
    expect(o.kind).toBe("error");
    if (o.kind !== "error") return;
    expect(o.status).toBe(500);
    expect(o.headers).toEqual([["Content-Type", "application/problem+json"]]);
    expect(JSON.parse(o.body)).toEqual({
      type: "about:blank",
      title: "Internal Server Error",
      status: 500,
      detail:
        "The rate limiter could not decide on this request: the limiter refused the key or cost it was given. The server's log has the error.",
    });
    expect(heard).toEqual([o.error]);
    expect(o.error.stage).toBe("decision");
    expect((o.error.cause as ValidationError).code).toBe("SLUICE_ERR_COST");
  });

  it("gives every request function the framework's request first and sluice's view second", async () => {
    const raw = { user: { id: 42 } };
    const seen: string[] = [];
    const core = new RateLimitCore<typeof raw>({
      limiter: (req, http) => (seen.push(`limiter ${req.user.id} ${http.ip}`), limiter),
      skip: (req, http) => (seen.push(`skip ${req.user.id} ${http.path}`), false),
      key: (req, http) => `user:${req.user.id}@${http.ip}`,
      cost: (req) => (seen.push(`cost ${req.user.id}`), 1),
      onDecision: (e) => seen.push(`decided ${e.key} ${e.request.raw.user.id}`),
    });
    const o = await core.handle({ ...input("198.51.100.8"), raw });
    expect(o.kind).toBe("pass");
    expect(seen).toEqual([
      "skip 42 /",
      "limiter 42 198.51.100.8",
      "cost 42",
      "decided user:42@198.51.100.8 42",
    ]);
  });

  it("a throwing onError changes nothing: the answer is still the 500", async () => {
    const core = new RateLimitCore<null>({
      limiter,
      key: () => {
        throw new Error("boom");
      },
      onError: () => {
        throw new Error("logger down");
      },
    });
    expect((await core.handle(input("198.51.100.11"))).kind).toBe("error");
  });
});

describe("wait strategy", () => {
  it("rejects waiters whose turn would come after maxWaitMs, at once", async () => {
    // One request per 200 ms, no burst: the 2nd waits 200 ms, the 3rd and 4th would wait longer.
    const time = new ManualTime();
    const l = createLimiter({
      store: new MemoryStore({ now: time.now }),
      policy: { name: "q", rules: [{ limit: 5, period: "1s", burst: 1 }] },
    });
    const core = new RateLimitCore<null>({
      limiter: l,
      clock: time.now,
      timers: time.timers,
      strategy: { type: "wait", maxWaitMs: 250 },
    });
    const all = Promise.all([0, 1, 2, 3].map(() => core.handle(input("198.51.100.9"))));
    await time.until(() => time.pending === 4);
    await time.advance(200);
    const outcomes = await all;
    expect(outcomes.map((o) => o.kind)).toEqual(["pass", "pass", "reject", "reject"]);
    for (const o of outcomes.slice(2)) {
      expect(o.kind === "reject" && o.decision.allowed).toBe(false);
      expect(o.kind === "reject" && o.status).toBe(429);
    }
    expect(time.pending).toBe(0);
  });

  it("rejects at once when the key's line is full", async () => {
    const time = new ManualTime();
    const l = createLimiter({
      store: new MemoryStore({ now: time.now }),
      policy: { name: "full", rules: [{ limit: 5, period: "1s", burst: 1 }] },
    });
    const core = new RateLimitCore<null>({
      limiter: l,
      clock: time.now,
      timers: time.timers,
      strategy: { type: "wait", maxWaitMs: 1000, maxQueue: 1 },
    });
    expect((await core.handle(input("198.51.100.10"))).kind).toBe("pass");
    const queued = core.handle(input("198.51.100.10"));
    await time.until(() => time.pending === 2);
    const third = await core.handle(input("198.51.100.10"));
    expect(third.kind).toBe("reject");
    expect(third.kind === "reject" && third.decision.allowed).toBe(false);
    await time.advance(200);
    expect((await queued).kind).toBe("pass");
  });
});
