/**
 * The gRPC door of the Envoy rate limit service: `envoy.service.ratelimit.v3.RateLimitService/
 * ShouldRateLimit` over `@grpc/grpc-js`, with the `.proto` files of packages/server/proto loaded
 * by `@grpc/proto-loader`, and gRPC's standard health check (`grpc.health.v1.Health/Check`).
 *
 * A request that cannot be answered (no domain, no descriptors, an override without a unit) is
 * `INVALID_ARGUMENT` naming the field; Envoy lets such a request through (or fails it, with
 * `failure_mode_deny`), as it does for any error. A counter store failure is never an error
 * here: each limit's `onStoreError` answers.
 */
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { Logger } from "pino";
import { PROTO_DIR } from "../proto-dir.js";
import {
  type RateLimitService,
  type RlsDescriptor,
  type RlsRequest,
  type RlsResponse,
  RlsInputError,
} from "./rls.js";

/** The files loaded, relative to {@link PROTO_DIR}. */
export const PROTO_FILES = [
  "envoy/service/ratelimit/v3/rls.proto",
  "grpc/health/v1/health.proto",
] as const;

/** The service's full name. */
export const RLS_SERVICE = "envoy.service.ratelimit.v3.RateLimitService";
const HEALTH_SERVICE = "grpc.health.v1.Health";

/** Loads the protocol files (camelCase fields, 64-bit integers as strings, enums as numbers). */
export function loadRlsDefinition(): protoLoader.PackageDefinition {
  return protoLoader.loadSync(
    PROTO_FILES.map((f) => join(PROTO_DIR, f)),
    {
      keepCase: false,
      longs: String,
      enums: Number,
      defaults: true,
      oneofs: true,
      includeDirs: [PROTO_DIR],
    },
  );
}

/** A `RateLimitRequest` as proto-loader decodes it (every field present: `defaults: true`). */
interface WireRequest {
  domain?: string;
  hitsAddend?: number;
  descriptors?: Array<{
    entries?: Array<{ key?: string; value?: string }>;
    limit?: { requestsPerUnit?: number; unit?: number } | null;
    hitsAddend?: { value?: string | number } | null;
  }>;
}

/** The transport-free request of a decoded gRPC one. */
export function requestFromWire(wire: WireRequest): RlsRequest {
  return {
    domain: wire.domain ?? "",
    hitsAddend: wire.hitsAddend ?? 0,
    descriptors: (wire.descriptors ?? []).map((d): RlsDescriptor => ({
      entries: (d.entries ?? []).map((e) => ({ key: e.key ?? "", value: e.value ?? "" })),
      limit: d.limit
        ? { requestsPerUnit: d.limit.requestsPerUnit ?? 0, unit: d.limit.unit ?? 0 }
        : undefined,
      // A UInt64Value: absent means "not set"; its value arrives as a decimal string.
      hitsAddend: d.hitsAddend ? Number(d.hitsAddend.value ?? 0) : undefined,
    })),
  };
}

/** The gRPC form of a response. */
export function responseToWire(r: RlsResponse): Record<string, unknown> {
  return {
    overallCode: r.overallCode,
    statuses: r.statuses.map((s) => ({
      code: s.code,
      currentLimit: s.currentLimit ?? null,
      limitRemaining: s.limitRemaining,
      durationUntilReset:
        s.durationUntilResetS === undefined ? null : { seconds: s.durationUntilResetS, nanos: 0 },
    })),
    responseHeadersToAdd: r.responseHeadersToAdd.map(([key, value]) => ({ key, value })),
    requestHeadersToAdd: [],
    rawBody: r.rawBody ? Buffer.from(r.rawBody) : Buffer.alloc(0),
  };
}

/** A running gRPC server. */
export interface RlsGrpcServer {
  /** Binds `host:port` (0: a free port); resolves to the port. */
  listen(host: string, port: number): Promise<number>;
  /**
   * Stops taking calls, lets those in flight finish, and closes every connection; whatever is
   * still open after `graceMs` is cut. Idempotent.
   */
  close(graceMs: number): Promise<void>;
}

/** Builds the gRPC server around a {@link RateLimitService}. */
export function createRlsGrpcServer(service: RateLimitService, logger: Logger): RlsGrpcServer {
  const definition = loadRlsDefinition();
  const server = new grpc.Server({
    // Envoy keeps one connection open and multiplexes on it; answer its pings.
    "grpc.keepalive_permit_without_calls": 1,
  });
  let serving = true;
  server.addService(definition[RLS_SERVICE] as grpc.ServiceDefinition, {
    ShouldRateLimit(
      call: grpc.ServerUnaryCall<WireRequest, unknown>,
      callback: grpc.sendUnaryData<unknown>,
    ) {
      let request: RlsRequest;
      try {
        request = requestFromWire(call.request);
      } catch (err) {
        callback({ code: grpc.status.INVALID_ARGUMENT, details: (err as Error).message });
        return;
      }
      service.shouldRateLimit(request).then(
        (r) => callback(null, responseToWire(r)),
        (err: unknown) => {
          if (err instanceof RlsInputError) {
            callback({ code: grpc.status.INVALID_ARGUMENT, details: err.message });
            return;
          }
          logger.error({ err, domain: request.domain }, "ShouldRateLimit failed");
          callback({ code: grpc.status.INTERNAL, details: "internal error" });
        },
      );
    },
  });
  server.addService(definition[HEALTH_SERVICE] as grpc.ServiceDefinition, {
    Check(
      call: grpc.ServerUnaryCall<{ service?: string }, unknown>,
      callback: grpc.sendUnaryData<unknown>,
    ) {
      const name = call.request.service ?? "";
      if (name !== "" && name !== RLS_SERVICE) {
        callback({ code: grpc.status.NOT_FOUND, details: `unknown service "${name}"` });
        return;
      }
      // SERVING 1, NOT_SERVING 2 (while shutting down).
      callback(null, { status: serving ? 1 : 2 });
    },
  });
  let closing: Promise<void> | undefined;
  return {
    listen(host, port) {
      const address = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
      return new Promise((resolve, reject) => {
        server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, bound) =>
          err ? reject(err) : resolve(bound),
        );
      });
    },
    close(graceMs) {
      closing ??= new Promise<void>((resolve) => {
        serving = false;
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      return closing;
    },
  };
}
