// A discrete-event simulation, in virtual time, of a backend with a capacity knee behind a
// sluice concurrency limiter (docs/adaptive.md, docs/benchmarks.md "Adaptive concurrency").
//
// The backend: `workers` servers, a FIFO queue in front of them, log-normal service times
// (mean `serviceMeanMs`, σ of the log `serviceSigma`); a request that starts service while n
// requests are in the backend (queued or served) takes (1 + contention × max(0, n − workers))
// times its service time, so past the knee throughput falls as the backend fills (memory,
// locks, context switches). Clients arrive open-loop (Poisson, per tier) and give up after
// `deadlineMs`: the limiter's permit is then released with `{ dropped: true }`, while the
// backend, which does not know, works on. Goodput: answers inside the deadline.
//
// The real limiter decides: `createLimiter` (the library's source in the tests, its build in
// the bench) over a memory store, both on the simulation's clock and timers, so one seed gives
// one result, and a minute of traffic takes well under a second.

/** A seeded random source (mulberry32): numbers in [0, 1). */
export function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A binary heap of events by time, then by the order they were scheduled. */
class Events {
  items = [];
  seq = 0;
  push(at, run) {
    const e = { at, seq: this.seq++, run, cancelled: false };
    const h = this.items;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (before(h[p], e)) break;
      h[i] = h[p];
      i = p;
    }
    h[i] = e;
    return e;
  }
  pop() {
    const h = this.items;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= h.length) break;
        const r = l + 1;
        const c = r < h.length && before(h[r], h[l]) ? r : l;
        if (before(last, h[c])) break;
        h[i] = h[c];
        i = c;
      }
      h[i] = last;
    }
    return top;
  }
  get size() {
    return this.items.length;
  }
}

const before = (a, b) => a.at < b.at || (a.at === b.at && a.seq < b.seq);

/** The simulation's defaults (the backend). */
export const BACKEND = {
  workers: 8,
  serviceMeanMs: 10,
  serviceSigma: 0.5,
  contention: 0.1,
  deadlineMs: 500,
};

/** Requests a second the backend answers at its knee: workers / mean service time. */
export const capacityOf = (workers = BACKEND.workers, serviceMeanMs = BACKEND.serviceMeanMs) =>
  (workers * 1000) / serviceMeanMs;

const EPOCH = 1_700_000_000_000;

/**
 * Runs one scenario. `limiter`: `{ kind: "none" }`, `{ kind: "static", limit }` or
 * `{ kind: "adaptive", algorithm, ...adaptive settings }`. `tiers`: [{ rate (req/s), priority,
 * maxWaitMs }]. `workersAt(tMs)` gives the workers at a time (a capacity change mid-run).
 * Figures are over [warmupMs, durationMs]; `series` per `binMs` over the whole run.
 */
