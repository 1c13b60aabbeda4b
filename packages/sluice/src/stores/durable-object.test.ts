/**
 * Unit tests of the Durable Object store's edges on Node: its options, the object's answers to
 * bad batches, a batch that arrives after its deadline, a stored value that is not sluice's,
 * and a call nobody answers. The object's storage is a Map here; the store and the object run
 * for real in workerd (test/runtimes/workerd.test.ts: the conformance table, exactness across
 * requests, restarts, the sweep).
 */
import { describe, expect, it } from "vitest";
import { ValidationError } from "../errors.js";
import { createLimiter } from "../limiter.js";
import { definePolicy } from "../policy.js";
import {
  type DurableObjectNamespaceLike,
  type DurableObjectStorageLike,
  SluiceDurableObject,
  durableObjectStore,
} from "./durable-object.js";

/** A Durable Object's storage as a Map (get/put/delete/list in key order, one alarm). */
function mapStorage(): DurableObjectStorageLike & { readonly map: Map<string, unknown> } {
  const map = new Map<string, unknown>();
  let alarm: number | null = null;
  return {
    map,
    get: (keys) =>
      Promise.resolve(new Map(keys.filter((k) => map.has(k)).map((k) => [k, map.get(k)]))),
    put: (entries) => {
      for (const [k, v] of Object.entries(entries)) map.set(k, structuredClone(v));
      return Promise.resolve();
    },
    delete: (keys) => Promise.resolve(keys.filter((k) => map.delete(k)).length),
    list: ({ startAfter, limit }) =>
      Promise.resolve(
        new Map(
          [...map]
            .sort(([a], [b]) => (a < b ? -1 : 1))
            .filter(([k]) => startAfter === undefined || k > startAfter)
            .slice(0, limit),
        ),
      ),
    getAlarm: () => Promise.resolve(alarm),
    setAlarm: (at) => {
      alarm = at;
      return Promise.resolve();
    },
  };
}

/** A namespace of one object, reached without a network (or never, with `hang`). */
function namespaceOf(object: SluiceDurableObject, hang = false): DurableObjectNamespaceLike {
  return {
    idFromName: (name) => name,
    get: () => ({
      fetch: (url, init) =>
        hang ? new Promise(() => undefined) : object.fetch(new Request(url, init)),
    }),
  };
}

const policy = definePolicy({ name: "api", rules: [{ limit: 3, period: "1m" }] });

