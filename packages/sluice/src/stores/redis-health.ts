/**
 * What the Redis store knows about the health of its Redis, kept apart from the batching:
 * circuit breakers (one for a standalone or Sentinel server, one per slot in a Cluster), and the
 * distance from this process's clock to Redis's (to give every call a deadline on the server's
 * clock). The client's events come through its port (redis-client.ts).
 */

import type { Logger } from "../logger.js";

/**
 * One circuit breaker. Closed, it lets every call through and counts failures in a row; at
 * `threshold` it opens. Open, it refuses calls until `retryAt`, then lets one call through as a
 * trial: its success closes the breaker, its failure opens it again for another interval.
 */
export class Breaker {
  private failures = 0;
  /** When the breaker is open, the time (monoNow) from which a trial may go; 0 when closed. */
  private retryAt = 0;
  private trial = false;

  constructor(
    private readonly threshold: number,
    private readonly intervalMs: number,
  ) {}

  /** True while the breaker is open (calls are refused, but for a trial). */
  get open(): boolean {
    return this.retryAt !== 0;
  }

  /** Whether a call may go now (while open, only one trial at a time once its time has come). */
  allow(now: number): boolean {
    if (this.retryAt === 0) return true;
    if (this.trial || now < this.retryAt) return false;
    this.trial = true;
    return true;
  }

  success(): void {
    this.failures = 0;
    this.retryAt = 0;
    this.trial = false;
  }

  failure(now: number): void {
    if (this.trial) {
      this.trial = false;
      this.retryAt = now + this.intervalMs;
      return;
    }
    if (this.retryAt === 0 && ++this.failures >= this.threshold)
      this.retryAt = now + this.intervalMs;
  }

  /** Redis is reachable again (the client reconnected): the next call is a trial, at once. */
  retryNow(): void {
    if (this.retryAt !== 0 && !this.trial) this.retryAt = Number.MIN_VALUE;
  }
}

/**
 * The breakers of one store: a single one for a standalone or Sentinel server; one per slot in
 * a Cluster (created on a slot's first failure, dropped when it closes), so that a failing node,
 * or a slot in the middle of a migration, fails fast alone while every other slot is served.
 */
export class Breakers {
  private readonly single: Breaker | undefined;
  private readonly bySlot = new Map<number, Breaker>();

  constructor(
    perSlot: boolean,
    private readonly threshold: number,
    private readonly intervalMs: number,
  ) {
    this.single = perSlot ? undefined : new Breaker(threshold, intervalMs);
  }

  /** Whether a call for `slot` may go now. */
  allow(slot: number, now: number): boolean {
    const b = this.single ?? this.bySlot.get(slot);
    return b === undefined || b.allow(now);
  }

  success(slot: number): void {
    if (this.single) this.single.success();
    else if (this.bySlot.size > 0) this.bySlot.delete(slot);
  }

  failure(slot: number, now: number): void {
    if (this.single) return this.single.failure(now);
    let b = this.bySlot.get(slot);
    if (b === undefined) this.bySlot.set(slot, (b = new Breaker(this.threshold, this.intervalMs)));
    b.failure(now);
  }

  /** True while any breaker is open. */
  get anyOpen(): boolean {
    if (this.single) return this.single.open;
    for (const b of this.bySlot.values()) if (b.open) return true;
    return false;
  }

  /** The client is connected again (or the Cluster's slots were refreshed): try at once. */
  retryNow(): void {
    this.single?.retryNow();
    for (const b of this.bySlot.values()) b.retryNow();
  }
}

/** How long a sample of the clock distance is trusted before a newer one replaces it (ms). */
const SAMPLE_TRUST_MS = 10_000;

/**
 * The distance from this process's monotonic clock to the Redis server's clock, so that a call
 * can carry its deadline in the server's time (lua/sluice.lua refuses to run after it).
 *
 * Each reply carries the server's time T (whole ms) when the script ran; it ran before the reply
 * arrived at local time r, so the server was at least T − r ahead of this clock: a lower bound
 * of the distance. The deadline sent for a call due at local time D is D + (that bound) − 1: if
 * the server runs the call no later than that by its own clock, it ran before D by ours, before
 * the caller gave up on it. The largest recent bound is kept (tightest); a bound older than 10 s
 * gives way to the next sample, so that a clock step is followed. In a Cluster each slot keeps
 * its own (the nodes' clocks may differ); a slot without one sends no deadline.
 */
