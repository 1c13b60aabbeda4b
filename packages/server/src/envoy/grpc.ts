/**
 * The gRPC door of the Envoy rate limit service, on `node:http2` directly: the two unary
 * methods Envoy calls — `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` and
 * gRPC's standard health check `grpc.health.v1.Health/Check` — with the messages read and
 * written by wire.ts. Nothing else of gRPC is needed here (no streaming, no metadata, no
 * interceptors), so a general gRPC server's per-call machinery is not paid for.
 *
 * Every call gets a gRPC status, never a crash or a stream left open (gRPC's PROTOCOL-HTTP2
 * document, and what grpc-go and grpc-js answer):
 *
 * - not POST: HTTP 405 with `grpc-status` INTERNAL; a content type other than
 *   `application/grpc` (or `application/grpc+proto`): HTTP 415 with INTERNAL, so that a plain
 *   HTTP client sees the refusal and a gRPC client a status;
 * - another method: UNIMPLEMENTED; a `grpc-encoding` other than identity, gzip or deflate:
 *   UNIMPLEMENTED with `grpc-accept-encoding`;
 * - a message larger than the limit (announced or after decompression): RESOURCE_EXHAUSTED;
 * - no message, a message cut off, a second message, a compressed flag without an encoding,
 *   bytes that are not a protocol buffer, a compressed message that does not inflate: INTERNAL;
 * - a request not whole within the request timeout: DEADLINE_EXCEEDED;
 * - a request that cannot be answered (no domain, no descriptors, an override without a unit):
 *   INVALID_ARGUMENT naming the field; an unexpected failure: INTERNAL (logged). A counter
 *   store failure is never an error here: each limit's `onStoreError` answers.
 *
 * Envoy lets a call that failed through (or fails it, with `failure_mode_deny`), as it does for
 * any error. A call the client cancels (RST_STREAM) is dropped when its answer is ready.
 *
 * With a tracer, each `ShouldRateLimit` call is a server span (../tracing.ts), a child of the
 * `traceparent` of its metadata, ended when its stream closes with the status it was answered;
 * without one, no span work is done.
 */
import type { Span, Tracer } from "@opentelemetry/api";
import http2 from "node:http2";
import { gunzipSync, inflateSync } from "node:zlib";
import type { Logger } from "pino";
import { annotateDecisions, grpcServerSpan } from "../tracing.js";
import { type RateLimitService, type RlsRequest, type RlsResponse, RlsInputError } from "./rls.js";
import {
  SERVING_STATUS,
  WireError,
  decodeHealthCheckRequest,
  decodeRateLimitRequest,
  encodeHealthCheckResponse,
  encodeRateLimitResponse,
} from "./wire.js";

/** The service's full name. */
export const RLS_SERVICE = "envoy.service.ratelimit.v3.RateLimitService";
const RLS_PATH = `/${RLS_SERVICE}/ShouldRateLimit`;
const HEALTH_PATH = "/grpc.health.v1.Health/Check";

/** gRPC status codes used here. */
export const GRPC_STATUS = Object.freeze({
  OK: 0,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
});

/** Message encodings a request may use (`grpc-encoding`). */
const ENCODINGS = "identity,deflate,gzip";

const OK_HEADERS = Object.freeze({ ":status": 200, "content-type": "application/grpc" });
const OK_TRAILERS = Object.freeze({ "grpc-status": "0" });
const { NGHTTP2_NO_ERROR } = http2.constants;

/** `grpc-message`: the UTF-8 bytes outside printable ASCII (and `%` itself) percent-encoded. */
export function grpcMessage(text: string): string {
  if (/^[\x20-\x24\x26-\x7e]*$/.test(text)) return text;
  let out = "";
  for (const byte of Buffer.from(text, "utf8"))
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  return out;
}

/** Options of {@link createRlsGrpcServer}. */
export interface RlsGrpcServerOptions {
  /** Largest request message in bytes (announced, received, or once decompressed). */
  readonly maxMessageBytes: number;
  /** Longest wait for a call's request to arrive whole (headers to its last byte), ms. */
  readonly requestTimeoutMs: number;
  /** The tracer of `ShouldRateLimit`'s server spans; undefined: no spans. */
  readonly tracer?: Tracer | undefined;
}

