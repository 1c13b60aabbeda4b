/**
 * `sluice serve` speaks OpenTelemetry (issue 33): a real `sluice serve` process, configured by
 * the standard OTEL_* variables, exports to a collector double — a node:http server here that
 * records every OTLP/HTTP request — the library's `ratelimit.decisions` counts and the decision
 * doors' server spans (the fast route, a Fastify route, the Envoy gRPC door), each a child of the
 * caller's `traceparent`. Without the variables nothing is started and nothing is sent; bad
 * values stop the start, naming the variable.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { freePort, waitFor } from "../../../test/support/ports.js";
import { type RlsClient, rlsClient } from "./envoy-client.js";
import { type ServeProcess, runCli, spawnServe, startService } from "./helpers.js";
import { tempDirs } from "./temp-dirs.js";

// Each test spawns `sluice serve` from the sources (a second or more on a busy machine).
vi.setConfig({ testTimeout: 90_000 });

const temp = tempDirs("sluice-otel-");

/** One OTLP request the collector double received. */
interface Received {
  readonly path: string;
  readonly contentType: string;
  readonly body: Buffer;
}

/** A collector double: answers every OTLP/HTTP export 200 and keeps what it was sent. */
interface Collector {
  readonly url: string;
  readonly received: Received[];
  close(): Promise<void>;
}

async function startCollector(): Promise<Collector> {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const contentType = req.headers["content-type"] ?? "";
      received.push({ path: req.url ?? "", contentType, body: Buffer.concat(chunks) });
      // An empty ExportServiceResponse: `{}` in JSON, no bytes in protobuf.
      const json = contentType.startsWith("application/json");
      res.writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf" });
      res.end(json ? "{}" : undefined);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Every OTEL_* variable of the test process's environment, unset (the child inherits the rest). */
function withoutOtel(): Record<string, undefined> {
  const out: Record<string, undefined> = {};
  for (const k of Object.keys(process.env)) if (k.startsWith("OTEL_")) out[k] = undefined;
  return out;
}

// OTLP/JSON, as much of it as the tests read.
interface KeyValue {
  key: string;
  value: {
    stringValue?: string;
    intValue?: number | string;
    doubleValue?: number;
    boolValue?: boolean;
  };
}
interface JsonPoint {
  attributes?: KeyValue[];
  asInt?: number | string;
  asDouble?: number;
}
interface JsonMetric {
  name: string;
  sum?: { dataPoints: JsonPoint[] };
}
interface JsonSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: KeyValue[];
  events?: Array<{ name: string; attributes?: KeyValue[] }>;
}

/** OTLP/JSON attributes as a plain object (64-bit integers as numbers). */
function attrs(list: KeyValue[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of list ?? [])
    out[key] =
      value.stringValue ??
      (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
      value.doubleValue ??
      value.boolValue;
  return out;
}

/** The metrics of every `/v1/metrics` request received, with their resource's attributes. */
function metricsOf(c: Collector): Array<{ resource: Record<string, unknown>; metric: JsonMetric }> {
  const out: Array<{ resource: Record<string, unknown>; metric: JsonMetric }> = [];
  for (const r of c.received) {
    if (r.path !== "/v1/metrics") continue;
    const body = JSON.parse(r.body.toString()) as {
      resourceMetrics: Array<{
        resource?: { attributes?: KeyValue[] };
        scopeMetrics: Array<{ metrics: JsonMetric[] }>;
      }>;
    };
    for (const rm of body.resourceMetrics)
      for (const sm of rm.scopeMetrics)
        for (const metric of sm.metrics)
          out.push({ resource: attrs(rm.resource?.attributes), metric });
  }
  return out;
}

/** The latest cumulative `ratelimit.decisions` of a policy, by result. */
function decisionsOf(c: Collector, policy: string): Record<string, number> {
  const exports = metricsOf(c).filter((m) => m.metric.name === "ratelimit.decisions");
  const last = exports.at(-1);
  const out: Record<string, number> = {};
  for (const p of last?.metric.sum?.dataPoints ?? []) {
    const a = attrs(p.attributes);
    if (a["ratelimit.policy"] !== policy) continue;
    const result = String(a["ratelimit.result"]);
    out[result] = (out[result] ?? 0) + Number(p.asInt ?? p.asDouble ?? 0);
  }
  return out;
}

/** Every span of every `/v1/traces` request received. */
function spansOf(c: Collector): JsonSpan[] {
  const out: JsonSpan[] = [];
  for (const r of c.received) {
    if (r.path !== "/v1/traces") continue;
    const body = JSON.parse(r.body.toString()) as {
      resourceSpans: Array<{ scopeSpans: Array<{ spans: JsonSpan[] }> }>;
    };
    for (const rs of body.resourceSpans) for (const ss of rs.scopeSpans) out.push(...ss.spans);
  }
  return out;
}

/** The span of a trace, once the collector has it (bounded wait). */
async function spanOfTrace(c: Collector, traceId: string): Promise<JsonSpan> {
  let found: JsonSpan | undefined;
  await waitFor(
    () => (found = spansOf(c).find((s) => s.traceId === traceId)) !== undefined,
    15_000,
  );
  return found!;
}

/** A W3C `traceparent` of a new, sampled trace: its ids and the header. */
function traceparent(n: number): { traceId: string; parentId: string; header: string } {
  const traceId = n.toString(16).padStart(32, "a");
  const parentId = n.toString(16).padStart(16, "b");
  return { traceId, parentId, header: `00-${traceId}-${parentId}-01` };
}

/** OTLP's SPAN_KIND_SERVER. */
const SPAN_KIND_SERVER = 2;

const ENVOY_DOMAIN = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 1 }
  - key: path
    rate_limit: { unit: minute, requests_per_unit: 10 }
