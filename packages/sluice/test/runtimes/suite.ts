/**
 * The runtime suite: what each runtime (Deno, Bun, workerd, Vercel's Edge runtime) runs inside
 * itself, in one process, over the built package as its users import it. Nothing here may use
 * Node or a test framework: results are data (`SuiteResult[]`), judged by the vitest file of
 * each runtime (`<runtime>.test.ts`), one test per result.
 *
 * - conformance: the scenario table (test/conformance) against every store the runtime can
 *   reach: the memory store, the Redis store over HTTP (`sluice/upstash`, through the Upstash
 *   REST fixture in front of a real redis-server), and whatever the runtime adds (workerd: the
 *   Durable Object store);
 * - conformance with leases: the table's lease dimension (`lease: { hotAfter: 1, ttl: 1 }` on
 *   every policy that can take one) against the stores that lease (`LEASED_STORES`: the Redis
 *   store over HTTP; the memory and Durable Object stores decide in one place and ignore
 *   `lease`), so that the lease book's timers run in the runtime;
 * - exactness: many concurrent decisions on one key at a small limit, exactly the limit allowed
 *   (over HTTP: from several stores and clients at once);
 * - keys: the digests that name keys are the ones Node computes (a key written here is the key
 *   a Node process reads);
 * - hono: `sluice/hono` in front of a Hono app, requests served in the runtime.
 */
import { Redis } from "@upstash/redis";
import { Hono } from "hono";
import {
  type Limiter,
  type PolicyInput,
  type Store,
  createLimiter,
  definePolicy,
  memoryStore,
} from "sluice";
import { digest, formatIp, ipIdentity, parseIp } from "sluice/http";
import { rateLimit } from "sluice/hono";
import { upstashStore } from "sluice/upstash";
import { leaseRefusal, play, withLeases } from "../conformance/play.js";
import { scenarios } from "../conformance/scenarios.js";

/** What the test gives the runtime. */
export interface SuiteConfig {
  /** The runtime's name, in policy names (so runtimes sharing one Redis never meet). */
  readonly runtime: string;
  /** The Upstash REST fixture; without it the HTTP-Redis part is reported skipped. */
  readonly upstash?: { readonly url: string; readonly token: string };
}

/** One result: a name, and whether it held (with why not). */
export interface SuiteResult {
  readonly name: string;
  readonly ok: boolean;
  readonly error?: string;
}

/** A store the suite runs the table and the exactness test against. */
export interface StoreUnderTest {
  readonly label: string;
  /** A store deciding at the injected time (one per scenario). */
  make(now: () => number): Store | Promise<Store>;
  /** `n` stores on the system clock sharing one backend (exactness from several at once). */
  shared(n: number): Store[];
}

/** The stores (by label) that take leases, played with the table's lease dimension too. */
export const LEASED_STORES: readonly string[] = ["upstash"];

/** The scenarios of the lease dimension: those whose policy can take leases. */
export const leasedScenarios = scenarios.filter((s) => leaseRefusal(s) === undefined);

/** The long identifier of the keys test and the tag Node gives it (test/../hash.test.ts). */
export const LONG_ID = "x".repeat(65);
export const LONG_ID_TAG = "#eMdB3cSC5M34xHSgh2NHoJBbYjM";

