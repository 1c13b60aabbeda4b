// The multi-region harness (issue 34), shared by the bench case (cases/multi-region.mjs) and the
// test (packages/sluice/test/redis/multi-region.test.ts): three regions (eu, us, ap), each its
// own redis-server on 127.0.0.1, and one process per region (multi-region-child.mjs, over IPC)
// that reaches its own region directly and the other two over a WAN link: a delay proxy
// (delay-proxy.mjs) per direction of each pair of regions, adding `delayMs` each way. The parent
// drives: each process decides one hot key at its share of the demand (1:1:4 by default), in
// one-second windows aligned to the wall clock; in window `cutWindow` the hot key's home is cut
// off from the other two (every link to and from it, both ways: a partition, not a one-way
// loss); then one region decides new keys homed elsewhere, one at a time (cold keys).
// Everything it starts is stopped at the end, also on failure.
import { fork } from "node:child_process";
import { join } from "node:path";
import { Redis } from "ioredis";
import { startDelayProxy } from "./delay-proxy.mjs";
import { startRedis } from "./redis.mjs";
import { BENCH_DIR, ROOT, SLUICE_DIST } from "./util.mjs";

/** The regions, in the order of their figures. */
export const REGIONS = ["eu", "us", "ap"];

/** The one global policy: 600 a second across the regions, with allotments. */
export const POLICY = {
  name: "global",
  algorithm: "fixed-window",
  rules: [{ limit: 600, period: "1s" }],
  lease: true,
};

/** The scenario's defaults (see {@link runContestant}). */
export const DEFAULTS = {
  windows: 6,
  cutWindow: 3,
  demand: { eu: 1000, us: 1000, ap: 4000 },
  batchMs: 5,
  delayMs: 40,
  home: "eu",
  coldRegion: "us",
  coldKeys: 30,
};

const CHILD = join(BENCH_DIR, "lib/multi-region-child.mjs");
const REST_FIXTURE = join(ROOT, "test/support/upstash-rest.ts");

/** Starts the three regions' redis-servers (no persistence); `stop()` stops them. */
export async function startRegions() {
  const servers = {};
  try {
    for (const r of REGIONS) servers[r] = await startRedis();
  } catch (err) {
    await Promise.all(Object.values(servers).map((s) => s.stop()));
    throw err;
  }
  return {
    ports: Object.fromEntries(REGIONS.map((r) => [r, servers[r].port])),
    async stop() {
      await Promise.all(Object.values(servers).map((s) => s.stop()));
    },
  };
}

/** The value at quantile `q` (0..1) of numbers, or NaN. */
export function quantile(xs, q) {
  if (xs.length === 0) return NaN;
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.floor(s.length * q))];
}

/** One region's process, with one request to it at a time. */
function startChild(region, execArgv) {
  const child = fork(CHILD, [], {
    cwd: ROOT,
    execArgv,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  let waiter;
  let exited = false;
  child.on("message", (m) => {
    const w = waiter;
    waiter = undefined;
    if (m.type === "error") w?.reject(new Error(`${region}: ${m.message}`));
    else w?.resolve(m);
  });
  child.on("exit", (code, signal) => {
    exited = true;
    waiter?.reject(new Error(`${region}'s process exited (${signal ?? code})`));
    waiter = undefined;
  });
  return {
    region,
    /** Sends `message`; resolves the child's answer (rejects after `timeoutMs`). */
    ask(message, timeoutMs = 60_000) {
      if (exited) return Promise.reject(new Error(`${region}'s process has exited`));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiter = undefined;
          reject(new Error(`${region}: no answer to ${message.type} in ${timeoutMs} ms`));
        }, timeoutMs);
        waiter = {
          resolve: (m) => {
            clearTimeout(timer);
            resolve(m);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        };
        child.send(message);
      });
    },
    /** Asks it to stop, and kills it if it has not exited 2 s later. */
    async stop() {
      if (exited) return;
      const gone = new Promise((resolve) => child.once("exit", resolve));
      await this.ask({ type: "stop" }, 5000).catch(() => undefined);
      if (child.connected) child.disconnect();
      const timer = setTimeout(() => child.kill("SIGKILL"), 2000);
      await gone;
      clearTimeout(timer);
    },
  };
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0);
const addUp = (arrays) => arrays[0].map((_, i) => sum(arrays.map((a) => a[i])));

