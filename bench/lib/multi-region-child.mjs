// One region's process of the multi-region harness (multi-region.mjs starts three of them, with
// IPC): it reaches its own region's Redis directly and the other two through the harness's delay
// proxies, decides the hot key at the rate the parent sets, and reports what it admitted per
// window, its latencies and its store's figures. `kind: "sluice"` runs a `multiRegionStore` over
// one `redisStore` per region, each on an ioredis client, or a node-redis one (`client:
// "node-redis"`); `kind: "upstash"` runs @upstash/ratelimit's MultiRegionRatelimit
// over the REST fixture of each region (this process serves its own region's fixture; it is a
// TypeScript file: the parent starts this process with `--import tsx` for that kind).
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { Redis } from "ioredis";

/** Sends a message to the parent and resolves once it is on its way. */
function send(message) {
  return new Promise((resolve) => process.send(message, () => resolve()));
}

// The parent went away (it failed, or was killed): nothing is left to do here.
process.on("disconnect", () => process.exit(0));

let setup;
let state;

/** What a message asks, answered by a message back (`error` when it failed). */
async function handle(message) {
  switch (message.type) {
    case "init":
      return { type: "up", ...(await init(message)) };
    case "links":
      await connect(message.ports);
      return { type: "ready" };
    case "run":
      return { type: "hot", ...(await runHot(message)) };
    case "cold":
      return { type: "cold", ...(await runCold(message)) };
    case "stop":
      await stop();
      return { type: "stopped" };
    default:
      throw new Error(`unknown message ${message.type}`);
  }
}

process.on("message", (message) => {
  handle(message).then(
    (reply) => send(reply),
    (err) => send({ type: "error", message: String(err?.stack ?? err) }),
  );
});

/** Starts what this region serves (the REST fixture, for upstash); answers the port others reach. */
async function init(message) {
  setup = message;
  if (setup.kind === "upstash") {
    const { startUpstashRest } = await import(pathToFileURL(setup.restFixture).href);
    state = { rest: await startUpstashRest({ redisUrl: `redis://127.0.0.1:${setup.redisPort}` }) };
    return { port: Number(new URL(state.rest.url).port) };
  }
  state = {};
  return { port: setup.redisPort };
}

/**
 * A connected client of the server at `port`: ioredis (the default) or node-redis. Either way a
 * link cut and healed reconnects soon (every 50 ms), not after the client's growing back-off;
 * node-redis also gives up on a connection that does not answer within 500 ms (a cut link holds
 * new connections silent), where its default would wait 5 s.
 */
async function redisClient(kind = "ioredis", port) {
  if (kind === "node-redis") {
    const { createClient } = await import("redis");
    const client = createClient({
      socket: { host: "127.0.0.1", port, connectTimeout: 500, reconnectStrategy: () => 50 },
    });
    // A cut link's errors are the scenario's; the store reports what it could not decide.
    client.on("error", () => {});
    await client.connect();
    return client;
  }
  const client = new Redis({ host: "127.0.0.1", port, lazyConnect: true, retryStrategy: () => 50 });
  await client.connect();
  return client;
}

/** Builds the limiter: this region's server directly, the others' through `ports` (the proxies). */
async function connect(ports) {
  const { regions, region, policy } = setup;
  if (setup.kind === "upstash") {
    const { Redis: UpstashRedis } = await import("@upstash/redis");
    const { MultiRegionRatelimit } = await import("@upstash/ratelimit");
    // Its calls to other regions: every HTTP request @upstash/redis makes to another's REST.
    state.remoteCalls = 0;
    const fetch = globalThis.fetch;
    globalThis.fetch = (input, init) => {
      if (!String(input.url ?? input).startsWith(state.rest.url)) state.remoteCalls++;
      return fetch(input, init);
    };
    const url = (r) => (r === region ? state.rest.url : `http://127.0.0.1:${ports[r]}`);
    const limit = policy.rules[0].limit;
    state.ratelimit = new MultiRegionRatelimit({
      redis: regions.map(
        (r) => new UpstashRedis({ url: url(r), token: state.rest.token, enableTelemetry: false }),
      ),
      limiter: MultiRegionRatelimit.fixedWindow(limit, "1 s"),
      // Its defaults otherwise: an ephemeral cache (a key denied is denied here until its
      // window ends, without a call) and a 5 s timeout, after which a decision is allowed.
    });
    // Loads the script in every region before the run.
    await state.ratelimit.limit("warm-up");
    state.decide = async (key) => {
      const r = await state.ratelimit.limit(key);
      // Its background sync (a region cut off fails it once the link heals): not this decision's.
      r.pending?.catch(() => {});
      // Upstash answers `reason: "timeout"` (allowed) when no region answered within its timeout.
      return { allowed: r.success, storeError: r.reason === "timeout" };
    };
    return;
  }
  const sluice = await import(pathToFileURL(setup.sluiceDist).href);
  state.clients = {};
  const stores = {};
  for (const r of regions) {
    const client = await redisClient(setup.client, r === region ? setup.redisPort : ports[r]);
    state.clients[r] = client;
    stores[r] = sluice.redisStore({ client, logger: false });
  }
  // Every region's script loaded (a first call loads it) before the run, with a policy of its own.
  const warm = sluice.definePolicy({
    name: "warm-up",
    algorithm: "fixed-window",
    rules: [{ limit: 10, period: "1s" }],
  });
  for (const r of regions)
    await sluice.createLimiter({ policy: warm, store: stores[r] }).limit(region);
  state.regionStores = stores;
  state.policy = sluice.definePolicy(policy);
  state.store = sluice.multiRegionStore({
    region,
    regions: stores,
    mode: setup.mode,
    ...(setup.borrow !== undefined ? { borrow: setup.borrow } : {}),
    homes: { [policy.name]: setup.home },
  });
  state.limiter = sluice.createLimiter({ policy: state.policy, store: state.store });
  state.decide = async (key) => {
    const d = await state.limiter.limit(key);
    return { allowed: d.allowed, storeError: d.reason === "store-error" };
  };
}

