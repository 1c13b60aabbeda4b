// What limits each target when it is missed, from profiles taken on this machine (2 cores
// shared by Node, Redis and the load generator). Each entry takes the run's results, so that
// the explanation quotes this run's figures. Keys are the target ids of lib/report.mjs.

const fmt = (ms) => (ms === undefined ? "?" : `${(ms * 1000).toFixed(0)} µs`);
const us = (x) => (x === undefined || Number.isNaN(x) ? "?" : `${x.toFixed(1)} µs`);

export const LIMITS = {
  "redis-256": (r) => {
    const s = r.redis[256]?.sluice ?? {};
    const f = r.redis[256]?.rlf ?? {};
    const busy = (x) => `${((x.nodeCpuUs * x.ops) / 1e4).toFixed(0)}%`;
    const rbusy = (x) => `${((x.redisCpuUs * x.ops) / 1e4).toFixed(0)}%`;
    return (
      `CPU per decision: sluice ${us(s.nodeCpuUs)} in Node + ${us(s.redisCpuUs)} in Redis, ` +
      `RateLimiterRedis ${us(f.nodeCpuUs)} + ${us(f.redisCpuUs)}; at sluice's rate Node is busy ` +
      `${busy(s)} of a core and Redis ${rbusy(s)}, on 2 cores that also carry the kernel's ` +
      `loopback networking. Batching removes Redis's per-command cost, but not the script's work ` +
      `per decision, nor Node's: ioredis encodes every argument (a key and 4 op values per ` +
      `decision) into one concatenated RESP string (Command + writeUtf8String: ~17% of Node's ` +
      `busy time), and each decision allocates a queue entry, promises, reply objects and a ` +
      `Decision (GC ~11%).`
    );
  },
  "redis-1-p50": (r) => {
    const s = r.redis[1]?.sluice ?? {};
    const raw = r.redis[1]?.raw ?? {};
    return (
      `One decision at a time pays what the raw call does not. In Redis: the batch script's ` +
      `fixed cost per call (its body creates ~33 closures and tables, then decodes the policy ` +
      `spec and the operation), which makes it ~1.5× as slow as the minimal script per call under ` +
      `redis-benchmark. In Node: the setImmediate flush, a timeout timer, a 6-value reply and ` +
      `the limiter's Decision. CPU per decision: Redis ${us(s.redisCpuUs)} vs ` +
      `${us(raw.redisCpuUs)}, Node ${us(s.nodeCpuUs)} vs ${us(raw.nodeCpuUs)}.`
    );
  },
  "redis-16-p99": (r) => {
    const s = r.redis[16]?.sluice ?? {};
    const f = r.redis[16]?.rlf ?? {};
    return (
      `At 16 in flight a batch is answered all at once: each decision waits for the setImmediate ` +
      `flush and for the script to run the whole batch (p50 ${fmt(s.p50)} vs ${fmt(f.p50)}), ` +
      `and the tail adds scheduling on 2 shared cores (GC pauses, Redis and Node preempting ` +
      `each other).`
    );
  },
  "memory-ops": () =>
    `RateLimiterMemory keeps a record for the whole 60 s window and bumps its counter in place. ` +
    `sluice's GCRA state for 1000/min lives 60 ms after each hit, so nearly every decision inserts ` +
    `a key into a 100k-entry Map and the sweep deletes an expired one; a rewrite moves the key ` +
    `to the end of the Map (delete + set) to keep least-recently-written order for eviction. ` +
    `That Map churn (hash-table holes and rehashes), the stored values promoted to the old ` +
    `generation (GC 15% for gcra, 28% for fixed-window) and the limiter's two promises and ` +
    `Decision per call are the cost. Measured on a copy: writing in place (eviction by first ` +
    `insertion instead of last write) +55% for gcra.`,
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
