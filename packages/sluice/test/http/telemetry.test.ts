/**
 * OpenTelemetry through every door (issue 33): an app registers the real SDK — a metric
 * reader, a span exporter, the async-hooks context manager — and serves through
 * `sluice/express`; sluice reaches the SDK through `@opentelemetry/api` only.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { context, metrics, trace } from "@opentelemetry/api";
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  MeterProvider,
  MetricReader,
} from "@opentelemetry/sdk-metrics";
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import express from "express";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  type Decision,
  type NearLimitEvent,
  type Store,
  StoreError,
  createLimiter,
  memoryStore,
  multiRegionStore,
  RATELIMIT_METRICS,
} from "sluice";
import { SluiceStore } from "sluice/compat/express-rate-limit";
import { RateLimiterMemory } from "sluice/compat/rate-limiter-flexible";
import { Ratelimit } from "sluice/compat/upstash";
import { type ExpressRateLimitOptions, rateLimit } from "sluice/express";
import { buildLive, decideLive, policyLiveKind } from "sluice/service";

const T0 = 1_700_000_000_000;
let nowMs = T0;
const clock = () => nowMs;

/** Collects on demand (what a periodic reader does on its interval). */
class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const reader = new TestReader();
const meterProvider = new MeterProvider({ readers: [reader] });
const spans = new InMemorySpanExporter();
const tracerProvider = new NodeTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(spans)],
});

beforeAll(() => {
  metrics.setGlobalMeterProvider(meterProvider);
  tracerProvider.register(); // the global tracer provider and the AsyncLocalStorage context
});
afterAll(async () => {
  await meterProvider.shutdown();
  await tracerProvider.shutdown();
  metrics.disable();
  trace.disable();
  context.disable();
});

const closers: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
  spans.reset();
});

/** The points of one instrument for one policy. */
async function points(name: string, policy: string): Promise<DataPoint<unknown>[]> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  const out: DataPoint<unknown>[] = [];
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const m of scope.metrics) {
      if (m.descriptor.name !== name) continue;
      for (const p of m.dataPoints as DataPoint<unknown>[])
        if (p.attributes["ratelimit.policy"] === policy) out.push(p);
    }
  }
  return out;
}

/** The decisions counter's value for one attribute set (a subset matched). */
function valueOf(ps: DataPoint<unknown>[], attrs: Record<string, unknown>): number {
  const match = ps.filter((p) => Object.entries(attrs).every(([k, v]) => p.attributes[k] === v));
  return match.reduce((a, p) => a + (p.value as number), 0);
}

