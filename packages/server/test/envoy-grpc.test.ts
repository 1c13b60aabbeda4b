/**
 * The gRPC transport of the Envoy service (src/envoy/grpc.ts) as clients other than its own
 * code see it: every malformed, too large, compressed, cut off, mistyped or unfinished request
 * gets the gRPC status a gRPC client (Envoy) expects, on a raw node:http2 client that can send
 * what no gRPC library would; @grpc/grpc-js with compression on; and h2load (nghttp2's C
 * client) for exactness under concurrency. The server answers the next call after each.
 */
import { execFile } from "node:child_process";
import http2 from "node:http2";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deflateSync, gzipSync } from "node:zlib";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { grpcMessage } from "../src/envoy/grpc.js";
import { type TestService, startService } from "./helpers.js";
import { type RlsClient, rlsClient } from "./envoy-client.js";

const RLS = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
const HEALTH = "/grpc.health.v1.Health/Check";
/** The service's bodyLimit in these tests: the largest request message. */
const LIMIT = 4096;
const TIMEOUT_MS = 300;

let s: TestService;
let port: number;
let session: http2.ClientHttp2Session;

/** What a raw call got back. */
interface Answer {
  httpStatus: number;
  headers: http2.IncomingHttpHeaders;
  grpcStatus: number | undefined;
  grpcMessage: string | undefined;
  body: Buffer;
}

/**
 * A raw call on the shared session: `headers` over gRPC's, `chunks` written one by one, then
 * the stream ended (unless `end` is false).
 */
function raw(
  options: {
    path?: string;
    headers?: http2.OutgoingHttpHeaders;
    chunks?: Buffer[];
    end?: boolean;
  } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = session.request({
      ":method": "POST",
      ":path": options.path ?? RLS,
      "content-type": "application/grpc",
      te: "trailers",
      ...options.headers,
    });
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    const body: Buffer[] = [];
    req.on("response", (h) => (headers = h));
    req.on("trailers", (t) => (trailers = t));
    req.on("data", (c: Buffer) => body.push(c));
    req.on("error", reject);
    req.on("close", () => {
      const status = trailers["grpc-status"] ?? headers["grpc-status"];
      const message = trailers["grpc-message"] ?? headers["grpc-message"];
      resolve({
        httpStatus: Number(headers[":status"]),
        headers,
        grpcStatus: status === undefined ? undefined : Number(status),
        grpcMessage: message === undefined ? undefined : decodeURIComponent(String(message)),
        body: Buffer.concat(body),
      });
    });
    for (const c of options.chunks ?? []) req.write(c);
    if (options.end !== false) req.end();
  });
}

/** A gRPC message: flag, 4-byte length, bytes (the length may be given to lie). */
function frame(bytes: Buffer, flag = 0, length = bytes.length): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(length, 1);
  return Buffer.concat([head, bytes]);
}

/** RateLimitRequest { domain: "edge", descriptors: [{ entries: [{ key: "k", value }] }] }. */
function request(value = "v"): Buffer {
  const entry = Buffer.concat([
    Buffer.from([0x0a, 1, 0x6b, 0x12, value.length]),
    Buffer.from(value),
  ]);
  const descriptor = Buffer.concat([Buffer.from([0x0a, entry.length]), entry]);
  return Buffer.concat([
    Buffer.from([0x0a, 4]),
    Buffer.from("edge"),
    Buffer.from([0x12, descriptor.length]),
    descriptor,
  ]);
}

/** The server still answers a good call (on the same connection). */
async function stillServes(): Promise<void> {
  const a = await raw({ chunks: [frame(request("ok"))] });
  expect(a.grpcStatus).toBe(0);
  expect(a.body.readUInt32BE(1)).toBe(a.body.length - 5);
}

