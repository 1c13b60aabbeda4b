/**
 * A separate OS process for the multi-process tests: `node --import tsx worker.ts`, forked with
 * IPC. Env: REDIS_URL (standalone) or CLUSTER_NODES (JSON [{host, port}]); SKEW_MS shifts this
 * process's clock (Date.now) to simulate a skewed app server; CLIENT the client connected at
 * start (test/support/redis-clients.ts; others connect on their first task).
 * Messages in: { id, policy, key, n, client? } → fires n concurrent limit() calls through that
 * client, answers { id, allowed, reasons } (reasons: count per decision reason).
 */
import {
  type Limiter,
  type PolicyInput,
  type RedisStore,
  createLimiter,
  redisStore,
} from "../../src/index.js";
import {
  ALL_CLIENTS,
  type ClientKind,
  clientKind,
} from "../../../../test/support/redis-clients.js";

const skew = Number(process.env.SKEW_MS ?? 0);
if (skew !== 0) {
  const real = Date.now.bind(Date);
  Date.now = () => real() + skew;
}

const nodes = process.env.CLUSTER_NODES
  ? (JSON.parse(process.env.CLUSTER_NODES) as Array<{ host: string; port: number }>)
  : undefined;

/** One client (of the kind a task names) and its store, made on the first task that names it. */
interface Connection {
  readonly kind: ClientKind;
  readonly client: Awaited<ReturnType<ClientKind["standalone"]>>;
  readonly store: RedisStore;
  readonly limiters: Map<string, Limiter>;
}
const connections = new Map<string, Promise<Connection>>();

function connection(name: string): Promise<Connection> {
  let c = connections.get(name);
  if (c === undefined) {
    const kind = clientKind(name);
    c = (async () => {
      const client = nodes
        ? await kind.cluster(nodes)
        : await kind.standalone(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
      const store = redisStore({
        client,
        maxBatch: Number(process.env.MAX_BATCH ?? 16),
        timeoutMs: 5000,
      });
      return { kind, client, store, limiters: new Map() };
    })();
    connections.set(name, c);
  }
  return c;
}

interface Task {
  id: number;
  /** The client to decide through (test/support/redis-clients.ts); default the first. */
  client?: string;
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
    void Promise.all(
      [...connections.values()].map(async (p) => {
        const c = await p;
        await c.store.close();
        await c.kind.close(c.client);
      }),
    ).then(() => process.exit(0));
    return;
  }
  void (async () => {
    const conn = await connection(msg.client ?? ALL_CLIENTS[0]!.name);
    let limiter = conn.limiters.get(msg.policy.name);
    if (!limiter) {
      limiter = createLimiter({ store: conn.store, policy: msg.policy });
      conn.limiters.set(msg.policy.name, limiter);
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

void connection(process.env.CLIENT ?? ALL_CLIENTS[0]!.name).then(() =>
  process.send!({ ready: true }),
);
