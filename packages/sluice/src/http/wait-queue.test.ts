import { describe, expect, it } from "vitest";
import { ManualTime } from "../../../../test/support/manual-time.js";
import type { Decision } from "../decision.js";
import { type Limiter, createLimiter } from "../limiter.js";
import { MemoryStore } from "../stores/memory.js";
import { type WaitRequest, WaitQueues, waitQueuesFor } from "./wait-queue.js";

/** A limiter of one request per `everyMs` (no burst) on the manual clock. */
function limiterOn(time: ManualTime, everyMs: number): Limiter {
  return createLimiter({
    store: new MemoryStore({ now: time.now }),
    policy: { name: "q", rules: [{ limit: 1, period: everyMs }] },
  });
}

function request(time: ManualTime, limiter: Limiter, over: Partial<WaitRequest> = {}): WaitRequest {
  return {
    limiter,
    key: "k",
    cost: 1,
    maxWaitMs: 10_000,
    maxQueue: 100,
    signal: undefined,
    clock: time.now,
    ...over,
  };
}

const summary = (r: { kind: string; decision: Decision; queued?: boolean }) =>
  `${r.kind}:${r.decision.allowed ? "allowed" : "denied"}${r.queued ? ":queued" : ""}`;

describe("WaitQueues", () => {
  it("serves one key's line in arrival order, each request at its own retry time", async () => {
    const time = new ManualTime();
    const limiter = limiterOn(time, 100);
    const q = new WaitQueues(time.timers);
    const order: string[] = [];
    const results = ["a", "b", "c"].map((name) =>
      q.decide(request(time, limiter)).then((r) => {
        order.push(`${name}@${time.now() - 1_700_000_000_000}`);
        return r;
      }),
    );
    // a passed; b was told 100 ms and sleeps (a retry and a deadline timer); c, told the same,
    // found b waiting and joined the line behind it (a deadline timer).
    await time.until(() => time.pending === 3);
    await time.advance(200);
    expect((await Promise.all(results)).map(summary)).toEqual([
      "decided:allowed",
      "decided:allowed:queued",
      "decided:allowed:queued",
    ]);
    expect(order).toEqual(["a@0", "b@100", "c@200"]);
    expect(q.waiting(limiter, "k")).toBe(false);
    expect(time.pending).toBe(0);
  });

  it("a request behind the head leaves at its own deadline", async () => {
    // Two middlewares with different maxWaitMs share the line: the second's deadline (150 ms)
    // comes while the head (told 1000 ms) still sleeps.
    const time = new ManualTime();
    const limiter = limiterOn(time, 1000);
    const q = new WaitQueues(time.timers);
    expect((await q.decide(request(time, limiter))).decision.allowed).toBe(true);
    const head = q.decide(request(time, limiter));
    await time.until(() => time.pending === 2);
    const behind = q.decide(request(time, limiter, { maxWaitMs: 150 }));
    await time.until(() => time.pending === 3);
    await time.advance(150);
    expect(time.pending).toBe(3);
    await time.advance(1);
    // Refused, reporting the key as it is (denied), without having been charged.
    const r = await behind;
    expect(summary(r)).toBe("decided:denied:queued");
    expect(r.kind === "decided" && r.decision.retryAfterMs).toBe(849);
    await time.advance(849);
    expect(summary(await head)).toBe("decided:allowed:queued");
  });

  it("a client that leaves while its decision is in flight gets its charge back", async () => {
    const time = new ManualTime();
    const real = limiterOn(time, 100);
    // The store answers the third decision (the waiting request's retry) only when `answer` is called.
    let answer: (() => void) | undefined;
    let calls = 0;
    const limiter: Limiter = Object.create(real, {
      limit: {
        value: async (key: string, o?: { cost?: number }) => {
          if (++calls === 3) await new Promise<void>((r) => (answer = r));
          return real.limit(key, o);
        },
      },
    }) as Limiter;
    const q = new WaitQueues(time.timers);
    expect((await q.decide(request(time, limiter))).decision.allowed).toBe(true);
    const ac = new AbortController();
    const waiting = q.decide(request(time, limiter, { signal: ac.signal }));
    await time.until(() => time.pending === 2);
    await time.advance(100); // the head asks again; the answer is held
    expect(answer).toBeDefined();
    ac.abort();
    answer!(); // the store answers after the client left: allowed, and charged
    const r = await waiting;
    expect(r.kind).toBe("aborted");
    expect(r.decision.allowed).toBe(true);
    await time.advance(0);
    // The unit the late decision took was refunded: one request passes now.
    expect((await real.peek("k")).remaining).toBe(1);
  });

  it("is shared by every middleware on the same timers, apart for other timers", () => {
    const a = new ManualTime();
    const b = new ManualTime();
    expect(waitQueuesFor(a.timers)).toBe(waitQueuesFor(a.timers));
    expect(waitQueuesFor(a.timers)).not.toBe(waitQueuesFor(b.timers));
  });
});