/** A running gRPC server. */
export interface RlsGrpcServer {
  /** Binds `host:port` (0: a free port); resolves to the port. */
  listen(host: string, port: number): Promise<number>;
  /**
   * Stops taking calls, lets those in flight finish, and closes every connection; whatever is
   * still open after `graceMs` is cut. Idempotent.
   */
  close(graceMs: number): Promise<void>;
}

/**
 * What the calls of one server share: the service they are answered by, the limits they are
 * held to, and the calls whose request is still arriving (watched for the request timeout).
 */
interface Door {
  readonly service: RateLimitService;
  readonly logger: Logger;
  readonly maxMessageBytes: number;
  readonly requestTimeoutMs: number;
  /** How often the calls still arriving are checked against the request timeout, ms. */
  readonly sweepMs: number;
  /** Calls whose request has not arrived whole yet. */
  readonly pending: Set<Call>;
  /** Whether the health check answers SERVING (until the server closes). */
  serving: boolean;
  /** The tracer of `ShouldRateLimit`'s spans, when there is one. */
  readonly tracer: Tracer | undefined;
  /** The span of each traced call, by its stream (only with a tracer). */
  readonly spans: WeakMap<http2.ServerHttp2Stream, Span>;
  /**
   * The clock, read once per sweep: a call's start needs no finer time than the sweep's. A call
   * starts at most one sweep after `coarseNow`, so it is taken to start then: no call is cut
   * before its time, and none later than two sweeps after it.
   */
  coarseNow: number;
}

/** A call being received: what its request needs to be read, kept on its stream. */
interface Call {
  readonly door: Door;
  readonly stream: http2.ServerHttp2Stream;
  readonly handler: Handler;
  readonly encoding: string;
  /** When it began, on the server's coarse clock (for the request timeout). */
  readonly since: number;
  /** The body's first chunk, and every chunk once there are several. */
  first: Buffer | undefined;
  more: Buffer[] | undefined;
  size: number;
}

/** A method: the call's stream and its message (`body[start, end)`). */
type Handler = (
  door: Door,
  stream: http2.ServerHttp2Stream,
  body: Buffer,
  start: number,
  end: number,
) => void;

const CALL = Symbol("sluice.grpcCall");
/** A stream with its call while the request arrives. */
type CallStream = http2.ServerHttp2Stream & { [CALL]?: Call };

/** Answers a call with a status and no message (gRPC's Trailers-Only response). */
function fail(
  stream: http2.ServerHttp2Stream,
  code: number,
  message: string,
  extra?: Record<string, string | number>,
): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond(
    {
      ":status": 200,
      "content-type": "application/grpc",
      ...extra,
      "grpc-status": String(code),
      "grpc-message": grpcMessage(message),
    },
    { endStream: true },
  );
  // Whatever the client still sends is not read: tell it to stop once the answer is out.
  if (!stream.readableEnded) stream.close(NGHTTP2_NO_ERROR);
}

function sendTrailers(this: http2.ServerHttp2Stream): void {
  this.sendTrailers(OK_TRAILERS);
}

const OK_OPTIONS = Object.freeze({ waitForTrailers: true });

/** Answers a call with one message and `grpc-status: 0`. */
function reply(stream: http2.ServerHttp2Stream, frame: Buffer): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond(OK_HEADERS, OK_OPTIONS);
  stream.once("wantTrailers", sendTrailers);
  stream.end(frame);
}

function ignore(): void {}

/** A call's message, decoded; undefined when it cannot be read (answered INTERNAL, saying why). */
function read<T>(
  stream: http2.ServerHttp2Stream,
  message: string,
  decode: (body: Buffer, start: number, end: number) => T,
  body: Buffer,
  start: number,
  end: number,
): T | undefined {
  try {
    return decode(body, start, end);
  } catch (err) {
    if (!(err instanceof WireError)) throw err;
    fail(stream, GRPC_STATUS.INTERNAL, `malformed ${message}: ${err.message}`);
    return undefined;
  }
}

