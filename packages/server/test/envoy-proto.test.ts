/**
 * The .proto files of packages/server/proto keep Envoy's wire format (they are what the tests'
 * gRPC client speaks, and what users generate clients from).
 */
import { describe, expect, it } from "vitest";
import { loadRlsDefinition } from "./envoy-client.js";

interface Descriptor {
  name?: string;
  field?: Array<{ name: string; number: number }>;
  value?: Array<{ name: string; number: number }>;
  nestedType?: Descriptor[];
  enumType?: Descriptor[];
}

/**
 * `name=number` of every field of a message (or value of an enum) in the loaded .proto files
 * (field names as proto-loader gives them: camelCase).
 */
function numbers(name: string): string[] {
  const definition = loadRlsDefinition();
  const top = Object.keys(definition)
    .filter((k) => name === k || name.startsWith(`${k}.`))
    .sort((a, b) => b.length - a.length)[0];
  if (!top) throw new Error(`${name} is not defined`);
  let d = (definition[top] as { type: Descriptor }).type;
  for (const part of name
    .slice(top.length + 1)
    .split(".")
    .filter(Boolean)) {
    const next = [...(d.nestedType ?? []), ...(d.enumType ?? [])].find((x) => x.name === part);
    if (!next) throw new Error(`${name} is not defined`);
    d = next;
  }
  return (d.field ?? d.value ?? []).map((f) => `${f.name}=${f.number}`);
}

describe("the protocol files keep Envoy's wire format", () => {
  it("names the service and the method as Envoy calls them", () => {
    const service = loadRlsDefinition()["envoy.service.ratelimit.v3.RateLimitService"] as Record<
      string,
      { path: string }
    >;
    expect(service.ShouldRateLimit!.path).toBe(
      "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
    );
  });

  it("keeps upstream's field numbers", () => {
    expect(numbers("envoy.service.ratelimit.v3.RateLimitRequest")).toEqual([
      "domain=1",
      "descriptors=2",
      "hitsAddend=3",
    ]);
    expect(numbers("envoy.extensions.common.ratelimit.v3.RateLimitDescriptor")).toEqual([
      "entries=1",
      "limit=2",
      "hitsAddend=3",
    ]);
    expect(numbers("envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry")).toEqual([
      "key=1",
      "value=2",
    ]);
    expect(
      numbers("envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.RateLimitOverride"),
    ).toEqual(["requestsPerUnit=1", "unit=2"]);
    expect(numbers("envoy.service.ratelimit.v3.RateLimitResponse")).toEqual([
      "overallCode=1",
      "statuses=2",
      "responseHeadersToAdd=3",
      "requestHeadersToAdd=4",
      "rawBody=5",
      "dynamicMetadata=6",
      "quota=7",
    ]);
    expect(numbers("envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus")).toEqual([
      "code=1",
      "currentLimit=2",
      "limitRemaining=3",
      "durationUntilReset=4",
      "quota=5",
    ]);
    expect(numbers("envoy.service.ratelimit.v3.RateLimitResponse.RateLimit")).toEqual([
      "name=3",
      "requestsPerUnit=1",
      "unit=2",
    ]);
    expect(numbers("envoy.config.core.v3.HeaderValue")).toEqual(["key=1", "value=2", "rawValue=3"]);
  });

  it("keeps upstream's enum values (the response's unit has WEEK = 7; the override's has none)", () => {
    expect(numbers("envoy.service.ratelimit.v3.RateLimitResponse.Code")).toEqual([
      "UNKNOWN=0",
      "OK=1",
      "OVER_LIMIT=2",
    ]);
    expect(numbers("envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit")).toEqual([
      "UNKNOWN=0",
      "SECOND=1",
      "MINUTE=2",
      "HOUR=3",
      "DAY=4",
      "WEEK=7",
      "MONTH=5",
      "YEAR=6",
    ]);
    expect(numbers("envoy.type.v3.RateLimitUnit")).toEqual([
      "UNKNOWN=0",
      "SECOND=1",
      "MINUTE=2",
      "HOUR=3",
      "DAY=4",
      "MONTH=5",
      "YEAR=6",
    ]);
  });
});
