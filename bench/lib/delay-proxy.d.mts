/** A running delay proxy (see delay-proxy.mjs). */
export interface DelayProxy {
  /** The port it listens on, on 127.0.0.1. */
  readonly port: number;
  /** Connections carrying data now. */
  readonly connections: number;
  /** A partition: connections in place are destroyed, new ones carry nothing until `heal()`. */
  cut(): void;
  /** Ends the partition (held connections are destroyed, so that clients reconnect). */
  heal(): void;
  /** Stops listening and destroys every connection. */
  close(): Promise<void>;
}

/** Starts a proxy to `target` on 127.0.0.1 adding `delayMs` each way. */
export function startDelayProxy(
  target: { host: string; port: number },
  delayMs: number,
): Promise<DelayProxy>;