/** `ShouldRateLimit`: the service's answer to the request, sync or async. */
const answerRateLimit: Handler = (door, stream, body, start, end) => {
  const request = read(stream, "RateLimitRequest", decodeRateLimitRequest, body, start, end);
  if (request === undefined) return;
  let answer: RlsResponse | Promise<RlsResponse>;
  try {
    answer = door.service.answer(request);
  } catch (err) {
    rateLimitFailed(door, stream, err, request);
    return;
  }
  if (answer instanceof Promise)
    answer.then(
      (r) => {
        if (door.tracer !== undefined) annotateCall(door, stream, r);
        reply(stream, encodeRateLimitResponse(r));
      },
      (err: unknown) => rateLimitFailed(door, stream, err, request),
    );
  else {
    if (door.tracer !== undefined) annotateCall(door, stream, answer);
    reply(stream, encodeRateLimitResponse(answer));
  }
};

/** A traced call's answer on its span: each descriptor's decision, and the deciding one's. */
function annotateCall(door: Door, stream: http2.ServerHttp2Stream, r: RlsResponse): void {
  const span = door.spans.get(stream);
  if (span === undefined) return;
  const outcomes = r.outcomes ?? [];
  annotateDecisions(
    span,
    outcomes.map((o) => o.decision),
    r.deciding,
  );
}

/** A call the service could not answer: its input (INVALID_ARGUMENT), or a failure. */
function rateLimitFailed(
  door: Door,
  stream: http2.ServerHttp2Stream,
  err: unknown,
  request: RlsRequest,
): void {
  if (err instanceof RlsInputError) {
    fail(stream, GRPC_STATUS.INVALID_ARGUMENT, err.message);
    return;
  }
  door.logger.error({ err, domain: request.domain }, "ShouldRateLimit failed");
  fail(stream, GRPC_STATUS.INTERNAL, "internal error");
}

/** `Health/Check`: SERVING until the server closes, for the whole server or the RLS service. */
const answerHealthCheck: Handler = (door, stream, body, start, end) => {
  const name = read(stream, "HealthCheckRequest", decodeHealthCheckRequest, body, start, end);
  if (name === undefined) return;
  if (name !== "" && name !== RLS_SERVICE) {
    fail(stream, GRPC_STATUS.NOT_FOUND, `unknown service "${name}"`);
    return;
  }
  reply(
    stream,
    encodeHealthCheckResponse(door.serving ? SERVING_STATUS.SERVING : SERVING_STATUS.NOT_SERVING),
  );
};

/**
 * The method a call's headers ask for; undefined when they ask for none this server has (not
 * POST, not gRPC's content type, another path), the call then answered saying why.
 */
function handlerOf(
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
): Handler | undefined {
  if (headers[":method"] !== "POST") {
    fail(stream, GRPC_STATUS.INTERNAL, `method ${headers[":method"]} is not POST`, {
      ":status": 405,
    });
    return undefined;
  }
  const type = headers["content-type"];
  if (
    type !== "application/grpc" &&
    !(typeof type === "string" && /^application\/grpc(\+proto)?(;|$)/.test(type))
  ) {
    fail(
      stream,
      GRPC_STATUS.INTERNAL,
      `content-type ${JSON.stringify(type ?? "")} is not application/grpc (protobuf)`,
      { ":status": 415 },
    );
    return undefined;
  }
  const path = headers[":path"];
  const handler =
    path === RLS_PATH ? answerRateLimit : path === HEALTH_PATH ? answerHealthCheck : undefined;
  if (handler === undefined) fail(stream, GRPC_STATUS.UNIMPLEMENTED, `unknown method ${path}`);
  return handler;
}

