/**
 * The hand-written protobuf codec of the Envoy service (src/envoy/wire.ts) against protobufjs
 * reading the same .proto files: requests protobufjs writes read back as written, responses
 * written here read back by protobufjs as given, random bytes never do anything but read or
 * throw a WireError, and the encoding rules a hand-written reader can get wrong (unknown fields,
 * merged messages, last value wins, wire type mismatch, truncation), each on its own.
 */
import { join } from "node:path";
import fc from "fast-check";
import protobuf from "protobufjs";
import { describe, expect, it } from "vitest";
import type { RlsRequest, RlsResponse } from "../src/envoy/rls.js";
import {
  WireError,
  decodeHealthCheckRequest,
  decodeRateLimitRequest,
  encodeHealthCheckResponse,
  encodeRateLimitResponse,
} from "../src/envoy/wire.js";
import { PROTO_DIR } from "./envoy-client.js";

const root = new protobuf.Root();
// google/protobuf/*.proto come with protobufjs.
root.resolvePath = (_origin, target) =>
  target.startsWith("google/protobuf/") ? target : join(PROTO_DIR, target);
root.loadSync(["envoy/service/ratelimit/v3/rls.proto", "grpc/health/v1/health.proto"]);
const Request = root.lookupType("envoy.service.ratelimit.v3.RateLimitRequest");
const Response = root.lookupType("envoy.service.ratelimit.v3.RateLimitResponse");
const HealthRequest = root.lookupType("grpc.health.v1.HealthCheckRequest");
const HealthResponse = root.lookupType("grpc.health.v1.HealthCheckResponse");

const encode = (type: protobuf.Type, value: Record<string, unknown>): Buffer =>
  Buffer.from(type.encode(type.fromObject(value)).finish());

/** A request as protobufjs takes it, and the RlsRequest it must read as. */
const requestArb = fc
  .record({
    domain: fc.string({ unit: "grapheme", maxLength: 20 }),
    hitsAddend: fc.nat({ max: 0xffff_ffff }),
    descriptors: fc.array(
      fc.record({
        entries: fc.array(
          fc.record({
            key: fc.string({ unit: "grapheme", maxLength: 12 }),
            value: fc.string({ unit: "grapheme", maxLength: 12 }),
          }),
          { maxLength: 4 },
        ),
        limit: fc.option(
          fc.record({
            requestsPerUnit: fc.nat({ max: 0xffff_ffff }),
            unit: fc.integer({ min: -3, max: 9 }),
          }),
          { nil: undefined },
        ),
        hitsAddend: fc.option(fc.maxSafeNat(), { nil: undefined }),
      }),
      { maxLength: 4 },
    ),
  })
  .map((r) => ({
    wire: {
      domain: r.domain,
      hitsAddend: r.hitsAddend,
      descriptors: r.descriptors.map((d) => ({
        entries: d.entries,
        ...(d.limit ? { limit: d.limit } : {}),
        ...(d.hitsAddend !== undefined ? { hitsAddend: { value: d.hitsAddend } } : {}),
      })),
    },
    expected: {
      domain: r.domain,
      hitsAddend: r.hitsAddend,
      descriptors: r.descriptors.map((d) => ({
        entries: d.entries,
        limit: d.limit,
        hitsAddend: d.hitsAddend,
      })),
    } satisfies RlsRequest,
  }));

/** A response, and what protobufjs must read it as (defaults included). */
const responseArb = fc
  .record({
    overallCode: fc.constantFrom(0, 1, 2),
    statuses: fc.array(
      fc.record({
        code: fc.constantFrom(0, 1, 2),
        currentLimit: fc.option(
          fc.record({
            requestsPerUnit: fc.nat({ max: 0xffff_ffff }),
            unit: fc.constantFrom(0, 1, 2, 3, 4, 5, 6, 7),
            name: fc.string({ unit: "grapheme", maxLength: 20 }),
          }),
          { nil: undefined },
        ),
        limitRemaining: fc.nat({ max: 0xffff_ffff }),
        durationUntilResetS: fc.option(fc.nat({ max: 400 * 86_400 }), { nil: undefined }),
      }),
      { maxLength: 4 },
    ),
    responseHeadersToAdd: fc.array(
      fc.tuple(
        fc.string({ unit: "grapheme", maxLength: 30 }),
        // Long enough at times that a header's length takes two bytes.
        fc.string({ unit: "grapheme", maxLength: 200 }),
      ),
      { maxLength: 3 },
    ),
    rawBody: fc.option(fc.uint8Array({ maxLength: 300 }), { nil: undefined }),
  })
  .map((r) => ({
    response: { ...r, failedClosed: false } satisfies RlsResponse,
    expected: {
      overallCode: r.overallCode,
      statuses: r.statuses.map((s) => ({
        code: s.code,
        currentLimit: s.currentLimit ?? null,
        limitRemaining: s.limitRemaining,
        durationUntilReset:
          s.durationUntilResetS === undefined ? null : { seconds: s.durationUntilResetS, nanos: 0 },
        quota: null,
      })),
      responseHeadersToAdd: r.responseHeadersToAdd.map(([key, value]) => ({
        key,
        value,
        rawValue: Buffer.alloc(0),
      })),
      requestHeadersToAdd: [],
      rawBody: Buffer.from(r.rawBody ?? []),
      dynamicMetadata: null,
      quota: null,
    },
  }));