/** An Express app whose every request runs in a span (what HTTP instrumentation does). */
async function serve(options: ExpressRateLimitOptions): Promise<string> {
  const tracer = trace.getTracer("test-app");
  const app = express();
  app.use((req, res, next) => {
    tracer.startActiveSpan(`${req.method} ${req.path}`, (span) => {
      res.on("finish", () => span.end());
      next();
    });
  });
  app.use(rateLimit(options));
  app.get("/", (_req, res) => {
    res.send("ok");
  });
  const server: Server = createServer(app);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  closers.push(() => new Promise((r) => server.close(r)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

async function hit(url: string, n: number, key = "k"): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(url, { headers: { "x-key": key } });
    await res.text();
    out.push(res.status);
  }
  return out;
}

const byHeader = (req: express.Request) => req.header("x-key") ?? "none";

describe("OpenTelemetry through sluice/express", () => {
  it("10 requests at limit 5: 5 allowed, 5 denied; every one timed; every trace carries the decision", async () => {
    const limiter = createLimiter({
      store: memoryStore({ now: clock }),
      policy: { name: "otel-five", rules: [{ limit: 5, period: "1m" }] },
    });
    const url = await serve({ limiter, key: byHeader });
    const statuses = await hit(url, 10);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429, 429, 429]);

    const decisions = await points(RATELIMIT_METRICS.DECISIONS, "otel-five");
    expect(valueOf(decisions, { "ratelimit.result": "allowed" })).toBe(5);
    expect(valueOf(decisions, { "ratelimit.result": "denied", "ratelimit.rule": 0 })).toBe(5);
    expect(decisions.every((p) => p.attributes["ratelimit.store"] === "memory")).toBe(true);
    // Keys never become attributes.
    expect(decisions.some((p) => Object.values(p.attributes).includes("k"))).toBe(false);

    const durations = await points(RATELIMIT_METRICS.DURATION, "otel-five");
    expect(durations).toHaveLength(1);
    expect((durations[0]!.value as Histogram).count).toBe(10);

    const finished = spans.getFinishedSpans();
    expect(finished).toHaveLength(10);
    for (const s of finished) {
      expect(s.attributes["ratelimit.policy"]).toBe("otel-five");
      expect(["allowed", "denied"]).toContain(s.attributes["ratelimit.result"]);
    }
    const denied = finished.filter((s) => s.attributes["ratelimit.result"] === "denied");
    expect(denied).toHaveLength(5);
    for (const s of denied) {
      expect(s.events.map((e) => e.name)).toEqual([RATELIMIT_METRICS.DENIED_EVENT]);
      expect(s.attributes["ratelimit.remaining"]).toBe(0);
      expect(s.events[0]!.attributes?.["ratelimit.retry_after_ms"]).toBeGreaterThan(0);
    }
    const allowed = finished.filter((s) => s.attributes["ratelimit.result"] === "allowed");
    expect(allowed.map((s) => s.attributes["ratelimit.remaining"]).sort()).toEqual([0, 1, 2, 3, 4]);
  });

  it("a two-rule denial names the rule that denied, on the span and in the counter", async () => {
    const limiter = createLimiter({
      store: memoryStore({ now: clock }),
      policy: {
        name: "otel-two",
        rules: [
          { limit: 100, period: "1h" },
          { limit: 2, period: "1s" },
        ],
      },
    });
    const url = await serve({ limiter, key: byHeader });
    expect(await hit(url, 3)).toEqual([200, 200, 429]);
    const last = spans
      .getFinishedSpans()
      .find((s) => s.attributes["ratelimit.result"] === "denied");
    expect(last?.attributes["ratelimit.rule"]).toBe(1);
    const decisions = await points(RATELIMIT_METRICS.DECISIONS, "otel-two");
    expect(valueOf(decisions, { "ratelimit.result": "denied", "ratelimit.rule": 1 })).toBe(1);
    expect(valueOf(decisions, { "ratelimit.result": "denied", "ratelimit.rule": 0 })).toBe(0);
  });

  it("a decision made by onStoreError carries ratelimit.reason store-error", async () => {
    // A store whose backend is down: every call rejects with a StoreError (a real Redis outage
    // is tested in test/redis/faults.test.ts; this checks what the limiter counts).
    const down: Store = {
      kind: "redis",
      decide: () => Promise.reject(new StoreError("SLUICE_ERR_STORE", "connection refused")),
      peek: () => Promise.reject(new StoreError("SLUICE_ERR_STORE", "connection refused")),
      adjust: () => Promise.resolve(),
      release: () => Promise.resolve(false),
      reset: () => Promise.resolve(),
    };
    const limiter = createLimiter({
      store: down,
      policy: { name: "otel-down", rules: [{ limit: 5, period: "1m" }], onStoreError: "allow" },
    });
    const url = await serve({ limiter, key: byHeader });
    expect(await hit(url, 2)).toEqual([200, 200]);
    const decisions = await points(RATELIMIT_METRICS.DECISIONS, "otel-down");
    expect(
      valueOf(decisions, {
        "ratelimit.result": "allowed",
        "ratelimit.reason": "store-error",
        "ratelimit.store": "redis",
      }),
    ).toBe(2);
    for (const s of spans.getFinishedSpans())
      expect(s.attributes["ratelimit.reason"]).toBe("store-error");
  });

  it("the shadow strategy and a shadow policy count what would have been denied as denied, reason shadow", async () => {
    const strategy = createLimiter({
      store: memoryStore({ now: clock }),
      policy: { name: "otel-shadow-strategy", rules: [{ limit: 2, period: "1m" }] },
    });
    const url = await serve({
      limiter: strategy,
      key: byHeader,
      strategy: { type: "shadow", onDeny: () => {} },
    });
    expect(await hit(url, 4)).toEqual([200, 200, 200, 200]);
    const a = await points(RATELIMIT_METRICS.DECISIONS, "otel-shadow-strategy");
    expect(valueOf(a, { "ratelimit.result": "allowed" })).toBe(2);
    expect(valueOf(a, { "ratelimit.result": "denied", "ratelimit.reason": "shadow" })).toBe(2);
    expect(valueOf(a, { "ratelimit.result": "denied" })).toBe(2); // none left without a reason

    const mode = createLimiter({
      store: memoryStore({ now: clock }),
      policy: { name: "otel-shadow-mode", rules: [{ limit: 1, period: "1m" }], shadow: true },
    });
    for (let i = 0; i < 3; i++) expect((await mode.limit("k")).allowed).toBe(true);
    const b = await points(RATELIMIT_METRICS.DECISIONS, "otel-shadow-mode");
    expect(valueOf(b, { "ratelimit.result": "allowed" })).toBe(1);
    expect(valueOf(b, { "ratelimit.result": "denied", "ratelimit.reason": "shadow" })).toBe(2);
  });

  it("50,000 distinct keys make at most 4 series", async () => {
    const limiter = createLimiter({
      store: memoryStore({ now: clock }),
      policy: { name: "otel-flood", rules: [{ limit: 1, period: "1m" }] },
    });
    for (let i = 0; i < 50_000; i++) {
      limiter.limitSync(`user:${i}`);
      if (i % 10 === 0) limiter.limitSync(`user:${i}`); // a denial now and then
    }
    const decisions = await points(RATELIMIT_METRICS.DECISIONS, "otel-flood");
    expect(decisions.length).toBeGreaterThan(0);
    expect(decisions.length).toBeLessThanOrEqual(4);
    expect(valueOf(decisions, {})).toBe(55_000);
  });

  it("warnAt: one near-limit event as a key crosses the share, on the span and to onNearLimit", async () => {
    const seen: NearLimitEvent[] = [];
    const limiter = createLimiter({
      store: memoryStore({ now: clock }),
      policy: { name: "otel-warn", algorithm: "fixed-window", rules: [{ limit: 5, period: "1m" }] },
      warnAt: 0.8,
      onNearLimit: (e) => seen.push(e),
    });
    const url = await serve({ limiter, key: byHeader });
    expect(await hit(url, 6)).toEqual([200, 200, 200, 200, 200, 429]);
    expect(seen.map((e) => [e.key, e.rule, e.used])).toEqual([["k", 0, 0.8]]);
    const withEvent = spans
      .getFinishedSpans()
      .filter((s) => s.events.some((e) => e.name === RATELIMIT_METRICS.NEAR_LIMIT_EVENT));
    expect(withEvent).toHaveLength(1);
    expect(withEvent[0]!.attributes["ratelimit.remaining"]).toBe(1);
    // The next window crosses again, once.
    nowMs += 60_000;
    await hit(url, 5);
    expect(seen).toHaveLength(2);
  });

  it("warnAt is checked: a share outside (0, 1] names the field", () => {
    expect(() =>
      createLimiter({
        policy: { name: "otel-bad", rules: [{ limit: 5, period: "1m" }] },
        warnAt: 1.5,
      }),
    ).toThrow(/warnAt: must be a number above 0 and at most 1 \(got 1\.5\)/);
  });

  it("concurrency permits held are a gauge per policy", async () => {
    const limiter = createLimiter({
      store: memoryStore({ now: clock }),
      policy: {
        name: "otel-permits",
        algorithm: "concurrency",
        rules: [{ limit: 3, period: "1m" }],
      },
    });
    const a = await limiter.acquire("k");
    await limiter.acquire("k");
    expect(valueOf(await points(RATELIMIT_METRICS.PERMITS, "otel-permits"), {})).toBe(2);
    await a.release();
    expect(valueOf(await points(RATELIMIT_METRICS.PERMITS, "otel-permits"), {})).toBe(1);
  });

  it("an adaptive policy's limit, in-flight count and RTT baseline are gauges per policy", async () => {
    let t = T0;
    const limiter = createLimiter({
      store: memoryStore({ now: () => t }),
      clock: () => t,
      policy: {
        name: "otel-adaptive",
        algorithm: "concurrency",
        rules: [{ limit: 100, period: "1m" }],
        adaptive: { initial: 20 },
      },
    });
    // Two rounds of 12 permits held 60 ms: one window of samples, the baseline 60 ms.
    for (let round = 0; round < 2; round++) {
      const held = await Promise.all(Array.from({ length: 12 }, () => limiter.acquire("k")));
      t += 60;
      await Promise.all(held.map((p) => p.release()));
    }
    await limiter.acquire("k");
    await limiter.acquire("k");
    const gauge = async (name: string) =>
      valueOf(await points(name, "otel-adaptive"), { "ratelimit.store": "memory" });
    expect(await gauge(RATELIMIT_METRICS.CONCURRENCY_IN_FLIGHT)).toBe(2);
    expect(await gauge(RATELIMIT_METRICS.CONCURRENCY_LIMIT)).toBe(limiter.adaptiveState()!.limit);
    expect(await gauge(RATELIMIT_METRICS.CONCURRENCY_LIMIT)).toBeGreaterThanOrEqual(20);
    expect(await gauge(RATELIMIT_METRICS.CONCURRENCY_RTT_BASELINE)).toBeCloseTo(0.06, 6);
  });

  it("a multi-region store's bound, under-admission and borrowing are instruments per policy", async () => {
    // Region us, the key's home eu out of reach (its store fails): bounded mode borrows 2 a
    // window, then denies.
    const down: Store = {
      kind: "down",
      decide: () => Promise.reject(new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "cut off")),
      peek: () => Promise.reject(new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "cut off")),
      adjust: () => Promise.reject(new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "cut off")),
      release: () => Promise.resolve(false),
      reset: () => Promise.resolve(),
    };
    const store = multiRegionStore({
      region: "us",
      regions: { us: memoryStore({ now: clock }), eu: down, ap: down },
      homes: { "otel-regions": "eu" },
      mode: "bounded",
      borrow: 2,
      now: clock,
    });
    closers.push(() => store.close());
    const limiter = createLimiter({
      store,
      policy: {
        name: "otel-regions",
        algorithm: "fixed-window",
        rules: [{ limit: 10, period: "1m" }],
        lease: true,
      },
    });
    const allowed = [];
    for (let i = 0; i < 5; i++) allowed.push((await limiter.limit("k")).allowed);
    expect(allowed).toEqual([true, true, false, false, false]);
    const value = async (name: string) => valueOf(await points(name, "otel-regions"), {});
    expect(await value(RATELIMIT_METRICS.REGION_BOUND)).toBe(10 + 2 * 2);
    expect(await value(RATELIMIT_METRICS.REGION_BORROWED)).toBe(2);
    expect(await value(RATELIMIT_METRICS.REGION_UNDER_ADMITTED)).toBe(3);
  });

  it("peeks are not decisions: nothing counted", async () => {
    const limiter = createLimiter({
      store: memoryStore({ now: clock }),
      policy: { name: "otel-peek", rules: [{ limit: 5, period: "1m" }] },
    });
    const d: Decision = await limiter.peek("k");
    expect(d.allowed).toBe(true);
    await limiter.limit("k");
    const decisions = await points(RATELIMIT_METRICS.DECISIONS, "otel-peek");
    expect(valueOf(decisions, {})).toBe(1);
  });

  it("a face counts through the same limiter: rate-limiter-flexible's consume", async () => {
    const face = new RateLimiterMemory({ keyPrefix: "otel-face", points: 2, duration: 60 });
    await face.consume("k");
    await face.consume("k");
    await expect(face.consume("k")).rejects.toMatchObject({ remainingPoints: 0 });
    const decisions = await points(RATELIMIT_METRICS.DECISIONS, "otel-face");
    expect(valueOf(decisions, { "ratelimit.result": "allowed" })).toBe(2);
    expect(valueOf(decisions, { "ratelimit.result": "denied" })).toBe(1);
  });

  it("faces that count (express-rate-limit's store, Upstash's fixedWindow) count the verdict, not the count", async () => {
    const erl = new SluiceStore({ prefix: "otel-erl" });
    erl.init({ windowMs: 60_000, limit: 2 });
    for (let i = 0; i < 3; i++) await erl.increment("k");
    const a = await points(RATELIMIT_METRICS.DECISIONS, "otel-erl");
    expect(valueOf(a, { "ratelimit.result": "allowed" })).toBe(2);
    expect(valueOf(a, { "ratelimit.result": "denied" })).toBe(1);

    const upstash = new Ratelimit({
      redis: memoryStore(),
      prefix: "otel-upstash",
      limiter: Ratelimit.fixedWindow(2, "1 m"),
    });
    const results: boolean[] = [];
    for (let i = 0; i < 3; i++) results.push((await upstash.limit("k")).success);
    expect(results).toEqual([true, true, false]);
    const b = await points(RATELIMIT_METRICS.DECISIONS, "otel-upstash");
    expect(valueOf(b, { "ratelimit.result": "allowed" })).toBe(2);
    expect(valueOf(b, { "ratelimit.result": "denied" })).toBe(1);
  });

  it("managed policies (connectPolicies, the service): a disabled policy counts allowed/disabled; a draft's denials count as shadow on its own policy", async () => {
    const store = memoryStore({ now: clock });
    const kind = policyLiveKind((policy) => createLimiter({ store, policy }));
    const off = buildLive(
      kind,
      {
        name: "otel-off",
        doc: { name: "otel-off", rules: [{ limit: 1, period: "1m" }], enabled: false },
        version: 1,
        draft: undefined,
      },
      undefined,
    );
    for (let i = 0; i < 3; i++) expect((await decideLive(off, "k", 1)).reason).toBe("disabled");
    const a = await points(RATELIMIT_METRICS.DECISIONS, "otel-off");
    expect(valueOf(a, { "ratelimit.result": "allowed", "ratelimit.reason": "disabled" })).toBe(3);

    const drafted = buildLive(
      kind,
      {
        name: "otel-drafted",
        doc: { name: "otel-drafted", rules: [{ limit: 5, period: "1m" }] },
        version: 1,
        draft: { id: 4242, doc: { name: "otel-drafted", rules: [{ limit: 1, period: "1m" }] } },
      },
      undefined,
    );
    for (let i = 0; i < 3; i++) expect((await decideLive(drafted, "k", 1)).allowed).toBe(true);
    const live = await points(RATELIMIT_METRICS.DECISIONS, "otel-drafted");
    expect(valueOf(live, { "ratelimit.result": "allowed" })).toBe(3);
    const draft = await points(RATELIMIT_METRICS.DECISIONS, "sluice.draft.4242");
    expect(valueOf(draft, { "ratelimit.result": "allowed" })).toBe(1);
    expect(valueOf(draft, { "ratelimit.result": "denied", "ratelimit.reason": "shadow" })).toBe(2);
  });
});
