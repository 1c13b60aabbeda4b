/**
 * Sentinel failovers under load (issue "exact through operations", item 5): how many charges
 * that Redis acknowledged are gone after the switch. `SENTINEL FAILOVER` both ways, then a
 * crashed master (SIGKILL). The store watches the sentinels and stops writing to the old master
 * at the first sign of a failover; decisions meanwhile follow onStoreError.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Decision,
  type Limiter,
  type PolicyInput,
  type RedisClient,
  createLimiter,
} from "../../src/index.js";
import { waitFor } from "../../../../test/support/ports.js";
import { CLIENTS } from "../../../../test/support/redis-clients.js";
import { type RedisSentinel, startSentinel } from "../../../../test/support/redis-sentinel.js";
import { Owned, lostCharges } from "./helpers.js";

const run = Date.now().toString(36);
let sentinel: RedisSentinel;
const owned = new Owned();

/** An ioredis client of the sentinels ({@link RedisSentinel.ioredis}). */
const sentinelClient = () => owned.client(sentinel.ioredis(), (c) => c.disconnect());

beforeAll(async () => {
  sentinel = await startSentinel("sluicefo");
}, 120_000);

afterAll(async () => {
  await owned.close();
  await sentinel?.stop();
});

/** Two processes' worth of traffic (two clients and stores) over 200 identifiers. */
function traffic(ls: Limiter[]) {
  let stop = false;
  const acked = new Map<string, number>();
  const reasons = new Map<string, number>();
  let decisions = 0;
  const note = (id: string, d: Decision) => {
    decisions++;
    if (d.reason !== undefined) reasons.set(d.reason, (reasons.get(d.reason) ?? 0) + 1);
    else if (d.allowed) acked.set(id, (acked.get(id) ?? 0) + 1);
  };
  const loops = ls.map(async (l, li) => {
    while (!stop) {
      await Promise.all(
        Array.from({ length: 100 }, (_, i) => {
          const id = `u${li * 100 + i}`;
          return l.limit(id).then((d) => note(id, d));
        }),
      );
      // A steady load (~40,000 decisions/s in all) that a replica on this machine keeps up
      // with: what a failover loses beyond the replica's lag is what is measured.
      await new Promise((r) => setTimeout(r, 5));
    }
  });
  return {
    acked,
    reasons,
    get decisions() {
      return decisions;
    },
    async stop() {
      stop = true;
      await Promise.all(loops);
    },
  };
}

async function lost(l: Limiter, acked: Map<string, number>): Promise<number> {
  // Answered by Redis (after a crash the client may still be reconnecting).
  await waitFor(async () => (await l.peek("probe")).reason === undefined, 20_000, 20);
  return lostCharges(l, acked);
}

describe("sentinel failovers under load", () => {
  const policy = (name: string): PolicyInput => ({
    name: `sfo${run}-${name}`,
    algorithm: "fixed-window" as const,
    rules: [{ limit: 1e9, period: "24h" }],
    onStoreError: "deny",
  });

  /**
   * Two stores (two clients from `client`) under load through one `SENTINEL FAILOVER`: the
   * acknowledged charges lost, within {@link LOSS_BOUND}.
   */
  async function failoverUnderLoad(label: string, client: () => Promise<RedisClient>) {
    const ls = await Promise.all(
      [0, 1].map(async () => {
        const s = owned.store({ client: await client(), heartbeatMs: 0 });
        return createLimiter({ store: s, policy: policy(label.replace(/[^\w-]/g, "")) });
      }),
    );
    await Promise.all(ls.map((l) => l.ready()));
    await sentinel.synced();
    const t = traffic(ls);
    await waitFor(() => t.decisions > 3000, 30_000, 20);
    await sentinel.failover();
    const at = t.decisions;
    await waitFor(() => t.decisions > at + 3000, 30_000, 20);
    await t.stop();
    const missing = await lost(ls[0]!, t.acked);
    console.log(
      `SENTINEL FAILOVER ${label}: ${t.decisions} decisions, reasons ${JSON.stringify(Object.fromEntries(t.reasons))}, acknowledged charges lost: ${missing}`,
    );
    expect(missing).toBeLessThanOrEqual(LOSS_BOUND);
  }

  it.each(["one way", "and back"])(
    "SENTINEL FAILOVER (%s): acknowledged charges are kept",
    (label) => failoverUnderLoad(label, () => Promise.resolve(sentinelClient())),
    120_000,
  );

  it.each(CLIENTS.filter((k) => k.sentinel !== undefined && k.family === "node-redis"))(
    "SENTINEL FAILOVER through $name (the watch over its own sockets): acknowledged charges are kept",
    (kind) =>
      failoverUnderLoad(`through ${kind.name}`, async () =>
        owned.client(
          await kind.sentinel!(sentinel.sentinels, sentinel.name, { reconnectMs: 50 }),
          (c) => kind.close(c),
        ),
      ),
    120_000,
  );

  // Last: it kills the master.
  it("a crashed master (SIGKILL): acknowledged charges are kept", async () => {
    const ls = [0, 1].map(() => {
      const s = owned.store({ client: sentinelClient(), heartbeatMs: 0 });
      return createLimiter({ store: s, policy: policy("crash") });
    });
    await Promise.all(ls.map((l) => l.ready()));
    // The replica has caught up with the failovers before (a crash loses what it lacks).
    await sentinel.synced();
    const t = traffic(ls);
    await waitFor(() => t.decisions > 3000, 30_000, 20);
    const before = await sentinel.masterPort();
    const victim = [sentinel.master, sentinel.replica].find((n) => n.port === before)!;
    victim.kill();
    await waitFor(async () => (await sentinel.masterPort()) !== before, 30_000, 50);
    const at = t.acked.size;
    const acked = () => [...t.acked.values()].reduce((a, b) => a + b, 0);
    const ackedAtSwitch = acked();
    // Decided by the new master again. (With ioredis's `failoverDetector`, a `+switch-master`
    // that lands while the client reconnects ends the client for good; the store connects it
    // again. On a busy machine this failed here 3 times in 3 before that.)
    await waitFor(() => acked() > ackedAtSwitch + 3000, 30_000, 20);
    await t.stop();
    const missing = await lost(ls[0]!, t.acked);
    console.log(
      `crashed master: ${t.decisions} decisions (${at} identifiers), reasons ${JSON.stringify(Object.fromEntries(t.reasons))}, acknowledged charges lost: ${missing}`,
    );
    expect(missing).toBeLessThanOrEqual(LOSS_BOUND);
  }, 120_000);
});

/**
 * The most acknowledged charges a failover may lose in these tests. Measured: none (see
 * docs/redis.md); the margin allows for a slow CI machine, where the sentinels' first message
 * can be read late. Without the watch a SENTINEL FAILOVER loses ~10⁵ here.
 */
const LOSS_BOUND = 100;