/**
 * Runs one contestant over `regions` (from {@link startRegions}): `kind` "sluice" (`mode`
 * "strict", or "bounded" with `borrow`; `client` "ioredis", the default, or "node-redis") or "upstash" (MultiRegionRatelimit.fixedWindow over a
 * REST fixture per region). Options default to {@link DEFAULTS}. Resolves its figures:
 * `admitted[w]` (all regions; sluice by when each decision was answered, which for a region
 * lease is inside the home's window that granted it; upstash by when it was asked, which picks
 * its window), per region too, the hot decisions' latencies (p50/p99 ms), the store's figures
 * (sluice: cross-region calls, units leased, under-admitted, borrowed, bound), and the cold
 * keys' latencies.
 */
export async function runContestant(regions, options) {
  const o = { ...DEFAULTS, ...options };
  const { kind, windows, cutWindow, delayMs, home } = o;
  // `scale`: the limit and the demand both times it (the same demand over the limit, 10×).
  const scale = o.scale ?? 1;
  const limit = Math.round(POLICY.rules[0].limit * scale);
  const policy = { ...POLICY, rules: [{ ...POLICY.rules[0], limit }] };
  const demand = Object.fromEntries(REGIONS.map((r) => [r, Math.round(o.demand[r] * scale)]));
  const log = o.log ?? (() => {});
  const label =
    kind === "upstash"
      ? "Upstash MultiRegionRatelimit"
      : `sluice ${o.mode}${o.client === "node-redis" ? " on node-redis" : ""}`;
  const children = {};
  const links = [];
  try {
    for (const r of REGIONS) {
      const flush = new Redis({ host: "127.0.0.1", port: regions.ports[r], lazyConnect: true });
      await flush.connect();
      await flush.flushall();
      flush.disconnect();
    }
    const execArgv = kind === "upstash" ? ["--import", "tsx"] : [];
    for (const r of REGIONS) children[r] = startChild(r, execArgv);
    const up = {};
    for (const r of REGIONS)
      up[r] = await children[r].ask({
        type: "init",
        kind,
        region: r,
        regions: REGIONS,
        redisPort: regions.ports[r],
        policy,
        mode: o.mode,
        borrow: o.borrow,
        client: o.client,
        home,
        sluiceDist: SLUICE_DIST,
        restFixture: REST_FIXTURE,
      });
    // The WAN: a link for each direction of each pair, so that a cut is a partition.
    const ports = Object.fromEntries(REGIONS.map((r) => [r, {}]));
    for (const from of REGIONS)
      for (const to of REGIONS) {
        if (from === to) continue;
        const link = await startDelayProxy({ host: "127.0.0.1", port: up[to].port }, delayMs);
        links.push({ from, to, link });
        ports[from][to] = link.port;
      }
    await Promise.all(REGIONS.map((r) => children[r].ask({ type: "links", ports: ports[r] })));
    // The first whole second at least 300 ms away, so every process starts on time.
    const t0 = Math.ceil((Date.now() + 300) / 1000) * 1000;
    log(`multi-region: ${label}: ${windows} windows from ${new Date(t0).toISOString()}`);
    const cutLinks = links.filter((l) => l.from === home || l.to === home);
    const cutAt = setTimeout(
      () => cutLinks.forEach((l) => l.link.cut()),
      t0 + cutWindow * 1000 - Date.now(),
    );
    const healAt = setTimeout(
      () => cutLinks.forEach((l) => l.link.heal()),
      t0 + (cutWindow + 1) * 1000 - Date.now(),
    );
    let hot;
    try {
      hot = await Promise.all(
        REGIONS.map((r) =>
          children[r].ask(
            { type: "run", t0, windows, rate: demand[r], batchMs: o.batchMs, key: "hot" },
            (windows + 30) * 1000,
          ),
        ),
      );
    } finally {
      clearTimeout(cutAt);
      clearTimeout(healAt);
      cutLinks.forEach((l) => l.link.heal());
    }
    const cold = await children[o.coldRegion].ask(
      { type: "cold", count: o.coldKeys, prefix: "cold-" },
      o.coldKeys * 5000 + 10_000,
    );
    const byRegion = Object.fromEntries(REGIONS.map((r, i) => [r, hot[i]]));
    const counted = kind === "upstash" ? "admittedAsked" : "admittedDone";
    // Hot decisions: from the second window on. In the first, the key is new: its first
    // requests wait for the home (a round trip) until the region has seen enough of it
    // (`lease.hotAfter`) to lease ahead.
    const latencies = hot.flatMap((h) => h.latencies);
    const firstLatencies = hot.flatMap((h) => h.firstLatencies);
    const decisions = sum(hot.map((h) => sum(h.decisions)));
    const stats = hot.map((h) => h.stats).filter((s) => s !== undefined && s !== null);
    const total = (field) => {
      const known = stats.map((s) => s[field]).filter((x) => typeof x === "number");
      return known.length > 0 ? sum(known) : undefined;
    };
    const result = {
      label,
      kind,
      mode: o.mode,
      borrow: o.borrow,
      limit,
      scale,
      windows,
      cutWindow,
      demand,
      delayMs,
      // Per window, all regions; the last entry holds what was answered after the last window.
      admitted: addUp(hot.map((h) => h[counted])),
      admittedByRegion: Object.fromEntries(REGIONS.map((r) => [r, byRegion[r][counted]])),
      decisionsPerWindow: addUp(hot.map((h) => h.decisions)),
      decisions,
      failed: sum(hot.map((h) => sum(h.failed))),
      storeErrors: sum(hot.map((h) => sum(h.storeErrors))),
      storeErrorsPerWindow: addUp(hot.map((h) => h.storeErrors)),
      hot: { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99) },
      first: { p50: quantile(firstLatencies, 0.5), p99: quantile(firstLatencies, 0.99) },
      hotByRegion: Object.fromEntries(
        REGIONS.map((r) => [
          r,
          {
            p50: quantile(byRegion[r].latencies, 0.5),
            p99: quantile(byRegion[r].latencies, 0.99),
          },
        ]),
      ),
      bound: stats[0]?.bound,
      crossRegionCalls: total("crossRegionCalls"),
      unitsLeased: total("unitsLeased"),
      underAdmitted: total("underAdmitted"),
      borrowed: total("borrowed"),
      cold: {
        region: o.coldRegion,
        keys: o.coldKeys,
        admitted: cold.admitted,
        p50: quantile(cold.latencies, 0.5),
        p99: quantile(cold.latencies, 0.99),
        crossRegionCalls:
          cold.stats && byRegion[o.coldRegion].stats
            ? cold.stats.crossRegionCalls - byRegion[o.coldRegion].stats.crossRegionCalls
            : undefined,
      },
    };
    if (result.crossRegionCalls !== undefined)
      result.crossRegionPer1000 = (result.crossRegionCalls / decisions) * 1000;
    return result;
  } finally {
    await Promise.all(Object.values(children).map((c) => c.stop()));
    await Promise.all(links.map((l) => l.link.close()));
  }
}