/** Runs everything; never throws (a failure is a result). */
export async function runSuite(
  config: SuiteConfig,
  extra: readonly StoreUnderTest[] = [],
): Promise<SuiteResult[]> {
  const results: SuiteResult[] = [];
  const check = async (name: string, fn: () => Promise<void> | void): Promise<void> => {
    try {
      await fn();
      results.push({ name, ok: true });
    } catch (err) {
      const error = err instanceof Error ? `${err.message}\n${err.stack ?? ""}` : String(err);
      results.push({ name, ok: false, error });
    }
  };
  const run = `${config.runtime}${Date.now().toString(36)}`;

  const stores: StoreUnderTest[] = [memory()];
  if (config.upstash) stores.push(overHttp(config.upstash));
  stores.push(...extra);

  for (const s of stores) {
    for (const [i, scenario] of scenarios.entries())
      await check(`conformance/${s.label}/${scenario.name}`, () =>
        play(scenario, `c${run}-${s.label}-${i}`, (now) => s.make(now)),
      );
    if (LEASED_STORES.includes(s.label))
      for (const [i, scenario] of leasedScenarios.entries())
        await check(`conformance/${s.label}+leases/${scenario.name}`, () =>
          play(withLeases(scenario), `l${run}-${s.label}-${i}`, (now) => s.make(now), false, true),
        );
    await check(`exactness/${s.label}`, () => exactness(s, `x${run}-${s.label}`));
  }

  await check("keys/digests", () => {
    equal(digest("sk_live_0123456789"), "edEbhqi8DcksVFew41sIzWgR4st", "apiKey digest");
  });
  if (config.upstash) {
    const u = config.upstash;
    // The Node side reads the key this writes: sl:keys-<runtime>:{#…}:g0.
    await check("keys/written", async () => {
      const l = createLimiter({
        store: upstashStore({ redis: client(u) }),
        policy: { name: `keys-${config.runtime}`, rules: [{ limit: 5, period: "1h" }] },
      });
      equal((await l.limit(LONG_ID)).remaining, 4, "remaining");
    });
  }
  await check("http/ip", () => {
    equal(formatIp(parseIp("[2001:DB8:0::1]:443")!), "2001:db8::1", "IPv6");
    equal(ipIdentity(parseIp("2001:db8:1:2:aaaa::1")!), "2001:db8:1:2::/64", "grouping");
    equal(formatIp(parseIp("::ffff:203.0.113.9")!), "203.0.113.9", "mapped");
    equal(parseIp("256.1.1.1"), undefined, "invalid");
  });
  for (const s of stores)
    await check(`hono/${s.label}`, () => hono(s.shared(1)[0]!, `h${run}-${s.label}`));
  return results;
}

function memory(): StoreUnderTest {
  return {
    label: "memory",
    make: (now) => memoryStore({ now }),
    shared: (n) => {
      const one = memoryStore();
      return Array.from({ length: n }, () => one);
    },
  };
}

function client(u: { url: string; token: string }): Redis {
  return new Redis({ url: u.url, token: u.token, retry: false });
}

function overHttp(u: { url: string; token: string }): StoreUnderTest {
  return {
    label: "upstash",
    make: (now) => upstashStore({ redis: client(u), now, denyCache: false }),
    shared: (n) =>
      Array.from({ length: n }, () =>
        upstashStore({ redis: client(u), denyCache: false, timeoutMs: 5000 }),
      ),
  };
}

/** 400 decisions at once on one key, from 4 stores, at a limit of 37: exactly 37 pass. */
async function exactness(s: StoreUnderTest, name: string): Promise<void> {
  const policy = definePolicy({ name, rules: [{ limit: 37, period: "1h" }] });
  const limiters: Limiter[] = s.shared(4).map((store) => createLimiter({ store, policy }));
  const ds = await Promise.all(
    Array.from({ length: 400 }, (_, i) => limiters[i % 4]!.limit("one-key")),
  );
  const odd = ds.filter((d) => d.reason !== undefined);
  if (odd.length > 0) throw new Error(`${odd.length} decisions were ${odd[0]!.reason}`);
  equal(ds.filter((d) => d.allowed).length, 37, "allowed");
}

/** A Hono app limited to 10 per client: 30 requests at once, 10 served, 20 refused (429). */
async function hono(store: Store, name: string): Promise<void> {
  const policy: PolicyInput = { name, rules: [{ limit: 10, period: "1m" }] };
  const app = new Hono();
  app.use(
    rateLimit({
      limiter: createLimiter({ store, policy }),
      peer: (c) => c.req.header("x-test-peer"),
    }),
  );
  app.get("/hello/:who", (c) => c.text(`hello ${c.req.param("who")}`));
  const responses = await Promise.all(
    Array.from({ length: 30 }, async () =>
      app.request("/hello/you", { headers: { "x-test-peer": "203.0.113.7" } }),
    ),
  );
  const codes = responses.map((r) => r.status);
  equal(codes.filter((c) => c === 200).length, 10, "served");
  equal(codes.filter((c) => c === 429).length, 20, "refused");
  const ok = responses.find((r) => r.status === 200)!;
  equal(await ok.text(), "hello you", "body");
  equal(ok.headers.get("ratelimit-policy") !== null, true, "RateLimit-Policy header");
  const refused = responses.find((r) => r.status === 429)!;
  equal(Number(refused.headers.get("retry-after")) > 0, true, "Retry-After header");
  equal(refused.headers.get("content-type"), "application/problem+json", "problem body");
  // Another client has its own count.
  const other = await app.request("/hello/me", { headers: { "x-test-peer": "2001:db8::1" } });
  equal(other.status, 200, "another client");
}

function equal(got: unknown, want: unknown, what: string): void {
  if (!Object.is(got, want))
    throw new Error(`${what}: got ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
}
