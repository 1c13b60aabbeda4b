/**
 * OpenTelemetry export of `sluice serve`, from the standard OTEL_* environment variables: the
 * SDK's meter provider (sluice's `ratelimit.*` instruments, docs/observability.md) and tracer
 * provider (the decision doors' server spans, ./tracing.ts), each with its OTLP/HTTP exporter.
 *
 * {@link otelSettings} reads and checks the variables at start — a bad value is a
 * {@link ConfigError} naming the variable, never a failure later — and says whether anything is
 * to be exported: without an endpoint (or with `OTEL_SDK_DISABLED=true`) it is undefined, and no
 * SDK module is even loaded. {@link startOpenTelemetry} registers the providers globally; it
 * must run before the service makes its limiters (sluice binds its instruments to the global
 * meter provider as its first limiter is made).
 *
 * What the exporters read themselves is left to them: `OTEL_EXPORTER_OTLP_HEADERS`,
 * `…_TIMEOUT`, `…_COMPRESSION`, the certificate files, `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`;
 * and the SDK's `OTEL_TRACES_SAMPLER` and `OTEL_BSP_*`.
 */
import { DiagLogLevel, type Tracer, diag, metrics } from "@opentelemetry/api";
import { randomUUID } from "node:crypto";
import { VERSION } from "sluice";
import { ConfigError } from "./config.js";

/** The OTLP encodings `sluice serve` exports in (over HTTP). */
export const OTLP_PROTOCOLS = ["http/protobuf", "http/json"] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** Where and how one signal is exported. */
export interface OtlpTarget {
  /** The full URL requests go to (`…/v1/metrics`, `…/v1/traces`). */
  readonly url: string;
  readonly protocol: OtlpProtocol;
}

/** What the OTEL_* variables ask of `sluice serve`. */
export interface OtelSettings {
  /** Resource attributes: `OTEL_RESOURCE_ATTRIBUTES`, `service.name` and `service.instance.id`. */
  readonly resource: Readonly<Record<string, string>>;
  /** Metrics export, when on: its target and period. */
  readonly metrics:
    (OtlpTarget & { readonly intervalMs: number; readonly timeoutMs: number }) | undefined;
  /** Traces export, when on. */
  readonly traces: OtlpTarget | undefined;
}

/** The default metric export interval and timeout (ms), as the specification has them. */
const DEFAULT_INTERVAL_MS = 60_000;
const DEFAULT_TIMEOUT_MS = 30_000;

type Issue = { path: string; message: string };

/** A variable's value; empty counts as unset (as the specification says). */
function read(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const v = env[name]?.trim();
  return v === undefined || v === "" ? undefined : v;
}

/** An http(s) URL, or an issue naming the variable. */
function endpoint(env: NodeJS.ProcessEnv, name: string, issues: Issue[]): string | undefined {
  const v = read(env, name);
  if (v === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    issues.push({ path: name, message: `must be an http:// or https:// URL (got "${v}")` });
    return undefined;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    issues.push({
      path: name,
      message: `must be an http:// or https:// URL: sluice serve exports OTLP over HTTP (got "${v}")`,
    });
    return undefined;
  }
  return v;
}

/** A protocol variable's value (`http/protobuf`, `http/json`), or an issue naming it. */
function protocol(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: OtlpProtocol,
  issues: Issue[],
): OtlpProtocol {
  const v = read(env, name);
  if (v === undefined) return fallback;
  if ((OTLP_PROTOCOLS as readonly string[]).includes(v)) return v as OtlpProtocol;
  issues.push({
    path: name,
    message:
      v === "grpc"
        ? 'grpc is not supported: sluice serve exports OTLP over HTTP; use "http/protobuf" (the default, a collector\'s port 4318) or "http/json"'
        : `must be "http/protobuf" or "http/json" (got "${v}")`,
  });
  return fallback;
}

/** A positive integer (ms), or an issue naming the variable. */
function positiveMs(
  env: NodeJS.ProcessEnv,
  name: string,
  fallback: number,
  issues: Issue[],
): number {
  const v = read(env, name);
  if (v === undefined) return fallback;
  const n = /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n <= 0) {
    issues.push({ path: name, message: `must be a positive integer of milliseconds (got "${v}")` });
    return fallback;
  }
  return n;
}

