import { describe, expect, it } from "vitest";
import { ConfigError } from "./config.js";
import { otelSettings } from "./otel.js";

const issues = (env: NodeJS.ProcessEnv) => {
  try {
    otelSettings(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.issues.map((i) => `${i.path}: ${i.message}`);
    throw err;
  }
  return [];
};

describe("otelSettings (the OTEL_* variables of sluice serve)", () => {
  it("nothing to export without an endpoint, or when the SDK is disabled", () => {
    expect(otelSettings({})).toBeUndefined();
    expect(otelSettings({ OTEL_SERVICE_NAME: "x", OTEL_METRIC_EXPORT_INTERVAL: "1000" })).toBe(
      undefined,
    );
    expect(
      otelSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "TRUE" }),
    ).toBeUndefined();
    expect(
      otelSettings({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
        OTEL_METRICS_EXPORTER: "none",
        OTEL_TRACES_EXPORTER: "none",
      }),
    ).toBeUndefined();
  });

  it("the common endpoint gets each signal's path; a signal's own endpoint is used as given", () => {
    const s = otelSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/otlp" })!;
    expect(s.metrics).toEqual({
      url: "http://c:4318/otlp/v1/metrics",
      protocol: "http/protobuf",
      intervalMs: 60_000,
      timeoutMs: 30_000,
    });
    expect(s.traces).toEqual({ url: "http://c:4318/otlp/v1/traces", protocol: "http/protobuf" });
    const own = otelSettings({
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://t.example/custom",
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
    })!;
    expect(own.metrics).toBeUndefined();
    expect(own.traces).toEqual({ url: "https://t.example/custom", protocol: "http/json" });
    const metricsOnly = otelSettings({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/",
      OTEL_TRACES_EXPORTER: "none",
      OTEL_METRIC_EXPORT_INTERVAL: "200",
    })!;
    expect(metricsOnly.traces).toBeUndefined();
    // A short interval shortens the default timeout with it.
    expect(metricsOnly.metrics).toMatchObject({
      url: "http://c:4318/v1/metrics",
      intervalMs: 200,
      timeoutMs: 200,
    });
  });

  it("the resource: service.name (default sluice), OTEL_RESOURCE_ATTRIBUTES, an instance id", () => {
    const base = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" };
    const s = otelSettings(base)!;
    expect(s.resource["service.name"]).toBe("sluice");
    expect(s.resource["service.instance.id"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(otelSettings(base)!.resource["service.instance.id"]).not.toBe(
      s.resource["service.instance.id"],
    );
    const r = otelSettings({
      ...base,
      OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attrs, region=eu%2Dwest ,a=b=c",
    })!.resource;
    expect(r).toMatchObject({ "service.name": "from-attrs", region: "eu-west", a: "b=c" });
    expect(
      otelSettings({
        ...base,
        OTEL_SERVICE_NAME: "edge-limits",
        OTEL_RESOURCE_ATTRIBUTES: "service.name=x",
      })!.resource["service.name"],
    ).toBe("edge-limits");
  });

  it("every bad value is an error naming its variable", () => {
    expect(
      issues({
        OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318",
        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "ftp://c/",
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "json",
        OTEL_METRIC_EXPORT_INTERVAL: "0",
        OTEL_METRIC_EXPORT_TIMEOUT: "-5",
        OTEL_TRACES_EXPORTER: "jaeger",
        OTEL_SDK_DISABLED: "1",
        OTEL_RESOURCE_ATTRIBUTES: "ok=1,novalue,bad=%E0%A4%A",
      }),
    ).toEqual([
      'OTEL_SDK_DISABLED: must be true or false (got "1")',
      'OTEL_EXPORTER_OTLP_ENDPOINT: must be an http:// or https:// URL: sluice serve exports OTLP over HTTP (got "collector:4318")',
      'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: must be an http:// or https:// URL: sluice serve exports OTLP over HTTP (got "ftp://c/")',
      'OTEL_EXPORTER_OTLP_PROTOCOL: grpc is not supported: sluice serve exports OTLP over HTTP; use "http/protobuf" (the default, a collector\'s port 4318) or "http/json"',
      'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: must be "http/protobuf" or "http/json" (got "json")',
      'OTEL_TRACES_EXPORTER: must be "otlp" or "none": sluice serve exports OTLP only (got "jaeger")',
      'OTEL_METRIC_EXPORT_INTERVAL: must be a positive integer of milliseconds (got "0")',
      'OTEL_METRIC_EXPORT_TIMEOUT: must be a positive integer of milliseconds (got "-5")',
      'OTEL_RESOURCE_ATTRIBUTES: must be key=value pairs separated by commas (got "novalue")',
      'OTEL_RESOURCE_ATTRIBUTES: the value of bad is not percent-encoded correctly (got "%E0%A4%A")',
    ]);
    expect(
      issues({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
        OTEL_METRIC_EXPORT_INTERVAL: "1000",
        OTEL_METRIC_EXPORT_TIMEOUT: "5000",
      }),
    ).toEqual([
      "OTEL_METRIC_EXPORT_TIMEOUT: must not exceed OTEL_METRIC_EXPORT_INTERVAL (1000) (got 5000)",
    ]);
    // Checked even when nothing is exported: a typo does not wait for the day it matters.
    expect(issues({ OTEL_EXPORTER_OTLP_PROTOCOL: "http" })).toHaveLength(1);
  });
});