/** The store's figures so far (sluice), or the calls to other regions so far (upstash). */
function stats() {
  if (state.remoteCalls !== undefined) return { crossRegionCalls: state.remoteCalls };
  return state.store?.regionStats(state.policy);
}

/**
 * Decides the hot key `rate` times a second from `t0` for `windows` one-second windows, in
 * batches every `batchMs` (each decision awaited on its own), and counts per window: decisions
 * (by when they were asked), admitted by when they were asked and by when they were answered,
 * failures (rejected) and store errors (decided by `onStoreError`, or Upstash's timeout); and every decision's latency (ms).
 */
async function runHot({ t0, windows, rate, batchMs, key }) {
  const slots = windows + 1;
  const tally = {
    decisions: new Array(slots).fill(0),
    admittedAsked: new Array(slots).fill(0),
    admittedDone: new Array(slots).fill(0),
    failed: new Array(slots).fill(0),
    storeErrors: new Array(slots).fill(0),
  };
  // Latencies of the first window (the key is new) apart from the others' (it is hot).
  const latencies = [];
  const firstLatencies = [];
  const pending = new Set();
  const windowOf = (t) => Math.min(slots - 1, Math.max(0, Math.floor((t - t0) / 1000)));
  const end = t0 + windows * 1000;
  let fired = 0;
  const fire = () => {
    const asked = Date.now();
    const w = windowOf(asked);
    const started = performance.now();
    tally.decisions[w]++;
    const p = state.decide(key).then(
      ({ allowed, storeError }) => {
        const took = performance.now() - started;
        (w === 0 ? firstLatencies : latencies).push(took);
        if (storeError) tally.storeErrors[w]++;
        if (allowed) {
          tally.admittedAsked[w]++;
          tally.admittedDone[windowOf(Date.now())]++;
        }
      },
      () => {
        (w === 0 ? firstLatencies : latencies).push(performance.now() - started);
        tally.failed[w]++;
      },
    );
    pending.add(p);
    void p.finally(() => pending.delete(p));
  };
  await new Promise((resolve) => {
    const tick = () => {
      const now = Date.now();
      const due = Math.floor((rate * (Math.min(now, end) - t0)) / 1000);
      while (fired < due) {
        fired++;
        fire();
      }
      if (now >= end) resolve();
      else setTimeout(tick, now < t0 ? t0 - now : batchMs);
    };
    tick();
  });
  await Promise.all(pending);
  return { ...tally, latencies, firstLatencies, stats: stats() };
}

/** Decides `count` new keys one at a time (`prefix`0, …): each one's latency (ms), and whether admitted. */
async function runCold({ count, prefix }) {
  const latencies = [];
  let admitted = 0;
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    if ((await state.decide(`${prefix}${i}`)).allowed) admitted++;
    latencies.push(performance.now() - started);
  }
  return { latencies, admitted, stats: stats() };
}

async function stop() {
  await state?.store?.close();
  for (const s of Object.values(state?.regionStores ?? {})) await s.close?.();
  // ioredis's disconnect; node-redis's destroy (its disconnect is deprecated from 5 on).
  for (const c of Object.values(state?.clients ?? {})) {
    if (typeof c.destroy === "function") c.destroy();
    else c.disconnect();
  }
  await state?.rest?.stop();
}