beforeAll(async () => {
  s = await startService({
    values: {
      grpcPort: 0,
      bodyLimit: LIMIT,
      requestTimeoutMs: TIMEOUT_MS,
      headersTimeoutMs: TIMEOUT_MS,
    },
  });
  const put = await s.call("PUT", "/v1/admin/envoy/domains/edge", {
    raw: "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: { unit: hour, requests_per_unit: 500 }\n",
    contentType: "application/yaml",
  });
  expect(put.status).toBe(201);
  port = s.service.grpcPort()!;
  session = http2.connect(`http://127.0.0.1:${port}`);
});
afterAll(async () => {
  session?.close();
  await s?.close();
});

describe("requests that are not gRPC", () => {
  it("a content type other than application/grpc: HTTP 415 with grpc-status INTERNAL", async () => {
    for (const type of ["application/json", "application/grpc-web", "application/grpc+json"]) {
      const a = await raw({ headers: { "content-type": type }, chunks: [frame(request())] });
      expect(a).toMatchObject({
        httpStatus: 415,
        grpcStatus: 13,
        grpcMessage: `content-type "${type}" is not application/grpc (protobuf)`,
      });
    }
    const none = await raw({ headers: { "content-type": undefined }, chunks: [frame(request())] });
    expect(none).toMatchObject({ httpStatus: 415, grpcStatus: 13 });
    // application/grpc+proto and parameters are gRPC.
    for (const type of ["application/grpc+proto", "application/grpc; charset=utf-8"]) {
      const a = await raw({ headers: { "content-type": type }, chunks: [frame(request())] });
      expect(a.grpcStatus).toBe(0);
    }
    await stillServes();
  });

  it("a method other than POST: HTTP 405 with grpc-status INTERNAL", async () => {
    const a = await raw({ headers: { ":method": "GET" } });
    expect(a).toMatchObject({
      httpStatus: 405,
      grpcStatus: 13,
      grpcMessage: "method GET is not POST",
    });
    await stillServes();
  });

  it("another gRPC method: UNIMPLEMENTED naming it", async () => {
    const a = await raw({ path: "/grpc.health.v1.Health/Watch", chunks: [frame(Buffer.alloc(0))] });
    expect(a).toMatchObject({
      httpStatus: 200,
      grpcStatus: 12,
      grpcMessage: "unknown method /grpc.health.v1.Health/Watch",
    });
    await stillServes();
  });
});

describe("messages that cannot be read", () => {
  it("bytes that are not a RateLimitRequest: INTERNAL saying where", async () => {
    const a = await raw({ chunks: [frame(Buffer.from([0x0a, 0x09, 0x61]))] });
    expect(a).toMatchObject({
      httpStatus: 200,
      grpcStatus: 13,
      grpcMessage: "malformed RateLimitRequest: domain: 9 bytes announced at byte 2, only 1 left",
    });
    const health = await raw({ path: HEALTH, chunks: [frame(Buffer.from([0x0e]))] });
    expect(health.grpcStatus).toBe(13);
    expect(health.grpcMessage).toMatch(/^malformed HealthCheckRequest: /);
    await stillServes();
  });

  it("no message, a prefix cut off, a message cut off: INTERNAL", async () => {
    expect(await raw()).toMatchObject({
      grpcStatus: 13,
      grpcMessage: "no request message: the stream ended before one",
    });
    expect(await raw({ chunks: [Buffer.from([0, 0, 0])] })).toMatchObject({
      grpcStatus: 13,
      grpcMessage: "request cut off: 3 bytes of a 5-byte message prefix",
    });
    const whole = request();
    const cut = frame(whole).subarray(0, 9);
    expect(await raw({ chunks: [cut] })).toMatchObject({
      grpcStatus: 13,
      grpcMessage: `request cut off: the message announces ${whole.length} bytes, 4 arrived`,
    });
    await stillServes();
  });

  it("two messages on a unary call: INTERNAL", async () => {
    const a = await raw({ chunks: [frame(request()), frame(request())] });
    expect(a).toMatchObject({
      grpcStatus: 13,
      grpcMessage: "more than one request message for a unary method",
    });
    await stillServes();
  });

  it("a message split over many writes is read whole", async () => {
    const bytes = frame(request("split"));
    const a = await raw({ chunks: [...bytes].map((b) => Buffer.from([b])) });
    expect(a.grpcStatus).toBe(0);
  });
});

