// Envoy's rate limit protocol as protobufjs reads the server's .proto files: the bench's own
// encoder of requests and constant responses (independent of the server's codec).
import { join } from "node:path";
import protobuf from "protobufjs";
import { ROOT } from "./util.mjs";

const PROTO_DIR = join(ROOT, "packages/server/proto");

/** The request and response types of `envoy.service.ratelimit.v3`. */
export function loadRls() {
  const root = new protobuf.Root();
  // google/protobuf/*.proto come with protobufjs.
  root.resolvePath = (_origin, target) =>
    target.startsWith("google/protobuf/") ? target : join(PROTO_DIR, target);
  root.loadSync(["envoy/service/ratelimit/v3/rls.proto"]);
  return {
    Request: root.lookupType("envoy.service.ratelimit.v3.RateLimitRequest"),
    Response: root.lookupType("envoy.service.ratelimit.v3.RateLimitResponse"),
  };
}

/** A gRPC length-prefixed message (uncompressed). */
export function grpcFrame(bytes) {
  const out = Buffer.alloc(5 + bytes.length);
  out.writeUInt32BE(bytes.length, 1);
  Buffer.from(bytes).copy(out, 5);
  return out;
}

/**
 * The constant answer of the bare baselines: shaped as sluice's answer to the bench's request
 * (overall OK, one status with its limit, remaining and reset, the two IETF headers).
 */
export const CONSTANT_RESPONSE = {
  overallCode: 1,
  statuses: [
    {
      code: 1,
      currentLimit: { requestsPerUnit: 1_000_000, unit: 1 },
      limitRemaining: 999_999,
      durationUntilReset: { seconds: 1 },
    },
  ],
  responseHeadersToAdd: [
    { key: "RateLimit-Policy", value: '"bench-h2.remote_address";q=1000000;w=1' },
    { key: "RateLimit", value: '"bench-h2.remote_address";r=999999;t=1' },
  ],
};

/** The constant answer, encoded and framed. */
export function constantResponseFrame() {
  const { Response } = loadRls();
  return grpcFrame(Response.encode(Response.fromObject(CONSTANT_RESPONSE)).finish());
}
