/**
 * The client's HTTP to the sluice service: each request with the app's API key, given up after
 * its wait plus `timeoutMs` (on the injected timers) or when the client closes, its answer read
 * whole; and the waits between requests, cut short by close too.
 */
import { SluiceError } from "../errors.js";
import type { Resolved } from "./options.js";
import type { PolicyFetchResponse, RuntimeAbortSignal } from "./types.js";
import { causeMessage, sourceError } from "./wire.js";

/** Requests and waits that `close()` ends at once. */
export class ServiceHttp {
  private closed = false;
  private readonly requests = new Set<AbortController>();
  private readonly sleepers = new Set<() => void>();

  constructor(private readonly o: Resolved) {}

  /** Gives up every request under way and ends every wait; later GETs are refused. */
  close(): void {
    this.closed = true;
    for (const c of this.requests) c.abort();
    for (const wake of this.sleepers) wake();
  }

  /** One request, given up after `waitMs + timeoutMs` or on close; the body read whole. */
  async request(
    method: "GET" | "POST",
    path: string,
    body: string | undefined,
    waitMs: number,
    headers: Record<string, string>,
  ): Promise<{ status: number; headers: PolicyFetchResponse["headers"]; text: string }> {
    if (this.closed && method === "GET") throw sourceError("the policy client is closed");
    const controller = new AbortController();
    this.requests.add(controller);
    const limitMs = waitMs + this.o.timeoutMs;
    // Settled by whichever comes first: the timeout, or an abort (close()).
    let fail!: (err: SluiceError) => void;
    const failed = new Promise<never>((_, reject) => (fail = reject));
    const timer = this.o.timers.setTimeout(() => {
      fail(
        sourceError(
          `the sluice service at ${this.o.url} did not answer ${method} ${path.split("?")[0]} within ${limitMs} ms`,
        ),
      );
      controller.abort();
    }, limitMs);
    controller.signal.addEventListener("abort", () =>
      fail(sourceError("the request was given up: the policy client is closing")),
    );
    try {
      const work = (async () => {
        const res = await this.o.fetch(`${this.o.url}${path}`, {
          method,
          headers: {
            accept: "application/json",
            authorization: `Bearer ${this.o.apiKey}`,
            ...headers,
          },
          ...(body !== undefined ? { body } : {}),
          signal: controller.signal as RuntimeAbortSignal,
        });
        const text = await res.text();
        return { status: res.status, headers: res.headers, text };
      })();
      work.catch(() => undefined);
      return await Promise.race([work, failed]);
    } catch (err) {
      if (err instanceof SluiceError) throw err;
      throw sourceError(
        `could not reach the sluice service at ${this.o.url}: ${causeMessage(err)}`,
        err,
      );
    } finally {
      this.o.timers.clearTimeout(timer);
      this.requests.delete(controller);
      failed.catch(() => undefined);
    }
  }

  /** Waits `ms` on the client's timers, or until close. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        this.o.timers.clearTimeout(handle);
        this.sleepers.delete(wake);
        resolve();
      };
      const handle = this.o.timers.setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }
}
