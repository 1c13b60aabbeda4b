/**
 * A separate OS process for the multi-process tests: `node --import tsx worker.ts`, forked with
 * IPC. Env: REDIS_URL (standalone) or CLUSTER_NODES (JSON [{host, port}]); SKEW_MS shifts this
 * process's clock (Date.now) to simulate a skewed app server.
 * Messages in: { id, policy, key, n } → fires n concurrent limit() calls, answers
 * { id, allowed, reasons } (reasons: count per decision reason).
 */
import { Cluster, Redis } from "ioredis";
import { type Limiter, type PolicyInput, createLimiter, redisStore } from "../../src/index.js";

const skew = Number(process.env.SKEW_MS ?? 0);
if (skew !== 0) {
  const real = Date.now.bind(Date);
  Date.now = () => real() + skew;
}

const client = process.env.CLUSTER_NODES
  ? new Cluster(JSON.parse(process.env.CLUSTER_NODES) as Array<{ host: string; port: number }>)
  : new Redis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
client.on("error", () => {});
const store = redisStore({
  client,
  maxBatch: Number(process.env.MAX_BATCH ?? 16),
  timeoutMs: 5000,
});
const limiters = new Map<string, Limiter>();

interface Task {
  id: number;
  policy: PolicyInput;
  key: string;
  n: number;
  /**
   * Paced instead of all at once: `n` calls every `everyMs` for `forMs`; the answer then also
   * counts what was admitted per window of `windowMs` (by this machine's clock).
   */
  pace?: { everyMs: number; forMs: number; windowMs: number };
}

process.on("message", (msg: Task | "exit") => {
  if (msg === "exit") {
    void store.close().then(() => {
      client.disconnect();
      process.exit(0);
    });
    return;
  }
  void (async () => {
    let limiter = limiters.get(msg.policy.name);
    if (!limiter) {
      limiter = createLimiter({ store, policy: msg.policy });
      limiters.set(msg.policy.name, limiter);
    }
    const l = limiter;
    if (msg.pace) {
      const { everyMs, forMs, windowMs } = msg.pace;
      const windows: Record<number, number> = {};
      const reasons: Record<string, number> = {};
      let allowed = 0;
      const end = Date.now() + forMs;
      while (Date.now() < end) {
        const ds = await Promise.all(Array.from({ length: msg.n }, () => l.limit(msg.key)));
        const now = Date.now();
        for (const d of ds) {
          if (d.reason) reasons[d.reason] = (reasons[d.reason] ?? 0) + 1;
          if (d.allowed) {
            allowed++;
            // The window a fixed-window decision counted in: the one whose end is nearest to
            // now + resetAfterMs (the decision may have been made a little before now).
            const w = Math.round((now + d.resetAfterMs) / windowMs) - 1;
            windows[w] = (windows[w] ?? 0) + 1;
          }
        }
        await new Promise((r) => setTimeout(r, everyMs));
      }
      process.send!({ id: msg.id, allowed, reasons, windows });
      return;
    }
    const decisions = await Promise.all(
      Array.from({ length: msg.n }, async (_, i) => {
        // Spread the calls over a few event-loop turns so that batches of processes interleave.
        if (i % 7 === 0) await new Promise((r) => setImmediate(r));
        return l.limit(msg.key);
      }),
    );
    const reasons: Record<string, number> = {};
    for (const d of decisions) if (d.reason) reasons[d.reason] = (reasons[d.reason] ?? 0) + 1;
    process.send!({ id: msg.id, allowed: decisions.filter((d) => d.allowed).length, reasons });
  })();
});

void client.ping().then(() => process.send!({ ready: true }));
