/**
 * The remote-call engine every remote store shares — the Redis store (over TCP, and over HTTP
 * through `sluice/upstash`) and the Durable Object store: what is decided apart from how it
 * travels. Operations are queued and sent together at the end of the microtask checkpoint,
 * grouped (by Cluster slot, by Durable Object shard), at most `maxBatch` a call and at most
 * `maxInFlight` calls in flight per group, a queue spread over the calls still free. Each
 * operation has its budget (`timeoutMs` from its call): when it ends the operation is answered
 * by an error whatever its call does, and a reply that comes after that goes to the transport's
 * `late`. Failed calls count in circuit breakers (one, or one per group) and an outage is said
 * once to the logger. A gate (the first connection, a failover) may hold the queue back.
 *
 * What a call carries and how it travels is the transport's (redis.ts with redis-codec.ts,
 * durable-object.ts).
 */
import { monoNow } from "../clock.js";
import { StoreError } from "../errors.js";
import type { Logger } from "../logger.js";
import { unrefTimer } from "../platform.js";
import { Breakers, CallTimes, Outage, SlotCalls } from "./redis-health.js";

/** An operation in the queue: its budget's end and how to answer it with an error. */
export interface Queued {
  /** When the caller stops waiting (monoNow); set by the engine when it is queued. */
  due: number;
  readonly reject: (err: unknown) => void;
}

/** What a failed call means. */
export type CallFailure =
  /** Refused before it ran (a Cluster slot moving): its operations may go again. */
  | "refused"
  /** It reached the server after its deadline and changed nothing. */
  | "expired"
  /** Anything else: counted by the breaker. */
  | "failed";

/** How calls travel: the store's side of the engine. */
export interface Transport<Q extends Queued> {
  /** The group an operation travels in (a Cluster slot, a shard); 0 when there is one. */
  groupOf(op: Q): number;
  /** Why no call can go now (e.g. `the client is reconnecting`), or undefined. */
  unavailable(): string | undefined;
  /** When a call of `group` due at `due` may still be answered: later for a first call. */
  dueOf(group: number, due: number, now: number): number;
  /**
   * Sends one call of `batch` (all in `group`); resolves with the reply. `waiting` says whether
   * its operations still wait for it (a call given up must not be sent again).
   */
  call(batch: Q[], group: number, due: number, waiting: () => boolean): Promise<unknown>;
  /** Settles each operation of a call answered in time (`sentAt`: monoNow when it went). */
  settle(batch: Q[], reply: unknown, group: number, sentAt: number): void;
  /** A reply that came after its operations were answered by their budget. */
  late(batch: Q[], reply: unknown, group: number): void;
  /** What a failed call means, and its cause in a few words. */
  failure(err: unknown, group: number): { readonly kind: CallFailure; readonly cause: string };
}

/**
 * What may hold the queue back: the first connection, a failover. While `mustHold`, queued
 * operations wait; the engine looks again at `holdUntil` and then asks `holdEnded`.
 */
export interface Gate<Q extends Queued> {
  mustHold(): boolean;
  /** When (monoNow) the held queue is to be looked at. */
  holdUntil(queue: readonly Q[]): number;
  /** That time came: the gate answers what waited too long (`engine.rejectQueued`) or holds on. */
  holdEnded(): void;
}

/** Options of the engine (the store's, checked). */
export interface EngineOptions {
  readonly timeoutMs: number;
  readonly maxBatch: number;
  readonly maxInFlight: number;
  /**
   * Spread a queue over the calls still free (several calls at once) — or send each group's
   * operations as few calls as `maxBatch` allows. Default true.
   */
  readonly spread?: boolean;
  readonly breakerFailures: number;
  readonly probeIntervalMs: number;
  /** Calls are grouped (Cluster slots, shards): in-flight counts and breakers are per group. */
  readonly grouped: boolean;
  /** Groups are Cluster slots, which move: decided one operation per call while they do. */
  readonly slotsMove: boolean;
  readonly logger: Logger | undefined;
  /** What answers, in messages: `Redis`, `the Durable Object`. */
  readonly what: string;
  /** The same, for the outage lines: `Redis (ioredis client)`. */
  readonly describe: string;
}

/** Fewest operations a batch is split into when it is spread over several calls. */
const MIN_CHUNK = 4;