/** The call's `grpc-encoding`; undefined when this server cannot read it (answered UNIMPLEMENTED). */
function encodingOf(
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
): string | undefined {
  const header = headers["grpc-encoding"];
  const encoding = header === undefined ? "identity" : String(header);
  if (encoding === "identity" || encoding === "gzip" || encoding === "deflate") return encoding;
  fail(
    stream,
    GRPC_STATUS.UNIMPLEMENTED,
    `grpc-encoding ${encoding} is not supported (use ${ENCODINGS})`,
    { "grpc-accept-encoding": ENCODINGS },
  );
  return undefined;
}

/** A new call: refused at once when its headers cannot be served, else its request is read. */
function acceptCall(
  door: Door,
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
): void {
  stream.on("error", ignore);
  const handler = handlerOf(stream, headers);
  if (handler === undefined) return;
  if (door.tracer !== undefined && handler === answerRateLimit)
    door.spans.set(
      stream,
      grpcServerSpan(door.tracer, RLS_SERVICE, "ShouldRateLimit", headers, stream),
    );
  const encoding = encodingOf(stream, headers);
  if (encoding === undefined) return;
  const call: Call = {
    door,
    stream,
    handler,
    encoding,
    since: door.coarseNow + door.sweepMs,
    first: undefined,
    more: undefined,
    size: 0,
  };
  (stream as CallStream)[CALL] = call;
  door.pending.add(call);
  stream.on("data", onData);
  stream.on("end", onEnd);
}

/** Stops reading a call's request (it was answered before it ended). */
function abandon(call: Call): void {
  call.door.pending.delete(call);
  call.stream.removeListener("data", onData);
  call.stream.removeListener("end", onEnd);
}

// The listeners of every call (`this` is the call's stream): made once, not per call.

/** A chunk of a call's request: kept, and the call refused once its message is too large. */
function onData(this: CallStream, chunk: Buffer): void {
  const call = this[CALL]!;
  const max = call.door.maxMessageBytes;
  const size = (call.size += chunk.length);
  if (call.first === undefined) call.first = chunk;
  else (call.more ??= [call.first]).push(chunk);
  let announced = 0;
  if (size >= 5 && size - chunk.length < 5) {
    // The prefix is complete: a message announced too large is refused before it arrives.
    announced = (call.more ? Buffer.concat(call.more) : call.first).readUInt32BE(1);
  }
  if (size > max + 5 || announced > max) {
    abandon(call);
    fail(
      this,
      GRPC_STATUS.RESOURCE_EXHAUSTED,
      `request message larger than the limit (${Math.max(size - 5, announced)} vs. ${max} bytes)`,
    );
  }
}

/** A call's request has ended: its body goes to its method (a failure answered INTERNAL). */
function onEnd(this: CallStream): void {
  const call = this[CALL]!;
  call.door.pending.delete(call);
  this[CALL] = undefined;
  const body = call.more ? Buffer.concat(call.more) : (call.first ?? Buffer.alloc(0));
  try {
    deliver(call, this, body);
  } catch (err) {
    call.door.logger.error({ err, path: RLS_PATH }, "gRPC call failed");
    fail(this, GRPC_STATUS.INTERNAL, "internal error");
  }
}

/** The whole request body has arrived: one gRPC message, checked, to its method. */
function deliver(call: Call, stream: http2.ServerHttp2Stream, body: Buffer): void {
  const problem = framingProblem(body);
  if (problem !== undefined) {
    fail(stream, GRPC_STATUS.INTERNAL, problem);
    return;
  }
  if (body[0] === 0) {
    call.handler(call.door, stream, body, 5, body.length);
    return;
  }
  const message = inflateMessage(stream, call.encoding, body, call.door.maxMessageBytes);
  if (message !== undefined) call.handler(call.door, stream, message, 0, message.length);
}

/**
 * What is wrong with a unary call's body as gRPC frames it (one message: a flag byte, a 4-byte
 * length, the message), or undefined when nothing is.
 */
function framingProblem(body: Buffer): string | undefined {
  if (body.length === 0) return "no request message: the stream ended before one";
  if (body.length < 5) return `request cut off: ${body.length} bytes of a 5-byte message prefix`;
  const len = body.readUInt32BE(1);
  if (body.length < 5 + len)
    return `request cut off: the message announces ${len} bytes, ${body.length - 5} arrived`;
  if (body.length > 5 + len) return "more than one request message for a unary method";
  const flag = body[0]!;
  if (flag !== 0 && flag !== 1) return `message flag ${flag} is neither 0 nor 1`;
  return undefined;
}

