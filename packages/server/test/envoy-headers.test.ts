/**
 * The Envoy service builds its rate-limit headers without copying each decision (the
 * `RateLimit-Policy` value is made once per limit): they must be exactly what sluice/http's
 * `rateLimitHeaders` gives for the decision under the limit's display name, in every header
 * format, through the synchronous path (memory store) and the awaited one, when the store
 * fails, and when an insurance limiter's rules differ from the policy's.
 */
import {
  type Decision,
  type Policy,
  type Store,
  type StoreDecision,
  type StoreRequest,
  createLimiter,
  memoryStore,
} from "sluice";
import { type HeaderFormat, rateLimitHeaders } from "sluice/http";
import { describe, expect, it } from "vitest";
import { ENVOY_POLICY_PREFIX, compileDomain } from "../src/envoy/compile.js";
import { parseEnvoyFile } from "../src/envoy/config.js";
import { type RlsRequest, RateLimitService, displayName } from "../src/envoy/rls.js";

const NOW = Date.UTC(2030, 0, 1, 0, 0, 30);

const DOMAIN = `
domain: hdr
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 4, on_store_error: insurance }
  - key: smooth
    rate_limit: { algorithm: gcra, requests_per_unit: 10, period: 30s, burst: 3 }
  - key: layered
    rate_limit:
      name: "two \\"rules\\""
      rules:
        - { requests_per_unit: 2, unit: minute }
        - { requests_per_unit: 3, period: 5m }
  - key: closed
    rate_limit: { unit: hour, requests_per_unit: 5, on_store_error: deny }
`;

/** A store that fails while `down`, else decides through a memory store (always awaited). */
function switchable(now: () => number): Store & { down: boolean } {
  const inner = memoryStore({ now });
  const fail = () => Promise.reject(new Error("counter store down"));
  return {
    kind: "switchable",
    down: false,
    decide(req: StoreRequest): Promise<StoreDecision> {
      return this.down ? fail() : inner.decide(req);
    },
    peek(req: StoreRequest): Promise<StoreDecision> {
      return this.down ? fail() : inner.peek(req);
    },
    adjust: (p, k, d) => inner.adjust(p, k, d),
    release: (p, k, l) => inner.release(p, k, l),
    reset: (p, k) => inner.reset(p, k),
    // Two instances share the limit: the insurance limiter keeps half of it.
    liveInstances: () => 2,
  };
}

/** The service over a store, and a twin limiter per policy over a store of its own. */
function setup(format: HeaderFormat, sync: boolean) {
  const now = () => NOW;
  const parsed = parseEnvoyFile(DOMAIN);
  if (!("docs" in parsed)) throw new Error(JSON.stringify(parsed.issues));
  const stores = sync
    ? [memoryStore({ now }), memoryStore({ now })]
    : [switchable(now), switchable(now)];
  const compiled = compileDomain(parsed.docs[0]!, {
    prefix: ENVOY_POLICY_PREFIX,
    limiter: (policy) => createLimiter({ store: stores[0]!, policy }),
  });
  const service = new RateLimitService({
    domain: (name) => (name === "hdr" ? { version: 1, compiled, draft: undefined } : undefined),
    store: stores[0]!,
    headers: format,
    now,
  });
  const twins = new Map<Policy, ReturnType<typeof createLimiter>>();
  /** The twin's decision for the same call, under the limit's display name. */
  const expected = async (key: string, value: string): Promise<Array<[string, string]>> => {
    const limit = compiled.limits.find((l) => l.elements[0]!.key === key)!;
    let twin = twins.get(limit.policy!);
    if (!twin) {
      twin = createLimiter({ store: stores[1]!, policy: limit.policy! });
      twins.set(limit.policy!, twin);
    }
    const d: Decision = await twin.limit(`${key}=${value}`);
    return rateLimitHeaders(
      format,
      { ...d, policy: displayName(limit) },
      { nowMs: NOW, algorithm: limit.algorithm },
    ).map(([k, v]) => [k, v]);
  };
  const ask = async (key: string, value: string) => {
    const req: RlsRequest = {
      domain: "hdr",
      hitsAddend: 0,
      descriptors: [{ entries: [{ key, value }] }],
    };
    const r = await service.answer(req);
    // The problem body's own headers come after the rate-limit headers.
    return r.responseHeadersToAdd
      .filter(([k]) => k !== "Retry-After" && k !== "Content-Type")
      .map(([k, v]) => [k, v]);
  };
  return { stores, service, expected, ask };
}

describe("the Envoy service's headers are sluice/http's, under the limit's display name", () => {
  for (const format of ["ietf", "github", "both"] as const) {
    for (const sync of [true, false]) {
      it(`${format}, ${sync ? "memory store (synchronous)" : "awaited store"}: allowed, exhausted, denied, several rules, escaped names`, async () => {
        const { ask, expected } = setup(format, sync);
        for (const key of ["user", "smooth", "layered"]) {
          for (let i = 0; i < 6; i++) {
            const value = i % 2 === 0 ? "a" : "b";
            expect(await ask(key, value)).toEqual(await expected(key, value));
          }
        }
      });
    }
  }

  it("when the store fails: a fail-closed limit shows RateLimit-Policy only, an insurance limit its share", async () => {
    const { stores, ask, expected } = setup("both", false);
    // First a healthy decision, so that the limit's RateLimit-Policy is made from its policy.
    expect(await ask("user", "u")).toEqual(await expected("user", "u"));
    for (const s of stores) (s as { down: boolean }).down = true;
    for (const key of ["closed", "user"]) {
      for (let i = 0; i < 3; i++) {
        const got = await ask(key, "u");
        expect(got).toEqual(await expected(key, "u"));
      }
    }
    // The insurance limiter keeps half the limit: its RateLimit-Policy says so.
    expect(Object.fromEntries(await ask("user", "v"))["RateLimit-Policy"]).toBe(
      '"hdr.user";q=2;w=60',
    );
    for (const s of stores) (s as { down: boolean }).down = false;
    expect(Object.fromEntries(await ask("user", "w"))["RateLimit-Policy"]).toBe(
      '"hdr.user";q=4;w=60',
    );
  });
});