describe("sizes and compression", () => {
  it("a message announced larger than the limit: RESOURCE_EXHAUSTED before it arrives", async () => {
    // Only the prefix is sent and the stream left open: the answer does not wait for the rest.
    const a = await raw({ chunks: [frame(Buffer.alloc(0), 0, LIMIT + 1)], end: false });
    expect(a).toMatchObject({
      grpcStatus: 8,
      grpcMessage: `request message larger than the limit (${LIMIT + 1} vs. ${LIMIT} bytes)`,
    });
    await stillServes();
  });

  it("more bytes than the limit, whatever the prefix says: RESOURCE_EXHAUSTED", async () => {
    const a = await raw({ chunks: [frame(Buffer.alloc(LIMIT + 100), 0, 10)] });
    expect(a.grpcStatus).toBe(8);
    // A message of exactly the limit is read (and is not a RateLimitRequest here).
    const at = await raw({ chunks: [frame(Buffer.alloc(LIMIT, 0xff))] });
    expect(at.grpcStatus).toBe(13);
    await stillServes();
  });

  it("gzip and deflate messages are read; one that inflates past the limit is RESOURCE_EXHAUSTED", async () => {
    for (const [encoding, pack] of [
      ["gzip", gzipSync],
      ["deflate", deflateSync],
    ] as const) {
      const a = await raw({
        headers: { "grpc-encoding": encoding },
        chunks: [frame(pack(request("zip")), 1)],
      });
      expect(a.grpcStatus).toBe(0);
      // An uncompressed message under the same header is read as it is.
      const plain = await raw({
        headers: { "grpc-encoding": encoding },
        chunks: [frame(request())],
      });
      expect(plain.grpcStatus).toBe(0);
      const bomb = await raw({
        headers: { "grpc-encoding": encoding },
        chunks: [frame(pack(Buffer.alloc(LIMIT * 100)), 1)],
      });
      expect(bomb).toMatchObject({
        grpcStatus: 8,
        grpcMessage: `request message larger than ${LIMIT} bytes once decompressed`,
      });
      const junk = await raw({
        headers: { "grpc-encoding": encoding },
        chunks: [frame(Buffer.from("not compressed"), 1)],
      });
      expect(junk).toMatchObject({
        grpcStatus: 13,
        grpcMessage: `the ${encoding} message does not decompress`,
      });
    }
    await stillServes();
  });

  it("an unknown grpc-encoding: UNIMPLEMENTED, naming the encodings read", async () => {
    const a = await raw({ headers: { "grpc-encoding": "snappy" }, chunks: [frame(request(), 1)] });
    expect(a).toMatchObject({
      grpcStatus: 12,
      grpcMessage: "grpc-encoding snappy is not supported (use identity,deflate,gzip)",
    });
    expect(a.headers["grpc-accept-encoding"]).toBe("identity,deflate,gzip");
    await stillServes();
  });

  it("a compressed flag without a compression: INTERNAL; a flag other than 0 or 1: INTERNAL", async () => {
    expect(await raw({ chunks: [frame(request(), 1)] })).toMatchObject({
      grpcStatus: 13,
      grpcMessage: "the message is flagged compressed but grpc-encoding names no compression",
    });
    expect(await raw({ chunks: [frame(request(), 7)] })).toMatchObject({
      grpcStatus: 13,
      grpcMessage: "message flag 7 is neither 0 nor 1",
    });
    await stillServes();
  });

  it("@grpc/grpc-js with gzip compression on gets its answers", async () => {
    const client = rlsClient(`127.0.0.1:${port}`, {
      "grpc.default_compression_algorithm": grpc.compressionAlgorithms.gzip,
    });
    try {
      const r = await client.shouldRateLimit({
        domain: "edge",
        descriptors: [{ entries: [{ key: "k", value: "gz" }] }],
      });
      expect(r.overallCode).toBe("OK");
      expect(r.statuses[0]!.limitRemaining).toBe(499);
      expect(await client.health()).toBe("SERVING");
    } finally {
      client.close();
    }
  });
});