/** How long an operation refused alone waits before it goes again (ms). */
const RETRY_REFUSED_MS = 20;

/** A timer that can be cancelled. */
export interface Deadline {
  cancel(): void;
}

/**
 * Calls `fn` once `monoNow()` has reached `at`. Node may fire a timer a little before its time
 * by the clock of the moment (its loop time lags); a call must never be answered by its timeout
 * before its deadline, so the timer is set again for what is left.
 */
export function deadlineTimer(at: number, fn: () => void): Deadline {
  let t: ReturnType<typeof setTimeout>;
  const arm = (): void => {
    t = setTimeout(
      () => {
        if (at - monoNow() > 0) arm();
        else fn();
      },
      Math.max(0, Math.ceil(at - monoNow())),
    );
  };
  arm();
  return { cancel: () => clearTimeout(t) };
}

/** The engine; see the file's comment. */
export class RemoteCalls<Q extends Queued> {
  private queue: Q[] = [];
  private scheduled = false;
  /** When operations queued in this turn are stamped (monoNow, read once per turn). */
  private turnStart = 0;
  /** Calls in flight (ungrouped). */
  private inFlight = 0;
  /** Grouped: calls in flight per group, and which Cluster slots are moving. */
  private readonly groups = new SlotCalls();
  private readonly breakers: Breakers;
  /** Says once that the server is down, and once that it is back. */
  readonly outage: Outage;
  /** The transport's last error, in words (what an outage is said to be caused by). */
  lastCause = "no answer";
  private holdTimer: Deadline | undefined;
  private closed = false;
  /** How long calls usually take to come back (ms; a moving average of the answered ones). */
  /** How long answered calls usually take (grouped stores whose slots move). */
  private readonly callTimes = new CallTimes();

  constructor(
    private readonly o: EngineOptions,
    private readonly transport: Transport<Q>,
    private readonly gate?: Gate<Q>,
  ) {
    this.breakers = new Breakers(o.grouped, o.breakerFailures, o.probeIntervalMs);
    this.outage = new Outage(o.logger, o.describe);
  }

  /** True while a circuit breaker is open (calls fail fast). */
  get breakerOpen(): boolean {
    return this.breakers.anyOpen;
  }

  /** Queues `op` (its budget counted from this turn); it goes at the end of the turn. */
  enqueue(op: Q): void {
    if (!this.scheduled) {
      // The first operation of this turn: every operation of the turn is stamped with this time.
      this.scheduled = true;
      this.turnStart = monoNow();
      queueMicrotask(this.flushLater);
    }
    op.due = this.turnStart + this.o.timeoutMs;
    this.queue.push(op);
    // A full batch goes at once (grouped, batches are per group: at the end of the turn).
    if (this.queue.length >= this.o.maxBatch && !this.o.grouped) this.flush();
  }

  /** What waits in the queue (the gate gives it a new budget when the first connection comes). */
  get queued(): readonly Q[] {
    return this.queue;
  }

  private readonly flushLater = (): void => {
    this.scheduled = false;
    // Every call busy: what is queued goes when one of them comes back (see `ended`). Grouped,
    // `flush` decides per group.
    if (
      this.o.grouped ||
      this.inFlight < this.o.maxInFlight ||
      this.queue.length >= this.o.maxBatch
    )
      this.flush();
  };

  /** Sends everything queued, unless the gate holds it back. */
  flush(): void {
    if (this.queue.length === 0) return;
    if (this.gate?.mustHold()) {
      this.hold();
      return;
    }
    const queue = this.queue;
    this.queue = [];
    if (!this.o.grouped) {
      this.sendChunks(queue, 0);
      return;
    }
    const byGroup = new Map<number, Q[]>();
    for (const p of queue) {
      const g = this.transport.groupOf(p);
      const list = byGroup.get(g);
      if (list === undefined) byGroup.set(g, [p]);
      else list.push(p);
    }
    const now = monoNow();
    const slowMs = this.callTimes.slowMs;
    for (const [g, list] of byGroup) {
      // A call unanswered for long: the slot is likely moving (see `SlotCalls`).
      if (this.o.slotsMove && this.groups.stuck(g, now, slowMs)) this.groups.moved(g, now);
      const busy = this.groups.count(g) >= this.o.maxInFlight;
      if (this.o.slotsMove && this.groups.isMoving(g, now)) {
        // One operation per call while the slot moves: each is refused only if its own keys
        // are, for the moment, on two nodes.
        for (const p of list) this.send([p], g);
      } else if (!busy || list.length >= this.o.maxBatch) this.sendChunks(list, g);
      // A group with every call busy keeps its operations until one comes back.
      else for (const p of list) this.queue.push(p);
    }
  }

