// Telemetry case (issue 33): the same decisions as the memory and Redis GCRA rows, with the
// app's OpenTelemetry SDK registered (`sdk: true`) or not (`sdk: false`), one contestant per
// process. With the SDK, a periodic metric reader collects (and exports, in memory) every
// `exportIntervalMs` during the run, a tracer provider is registered with its AsyncLocalStorage
// context manager, and the run fails unless the exporter saw every decision: a broken wiring
// cannot pass as "fast".
import { performance } from "node:perf_hooks";

/** The policy names of the reused cases (cases/memory.mjs and cases/redis.mjs, POLICY_NAME). */
const POLICY = { memory: "bench", redis: "b" };

/**
 * Registers the real SDK as an app does, before any sluice limiter exists: a MeterProvider with
 * a PeriodicExportingMetricReader over an InMemoryMetricExporter (collections timed in
 * `exports`), set globally; a NodeTracerProvider with a BatchSpanProcessor over an
 * InMemorySpanExporter, registered (AsyncLocalStorage context). Resolves what the checks need.
 */
async function registerSdk(exportIntervalMs) {
  const { metrics } = await import("@opentelemetry/api");
  const { AggregationTemporality, InMemoryMetricExporter, MeterProvider } =
    await import("@opentelemetry/sdk-metrics");
  const { PeriodicExportingMetricReader } = await import("@opentelemetry/sdk-metrics");
  const { BatchSpanProcessor, InMemorySpanExporter } =
    await import("@opentelemetry/sdk-trace-base");
  const { NodeTracerProvider } = await import("@opentelemetry/sdk-trace-node");

  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  /** When each periodic export happened (performance.now() ms). */
  const exports = [];
  const exportOne = exporter.export.bind(exporter);
  exporter.export = (metrics, done) => {
    exports.push(performance.now());
    exportOne(metrics, done);
  };
  const reader = new PeriodicExportingMetricReader({
    exporter,
    exportIntervalMillis: exportIntervalMs,
    exportTimeoutMillis: exportIntervalMs,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  if (!metrics.setGlobalMeterProvider(meterProvider))
    throw new Error("a global meter provider was already set");
  const tracerProvider = new NodeTracerProvider({
    spanProcessors: [new BatchSpanProcessor(new InMemorySpanExporter())],
  });
  tracerProvider.register();
  return { exporter, exports, meterProvider, tracerProvider };
}

/** The last export's data points of instrument `name` for policy `policy`. */
function points(exporter, name, policy) {
  const last = exporter.getMetrics().at(-1);
  const out = [];
  for (const scope of last?.scopeMetrics ?? []) {
    for (const m of scope.metrics) {
      if (m.descriptor.name !== name) continue;
      for (const p of m.dataPoints) if (p.attributes["ratelimit.policy"] === policy) out.push(p);
    }
  }
  return out;
}

/**
 * Decisions/s of one contestant: `store` "memory" (cases/memory.mjs `throughput`, sluice GCRA,
 * awaited, round robin: `durationMs`, `warmupMs`, `keyCount`, `policy`) or "redis"
 * (cases/redis.mjs `throughput`, sluice GCRA: `port`, `inflight`, `durationMs`, `warmupMs`,
 * `keyCount`), with the SDK registered first when `sdk` (collecting every `exportIntervalMs`).
 * The result is the reused case's, plus with the SDK: `collections` (periodic exports in the
 * measured stretch), `exported` (ratelimit.decisions seen by the exporter after a final
 * collection) and `timed` (the duration histogram's count).
 */
export async function throughput({ store, sdk, exportIntervalMs = 500, ...params }) {
  const otel = sdk ? await registerSdk(exportIntervalMs) : undefined;
  // Imported only now: no sluice module is loaded before the SDK is registered.
  const r =
    store === "memory"
      ? await (
          await import("./memory.mjs")
        ).throughput({
          ...params,
          name: "sluice",
          algorithm: "gcra",
        })
      : store === "redis"
        ? await (
            await import("./redis.mjs")
          ).throughput({
            ...params,
            name: "sluice",
            algorithm: "gcra",
          })
        : undefined;
  if (r === undefined) throw new Error(`unknown store ${store}`);
  if (!otel) return { ...r, sdk: false };

  const end = performance.now();
  const start = end - (r.count / r.ops) * 1000;
  const collections = otel.exports.filter((t) => t >= start && t <= end).length;
  // One more collection now: the exporter's cumulative count must hold every decision made.
  await otel.meterProvider.forceFlush();
  const policy = POLICY[store];
  const decisions = points(otel.exporter, "ratelimit.decisions", policy);
  const exported = decisions.reduce((s, p) => s + p.value, 0);
  const timed = points(otel.exporter, "ratelimit.decision.duration", policy).reduce(
    (s, p) => s + p.value.count,
    0,
  );
  // The measured decisions alone (warm-up's come on top): fewer means the SDK missed some.
  if (!(exported > 0) || exported < r.count)
    throw new Error(
      `the SDK's exporter saw ${exported} ratelimit.decisions for policy ${policy}, ` +
        `fewer than the ${r.count} decisions measured: telemetry is not wired`,
    );
  if (!(timed > 0))
    throw new Error(
      "the SDK's exporter saw no ratelimit.decision.duration: telemetry is not wired",
    );
  await otel.meterProvider.shutdown();
  await otel.tracerProvider.shutdown();
  return { ...r, sdk: true, collections, exported, timed };
}
