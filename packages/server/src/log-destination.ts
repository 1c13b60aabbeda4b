/**
 * Where `sluice serve` writes its JSON log: stdout, asynchronously, in a way that can never hold
 * the process up. pino's default destination flushes synchronously when the process exits and
 * retries for as long as the write fails, so a stdout pipe that is full (its reader stalled) or
 * closed under a pending write kept the process alive forever after SIGTERM, second signal
 * included. Here:
 *
 * - writes are asynchronous (sonic-boom), buffered up to {@link MAX_BUFFERED_BYTES}; lines beyond
 *   that are dropped, so a stalled reader costs bounded memory;
 * - a write that fails (EPIPE: the reader is gone; EBADF…) ends logging to that destination —
 *   there is nobody left to read it — instead of retrying;
 * - nothing runs at exit: shutdown waits for the buffer with {@link LogDestination.drain}, within
 *   its own deadline, and then exits whatever the pipe does.
 */
import sonicBoom, { type SonicBoom as SonicBoomClass } from "sonic-boom";

// A CommonJS module whose export is the class itself.
const SonicBoom = sonicBoom as unknown as typeof SonicBoomClass;

/** Most bytes buffered while the reader is slower than the log; later lines are dropped. */
export const MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

/** A log destination for pino, with a way to wait for what was written. */
export interface LogDestination {
  /** The stream to give pino. */
  readonly stream: { write(line: string): void };
  /**
   * Resolves once every line written so far has reached the file descriptor, or at once when
   * the destination failed. Never rejects; may never resolve while the reader is stalled, so
   * race it with a deadline.
   */
  drain(): Promise<void>;
  /** True once a write failed and logging to this destination stopped. */
  readonly failed: boolean;
}

/** An asynchronous destination on file descriptor `fd` (1: stdout). */
export function fdDestination(fd = 1): LogDestination {
  // Opening Node's own stream on a stdio pipe or socket makes the descriptor non-blocking
  // (libuv does), so a write to a full pipe fails with EAGAIN and is retried later. Left
  // blocking, the write would hang a thread-pool thread, and the process could not exit.
  if (fd === 1) void process.stdout.fd;
  else if (fd === 2) void process.stderr.fd;
  const boom = new SonicBoom({ fd, sync: false, maxLength: MAX_BUFFERED_BYTES });
  let pending = 0;
  let failed = false;
  const waiters: (() => void)[] = [];
  const settle = () => {
    if (pending > 0 && !failed) return;
    for (const w of waiters.splice(0)) w();
  };
  boom.on("write", (n: number) => {
    pending = Math.max(0, pending - n);
    settle();
  });
  boom.on("drop", (data: string | Buffer) => {
    pending = Math.max(0, pending - Buffer.byteLength(data));
    settle();
  });
  boom.on("error", () => {
    failed = true;
    settle();
  });
  return {
    stream: {
      write(line: string) {
        if (failed) return;
        pending += Buffer.byteLength(line);
        boom.write(line);
      },
    },
    drain() {
      if (pending === 0 || failed) return Promise.resolve();
      return new Promise((resolve) => waiters.push(resolve));
    },
    get failed() {
      return failed;
    },
  };
}
