/**
 * A connection to one sentinel over a plain TCP socket, speaking just enough RESP (RESP2) to ask
 * the sentinel a few questions and to follow its pub/sub channels. The Sentinel watch uses it for
 * clients that cannot hand over a connection of their own to a sentinel (node-redis's
 * `createSentinel` keeps its sentinel connection private); an ioredis client's `duplicate` is used
 * where there is one (sentinel-watch.ts). `node:net` is loaded when a connection is first made, so
 * the core stays free of Node built-ins elsewhere.
 */
import { importBuiltin, unrefTimer } from "../platform.js";

/** A sentinel's address. */
export interface SentinelAddress {
  readonly host: string;
  readonly port: number;
}

/** The part of `node:net` used here. */
interface Net {
  createConnection(options: { host: string; port: number }): Socket;
}

interface Socket {
  setNoDelay(noDelay: boolean): unknown;
  write(data: string): unknown;
  destroy(): unknown;
  unref(): unknown;
  on(event: "data", listener: (chunk: Uint8Array) => void): unknown;
  on(event: "connect" | "close", listener: () => void): unknown;
  on(event: "error", listener: (err: Error) => void): unknown;
}

/** A RESP2 value: text, an integer, an error, nil, or an array of them. */
export type Resp = string | number | null | RespError | Resp[];

/** An error reply (`-ERR …`). */
export class RespError extends Error {
  override readonly name = "RespError";
}

/** One command in RESP: an array of bulk strings. */
export function encodeCommand(args: readonly string[]): string {
  let out = `*${args.length}\r\n`;
  for (const a of args) out += `$${new TextEncoder().encode(a).length}\r\n${a}\r\n`;
  return out;
}

/**
 * Reads RESP2 values from chunks as they arrive: `push` a chunk, then take every whole value with
 * `next` (undefined when the rest has not arrived yet).
 */
export class RespReader {
  private buf = new Uint8Array(0);
  private pos = 0;
  private readonly decoder = new TextDecoder();

  push(chunk: Uint8Array): void {
    const rest = this.buf.subarray(this.pos);
    const joined = new Uint8Array(rest.length + chunk.length);
    joined.set(rest, 0);
    joined.set(chunk, rest.length);
    this.buf = joined;
    this.pos = 0;
  }

  /** The next whole value, or undefined when it is not all here. */
  next(): { value: Resp } | undefined {
    const start = this.pos;
    const v = this.read();
    if (v === undefined) this.pos = start;
    return v;
  }

  private line(): string | undefined {
    for (let i = this.pos; i + 1 < this.buf.length; i++)
      if (this.buf[i] === 13 && this.buf[i + 1] === 10) {
        const text = this.decoder.decode(this.buf.subarray(this.pos, i));
        this.pos = i + 2;
        return text;
      }
    return undefined;
  }

  private read(): { value: Resp } | undefined {
    const head = this.line();
    if (head === undefined) return undefined;
    const type = head[0];
    const rest = head.slice(1);
    switch (type) {
      case "+":
        return { value: rest };
      case "-":
        return { value: new RespError(rest) };
      case ":":
        return { value: Number(rest) };
      case "$": {
        const n = Number(rest);
        if (n < 0) return { value: null };
        if (this.pos + n + 2 > this.buf.length) return undefined;
        const text = this.decoder.decode(this.buf.subarray(this.pos, this.pos + n));
        this.pos += n + 2;
        return { value: text };
      }
      case "*": {
        const n = Number(rest);
        if (n < 0) return { value: null };
        const items: Resp[] = [];
        for (let i = 0; i < n; i++) {
          const item = this.read();
          if (item === undefined) return undefined;
          items.push(item.value);
        }
        return { value: items };
      }
      default:
        return { value: new RespError(`unreadable reply from the sentinel: ${head}`) };
    }
  }
}

/** How long to wait before connecting to a sentinel again (ms). */
const RECONNECT_MS = 1000;

/**
 * A connection to one sentinel, subscribed to its events: an ioredis `Redis` made by the
 * client's `duplicate`, or a {@link SentinelSocket}.
 */
export interface SentinelConnectionLike {
  subscribe(...channels: string[]): Promise<unknown>;
  on(event: "message", listener: (channel: string, message: string) => void): unknown;
  on(event: "error", listener: (err: Error) => void): unknown;
  disconnect(): void;
}

/**
 * A connection to one sentinel that asks (`command`) and follows channels (`subscribe`): it
 * reconnects by itself every second while the sentinel is down, and subscribes again.
 */