  /**
   * Sends a batch (one group) as calls of at most `maxBatch`, spread over the calls still free
   * in chunks of at least {@link MIN_CHUNK}: with little in flight, several calls run at once,
   * so the server works on one while Node encodes the next or reads the previous one's answer.
   */
  private sendChunks(batch: Q[], group: number): void {
    const n = batch.length;
    const free = this.o.maxInFlight - (this.o.grouped ? this.groups.count(group) : this.inFlight);
    const parts = Math.max(
      1,
      this.o.spread === false ? 1 : Math.min(free, Math.floor(n / MIN_CHUNK)),
      Math.ceil(n / this.o.maxBatch),
    );
    if (parts === 1) {
      this.send(batch, group);
      return;
    }
    const size = Math.ceil(n / parts);
    for (let i = 0; i < n; i += size) this.send(batch.slice(i, i + size), group);
  }

  /**
   * Sends one call and settles each operation with its own result. The call is due when its
   * oldest operation is (each operation's budget counts from its own call).
   */
  private send(batch: Q[], group: number): void {
    const now = monoNow();
    if (!this.breakers.allow(group, now)) {
      this.rejectAll(
        batch,
        new StoreError(
          "SLUICE_ERR_STORE_UNAVAILABLE",
          `${this.o.what} is unavailable (circuit open); waiting for a trial call to succeed`,
        ),
      );
      return;
    }
    const unavailable = this.transport.unavailable();
    if (unavailable !== undefined) {
      this.failed(group, now, unavailable);
      this.rejectAll(
        batch,
        new StoreError(
          "SLUICE_ERR_STORE_UNAVAILABLE",
          `${this.o.what} is unavailable (${unavailable})`,
        ),
      );
      return;
    }
    let due = Infinity;
    for (const p of batch) if (p.due < due) due = p.due;
    due = this.transport.dueOf(group, due, now);
    if (this.o.grouped) this.groups.started(group, now);
    else this.inFlight++;
    let answered = false;
    const timer = deadlineTimer(due, () => {
      if (answered) return;
      answered = true;
      this.ended(group, now);
      const at = monoNow();
      // A grouped call that times out may have met a moving slot (see `SlotCalls`).
      if (this.o.slotsMove) this.groups.moved(group, at);
      this.failed(group, at, `no answer within ${this.o.timeoutMs} ms`);
      this.rejectAll(
        batch,
        new StoreError(
          "SLUICE_ERR_STORE_TIMEOUT",
          `${this.o.what} did not answer within ${this.o.timeoutMs} ms`,
        ),
      );
    });
    let call: Promise<unknown>;
    try {
      call = this.transport.call(batch, group, due, () => !answered);
    } catch (err) {
      // A transport that throws instead of rejecting fails this call, never the flush.
      call = Promise.reject(err);
    }
    call.then(
      (reply) => {
        if (answered) {
          this.transport.late(batch, reply, group);
          return;
        }
        answered = true;
        timer.cancel();
        this.ended(group, now);
        if (this.o.slotsMove) this.callTimes.sample(monoNow() - now);
        this.breakers.success(group);
        // Over once no breaker is open (grouped: every group's).
        if (this.outage.down && !this.breakers.anyOpen) this.outage.ended(monoNow());
        this.transport.settle(batch, reply, group, now);
      },
      (err: unknown) => {
        const { kind, cause } = this.transport.failure(err, group);
        if (answered) return;
        answered = true;
        timer.cancel();
        this.ended(group, now);
        if (kind === "refused" && this.o.slotsMove) {
          this.refused(batch, group);
          return;
        }
        this.failed(group, monoNow(), cause);
        this.rejectAll(
          batch,
          kind === "expired"
            ? new StoreError(
                "SLUICE_ERR_STORE_TIMEOUT",
                `${this.o.what} ran the call after its deadline (${this.o.timeoutMs} ms); it changed nothing`,
                { cause: err },
              )
            : new StoreError(
                "SLUICE_ERR_STORE",
                `${this.o.what} call failed: ${errorMessage(err)}`,
                {
                  cause: err,
                },
              ),
        );
      },
    );
  }