`;

/**
 * A data directory holding an app `web` (its API key returned), a policy `api` (3 a minute)
 * granted to it, and the Envoy domain `edge`: made by a service in this process, then closed.
 */
async function prepareData(): Promise<{ dataDir: string; apiKey: string }> {
  const dataDir = temp.dir();
  const s = await startService({ dataDir });
  try {
    const apiKey = await s.createApp("web");
    await s.createPolicy({ name: "api", rules: [{ limit: 3, period: "1m" }], apps: ["web"] });
    const r = await s.call("POST", "/v1/admin/envoy/import", {
      raw: ENVOY_DOMAIN,
      contentType: "application/yaml",
    });
    if (r.status !== 200) throw new Error(`envoy import: ${r.status} ${JSON.stringify(r.body)}`);
    return { dataDir, apiKey };
  } finally {
    await s.close();
  }
}

/** `POST <path>` with the app's key, a JSON body and extra headers; the status and body. */
async function post(
  url: string,
  path: string,
  apiKey: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${apiKey}`,
      "content-type": "application/json",
      ...headers,
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

let data: { dataDir: string; apiKey: string };
beforeAll(async () => {
  data = await prepareData();
});

describe("sluice serve with OTEL_EXPORTER_OTLP_ENDPOINT (http/json)", () => {
  let collector: Collector;
  let serve: ServeProcess;
  let grpcPort: number;
  let rls: RlsClient;

  beforeAll(async () => {
    collector = await startCollector();
    grpcPort = await freePort();
    serve = await spawnServe(["--data-dir", data.dataDir, "--grpc-port", String(grpcPort)], {
      ...withoutOtel(),
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_METRIC_EXPORT_INTERVAL: "200",
      OTEL_BSP_SCHEDULE_DELAY: "50",
      OTEL_SERVICE_NAME: "sluice-under-test",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=test,team=rate%20limits",
    });
    rls = rlsClient(`127.0.0.1:${grpcPort}`);
  });
  afterAll(async () => {
    rls?.close();
    await serve?.stop();
    await collector?.close();
  });

  it("exports ratelimit.decisions by policy and result, with the service's resource", async () => {
    const statuses: boolean[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await post(serve.url, "/v1/limit", data.apiKey, { policy: "api", key: "user-1" });
      expect(r.status).toBe(200);
      statuses.push(r.body.allowed as boolean);
    }
    expect(statuses).toEqual([true, true, true, false, false]);
    // Within a few export intervals (200 ms), the cumulative counts say as much.
    await waitFor(() => {
      const d = decisionsOf(collector, "api");
      return d.allowed === 3 && d.denied === 2;
    }, 15_000);
    const point = metricsOf(collector)
      .filter((m) => m.metric.name === "ratelimit.decisions")
      .at(-1)!;
    const denied = point.metric
      .sum!.dataPoints.map((p) => attrs(p.attributes))
      .find((a) => a["ratelimit.policy"] === "api" && a["ratelimit.result"] === "denied");
    expect(denied).toEqual({
      "ratelimit.policy": "api",
      "ratelimit.result": "denied",
      "ratelimit.rule": 0,
      "ratelimit.store": "memory",
    });
    expect(point.resource).toMatchObject({
      "service.name": "sluice-under-test",
      "deployment.environment.name": "test",
      team: "rate limits",
    });
    expect(point.resource["service.instance.id"]).toMatch(/^[0-9a-f-]{36}$/);
    // No key is ever an attribute.
    expect(JSON.stringify(metricsOf(collector))).not.toContain("user-1");
    // The Prometheus endpoint is unchanged.
    const text = await (await fetch(`${serve.url}/metrics`)).text();
    expect(text).toContain('sluice_decisions_total{policy="api",outcome="denied",reason=""} 2');
  });

  it("a POST /v1/limit (the fast route) with a traceparent is a server span of that trace", async () => {
    const t = traceparent(1);
    const r = await post(
      serve.url,
      "/v1/limit",
      data.apiKey,
      { policy: "api", key: "user-2" },
      { traceparent: t.header },
    );
    expect(r.body.allowed).toBe(true);
    const span = await spanOfTrace(collector, t.traceId);
    expect(span.parentSpanId).toBe(t.parentId);
    expect(span.name).toBe("POST /v1/limit");
    expect(span.kind).toBe(SPAN_KIND_SERVER);
    expect(attrs(span.attributes)).toMatchObject({
      "http.request.method": "POST",
      "http.route": "/v1/limit",
      "http.response.status_code": 200,
      "ratelimit.policy": "api",
      "ratelimit.result": "allowed",
      "ratelimit.rule": 0,
      "ratelimit.remaining": 2,
    });
    expect(span.events ?? []).toEqual([]);
  });

  it("a denial on its span: the result and the ratelimit.denied event; never the key", async () => {
    for (let i = 0; i < 3; i++)
      await post(serve.url, "/v1/limit", data.apiKey, { policy: "api", key: "user-3" });
    const t = traceparent(2);
    const r = await post(
      serve.url,
      "/v1/limit",
      data.apiKey,
      { policy: "api", key: "user-3" },
      { traceparent: t.header },
    );
    expect(r.body.allowed).toBe(false);
    const span = await spanOfTrace(collector, t.traceId);
    expect(attrs(span.attributes)).toMatchObject({
      "ratelimit.policy": "api",
      "ratelimit.result": "denied",
      "ratelimit.remaining": 0,
    });
    expect(span.events?.map((e) => e.name)).toEqual(["ratelimit.denied"]);
    expect(attrs(span.events![0]!.attributes)).toMatchObject({
      "ratelimit.policy": "api",
      "ratelimit.rule": 0,
    });
    expect(JSON.stringify(spansOf(collector))).not.toContain("user-3");
  });

  it("a batch (a Fastify route) is one span: each item an event, the deciding one's attributes", async () => {
    const t = traceparent(3);
    const r = await post(
      serve.url,
      "/v1/limit/batch",
      data.apiKey,
      {
        requests: [
          { policy: "api", key: "user-4" },
          { policy: "api", key: "user-4", cost: 3 },
        ],
      },
      { traceparent: t.header },
    );
    expect(r.status).toBe(200);
    const span = await spanOfTrace(collector, t.traceId);
    expect(span.parentSpanId).toBe(t.parentId);
    expect(span.name).toBe("POST /v1/limit/batch");
    expect(span.kind).toBe(SPAN_KIND_SERVER);
    // The second item cannot fit after the first: it denies, and speaks for the batch.
    expect(attrs(span.attributes)).toMatchObject({
      "http.route": "/v1/limit/batch",
      "http.response.status_code": 200,
      "ratelimit.policy": "api",
      "ratelimit.result": "denied",
    });
    const events = (span.events ?? []).map((e) => ({ name: e.name, ...attrs(e.attributes) }));
    expect(events).toEqual([
      expect.objectContaining({
        name: "ratelimit.decision",
        "ratelimit.index": 0,
        "ratelimit.result": "allowed",
      }),
      expect.objectContaining({
        name: "ratelimit.decision",
        "ratelimit.index": 1,
        "ratelimit.result": "denied",
      }),
      expect.objectContaining({ name: "ratelimit.denied", "ratelimit.policy": "api" }),
    ]);
  });

  it("an Envoy ShouldRateLimit call with traceparent metadata is a span of that trace", async () => {
    const t = traceparent(4);
    const ask = (metadata?: Record<string, string>) =>
      rls.shouldRateLimit(
        {
          domain: "edge",
          descriptors: [
            { entries: [{ key: "remote_address", value: "10.0.0.1" }] },
            { entries: [{ key: "path", value: "/secret-path" }] },
          ],
        },
        metadata ? { metadata } : {},
      );
    expect((await ask()).overallCode).toBe("OK");
    expect((await ask({ traceparent: t.header })).overallCode).toBe("OVER_LIMIT");
    const span = await spanOfTrace(collector, t.traceId);
    expect(span.parentSpanId).toBe(t.parentId);
    expect(span.name).toBe("envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit");
    expect(span.kind).toBe(SPAN_KIND_SERVER);
    const a = attrs(span.attributes);
    expect(a).toMatchObject({
      "rpc.system": "grpc",
      "rpc.service": "envoy.service.ratelimit.v3.RateLimitService",
      "rpc.method": "ShouldRateLimit",
      "rpc.grpc.status_code": 0,
      "ratelimit.result": "denied",
    });
    expect(String(a["ratelimit.policy"])).toContain("remote_address");
    const events = (span.events ?? []).map((e): Record<string, unknown> => ({
      name: e.name,
      ...attrs(e.attributes),
    }));
    expect(events.map((e) => [e.name, e["ratelimit.index"], e["ratelimit.result"]])).toEqual([
      ["ratelimit.decision", 0, "denied"],
      ["ratelimit.decision", 1, "allowed"],
      ["ratelimit.denied", undefined, undefined],
    ]);
    // Descriptor values (the identifiers counted) are never on a span.
    const all = JSON.stringify(spansOf(collector));
    expect(all).not.toContain("10.0.0.1");
    expect(all).not.toContain("secret-path");
  });

  it("a request without traceparent starts a trace of its own", async () => {
    const before = new Set(spansOf(collector).map((s) => s.spanId));
    await post(serve.url, "/v1/peek", data.apiKey, { policy: "api", key: "user-5" });
    let span: JsonSpan | undefined;
    await waitFor(
      () =>
        (span = spansOf(collector).find(
          (s) => !before.has(s.spanId) && s.name === "POST /v1/peek",
        )) !== undefined,
      15_000,
    );
    expect(span!.parentSpanId ?? "").toBe("");
    expect(attrs(span!.attributes)).toMatchObject({
      "ratelimit.policy": "api",
      "ratelimit.result": "allowed",
      "ratelimit.remaining": 3,
    });
  });
});