export class SentinelSocket implements SentinelConnectionLike {
  private socket: Socket | undefined;
  private readonly reader = new RespReader();
  private readonly waiting: Array<{ resolve: (v: Resp) => void; reject: (e: Error) => void }> = [];
  private channels: string[] = [];
  /** Connected: commands are written at once (else kept in `outbox` until connected). */
  private connected = false;
  private outbox: string[] = [];
  /** The connection was lost after a subscription: subscribe again once reconnected. */
  private resubscribe = false;
  private readonly messageListeners: Array<(channel: string, message: string) => void> = [];
  private readonly errorListeners: Array<(err: Error) => void> = [];
  private closed = false;
  private retry: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly address: SentinelAddress,
    /** `AUTH` arguments (a password, or a user and a password), when the sentinel needs them. */
    private readonly auth: readonly string[] | undefined = undefined,
  ) {
    void this.open();
  }

  /** Sends one command; resolves with its reply (an error reply rejects). */
  command(args: readonly string[]): Promise<Resp> {
    return new Promise((resolve, reject) => {
      if (this.closed) {
        reject(new Error("the sentinel connection is closed"));
        return;
      }
      this.waiting.push({ resolve, reject });
      if (this.connected) this.socket?.write(encodeCommand(args));
      else this.outbox.push(encodeCommand(args));
    });
  }

  subscribe(...channels: string[]): Promise<unknown> {
    this.channels = channels;
    return this.command(["SUBSCRIBE", ...channels]);
  }

  on(event: "message", listener: (channel: string, message: string) => void): this;
  on(event: "error", listener: (err: Error) => void): this;
  on(event: "message" | "error", listener: (...args: never[]) => void): this {
    if (event === "message")
      this.messageListeners.push(listener as (channel: string, message: string) => void);
    else this.errorListeners.push(listener as (err: Error) => void);
    return this;
  }

  disconnect(): void {
    this.closed = true;
    if (this.retry !== undefined) clearTimeout(this.retry);
    this.socket?.destroy();
    this.failWaiting(new Error("the sentinel connection is closed"));
  }

  private async open(): Promise<void> {
    const net = await importBuiltin<Net>("net");
    if (this.closed) return;
    const socket = net.createConnection({ host: this.address.host, port: this.address.port });
    socket.setNoDelay(true);
    // A node:net socket (this file runs only where node:net loads), not a timer.
    // eslint-disable-next-line no-restricted-syntax -- not a timer
    socket.unref();
    this.socket = socket;
    socket.on("connect", () => {
      // First AUTH, then (after a lost connection) the subscription again, then what waited.
      const first: string[][] = [];
      if (this.auth !== undefined) first.push(["AUTH", ...this.auth]);
      if (this.resubscribe) first.push(["SUBSCRIBE", ...this.channels]);
      for (let i = first.length - 1; i >= 0; i--)
        this.waiting.unshift({ resolve: () => undefined, reject: () => undefined });
      let out = first.map(encodeCommand).join("");
      for (const c of this.outbox.splice(0)) out += c;
      this.connected = true;
      if (out !== "") socket.write(out);
    });
    socket.on("data", (chunk) => this.read(chunk));
    socket.on("error", (err) => {
      for (const l of this.errorListeners) l(err);
    });
    socket.on("close", () => {
      this.connected = false;
      this.outbox = [];
      this.resubscribe = this.channels.length > 0;
      this.failWaiting(
        new Error(
          `the sentinel at ${this.address.host}:${this.address.port} closed the connection`,
        ),
      );
      if (this.closed) return;
      this.retry = setTimeout(() => void this.open(), RECONNECT_MS);
      unrefTimer(this.retry);
    });
  }

  private read(chunk: Uint8Array): void {
    this.reader.push(chunk);
    for (let v = this.reader.next(); v !== undefined; v = this.reader.next()) {
      const value = v.value;
      if (Array.isArray(value) && value[0] === "message" && value.length === 3) {
        for (const l of this.messageListeners) l(String(value[1]), String(value[2]));
        continue;
      }
      // A subscription's confirmations: one per channel, the first answers the command.
      if (Array.isArray(value) && value[0] === "subscribe" && value[2] !== 1) continue;
      const w = this.waiting.shift();
      if (w === undefined) continue;
      if (value instanceof RespError) w.reject(value);
      else w.resolve(value);
    }
  }

  private failWaiting(err: Error): void {
    for (const w of this.waiting.splice(0)) w.reject(err);
  }
}