/**
 * A message flagged compressed, decompressed with the call's encoding to at most `max` bytes;
 * undefined when it cannot be (answered INTERNAL, or RESOURCE_EXHAUSTED when it is too large).
 */
function inflateMessage(
  stream: http2.ServerHttp2Stream,
  encoding: string,
  body: Buffer,
  max: number,
): Buffer | undefined {
  if (encoding === "identity") {
    fail(
      stream,
      GRPC_STATUS.INTERNAL,
      "the message is flagged compressed but grpc-encoding names no compression",
    );
    return undefined;
  }
  try {
    const inflate = encoding === "gzip" ? gunzipSync : inflateSync;
    return inflate(body.subarray(5), { maxOutputLength: max });
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE")
      fail(
        stream,
        GRPC_STATUS.RESOURCE_EXHAUSTED,
        `request message larger than ${max} bytes once decompressed`,
      );
    else fail(stream, GRPC_STATUS.INTERNAL, `the ${encoding} message does not decompress`);
    return undefined;
  }
}

/** Answers DEADLINE_EXCEEDED to the calls whose request did not arrive whole within the timeout. */
function sweepPending(door: Door): void {
  door.coarseNow = Date.now();
  const before = door.coarseNow - door.requestTimeoutMs;
  for (const call of door.pending) {
    if (call.stream.destroyed) door.pending.delete(call);
    else if (call.since <= before) {
      abandon(call);
      fail(
        call.stream,
        GRPC_STATUS.DEADLINE_EXCEEDED,
        `the request did not arrive whole within ${door.requestTimeoutMs} ms`,
      );
    }
  }
}

/** The server's open sessions (connections), kept as they open and close. */
function trackSessions(server: http2.Http2Server): Set<http2.ServerHttp2Session> {
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.on("error", ignore);
    session.on("close", () => sessions.delete(session));
  });
  return sessions;
}

/** Binds `host:port`; resolves to the port bound. */
function listenOn(server: http2.Http2Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as { port: number }).port);
    });
  });
}

/**
 * Takes no new connections and tells each open one to go away (GOAWAY): it closes once its calls
 * in flight are answered. Whatever is still open after `graceMs` is cut.
 */
function closeWithin(
  server: http2.Http2Server,
  sessions: ReadonlySet<http2.ServerHttp2Session>,
  graceMs: number,
): Promise<void> {
  return new Promise<void>((resolve) => {
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      for (const s of sessions) s.destroy();
      finish();
    }, graceMs);
    timer.unref();
    server.close(finish);
    for (const s of sessions) s.close();
  });
}

/** Builds the gRPC server around a {@link RateLimitService}. */
export function createRlsGrpcServer(
  service: RateLimitService,
  logger: Logger,
  options: RlsGrpcServerOptions,
): RlsGrpcServer {
  const door: Door = {
    service,
    logger,
    maxMessageBytes: options.maxMessageBytes,
    requestTimeoutMs: options.requestTimeoutMs,
    sweepMs: Math.min(1000, Math.max(10, options.requestTimeoutMs / 10)),
    pending: new Set(),
    serving: true,
    coarseNow: Date.now(),
    tracer: options.tracer,
    spans: new WeakMap(),
  };
  const server = http2.createServer();
  server.on("stream", (stream, headers) => acceptCall(door, stream, headers));
  const sessions = trackSessions(server);
  const sweep = setInterval(sweepPending, door.sweepMs, door);
  sweep.unref();
  let closing: Promise<void> | undefined;
  return {
    listen: (host, port) => listenOn(server, host, port),
    close(graceMs) {
      if (closing === undefined) {
        door.serving = false;
        clearInterval(sweep);
        closing = closeWithin(server, sessions, graceMs);
      }
      return closing;
    },
  };
}