describe("sluice serve's OTLP defaults", () => {
  it("exports in http/protobuf when no protocol is set", async () => {
    const collector = await startCollector();
    let serve: ServeProcess | undefined;
    try {
      serve = await spawnServe(["--data-dir", data.dataDir], {
        ...withoutOtel(),
        OTEL_EXPORTER_OTLP_ENDPOINT: `${collector.url}/`,
        OTEL_METRIC_EXPORT_INTERVAL: "200",
        OTEL_BSP_SCHEDULE_DELAY: "50",
      });
      await post(
        serve.url,
        "/v1/limit",
        data.apiKey,
        { policy: "api", key: "proto" },
        {
          traceparent: traceparent(5).header,
        },
      );
      const seen = (path: string) => collector.received.find((r) => r.path === path);
      await waitFor(
        () => seen("/v1/metrics") !== undefined && seen("/v1/traces") !== undefined,
        15_000,
      );
      for (const path of ["/v1/metrics", "/v1/traces"])
        expect(seen(path)!.contentType).toBe("application/x-protobuf");
      expect(collector.received.every((r) => r.contentType === "application/x-protobuf")).toBe(
        true,
      );
    } finally {
      await serve?.stop();
      await collector.close();
    }
  });

  it("without OTEL variables starts no SDK and sends nothing; /metrics answers", async () => {
    const collector = await startCollector();
    const serve = await spawnServe(["--data-dir", data.dataDir], withoutOtel());
    try {
      for (let i = 0; i < 3; i++)
        await post(
          serve.url,
          "/v1/limit",
          data.apiKey,
          { policy: "api", key: "quiet" },
          {
            traceparent: traceparent(6).header,
          },
        );
      const text = await (await fetch(`${serve.url}/metrics`)).text();
      expect(text).toContain('sluice_decisions_total{policy="api",outcome="allowed",reason=""} 3');
    } finally {
      // A graceful stop: an SDK, had one started, would export what it holds now.
      expect(await serve.stop()).toBe(0);
      await collector.close();
    }
    expect(collector.received).toEqual([]);
    expect(serve.output()).not.toContain("OpenTelemetry");
  });
});

describe("bad OTEL values stop the start, naming the variable", () => {
  const start = (env: Record<string, string>) =>
    runCli(["serve", "--port", "0", "--data-dir", data.dataDir], {
      ...withoutOtel(),
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
      ...env,
    });

  it("an interval that is not a positive integer", async () => {
    const r = await start({ OTEL_METRIC_EXPORT_INTERVAL: "5s" });
    expect(r.code).toBe(1);
    expect(r.output).toContain(
      'OTEL_METRIC_EXPORT_INTERVAL: must be a positive integer of milliseconds (got "5s")',
    );
    expect(r.output).not.toContain("listening");
  });

  it("an unknown protocol, and grpc (not supported)", async () => {
    const r = await start({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/xml" });
    expect(r.code).toBe(1);
    expect(r.output).toContain(
      'OTEL_EXPORTER_OTLP_PROTOCOL: must be "http/protobuf" or "http/json" (got "http/xml")',
    );
    const g = await start({ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" });
    expect(g.code).toBe(1);
    expect(g.output).toContain("OTEL_EXPORTER_OTLP_PROTOCOL: grpc is not supported");
  });
});
