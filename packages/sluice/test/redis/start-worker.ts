/**
 * A process that decides from its very first moment, for the cold-start tests: it builds its
 * client, store and limiters with the defaults (no waiting for a connection) and at once fires
 * `N` concurrent `limit()` calls at one key per policy. `node --import tsx start-worker.ts`,
 * forked with IPC.
 *
 * Env: REDIS_URL (standalone) or CLUSTER_NODES (JSON [{host, port}]); POLICIES (JSON
 * PolicyInput[]); KEY; N. Sends `{ firing: true }` just before the calls, then
 * `{ results: { [policy]: { allowed, reasons } } }` and exits.
 */
import { Cluster, Redis } from "ioredis";
import { type PolicyInput, createLimiter, redisStore } from "../../src/index.js";

const client = process.env.CLUSTER_NODES
  ? new Cluster(JSON.parse(process.env.CLUSTER_NODES) as Array<{ host: string; port: number }>)
  : new Redis(process.env.REDIS_URL!);
client.on("error", () => {});
const store = redisStore({ client });
const policies = JSON.parse(process.env.POLICIES!) as PolicyInput[];
const key = process.env.KEY!;
const n = Number(process.env.N);

process.send!({ firing: true });
const results: Record<
  string,
  { allowed: number; reasons: Record<string, number>; errors?: string[] }
> = {};
await Promise.all(
  policies.map(async (policy) => {
    const errors = new Set<string>();
    const limiter = createLimiter({
      store,
      policy,
      onError: (e) => errors.add(e instanceof Error ? e.message : String(e)),
    });
    const ds = await Promise.all(Array.from({ length: n }, () => limiter.limit(key)));
    const reasons: Record<string, number> = {};
    for (const d of ds) if (d.reason) reasons[d.reason] = (reasons[d.reason] ?? 0) + 1;
    results[policy.name] = {
      allowed: ds.filter((d) => d.allowed).length,
      reasons,
      ...(errors.size > 0 ? { errors: [...errors] } : {}),
    };
  }),
);
process.send!({ results }, () => {
  void store.close().then(() => {
    client.disconnect();
    process.exit(0);
  });
});
