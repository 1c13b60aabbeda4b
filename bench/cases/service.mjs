// The HTTP load generator: autocannon against POST /v1/limit (one identifier per request) or
// against POST /json (the Envoy rate limit service's JSON door, one descriptor per request).
import autocannon from "autocannon";
import { makeKeys } from "../lib/util.mjs";

/**
 * Requests/s and latency of `url` under autocannon: POST /v1/limit with `{ policy, key }`, or
 * with `domain`, POST /json with a RateLimitRequest of one descriptor `remote_address=<key>`.
 * Each connection cycles through `distinct` prebuilt requests, one identifier each: a request
 * built per call (setupRequest) costs autocannon more than a bare Fastify route costs the server.
 */
export async function load({ url, token, policy, domain, distinct, durationS, connections }) {
  const headers = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const requests = makeKeys(distinct).map((key) =>
    domain
      ? {
          method: "POST",
          path: "/json",
          headers,
          body: JSON.stringify({
            domain,
            descriptors: [{ entries: [{ key: "remote_address", value: key }] }],
          }),
        }
      : { method: "POST", path: "/v1/limit", headers, body: JSON.stringify({ policy, key }) },
  );
  const cpu = process.cpuUsage();
  const result = await autocannon({ url, connections, duration: durationS, requests });
  const used = process.cpuUsage(cpu);
  return {
    // autocannon's own CPU (this process) per request, in µs.
    loadUs: (used.user + used.system) / Math.max(1, result.requests.total),
    rps: result.requests.average,
    total: result.requests.total,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}
