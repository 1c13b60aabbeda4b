// The gRPC load generator: ShouldRateLimit calls (Envoy's rate limit service protocol, through
// @grpc/grpc-js and the server's .proto files) kept `connections` in flight for a while.
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ROOT, makeKeys } from "../lib/util.mjs";

const PROTO_DIR = join(ROOT, "packages/server/proto");

/**
 * Decisions/s and latency of the gRPC server at `address`: `connections` calls in flight on one
 * channel (as one Envoy multiplexes its calls on one HTTP/2 connection), each asking for a
 * descriptor `remote_address=<identifier>` of domain `domain`, cycling over `distinct`
 * identifiers (prebuilt requests), for `durationS` seconds.
 */
export async function load({ address, domain, distinct, durationS, connections }) {
  const definition = protoLoader.loadSync(join(PROTO_DIR, "envoy/service/ratelimit/v3/rls.proto"), {
    keepCase: false,
    longs: String,
    enums: Number,
    defaults: true,
    includeDirs: [PROTO_DIR],
  });
  const Service =
    grpc.loadPackageDefinition(definition).envoy.service.ratelimit.v3.RateLimitService;
  const client = new Service(address, grpc.credentials.createInsecure());
  await new Promise((resolve, reject) =>
    client.waitForReady(Date.now() + 10_000, (err) => (err ? reject(err) : resolve())),
  );
  const requests = makeKeys(distinct).map((value) => ({
    domain,
    descriptors: [{ entries: [{ key: "remote_address", value }] }],
  }));
  const latencies = [];
  let total = 0;
  let errors = 0;
  let overLimit = 0;
  let next = 0;
  const end = Date.now() + durationS * 1000;
  const worker = async () => {
    while (Date.now() < end) {
      const req = requests[next++ % requests.length];
      const t0 = performance.now();
      try {
        const r = await new Promise((resolve, reject) =>
          client.ShouldRateLimit(req, (err, res) => (err ? reject(err) : resolve(res))),
        );
        if (r.overallCode !== 1) overLimit++;
      } catch {
        errors++;
      }
      latencies.push(performance.now() - t0);
      total++;
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: connections }, worker));
  const seconds = (Date.now() - started) / 1000;
  client.close();
  latencies.sort((a, b) => a - b);
  const at = (q) =>
    Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0);
  return { rps: total / seconds, total, p50: at(0.5), p99: at(0.99), non2xx: overLimit, errors };
}