export async function simulate(options) {
  const o = { ...BACKEND, warmupMs: 2000, binMs: 250, seed: 1, ...options };
  const { createLimiter, memoryStore } = o.sluice;
  const rand = random(o.seed);
  const events = new Events();
  let now = 0;
  const clock = () => EPOCH + Math.floor(now);
  const timers = {
    setTimeout: (callback, ms) => events.push(now + Math.max(0, ms), callback),
    clearTimeout: (e) => {
      if (e) e.cancelled = true;
    },
  };
  const mu = Math.log(o.serviceMeanMs) - (o.serviceSigma * o.serviceSigma) / 2;
  const serviceMs = () => {
    const u = 1 - rand();
    const v = rand();
    const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    return Math.exp(mu + o.serviceSigma * z);
  };
  const workersAt = o.workersAt ?? (() => o.workers);

  let limiter;
  if (o.limiter.kind !== "none") {
    const store = memoryStore({ now: clock });
    const adaptive =
      o.limiter.kind === "adaptive"
        ? {
            algorithm: o.limiter.algorithm,
            min: o.limiter.min ?? 1,
            max: o.limiter.max ?? 200,
            ...(o.limiter.initial !== undefined ? { initial: o.limiter.initial } : {}),
          }
        : undefined;
    limiter = createLimiter({
      store,
      clock,
      timers,
      policy: {
        name: "backend",
        algorithm: "concurrency",
        rules: [{ limit: o.limiter.kind === "static" ? o.limiter.limit : 1000, period: "60s" }],
        ...(adaptive ? { adaptive } : {}),
      },
    });
  }

  // The backend.
  const queue = [];
  let queueHead = 0;
  let inBackend = 0;
  let busy = 0;
  const start = (req) => {
    busy++;
    const factor = 1 + o.contention * Math.max(0, inBackend - workersAt(now));
    events.push(now + serviceMs() * factor, () => complete(req));
  };
  const dispatch = (req) => {
    req.admittedAt = now;
    inBackend++;
    if (busy < workersAt(now)) start(req);
    else queue.push(req);
  };
  const complete = (req) => {
    busy--;
    inBackend--;
    answer(req);
    while (queueHead < queue.length && busy < workersAt(now)) start(queue[queueHead++]);
    if (queueHead > 4096 && queueHead * 2 > queue.length) {
      queue.splice(0, queueHead);
      queueHead = 0;
    }
  };

  // The figures.
  const bins = Math.ceil(o.durationMs / o.binMs);
  const series = Array.from({ length: bins }, (_, i) => ({
    tMs: (i + 1) * o.binMs,
    good: 0,
    limit: 0,
    inFlight: 0,
  }));
  const tiers = o.tiers.map((t) => ({ ...t, offered: 0, good: 0, rejected: 0, late: 0 }));
  const latencies = [];

  const answer = (req) => {
    if (req.timedOut) return;
    req.done = true;
    const latency = now - req.arrivedAt;
    if (req.permit !== undefined) void limiter.release("backend", req.permit);
    if (req.measured) {
      latencies.push(now - req.admittedAt);
      tiers[req.tier].good++;
    }
    const bin = series[Math.min(bins - 1, Math.floor(now / o.binMs))];
    if (latency <= o.deadlineMs) bin.good++;
  };
  const timeout = (req) => {
    if (req.done) return;
    req.timedOut = true;
    if (req.measured) {
      tiers[req.tier].late++;
      latencies.push(now - (req.admittedAt ?? req.arrivedAt));
    }
    if (req.permit !== undefined) void limiter.release("backend", req.permit, { dropped: true });
  };

  let waiting = 0;
  const admit = (req, decision) => {
    if (!decision.allowed) {
      if (req.measured) tiers[req.tier].rejected++;
      req.done = true;
      return;
    }
    req.permit = decision.leaseId;
    dispatch(req);
  };
  const arrive = (tierIndex) => {
    const tier = tiers[tierIndex];
    const req = {
      tier: tierIndex,
      arrivedAt: now,
      permit: undefined,
      done: false,
      timedOut: false,
      measured: now >= o.warmupMs,
    };
    if (req.measured) tier.offered++;
    events.push(now + o.deadlineMs, () => timeout(req));
    if (limiter === undefined) dispatch(req);
    else if (o.limiter.kind === "adaptive" && tier.maxWaitMs > 0) {
      waiting++;
      void limiter
        .acquire("backend", { priority: tier.priority, maxWaitMs: tier.maxWaitMs })
        .then((p) => {
          waiting--;
          admit(req, p.decision);
        });
    } else {
      const options = o.limiter.kind === "adaptive" ? { priority: tier.priority } : undefined;
      admit(req, limiter.limitSync("backend", options));
    }
    events.push(now - Math.log(1 - rand()) * (1000 / tier.rate), () => arrive(tierIndex));
  };
  tiers.forEach((_, i) =>
    events.push(-Math.log(1 - rand()) * (1000 / tiers[i].rate), () => arrive(i)),
  );
  for (let i = 0; i < bins; i++) {
    events.push(series[i].tMs - 1e-6, () => {
      const s = limiter?.adaptiveState?.();
      series[i].limit = s?.limit ?? (o.limiter.kind === "static" ? o.limiter.limit : 0);
      series[i].inFlight = s?.inFlight ?? inBackend;
    });
  }

  while (events.size > 0) {
    const e = events.pop();
    if (e.at > o.durationMs) break;
    if (e.cancelled) continue;
    now = e.at;
    e.run();
    // A permit handed out of the priority line resolves in promise callbacks: let them run
    // before time moves on.
    if (waiting > 0) for (let i = 0; i < 6; i++) await null;
  }

  latencies.sort((a, b) => a - b);
  const seconds = (o.durationMs - o.warmupMs) / 1000;
  const pct = (q) =>
    latencies.length
      ? latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]
      : NaN;
  const offered = tiers.reduce((s, t) => s + t.offered, 0);
  const good = tiers.reduce((s, t) => s + t.good, 0);
  return {
    goodput: good / seconds,
    offered: offered / seconds,
    rejected: tiers.reduce((s, t) => s + t.rejected, 0) / seconds,
    late: tiers.reduce((s, t) => s + t.late, 0) / seconds,
    p50Ms: pct(0.5),
    p99Ms: pct(0.99),
    tiers: tiers.map((t) => ({
      priority: t.priority,
      offered: t.offered / seconds,
      goodput: t.good / seconds,
      rejected: t.rejected / seconds,
      late: t.late / seconds,
    })),
    series: series.map((b) => ({ ...b, goodput: b.good / (o.binMs / 1000) })),
  };
}

/** Goodput (req/s) over [fromMs, toMs) of a run's series. */
export function goodputBetween(series, fromMs, toMs) {
  let good = 0;
  let span = 0;
  let prev = 0;
  for (const b of series) {
    const start = prev;
    prev = b.tMs;
    if (start >= fromMs && b.tMs <= toMs) {
      good += b.good;
      span += b.tMs - start;
    }
  }
  return span > 0 ? (good * 1000) / span : NaN;
}

/**
 * How long after `atMs` the goodput (over a sliding second, in bins) first reaches `share` of
 * `target` and holds there on average for the rest of the run; Infinity if it never does.
 */
