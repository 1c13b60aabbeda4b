/**
 * A real gRPC client of the Envoy rate limit service (`@grpc/grpc-js`), speaking the project's
 * `.proto` files as Envoy does, for the tests and the benchmark's gRPC case.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

/** The directory of the server's `.proto` files. */
export const PROTO_DIR = fileURLToPath(new URL("../proto/", import.meta.url));

/** A descriptor as the tests write it (protojson-like, enums by name). */
export interface TestDescriptor {
  entries: Array<{ key: string; value?: string }>;
  limit?: { requestsPerUnit: number; unit: string | number };
  hitsAddend?: { value: number | string };
}

/** A request as the tests write it. */
export interface TestRequest {
  domain: string;
  descriptors: TestDescriptor[];
  hitsAddend?: number;
}

/**
 * A decoded response (enums by name, 64-bit integers as strings, every field present), without
 * the fields sluice never sets (`quota`, `raw_value`, `dynamic_metadata`).
 */
export interface TestResponse {
  overallCode: "UNKNOWN" | "OK" | "OVER_LIMIT";
  statuses: Array<{
    code: "UNKNOWN" | "OK" | "OVER_LIMIT";
    currentLimit: { requestsPerUnit: number; unit: string; name: string } | null;
    limitRemaining: number;
    durationUntilReset: { seconds: string; nanos: number } | null;
  }>;
  responseHeadersToAdd: Array<{ key: string; value: string }>;
  requestHeadersToAdd: Array<{ key: string; value: string }>;
  rawBody: Buffer;
}

type Callback<T> = (err: grpc.ServiceError | null, value?: T) => void;
interface RlsStub extends grpc.Client {
  ShouldRateLimit(req: TestRequest, cb: Callback<TestResponse>): grpc.ClientUnaryCall;
  ShouldRateLimit(
    req: TestRequest,
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    cb: Callback<TestResponse>,
  ): grpc.ClientUnaryCall;
}
interface HealthStub extends grpc.Client {
  Check(req: { service: string }, cb: Callback<{ status: string }>): grpc.ClientUnaryCall;
}

/** A client of one server. */
export interface RlsClient {
  /**
   * Calls ShouldRateLimit (with `metadata`, e.g. a `traceparent`); rejects with the gRPC error
   * (`code`, `details`).
   */
  shouldRateLimit(
    req: TestRequest,
    options?: { deadlineMs?: number; metadata?: Record<string, string> },
  ): Promise<TestResponse>;
  /** grpc.health.v1 Check. */
  health(service?: string): Promise<string>;
  close(): void;
}

/** The protocol files as proto-loader reads them (camelCase fields, 64-bit integers as strings). */
export function loadRlsDefinition(enums: typeof String | typeof Number = Number) {
  return protoLoader.loadSync(
    [
      join(PROTO_DIR, "envoy/service/ratelimit/v3/rls.proto"),
      join(PROTO_DIR, "grpc/health/v1/health.proto"),
    ],
    {
      keepCase: false,
      longs: String,
      enums,
      defaults: true,
      oneofs: true,
      includeDirs: [PROTO_DIR],
    },
  );
}

const definition = loadRlsDefinition(String);
const pkg = grpc.loadPackageDefinition(definition) as unknown as {
  envoy: {
    service: {
      ratelimit: {
        v3: {
          RateLimitService: new (
            a: string,
            c: grpc.ChannelCredentials,
            o?: grpc.ChannelOptions,
          ) => RlsStub;
        };
      };
    };
  };
  grpc: {
    health: {
      v1: {
        Health: new (a: string, c: grpc.ChannelCredentials, o?: grpc.ChannelOptions) => HealthStub;
      };
    };
  };
};

function normalize(r: TestResponse): TestResponse {
  return {
    overallCode: r.overallCode,
    statuses: r.statuses.map((x) => ({
      code: x.code,
      currentLimit: x.currentLimit,
      limitRemaining: x.limitRemaining,
      durationUntilReset: x.durationUntilReset,
    })),
    responseHeadersToAdd: r.responseHeadersToAdd.map((h) => ({ key: h.key, value: h.value })),
    requestHeadersToAdd: r.requestHeadersToAdd.map((h) => ({ key: h.key, value: h.value })),
    rawBody: r.rawBody,
  };
}

/** Connects to `host:port` (with grpc-js channel options, e.g. compression). */
export function rlsClient(address: string, options: grpc.ChannelOptions = {}): RlsClient {
  const stub = new pkg.envoy.service.ratelimit.v3.RateLimitService(
    address,
    grpc.credentials.createInsecure(),
    options,
  );
  const health = new pkg.grpc.health.v1.Health(address, grpc.credentials.createInsecure(), options);
  return {
    shouldRateLimit(req, options = {}) {
      return new Promise((resolve, reject) => {
        const deadline = new Date(Date.now() + (options.deadlineMs ?? 10_000));
        const metadata = new grpc.Metadata();
        for (const [k, v] of Object.entries(options.metadata ?? {})) metadata.set(k, v);
        stub.ShouldRateLimit(req, metadata, { deadline }, (err, value) =>
          err ? reject(err) : resolve(normalize(value!)),
        );
      });
    },
    health(service = "") {
      return new Promise((resolve, reject) => {
        health.Check({ service }, (err, value) => (err ? reject(err) : resolve(value!.status)));
      });
    },
    close() {
      stub.close();
      health.close();
    },
  };
}