/** One line of a contestant's figures, for logs and the test's output. */
export function summaryLine(r) {
  const f = (x, d = 1) => (x === undefined || Number.isNaN(x) ? "–" : x.toFixed(d));
  const parts = [
    `${r.label}${r.borrow !== undefined ? ` (borrow ${r.borrow})` : ""}`,
    `admitted/window ${r.admitted.slice(0, r.windows).join(" ")} (cut window ${r.cutWindow}; limit ${r.limit}${r.bound !== undefined ? `, bound ${r.bound}` : ""})`,
    `decisions ${r.decisions} (failed ${r.failed}, store errors ${r.storeErrors})`,
    `hot p50 ${f(r.hot.p50, 2)} ms p99 ${f(r.hot.p99, 2)} ms (first window: p99 ${f(r.first.p99, 2)} ms)`,
  ];
  if (r.crossRegionPer1000 !== undefined)
    parts.push(`cross-region ${r.crossRegionCalls} (${f(r.crossRegionPer1000, 2)}/1000)`);
  if (r.kind === "sluice")
    parts.push(`under-admitted ${r.underAdmitted}`, `borrowed ${r.borrowed}`);
  parts.push(
    `cold (${r.cold.keys} keys from ${r.cold.region}) p50 ${f(r.cold.p50)} ms p99 ${f(r.cold.p99)} ms`,
  );
  return parts.join("; ");
}