describe("calls that do not finish", () => {
  it("a request not whole within the request timeout: DEADLINE_EXCEEDED", async () => {
    const t0 = Date.now();
    const a = await raw({ chunks: [frame(request()).subarray(0, 8)], end: false });
    expect(a).toMatchObject({
      grpcStatus: 4,
      grpcMessage: `the request did not arrive whole within ${TIMEOUT_MS} ms`,
    });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(TIMEOUT_MS);
    expect(Date.now() - t0).toBeLessThan(TIMEOUT_MS + 2000);
    await stillServes();
  });

  it("a call the client cancels is dropped; the connection goes on", async () => {
    const req = session.request({
      ":method": "POST",
      ":path": RLS,
      "content-type": "application/grpc",
    });
    req.on("error", () => undefined);
    req.write(frame(request()).subarray(0, 6));
    await new Promise((r) => setTimeout(r, 20));
    req.close(http2.constants.NGHTTP2_CANCEL);
    await new Promise((r) => req.on("close", r));
    await stillServes();
  });

  it("a client that drops its connection mid-call leaves the server serving", async () => {
    const other = http2.connect(`http://127.0.0.1:${port}`);
    await new Promise((r) => other.on("connect", r));
    const req = other.request({
      ":method": "POST",
      ":path": RLS,
      "content-type": "application/grpc",
    });
    req.on("error", () => undefined);
    req.write(frame(request()).subarray(0, 6));
    other.destroy();
    await stillServes();
  });
});

describe("grpc-message", () => {
  it("percent-encodes what is not printable ASCII, and % itself", () => {
    expect(grpcMessage("plain: text")).toBe("plain: text");
    expect(grpcMessage('50% of "é"\n')).toBe('50%25 of "%C3%A9"%0A');
  });
});

describe("a C client (h2load): exactly the limit passes under concurrency", () => {
  let client: RlsClient;
  beforeAll(() => {
    client = rlsClient(`127.0.0.1:${port}`);
  });
  afterAll(() => client?.close());

  it("800 calls, 4 connections × 16 in flight, at a limit of 500: 500 OK, 300 OVER_LIMIT", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-h2load-"));
    try {
      const data = join(dir, "request.bin");
      writeFileSync(data, frame(request("h2load")));
      const metric = async (code: string) => {
        const text = (await s.call("GET", "/metrics")).body as string;
        const m = new RegExp(
          `sluice_envoy_requests_total\\{domain="edge",code="${code}"\\} (\\d+)`,
        ).exec(text);
        return Number(m?.[1] ?? 0);
      };
      const [ok0, over0] = [await metric("ok"), await metric("over_limit")];
      // Not spawnSync: the server answers from this very process.
      const r = await new Promise<{ error: Error | null; stdout: string }>((resolve) =>
        execFile(
          "h2load",
          [
            "-n",
            "800",
            "-c",
            "4",
            "-m",
            "16",
            "-d",
            data,
            "-H",
            "content-type: application/grpc",
          ].concat(["-H", "te: trailers", `http://127.0.0.1:${port}${RLS}`]),
          (error, stdout) => resolve({ error, stdout }),
        ),
      );
      expect(r.error, "h2load (Debian's nghttp2-client) must be installed").toBeNull();
      expect(r.stdout).toContain("800 succeeded, 0 failed, 0 errored, 0 timeout");
      // h2load sees HTTP statuses only; the server's own counts say what each call got.
      expect((await metric("ok")) - ok0).toBe(500);
      expect((await metric("over_limit")) - over0).toBe(300);
      const after = await client.shouldRateLimit({
        domain: "edge",
        descriptors: [{ entries: [{ key: "k", value: "h2load" }] }],
      });
      expect(after.overallCode).toBe("OVER_LIMIT");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