describe("durableObjectStore", () => {
  it("validates its options, naming the field", () => {
    expect(() => durableObjectStore({ namespace: {} as never })).toThrow(ValidationError);
    expect(() => durableObjectStore({ namespace: {} as never })).toThrow(
      /namespace: must be a Durable Object namespace binding/,
    );
    const ns = namespaceOf(new SluiceDurableObject({ storage: mapStorage() }));
    expect(() => durableObjectStore({ namespace: ns, shards: 0 })).toThrow(
      /shards: must be an integer from 1 to 16384 \(got 0\)/,
    );
    expect(() => durableObjectStore({ namespace: ns, timeoutMs: 1.5 })).toThrow(/timeoutMs/);
    expect(() => durableObjectStore({ namespace: ns, bogus: 1 } as never)).toThrow(
      /bogus: unknown option/,
    );
    expect(() => durableObjectStore({ namespace: ns, logger: "console" as never })).toThrow(
      /logger: must be an object with a warn\(message\) method, or false/,
    );
    expect(() => durableObjectStore({ namespace: ns, logger: false })).not.toThrow();
  });

  it("decides through the object, and answers by onStoreError when it does not answer in time", async () => {
    const storage = mapStorage();
    const object = new SluiceDurableObject({ storage });
    const l = createLimiter({
      store: durableObjectStore({ namespace: namespaceOf(object) }),
      policy,
    });
    expect((await l.limit("k")).remaining).toBe(2);
    expect([...storage.map.keys()]).toEqual(["api:{k}:g"]);
    const hung = createLimiter({
      store: durableObjectStore({ namespace: namespaceOf(object, true), timeoutMs: 5 }),
      policy: { name: "api", rules: [{ limit: 3, period: "1m" }], onStoreError: "deny" },
    });
    const d = await hung.limit("k");
    expect([d.allowed, d.reason]).toEqual([false, "store-error"]);
  });

  it("a token bucket refilled by interval: keys of its own (code i), decided by whole steps", async () => {
    const storage = mapStorage();
    let t = 1_700_006_400_000;
    const store = durableObjectStore({
      namespace: namespaceOf(new SluiceDurableObject({ storage })),
      now: () => t,
    });
    const stepped = createLimiter({
      store,
      policy: {
        name: "api",
        algorithm: "token-bucket",
        refill: "interval",
        rules: [{ limit: 2, period: "1s", burst: 2 }],
      },
    });
    expect((await stepped.limit("k")).remaining).toBe(1);
    expect((await stepped.limit("k")).remaining).toBe(0);
    t += 999;
    // Continuous, 1.998 tokens would be back; by interval, none until the anchor + 1 s.
    expect(await stepped.limit("k")).toMatchObject({ allowed: false, retryAfterMs: 1 });
    t += 1;
    expect((await stepped.limit("k")).remaining).toBe(1);
    expect([...storage.map.keys()]).toEqual(["api:{k}:i"]);
  });

  it("reports a stored value that is not sluice's as SLUICE_ERR_CORRUPT_STATE, for that key only", async () => {
    const storage = mapStorage();
    const store = durableObjectStore({
      namespace: namespaceOf(new SluiceDurableObject({ storage })),
    });
    storage.map.set("api:{bad}:g", "not a state");
    const [bad, good] = await Promise.allSettled([
      store.decide({ policy, key: "bad", cost: 1 }),
      store.decide({ policy, key: "good", cost: 1 }),
    ]);
    expect(bad).toMatchObject({ status: "rejected", reason: { code: "SLUICE_ERR_CORRUPT_STATE" } });
    expect(good).toMatchObject({ status: "fulfilled", value: { allowed: true } });
  });
});

describe("SluiceDurableObject", () => {
  const post = (object: SluiceDurableObject, body: unknown) =>
    object.fetch(
      new Request("https://sluice/batch", {
        method: "POST",
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
    );

  it("answers only its store's batches: 405 for a GET, 400 naming what is wrong", async () => {
    const object = new SluiceDurableObject({ storage: mapStorage() });
    expect((await object.fetch(new Request("https://sluice/"))).status).toBe(405);
    const notJson = await post(object, "{");
    expect(notJson.status).toBe(400);
    const noDeadline = await post(object, { policies: [], ops: [] });
    expect([noDeadline.status, await noDeadline.json()]).toEqual([
      400,
      { error: "bad batch: deadline must be a number" },
    ]);
    const badOp = await post(object, {
      deadline: Date.now() + 1000,
      policies: [],
      ops: [[0, 0, "k", 1, 0]],
    });
    expect(await badOp.json()).toEqual({
      error: "bad batch: ops must be [op, policy, key, cost, extra] arrays",
    });
  });

  it("changes nothing for a batch that comes after its deadline (its caller stopped waiting)", async () => {
    const storage = mapStorage();
    const object = new SluiceDurableObject({ storage });
    const res = await post(object, {
      deadline: Date.now() - 1,
      policies: [JSON.stringify({ name: "api", rules: [{ limit: 3, period: 60_000 }] })],
      ops: [[0, 0, "k", 1, 0]],
    });
    expect(await res.json()).toEqual({ expired: true });
    expect(storage.map.size).toBe(0);
  });

  it("takes the sweep's pace from the SLUICE_SWEEP_MS binding", async () => {
    const storage = mapStorage();
    const object = new SluiceDurableObject({ storage }, { SLUICE_SWEEP_MS: "120000" });
    const before = Date.now();
    await createLimiter({
      store: durableObjectStore({ namespace: namespaceOf(object) }),
      policy,
    }).limit("k");
    const at = await storage.getAlarm();
    expect(at).toBeGreaterThanOrEqual(before + 120_000);
  });
});
