// What limits each target when it is missed, from profiles taken on this machine (2 cores
// shared by Node, Redis and the load generator). Each entry takes the run's results, so that
// the explanation quotes this run's figures. Keys are the target ids of lib/report.mjs.

const us = (x) => (x === undefined || Number.isNaN(x) ? "?" : `${x.toFixed(1)} µs`);

export const LIMITS = {
  "redis-256": (r) => {
    const s = r.redis[256]?.sluice ?? {};
    const f = r.redis[256]?.rlf ?? {};
    return (
      `CPU per decision: sluice ${us(s.nodeCpuUs)} in Node + ${us(s.redisCpuUs)} in Redis, ` +
      `RateLimiterRedis ${us(f.nodeCpuUs)} + ${us(f.redisCpuUs)}. Batching removes Redis's per-command ` +
      `cost, but not the script's work per decision, nor Node's: ioredis encodes every argument ` +
      `(a key and 4 op values per decision) into one concatenated string that writeUtf8String ` +
      `flattens (the top item of the profile), then 6 reply integers, a promise and a Decision ` +
      `per decision. Node and Redis share 2 cores, and a batch's reply is processed before the ` +
      `next batch is full, so they partly wait for each other.`
    );
  },
  "redis-1-p50": (r) => {
    const s = r.redis[1]?.sluice ?? {};
    const raw = r.redis[1]?.raw ?? {};
    return (
      `One decision at a time pays what the raw call does not: the wait for the setImmediate ` +
      `flush, the general batch script (spec and operation decoding, PEXPIRE arithmetic) instead ` +
      `of a 10-line one, a 6-value reply, a timeout timer, and the limiter's Decision. Redis CPU ` +
      `per decision: sluice ${us(s.redisCpuUs)}, raw ${us(raw.redisCpuUs)}; Node CPU ` +
      `${us(s.nodeCpuUs)} vs ${us(raw.nodeCpuUs)}.`
    );
  },
  "redis-16-p99": () =>
    `The tail at 16 in flight is set by scheduling on 2 shared cores (GC pauses of the ` +
    `measuring process, Redis and Node preempting each other) more than by the store; a batch ` +
    `of 16 also waits for its slowest member's reply processing.`,
  "memory-ops": () =>
    `Per decision the memory store does 3 Map operations on a 100k-entry Map (get, then delete ` +
    `and set to keep least-recently-written order for eviction), allocates the stored state ` +
    `(a heap number for GCRA; a KeyState with arrays for the others), which survives into the ` +
    `old generation (GC is 15% of CPU for gcra, 28% for fixed-window), and sweeps 2 entries per ` +
    `new key; then the limiter builds a Decision behind two promises. RateLimiterMemory bumps a ` +
    `small integer in place. Measured on the side: updating in place instead of moving the key ` +
    `(giving up exact least-recently-written eviction) +60% for gcra.`,
  "memory-heap": () => `A GCRA key is a Map entry holding one number (the TAT).`,
  "redis-bytes-gcra": () =>
    `Same key length; the value differs: sluice stores a 13-digit TAT, an integer-encoded ` +
    `object (16 B), while the peers' counter is a small integer that Redis shares (below ` +
    `10,000: no allocation). Keeping the TAT in the key's expiry (PEXPIREAT) with a small shared ` +
    `value would close the gap where the emission interval is a whole number of ms.`,
  "redis-bytes-fixed-window": () =>
    `sluice packs window start and count into one 13-digit integer (16 B object); the peers ` +
    `keep a small shared counter and let the key's TTL mark the window.`,
  "redis-bytes-sliding-window": () =>
    `sliding-window keeps "start previous current" as a string (embstr) on one key.`,
  "deny-cache": () => `The first denial of the key must still reach Redis once per retry period.`,
  "service-sluice": () =>
    `Per request the service authenticates the app (SHA-256 of the API key), validates the body ` +
    `with zod, decides through the limiter, counts Prometheus metrics and formats rate-limit ` +
    `headers; the bare route only parses JSON. autocannon, the server and Redis share 2 cores.`,
  service: () => "",
};