export class ClockOffsets {
  private single: { lo: number; at: number } | undefined;
  private readonly bySlot: Map<number, { lo: number; at: number }> | undefined;

  constructor(perSlot: boolean) {
    this.bySlot = perSlot ? new Map() : undefined;
  }

  /** A reply that left the server at `serverMs` arrived at local time `receivedAt`. */
  sample(slot: number, serverMs: number, receivedAt: number): void {
    const lo = serverMs - receivedAt;
    const e = this.bySlot ? this.bySlot.get(slot) : this.single;
    if (e === undefined) {
      const fresh = { lo, at: receivedAt };
      if (this.bySlot) this.bySlot.set(slot, fresh);
      else this.single = fresh;
    } else if (lo > e.lo || receivedAt - e.at > SAMPLE_TRUST_MS) {
      e.lo = lo;
      e.at = receivedAt;
    }
  }

  /** The server's time (epoch ms) at local time `local`, as the samples tell, or undefined. */
  serverNow(slot: number, local: number): number | undefined {
    const e = this.bySlot ? this.bySlot.get(slot) : this.single;
    return e === undefined ? undefined : local + e.lo;
  }

  /** The server-time deadline (epoch ms, as text) of a call due at local time `due`, or "". */
  deadline(slot: number, due: number): string {
    const e = this.bySlot ? this.bySlot.get(slot) : this.single;
    return e === undefined ? "" : String(Math.floor(due + e.lo) - 1);
  }
}

/**
 * True for an error that says the server cannot be reached at all (nothing listens, no such
 * host), as opposed to one that is slow to answer. A Cluster reports its nodes' last error.
 */
export function isUnreachable(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 4; depth++) {
    const code = (e as { code?: unknown }).code;
    if (
      code === "ECONNREFUSED" ||
      code === "ENOTFOUND" ||
      code === "EHOSTUNREACH" ||
      code === "ENETUNREACH"
    )
      return true;
    e = (e as { lastNodeError?: unknown }).lastNodeError;
  }
  return false;
}

/**
 * Whether a store can decide, said once when it stops and once when it can again — never once
 * per call — to its logger. A store is down when its first connection failed or a breaker
 * opened (calls fail fast); it is up again at the first answer from the server.
 */
export class Outage {
  /** When the outage began (monoNow), or undefined while up. */
  private since: number | undefined;
  /** Operations answered by an error (decisions: by `onStoreError`) during the outage. */
  private failed = 0;

  constructor(
    private readonly logger: Logger | undefined,
    /** What is down, in a message ("Redis at 127.0.0.1:6379"). */
    private readonly what: string,
  ) {}

  /** True during an outage. */
  get down(): boolean {
    return this.since !== undefined;
  }

  /** The store cannot decide (`cause`: why, in words): said once. */
  began(cause: string, now: number): void {
    if (this.since !== undefined) return;
    this.since = now;
    this.failed = 0;
    this.logger?.warn(
      `sluice: ${this.what} is unavailable (${cause}); each policy's onStoreError decides until it is back`,
    );
  }

  /** `n` operations were answered by an error. */
  count(n: number): void {
    if (this.since !== undefined) this.failed += n;
  }

  /** The server answered: the outage, if any, is over (said once). */
  ended(now: number): void {
    if (this.since === undefined) return;
    const seconds = ((now - this.since) / 1000).toFixed(1);
    this.logger?.warn(
      `sluice: ${this.what} is available again after ${seconds} s (${this.failed} operation(s) answered by onStoreError or an error meanwhile)`,
    );
    this.since = undefined;
  }
}

/**
 * An error's cause in a few words for an operator: its code and address (`ECONNREFUSED
 * 127.0.0.1:6390`), looking through what clients wrap (an ioredis Cluster's `lastNodeError`,
 * Node's `AggregateError` of every address tried, `cause`).
 */