export function recoveryMs(series, atMs, target, share = 0.95, endMs = Infinity) {
  const binMs = series[0].tMs;
  const last = Math.min(endMs, series[series.length - 1].tMs);
  for (let t = atMs; t + 1000 <= last; t += binMs) {
    if (
      goodputBetween(series, t, t + 1000) >= share * target &&
      goodputBetween(series, t, last) >= share * target
    )
      return t + 1000 - atMs;
  }
  return Infinity;
}

/** The loads of the comparison, as multiples of the backend's capacity. */
export const LOADS = [0.5, 1, 2, 4];

/** The adaptive algorithms, the default first. */
export const ADAPTIVE = ["gradient2", "vegas", "aimd"];

/**
 * Every figure of the comparison (docs/benchmarks.md, "Adaptive concurrency"): per load, no
 * limiter, the oracle (the best static limit of a sweep), static limits 2× too high and too
 * low, and each algorithm; the capacity drop (8 → 4 workers at half time, at 2× the first
 * capacity) against the new oracle; the priority run (tier 0 at a quarter of capacity, waiting
 * up to 50 ms in the priority line, while tier 3 floods at 4×). `sweep`: the static limits tried.
 */
export async function adaptiveComparison({
  sluice,
  seed = 1,
  durationMs = 20_000,
  sweep,
  loads = LOADS,
}) {
  const cap = capacityOf();
  // Each run first yields to the event loop (a run's awaits are microtasks only, so it holds the
  // thread for its whole length): a test runner's messages get through between runs.
  const one = async (limiter, rate, extra = {}) => {
    await new Promise((resolve) => setTimeout(resolve, 0));
    return simulate({
      sluice,
      seed,
      durationMs,
      limiter,
      tiers: [{ rate, priority: 1, maxWaitMs: 0 }],
      ...extra,
    });
  };
  const limits = sweep ?? Array.from({ length: 19 }, (_, i) => i + 2);
  const rows = [];
  for (const load of loads) {
    const rate = load * cap;
    let oracle;
    for (const limit of limits) {
      const r = await one({ kind: "static", limit }, rate);
      if (oracle === undefined || r.goodput > oracle.run.goodput) oracle = { limit, run: r };
    }
    const row = { load, oracle: { limit: oracle.limit, ...summary(oracle.run) } };
    row.none = summary(await one({ kind: "none" }, rate));
    row.tooHigh = {
      limit: oracle.limit * 2,
      ...summary(await one({ kind: "static", limit: oracle.limit * 2 }, rate)),
    };
    const low = Math.max(1, Math.round(oracle.limit / 2));
    row.tooLow = { limit: low, ...summary(await one({ kind: "static", limit: low }, rate)) };
    for (const algorithm of ADAPTIVE) {
      const r = await one({ kind: "adaptive", algorithm }, rate);
      row[algorithm] = { ...summary(r), limit: meanLimit(r.series, 2000) };
    }
    rows.push(row);
  }
  const unloadedP99Ms = (await one({ kind: "none" }, 0.5 * cap)).p99Ms;

  // Capacity drop: 8 workers, then 4 from half time; offered 2× the first capacity.
  const dropAt = durationMs;
  const dropRun = durationMs * 2;
  const rate = 2 * cap;
  let newOracle;
  for (const limit of limits.filter((l) => l <= 12)) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    const r = await simulate({
      sluice,
      seed,
      durationMs,
      workers: 4,
      limiter: { kind: "static", limit },
      tiers: [{ rate, priority: 1, maxWaitMs: 0 }],
    });
    if (newOracle === undefined || r.goodput > newOracle.goodput)
      newOracle = { limit, goodput: r.goodput };
  }
  const drop = { atMs: dropAt, newOracle, algorithms: {} };
  for (const algorithm of ADAPTIVE) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    const r = await simulate({
      sluice,
      seed,
      durationMs: dropRun,
      workersAt: (t) => (t < dropAt ? 8 : 4),
      limiter: { kind: "adaptive", algorithm },
      tiers: [{ rate, priority: 1, maxWaitMs: 0 }],
    });
    drop.algorithms[algorithm] = {
      recoveryMs: recoveryMs(r.series, dropAt, newOracle.goodput, 0.95, dropRun),
      after: goodputBetween(r.series, dropAt + 5000, dropRun),
      series: r.series,
    };
  }

  // Priorities: tier 0 at a quarter of capacity, tier 3 flooding at 4×.
  const priority = {};
  for (const algorithm of ADAPTIVE) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    const r = await simulate({
      sluice,
      seed,
      durationMs,
      limiter: { kind: "adaptive", algorithm },
      tiers: [
        { rate: 0.25 * cap, priority: 0, maxWaitMs: 50 },
        { rate: 4 * cap, priority: 3, maxWaitMs: 0 },
      ],
    });
    priority[algorithm] = { top: r.tiers[0], lowest: r.tiers[1], goodput: r.goodput };
  }
  return { capacity: cap, durationMs, rows, unloadedP99Ms, drop, priority };
}

function summary(r) {
  return { goodput: r.goodput, p99Ms: r.p99Ms, rejected: r.rejected, late: r.late };
}

function meanLimit(series, fromMs) {
  const kept = series.filter((b) => b.tMs > fromMs);
  return kept.reduce((s, b) => s + b.limit, 0) / kept.length;
}