/** `OTEL_TRACES_EXPORTER` / `OTEL_METRICS_EXPORTER`: `otlp` (the default) or `none`. */
function exporterOn(env: NodeJS.ProcessEnv, name: string, issues: Issue[]): boolean {
  const v = read(env, name);
  if (v === undefined || v === "otlp") return true;
  if (v === "none") return false;
  issues.push({
    path: name,
    message: `must be "otlp" or "none": sluice serve exports OTLP only (got "${v}")`,
  });
  return false;
}

/**
 * `OTEL_RESOURCE_ATTRIBUTES`: `key=value` pairs separated by commas, values percent-encoded (the
 * W3C Baggage octets), or an issue naming the variable.
 */
export function parseResourceAttributes(
  text: string | undefined,
  issues: Issue[],
): Record<string, string> {
  const out: Record<string, string> = {};
  if (text === undefined) return out;
  const name = "OTEL_RESOURCE_ATTRIBUTES";
  for (const pair of text.split(",")) {
    if (pair.trim() === "") continue;
    const eq = pair.indexOf("=");
    const key = eq < 0 ? "" : pair.slice(0, eq).trim();
    if (key === "") {
      issues.push({
        path: name,
        message: `must be key=value pairs separated by commas (got "${pair.trim()}")`,
      });
      continue;
    }
    try {
      out[key] = decodeURIComponent(pair.slice(eq + 1).trim());
    } catch {
      issues.push({
        path: name,
        message: `the value of ${key} is not percent-encoded correctly (got "${pair.slice(eq + 1).trim()}")`,
      });
    }
  }
  return out;
}

/** `base` + `/v1/<signal>` (a signal's URL from `OTEL_EXPORTER_OTLP_ENDPOINT`, as the specification joins them). */
function signalUrl(base: string, path: string): string {
  return `${base.endsWith("/") ? base : `${base}/`}${path}`;
}

/**
 * Reads the OTEL_* variables `sluice serve` honours. Undefined when nothing is to be exported:
 * no endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, `…_METRICS_ENDPOINT`, `…_TRACES_ENDPOINT`),
 * both exporters are `none`, or `OTEL_SDK_DISABLED=true`. Every variable that is set is checked,
 * whether or not anything is exported; a bad one throws a {@link ConfigError} naming it.
 */