export function causeOf(err: unknown): string {
  for (let e = err, depth = 0; e && depth < 5; depth++) {
    const x = e as {
      code?: unknown;
      address?: unknown;
      port?: unknown;
      message?: unknown;
      errors?: unknown;
      lastNodeError?: unknown;
      cause?: unknown;
    };
    if (typeof x.code === "string" && typeof x.address === "string")
      return `${x.code} ${x.address}${typeof x.port === "number" ? `:${x.port}` : ""}`;
    const next =
      x.lastNodeError ??
      (Array.isArray(x.errors) && x.errors.length > 0
        ? x.errors[x.errors.length - 1]
        : undefined) ??
      x.cause;
    if (next === undefined || next === null)
      return typeof x.message === "string" && x.message !== "" ? x.message : String(e);
    e = next;
  }
  return String(err);
}

/**
 * How long a call to a Cluster slot may go unanswered before the slot is thought to be moving
 * (ms): at least this, and at least {@link SLOW_CALL_FACTOR} times the calls' usual time (on a
 * machine so busy that every call is slow, no slot looks stuck for it).
 */
export const SLOW_CALL_MS = 100;
export const SLOW_CALL_FACTOR = 8;

/**
 * The usual time of an answered call (a moving average, ms), and from it how long a call may go
 * unanswered before its slot is taken to be moving ({@link SLOW_CALL_MS},
 * {@link SLOW_CALL_FACTOR}). A sample counts for at most the threshold of the moment, so that
 * one call that waited out a move raises the usual time by a little, not eightfold.
 */
export class CallTimes {
  private usual = 0;

  /** An answered call took `ms`. */
  sample(ms: number): void {
    const taken = Math.min(ms, this.slowMs);
    this.usual = this.usual === 0 ? taken : this.usual + (taken - this.usual) / 16;
  }

  /** How long a call may go unanswered before its slot is thought to be moving (ms). */
  get slowMs(): number {
    return Math.max(SLOW_CALL_MS, SLOW_CALL_FACTOR * this.usual);
  }
}

/** How long a slot stays "moving" after the last sign of it (ms). */
export const MOVING_MS = 1000;

/**
 * What a Cluster store knows of each slot's calls: those in flight (when each was sent, oldest
 * first) and whether the slot is moving. A slot moves when `redis-cli --cluster reshard` (or any
 * `MIGRATE`) takes its keys to another node: until the last key has moved, Redis refuses a
 * script whose keys are on both nodes (`TRYAGAIN`), and on the importing node one with a key
 * that does not exist yet, so a call carrying many identifiers' operations cannot run there
 * while the slot moves — but each operation alone, whose keys moved together, can (the source
 * runs it, or sends it on with `ASK`). A slot is taken to be moving when a call to it is refused
 * so, when one goes unanswered much longer than calls usually take ({@link SLOW_CALL_MS}; a
 * client that retries `TRYAGAIN` by itself, as ioredis does, says nothing until then), or
 * when one times out; it stays so until {@link MOVING_MS} after the last such sign.
 */
export class SlotCalls {
  /** Send times (monoNow) of the calls in flight, per slot, oldest first. */
  private readonly inFlight = new Map<number, number[]>();
  /** Until when (monoNow) each moving slot is decided one operation per call. */
  private readonly moving = new Map<number, number>();

  /** Calls in flight for `slot`. */
  count(slot: number): number {
    return this.inFlight.get(slot)?.length ?? 0;
  }

  /** A call for `slot` was sent at `at`. */
  started(slot: number, at: number): void {
    const list = this.inFlight.get(slot);
    if (list === undefined) this.inFlight.set(slot, [at]);
    else list.push(at);
  }

  /** The call for `slot` sent at `at` came back (or gave up). */
  ended(slot: number, at: number): void {
    const list = this.inFlight.get(slot);
    if (list === undefined) return;
    const i = list.indexOf(at);
    list.splice(i < 0 ? 0 : i, 1);
    if (list.length === 0) this.inFlight.delete(slot);
  }

  /** Whether `slot`'s oldest call in flight has gone unanswered for `slowMs`. */
  stuck(slot: number, now: number, slowMs: number): boolean {
    const list = this.inFlight.get(slot);
    return list !== undefined && now - list[0]! >= slowMs;
  }

  /** Whether `slot` is moving (operations go one per call). */
  isMoving(slot: number, now: number): boolean {
    if (this.moving.size === 0) return false;
    const until = this.moving.get(slot);
    if (until === undefined) return false;
    if (now < until) return true;
    this.moving.delete(slot);
    return false;
  }

  /** A sign that `slot` is moving, seen at `now`. */
  moved(slot: number, now: number): void {
    this.moving.set(slot, now + MOVING_MS);
  }
}
