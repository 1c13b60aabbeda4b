/**
 * Helpers of the Redis suites: stores and clients closed together, a watch for unhandled
 * rejections, and the acknowledged charges that an operation (a failover, a reshard) lost.
 */
import { afterAll, beforeAll, expect } from "vitest";
import {
  type Limiter,
  type RedisStore,
  type RedisStoreOptions,
  redisStore,
} from "../../src/index.js";

/** Stores and the clients under them, made by a suite or a test and closed together. */
export class Owned {
  private readonly stores: RedisStore[] = [];
  private readonly closers: Array<() => unknown> = [];

  /** A store, closed by {@link Owned.close}. */
  store(options: RedisStoreOptions): RedisStore {
    const s = redisStore(options);
    this.stores.push(s);
    return s;
  }

  /** `client`, closed by {@link Owned.close} with `close` (after the stores). */
  client<C>(client: C, close: (client: C) => unknown): C {
    this.closers.push(() => close(client));
    return client;
  }

  /** Closes the stores, then the clients. */
  async close(): Promise<void> {
    await Promise.all(this.stores.splice(0).map((s) => s.close()));
    await Promise.all(this.closers.splice(0).map((close) => close()));
  }
}

/**
 * The unhandled rejections of the calling file while its tests run (a store must leave none,
 * whatever Redis does); a test at its end expects the list empty.
 */
export function unhandledRejections(): unknown[] {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  beforeAll(() => {
    process.on("unhandledRejection", onUnhandled);
  });
  afterAll(() => {
    process.off("unhandledRejection", onUnhandled);
  });
  return unhandled;
}

/**
 * The charges Redis acknowledged (`acked`: the allowed decisions per identifier) that
 * `limiter`'s counts no longer hold: for each identifier and rule, how far its count is below
 * what was acknowledged (fixed-window policies: their counts are exact). Each peek must be
 * answered by Redis.
 */
export async function lostCharges(
  limiter: Limiter,
  acked: ReadonlyMap<string, number>,
): Promise<number> {
  let missing = 0;
  for (const [id, n] of acked) {
    const d = await limiter.peek(id);
    expect(d.reason).toBeUndefined();
    for (const r of d.rules) missing += Math.max(0, n - (r.limit - r.remaining));
  }
  return missing;
}
