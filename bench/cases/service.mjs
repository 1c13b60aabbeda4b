// The HTTP load generator: autocannon against POST /v1/limit, one identifier per request.
import autocannon from "autocannon";
import { makeKeys } from "../lib/util.mjs";

/** Requests/s and latency of `url` (POST /v1/limit with { policy, key }) under autocannon. */
export async function load({ url, token, policy, keyCount, durationS, connections }) {
  const keys = makeKeys(keyCount);
  let i = 0;
  const headers = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const result = await autocannon({
    url,
    connections,
    duration: durationS,
    requests: [
      {
        method: "POST",
        path: "/v1/limit",
        headers,
        setupRequest: (req) => ({
          ...req,
          body: JSON.stringify({ policy, key: keys[i++ % keys.length] }),
        }),
      },
    ],
  });
  return {
    rps: result.requests.average,
    total: result.requests.total,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}