  /**
   * A call the server refused before running it, because its slot is moving (`TRYAGAIN`, or
   * an `ASK` or `MOVED` the client did not follow): nothing was charged, so its operations go
   * again, each alone — at once when it carried several, else after {@link RETRY_REFUSED_MS}
   * (its keys are on two nodes for the moment) — each within its own budget.
   */
  private refused(batch: Q[], group: number): void {
    const now = monoNow();
    this.groups.moved(group, now);
    const late = batch.filter((p) => p.due <= now + 1);
    if (late.length > 0)
      this.rejectAll(
        late,
        new StoreError(
          "SLUICE_ERR_STORE_TIMEOUT",
          `${this.o.what} did not answer within ${this.o.timeoutMs} ms (its Cluster slot ${group} was moving)`,
        ),
      );
    const live = late.length === 0 ? batch : batch.filter((p) => p.due > now + 1);
    if (live.length > 1) for (const p of live) this.send([p], group);
    else if (live.length === 1)
      unrefTimer(
        setTimeout(() => {
          if (this.closed)
            this.rejectAll(
              live,
              new StoreError("SLUICE_ERR_STORE_UNAVAILABLE", "the store is closed"),
            );
          else this.send(live, group);
        }, RETRY_REFUSED_MS),
      );
  }

  /** A call came back (or gave up): what waited for it goes now (after this turn's own calls). */
  private ended(group: number, sentAt: number): void {
    if (this.o.grouped) this.groups.ended(group, sentAt);
    else this.inFlight--;
    if (this.queue.length > 0 && !this.scheduled) {
      this.scheduled = true;
      this.turnStart = monoNow();
      queueMicrotask(this.flushLater);
    }
  }

  /**
   * A call for `group` failed (`cause`, in words): the breaker counts it, and an opened breaker
   * begins an outage (said once to the logger).
   */
  private failed(group: number, now: number, cause: string): void {
    this.breakers.failure(group, now);
    if (this.breakers.anyOpen && !this.outage.down)
      this.outage.began(this.lastCause === "no answer" ? cause : this.lastCause, now);
  }

  /** Answers every operation of `batch` with `err`. */
  rejectAll(batch: readonly Q[], err: unknown): void {
    this.outage.count(batch.length);
    for (const p of batch) p.reject(err);
  }

  /** Answers what waits in the queue with `err` (those `which` picks, or all). */
  rejectQueued(err: unknown, which?: (op: Q) => boolean): void {
    const queue = this.queue;
    this.queue = which ? queue.filter((p) => !which(p)) : [];
    this.rejectAll(which ? queue.filter(which) : queue, err);
  }

  /** The queue waits for the gate; one timer, at the gate's time. */
  private hold(): void {
    if (this.holdTimer !== undefined) return;
    this.holdTimer = deadlineTimer(this.gate!.holdUntil(this.queue), () => {
      this.holdTimer = undefined;
      this.gate!.holdEnded();
    });
  }

  /** Looks at the held queue again at the gate's time (after `holdEnded` kept some waiting). */
  holdAgain(): void {
    if (this.queue.length > 0) this.hold();
  }

  /** The gate no longer holds the queue for now (the first connection failed). */
  stopHolding(): void {
    this.holdTimer?.cancel();
    this.holdTimer = undefined;
  }

  /** The server may be reached again (connected, a failover over): try at once, send what waited. */
  reopen(): void {
    this.holdTimer?.cancel();
    this.holdTimer = undefined;
    this.breakers.retryNow();
    this.flush();
  }

  /** The server's topology changed (a Cluster's slots refreshed): breakers try again at once. */
  retryNow(): void {
    this.breakers.retryNow();
  }

  /** Stops: what is queued is answered with `err`; nothing goes afterwards. */
  close(err: unknown): void {
    this.closed = true;
    this.holdTimer?.cancel();
    this.holdTimer = undefined;
    this.rejectQueued(err);
  }
}

/** An error's message. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