export function otelSettings(env: NodeJS.ProcessEnv): OtelSettings | undefined {
  const issues: Issue[] = [];
  const disabled = read(env, "OTEL_SDK_DISABLED")?.toLowerCase();
  if (disabled === "true") return undefined;
  if (disabled !== undefined && disabled !== "false")
    issues.push({
      path: "OTEL_SDK_DISABLED",
      message: `must be true or false (got "${read(env, "OTEL_SDK_DISABLED")}")`,
    });
  const base = endpoint(env, "OTEL_EXPORTER_OTLP_ENDPOINT", issues);
  const metricsEndpoint = endpoint(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", issues);
  const tracesEndpoint = endpoint(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", issues);
  const common = protocol(env, "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", issues);
  const metricsProtocol = protocol(env, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", common, issues);
  const tracesProtocol = protocol(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", common, issues);
  const metricsOn = exporterOn(env, "OTEL_METRICS_EXPORTER", issues);
  const tracesOn = exporterOn(env, "OTEL_TRACES_EXPORTER", issues);
  const intervalMs = positiveMs(env, "OTEL_METRIC_EXPORT_INTERVAL", DEFAULT_INTERVAL_MS, issues);
  const timeoutSet = read(env, "OTEL_METRIC_EXPORT_TIMEOUT") !== undefined;
  let timeoutMs = positiveMs(env, "OTEL_METRIC_EXPORT_TIMEOUT", DEFAULT_TIMEOUT_MS, issues);
  if (timeoutMs > intervalMs) {
    // The SDK's reader refuses a timeout longer than the interval: the default is shortened to
    // it, a value given is refused.
    if (timeoutSet)
      issues.push({
        path: "OTEL_METRIC_EXPORT_TIMEOUT",
        message: `must not exceed OTEL_METRIC_EXPORT_INTERVAL (${intervalMs}) (got ${timeoutMs})`,
      });
    timeoutMs = intervalMs;
  }
  const attributes = parseResourceAttributes(read(env, "OTEL_RESOURCE_ATTRIBUTES"), issues);
  if (issues.length > 0) throw new ConfigError(issues);

  const metricsUrl = metricsEndpoint ?? (base && signalUrl(base, "v1/metrics"));
  const tracesUrl = tracesEndpoint ?? (base && signalUrl(base, "v1/traces"));
  const metrics =
    metricsOn && metricsUrl
      ? { url: metricsUrl, protocol: metricsProtocol, intervalMs, timeoutMs }
      : undefined;
  const traces = tracesOn && tracesUrl ? { url: tracesUrl, protocol: tracesProtocol } : undefined;
  if (metrics === undefined && traces === undefined) return undefined;
  return {
    resource: {
      "service.version": VERSION,
      // Each process is an instance of its own (the workers of --workers too): without this,
      // their cumulative counts would be one series, overwriting each other.
      "service.instance.id": randomUUID(),
      ...attributes,
      "service.name": read(env, "OTEL_SERVICE_NAME") ?? attributes["service.name"] ?? "sluice",
    },
    metrics,
    traces,
  };
}

function ignore(): void {}

/** The running SDK: its tracer (when traces are exported), and its shutdown. */
export interface OpenTelemetry {
  /** The tracer of the service's spans; undefined when traces are not exported. */
  readonly tracer: Tracer | undefined;
  /** Exports what is left (a last collection of metrics, the spans still queued) and stops. */
  shutdown(): Promise<void>;
}

/** Where the SDK's own complaints go (an export that failed, say): the service's log. */
export interface OtelLogger {
  warn(obj: object, message: string): void;
}

/**
 * Starts the SDK the settings ask for and registers it globally: the meter provider (with a
 * periodic OTLP reader), and the tracer provider (batched OTLP export, the W3C trace-context
 * propagator, the AsyncLocalStorage context manager). The SDK's modules are loaded here only.
 */
export async function startOpenTelemetry(
  settings: OtelSettings,
  logger: OtelLogger,
): Promise<OpenTelemetry> {
  const { defaultResource, resourceFromAttributes } = await import("@opentelemetry/resources");
  // Export failures and the like: warnings and errors only, into the log.
  const tell = (message: string, ...args: unknown[]) =>
    logger.warn(
      { otel: args.map((a) => (a instanceof Error ? a.message : a)) },
      `OpenTelemetry: ${message}`,
    );
  diag.setLogger(
    { error: tell, warn: tell, info: ignore, debug: ignore, verbose: ignore },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const resource = defaultResource().merge(resourceFromAttributes(settings.resource));
  const stops: Array<() => Promise<void>> = [];
  let tracer: Tracer | undefined;
  if (settings.metrics) {
    const m = settings.metrics;
    const [{ MeterProvider, PeriodicExportingMetricReader }, exporters] = await Promise.all([
      import("@opentelemetry/sdk-metrics"),
      m.protocol === "http/json"
        ? import("@opentelemetry/exporter-metrics-otlp-http")
        : import("@opentelemetry/exporter-metrics-otlp-proto"),
    ]);
    const provider = new MeterProvider({
      resource,
      readers: [
        new PeriodicExportingMetricReader({
          exporter: new exporters.OTLPMetricExporter({ url: m.url }),
          exportIntervalMillis: m.intervalMs,
          exportTimeoutMillis: m.timeoutMs,
        }),
      ],
    });
    metrics.setGlobalMeterProvider(provider);
    stops.push(() => provider.shutdown());
  }
  if (settings.traces) {
    const t = settings.traces;
    const [
      { NodeTracerProvider },
      { BatchSpanProcessor },
      { W3CTraceContextPropagator },
      exporters,
    ] = await Promise.all([
      import("@opentelemetry/sdk-trace-node"),
      import("@opentelemetry/sdk-trace-base"),
      import("@opentelemetry/core"),
      t.protocol === "http/json"
        ? import("@opentelemetry/exporter-trace-otlp-http")
        : import("@opentelemetry/exporter-trace-otlp-proto"),
    ]);
    const provider = new NodeTracerProvider({
      resource,
      spanProcessors: [new BatchSpanProcessor(new exporters.OTLPTraceExporter({ url: t.url }))],
    });
    provider.register({ propagator: new W3CTraceContextPropagator() });
    tracer = provider.getTracer("sluice", VERSION);
    stops.push(() => provider.shutdown());
  }
  let stopping: Promise<void> | undefined;
  return {
    tracer,
    shutdown() {
      stopping ??= Promise.all(stops.map((stop) => stop())).then(() => undefined);
      return stopping;
    },
  };
}