const readResponse = (frame: Buffer) => {
  expect(frame[0]).toBe(0);
  expect(frame.readUInt32BE(1)).toBe(frame.length - 5);
  return Response.toObject(Response.decode(frame.subarray(5)), {
    longs: Number,
    enums: Number,
    bytes: Buffer,
    defaults: true,
    arrays: true,
  });
};

describe("RateLimitRequest: read as protobufjs writes it", () => {
  it("any request, field by field", () => {
    fc.assert(
      fc.property(requestArb, ({ wire, expected }) => {
        expect(decodeRateLimitRequest(encode(Request, wire))).toEqual(expected);
      }),
      { numRuns: 500 },
    );
  });

  it("a message inside a larger buffer is read between its bounds only", () => {
    const bytes = encode(Request, { domain: "d", descriptors: [{ entries: [{ key: "k" }] }] });
    const framed = Buffer.concat([Buffer.from([9, 9, 9]), bytes, Buffer.from([0xff])]);
    expect(decodeRateLimitRequest(framed, 3, 3 + bytes.length)).toEqual({
      domain: "d",
      hitsAddend: 0,
      descriptors: [
        { entries: [{ key: "k", value: "" }], limit: undefined, hitsAddend: undefined },
      ],
    });
  });

  it("a uint64 hits_addend above 2^53 reads as a number as large (it never fits a limit)", () => {
    // descriptors { hits_addend { value: 2^64 - 1 } }
    const max = Buffer.from([0x12, 0x0d, 0x1a, 0x0b, 0x08, ...Array(9).fill(0xff), 0x01]);
    expect(decodeRateLimitRequest(max).descriptors[0]!.hitsAddend).toBe(2 ** 64);
  });

  it("a negative override unit (a 10-byte varint) reads as that negative number", () => {
    const bytes = encode(Request, {
      domain: "d",
      descriptors: [{ entries: [], limit: { requestsPerUnit: 1, unit: -1 } }],
    });
    expect(decodeRateLimitRequest(bytes).descriptors[0]!.limit).toEqual({
      requestsPerUnit: 1,
      unit: -1,
    });
  });

  it("unknown fields of every wire type are skipped, at every level", () => {
    const unknown = Buffer.from([
      ...[0x78, 0x96, 0x01], // field 15, varint 150
      ...[0x79, 1, 2, 3, 4, 5, 6, 7, 8], // field 15, 64-bit
      ...[0x7a, 0x02, 0x61, 0x62], // field 15, 2 bytes
      ...[0x7d, 1, 2, 3, 4], // field 15, 32-bit
      ...[0x7b, 0x08, 0x01, 0x7c], // field 15, a group holding field 1 = 1
    ]);
    const entry = Buffer.concat([Buffer.from([0x0a, 0x01, 0x6b]), unknown]);
    const descriptor = Buffer.concat([Buffer.from([0x0a, entry.length]), entry, unknown]);
    const request = Buffer.concat([
      unknown,
      Buffer.from([0x0a, 0x01, 0x64]),
      Buffer.from([0x12, descriptor.length]),
      descriptor,
      unknown,
    ]);
    expect(decodeRateLimitRequest(request)).toEqual({
      domain: "d",
      hitsAddend: 0,
      descriptors: [
        { entries: [{ key: "k", value: "" }], limit: undefined, hitsAddend: undefined },
      ],
    });
  });

  it("the last value of a field wins; a message field seen twice is merged", () => {
    const request = Buffer.from([
      ...[0x0a, 0x01, 0x61], // domain "a"
      ...[0x0a, 0x01, 0x62], // domain "b"
      ...[0x18, 0x02, 0x18, 0x03], // hits_addend 2, then 3
      ...[0x12, 0x08], // a descriptor:
      ...[0x12, 0x02, 0x08, 0x05], //   limit { requests_per_unit: 5 }
      ...[0x12, 0x02, 0x10, 0x02], //   limit { unit: MINUTE } (merged)
    ]);
    expect(decodeRateLimitRequest(request)).toEqual({
      domain: "b",
      hitsAddend: 3,
      descriptors: [{ entries: [], limit: { requestsPerUnit: 5, unit: 2 }, hitsAddend: undefined }],
    });
  });

  it("a known field sent with another wire type is skipped, as an unknown one", () => {
    // domain as a varint, hits_addend as a string
    const request = Buffer.from([0x08, 0x05, 0x1a, 0x01, 0x61, 0x0a, 0x01, 0x64]);
    expect(decodeRateLimitRequest(request)).toEqual({
      domain: "d",
      hitsAddend: 0,
      descriptors: [],
    });
  });

  it("bytes that are not a protocol buffer throw a WireError saying where", () => {
    const cases: Array<[number[], RegExp]> = [
      [[0x0a, 0x05, 0x61], /domain: 5 bytes announced at byte 2, only 1 left/],
      [[0x12, 0x03, 0x0a, 0x05, 0x0a], /descriptors.0.entries: 5 bytes announced/],
      [[0x18, 0x80], /varint cut off at byte 2/],
      [[0x18, ...Array(11).fill(0x80)], /varint longer than 10 bytes/],
      [[0x00], /field number 0/],
      [[0x0e], /wire type 6/],
      [[0x79, 1, 2], /fixed-size field cut off/],
    ];
    for (const [bytes, message] of cases) {
      expect(() => decodeRateLimitRequest(Buffer.from(bytes))).toThrow(WireError);
      expect(() => decodeRateLimitRequest(Buffer.from(bytes))).toThrow(message);
    }
  });

  it("random bytes either read or throw a WireError, never anything else", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        try {
          const r = decodeRateLimitRequest(Buffer.from(bytes));
          expect(typeof r.domain).toBe("string");
        } catch (err) {
          expect(err).toBeInstanceOf(WireError);
        }
      }),
      { numRuns: 5000 },
    );
  });

  it("random changes to a valid request either read or throw a WireError", () => {
    fc.assert(
      fc.property(requestArb, fc.nat(), fc.integer({ min: 0, max: 255 }), ({ wire }, at, byte) => {
        const bytes = encode(Request, wire);
        if (bytes.length === 0) return;
        bytes[at % bytes.length] = byte;
        try {
          decodeRateLimitRequest(bytes.subarray(0, bytes.length - (at % 3)));
        } catch (err) {
          expect(err).toBeInstanceOf(WireError);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe("RateLimitResponse: written as protobufjs reads it", () => {
  it("any response, field by field, with its gRPC prefix", () => {
    fc.assert(
      fc.property(responseArb, ({ response, expected }) => {
        expect(readResponse(encodeRateLimitResponse(response))).toEqual(expected);
      }),
      { numRuns: 500 },
    );
  });

  it("the same bytes as protobufjs writes, for a typical answer", () => {
    const response: RlsResponse = {
      overallCode: 2,
      statuses: [
        {
          code: 2,
          currentLimit: { requestsPerUnit: 10, unit: 2, name: "per_user" },
          limitRemaining: 0,
          durationUntilResetS: 30,
        },
        { code: 1, limitRemaining: 0 },
      ],
      responseHeadersToAdd: [["Retry-After", "30"]],
      rawBody: new TextEncoder().encode('{"title":"Too Many Requests"}'),
      failedClosed: false,
    };
    const theirs = encode(Response, {
      overallCode: 2,
      statuses: [
        {
          code: 2,
          currentLimit: { requestsPerUnit: 10, unit: 2, name: "per_user" },
          durationUntilReset: { seconds: 30 },
        },
        { code: 1 },
      ],
      responseHeadersToAdd: [{ key: "Retry-After", value: "30" }],
      rawBody: Buffer.from(response.rawBody!),
    });
    // protobufjs writes a message's fields in the order declared (RateLimit's name = 3 first);
    // the bytes read back the same, and the lengths agree.
    const ours = encodeRateLimitResponse(response);
    expect(ours.length - 5).toBe(theirs.length);
    expect(Response.toObject(Response.decode(ours.subarray(5)))).toEqual(
      Response.toObject(Response.decode(theirs)),
    );
  });

  it("a long response (lengths of several bytes at every level)", () => {
    const long = "x".repeat(70_000);
    const frame = encodeRateLimitResponse({
      overallCode: 1,
      statuses: [
        { code: 1, currentLimit: { requestsPerUnit: 1, unit: 1, name: long }, limitRemaining: 1 },
      ],
      responseHeadersToAdd: [["a", long]],
      rawBody: undefined,
      failedClosed: false,
    });
    const r = readResponse(frame);
    expect(r.statuses[0].currentLimit.name).toBe(long);
    expect(r.responseHeadersToAdd[0].value).toBe(long);
  });
});

describe("grpc.health.v1", () => {
  it("reads a HealthCheckRequest and writes a HealthCheckResponse as protobufjs does", () => {
    fc.assert(
      fc.property(fc.string({ unit: "grapheme", maxLength: 40 }), (service) => {
        expect(decodeHealthCheckRequest(encode(HealthRequest, { service }))).toBe(service);
      }),
    );
    for (const status of [1, 2]) {
      const frame = encodeHealthCheckResponse(status);
      expect(frame.readUInt32BE(1)).toBe(frame.length - 5);
      expect(HealthResponse.toObject(HealthResponse.decode(frame.subarray(5)))).toEqual({
        status,
      });
    }
  });
});
