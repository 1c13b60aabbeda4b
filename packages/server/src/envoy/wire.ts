/**
 * The protocol buffers of the Envoy rate limit service, read and written by hand: exactly the
 * messages `ShouldRateLimit` and `grpc.health.v1.Health/Check` carry (packages/server/proto),
 * decoded straight into the transport-free request of rls.ts and encoded straight from its
 * response, with no intermediate message objects.
 *
 * Reading follows the protobuf encoding rules as Envoy's C++ writer and every conforming
 * parser apply them: fields in any order, the last value of a scalar wins, a message field
 * seen twice is merged, a repeated field appends, unknown fields (and known fields sent with
 * another wire type) are skipped, strings are UTF-8 (invalid bytes read as U+FFFD, as
 * protobufjs reads them). A message that cannot be read throws a {@link WireError} saying where.
 * Writing emits fields in field-number order and leaves out scalars at their default value, as
 * protobuf's canonical form does; a message field that is present is written even when empty.
 *
 * test/envoy-wire.test.ts checks both directions against protobufjs reading the .proto files,
 * with fast-check's random messages and random bytes.
 */
import type { RlsDescriptor, RlsRequest, RlsResponse, RlsStatus } from "./rls.js";

/** A protocol buffer that cannot be read. */
export class WireError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WireError";
  }
}

// Wire types.
const VARINT = 0;
const I64 = 1;
const LEN = 2;
const SGROUP = 3;
const EGROUP = 4;
const I32 = 5;

/** Where the reader is in the buffer being read (one per top-level message read). */
class Reader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    /** Where the message starts: error messages count bytes from there. */
    readonly start: number,
  ) {
    this.pos = start;
  }

  /** A position as error messages give it: from the start of the message. */
  at(pos: number): number {
    return pos - this.start;
  }

  /** A varint's low 32 bits, unsigned (uint32, and the int32/enum bits before `| 0`). */
  uint32(end: number): number {
    const buf = this.buf;
    let pos = this.pos;
    let value = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (pos >= end) throw new WireError(`varint cut off at byte ${this.at(pos)}`);
      const b = buf[pos++]!;
      // Bits beyond the 32nd are dropped (a uint32 field read from a longer varint).
      if (shift < 32) value |= (b & 0x7f) << shift;
      if (b < 0x80) {
        this.pos = pos;
        return value >>> 0;
      }
    }
    throw new WireError(`varint longer than 10 bytes at byte ${this.at(this.pos)}`);
  }

  /** A uint64 varint as a number (exact up to 2^53; larger values lose their low bits). */
  uint64(end: number): number {
    const buf = this.buf;
    let pos = this.pos;
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) throw new WireError(`varint cut off at byte ${this.at(pos)}`);
      const b = buf[pos++]!;
      value += (b & 0x7f) * scale;
      scale *= 128;
      if (b < 0x80) {
        this.pos = pos;
        return value;
      }
    }
    throw new WireError(`varint longer than 10 bytes at byte ${this.at(this.pos)}`);
  }

  /** A length-delimited field's end, checked against the enclosing message's. */
  lengthEnd(end: number, field: string): number {
    const len = this.uint32(end);
    const stop = this.pos + len;
    if (stop > end)
      throw new WireError(
        `${field}: ${len} bytes announced at byte ${this.at(this.pos)}, only ${end - this.pos} left`,
      );
    return stop;
  }

  string(end: number, field: string): string {
    const stop = this.lengthEnd(end, field);
    const s = this.buf.toString("utf8", this.pos, stop);
    this.pos = stop;
    return s;
  }

  /** Skips a field of wire type `type` (an unknown field, or a known one of another type). */
  skip(type: number, end: number): void {
    switch (type) {
      case VARINT:
        this.uint64(end);
        return;
      case I64:
        this.pos += 8;
        break;
      case LEN:
        this.pos = this.lengthEnd(end, "unknown field");
        return;
      case I32:
        this.pos += 4;
        break;
      case SGROUP: {
        // A group (proto2): skip its fields up to the matching end tag.
        for (;;) {
          const tag = this.tag(end);
          if ((tag & 7) === EGROUP) return;
          this.skip(tag & 7, end);
        }
      }
      default:
        throw new WireError(
          `wire type ${type} at byte ${this.at(this.pos)} is not a protobuf wire type`,
        );
    }
    if (this.pos > end) throw new WireError(`fixed-size field cut off at byte ${this.at(end)}`);
  }

  tag(end: number): number {
    const tag = this.uint32(end);
    if (tag >>> 3 === 0) throw new WireError(`field number 0 at byte ${this.at(this.pos)}`);
    return tag;
  }
}

/** Reads a `RateLimitDescriptor` ending at `end`, merging into what an earlier copy gave. */
function readDescriptor(r: Reader, end: number, path: string): RlsDescriptor {
  const entries: Array<{ key: string; value: string }> = [];
  let limit: { requestsPerUnit: number; unit: number } | undefined;
  let hitsAddend: number | undefined;
  while (r.pos < end) {
    const tag = r.tag(end);
    switch (tag) {
      case 0x0a: {
        // entries (Entry: key = 1, value = 2)
        const stop = r.lengthEnd(end, `${path}.entries`);
        let key = "";
        let value = "";
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t === 0x0a) key = r.string(stop, `${path}.entries.key`);
          else if (t === 0x12) value = r.string(stop, `${path}.entries.value`);
          else r.skip(t & 7, stop);
        }
        entries.push({ key, value });
        break;
      }
      case 0x12: {
        // limit (RateLimitOverride: requests_per_unit = 1, unit = 2), merged when repeated
        const stop = r.lengthEnd(end, `${path}.limit`);
        limit ??= { requestsPerUnit: 0, unit: 0 };
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t === 0x08) limit.requestsPerUnit = r.uint32(stop);
          else if (t === 0x10) limit.unit = r.uint32(stop) | 0;
          else r.skip(t & 7, stop);
        }
        break;
      }
      case 0x1a: {
        // hits_addend (google.protobuf.UInt64Value: value = 1), merged when repeated
        const stop = r.lengthEnd(end, `${path}.hits_addend`);
        hitsAddend ??= 0;
        while (r.pos < stop) {
          const t = r.tag(stop);
          if (t === 0x08) hitsAddend = r.uint64(stop);
          else r.skip(t & 7, stop);
        }
        break;
      }
      default:
        r.skip(tag & 7, end);
    }
  }
  return { entries, limit, hitsAddend };
}

/** Reads a `RateLimitRequest` (the whole of `buf`, or `buf[start, end)`). */
export function decodeRateLimitRequest(buf: Buffer, start = 0, end = buf.length): RlsRequest {
  const r = new Reader(buf, start);
  let domain = "";
  let hitsAddend = 0;
  const descriptors: RlsDescriptor[] = [];
  while (r.pos < end) {
    const tag = r.tag(end);
    switch (tag) {
      case 0x0a:
        domain = r.string(end, "domain");
        break;
      case 0x12: {
        const path = `descriptors.${descriptors.length}`;
        const stop = r.lengthEnd(end, path);
        descriptors.push(readDescriptor(r, stop, path));
        break;
      }
      case 0x18:
        hitsAddend = r.uint32(end);
        break;
      default:
        r.skip(tag & 7, end);
    }
  }
  return { domain, descriptors, hitsAddend };
}

/** Reads a `grpc.health.v1.HealthCheckRequest`: the service asked about. */
export function decodeHealthCheckRequest(buf: Buffer, start = 0, end = buf.length): string {
  const r = new Reader(buf, start);
  let service = "";
  while (r.pos < end) {
    const tag = r.tag(end);
    if (tag === 0x0a) service = r.string(end, "service");
    else r.skip(tag & 7, end);
  }
  return service;
}

/**
 * Where a message is written: one buffer, grown when needed and reused from call to call (what
 * leaves it is a copy). A length-delimited field reserves one byte for its length and moves its
 * content when the length needs more.
 */
class Writer {
  buf = Buffer.allocUnsafe(1024);
  pos = 0;

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  varint(v: number): void {
    this.ensure(10);
    const buf = this.buf;
    let pos = this.pos;
    // Exact for integers up to 2^53 (larger ones are never written here).
    while (v >= 0x80) {
      buf[pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    buf[pos++] = v;
    this.pos = pos;
  }

  /** Opens a length-delimited field: its tag, and one byte kept for its length. */
  open(tag: number): number {
    this.ensure(2);
    this.buf[this.pos++] = tag;
    return this.pos++;
  }

  /** Closes the field opened at `at`: writes its length, moving the content when it takes more than a byte. */
  close(at: number): void {
    const len = this.pos - at - 1;
    if (len < 0x80) {
      this.buf[at] = len;
      return;
    }
    let extra = 0;
    for (let v = len >>> 7; v > 0; v >>>= 7) extra++;
    this.ensure(extra);
    this.buf.copy(this.buf, at + 1 + extra, at + 1, this.pos);
    const end = this.pos + extra;
    this.pos = at;
    this.varint(len);
    this.pos = end;
  }

  string(tag: number, s: string): void {
    const n = Buffer.byteLength(s);
    this.ensure(n + 11);
    this.buf[this.pos++] = tag;
    this.varint(n);
    this.pos += this.buf.write(s, this.pos, "utf8");
  }

  bytes(tag: number, b: Uint8Array): void {
    this.ensure(b.length + 11);
    this.buf[this.pos++] = tag;
    this.varint(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  raw(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  /** Starts a gRPC message: 5 bytes (compressed flag 0, length) filled in by {@link frame}. */
  begin(): void {
    this.pos = 5;
  }

  /** A copy of the message written since {@link begin}, with its gRPC prefix. */
  frame(): Buffer {
    const len = this.pos - 5;
    this.buf[0] = 0;
    this.buf.writeUInt32BE(len, 1);
    const out = Buffer.allocUnsafe(this.pos);
    this.buf.copy(out, 0, 0, this.pos);
    return out;
  }
}

const writer = new Writer();

/** The encoded `RateLimit` message of each `currentLimit` (constant per limit and rule). */
const limitBytes = new WeakMap<NonNullable<RlsStatus["currentLimit"]>, Buffer>();

function currentLimitBytes(c: NonNullable<RlsStatus["currentLimit"]>): Buffer {
  let b = limitBytes.get(c);
  if (b === undefined) {
    // Written on a writer of its own: the shared one is in the middle of a message.
    const w = new Writer();
    if (c.requestsPerUnit) {
      w.buf[w.pos++] = 0x08;
      w.varint(c.requestsPerUnit);
    }
    if (c.unit) {
      w.buf[w.pos++] = 0x10;
      w.varint(c.unit);
    }
    if (c.name) w.string(0x1a, c.name);
    b = Buffer.from(w.buf.subarray(0, w.pos));
    limitBytes.set(c, b);
  }
  return b;
}

function writeStatus(w: Writer, s: RlsStatus): void {
  const at = w.open(0x12);
  if (s.code) {
    w.buf[w.pos++] = 0x08;
    w.varint(s.code);
  }
  if (s.currentLimit) {
    const bytes = currentLimitBytes(s.currentLimit);
    w.ensure(bytes.length + 11);
    w.buf[w.pos++] = 0x12;
    w.varint(bytes.length);
    w.raw(bytes);
  }
  if (s.limitRemaining) {
    w.ensure(11);
    w.buf[w.pos++] = 0x18;
    w.varint(s.limitRemaining);
  }
  if (s.durationUntilResetS !== undefined) {
    // google.protobuf.Duration: seconds = 1 (nanos always 0)
    w.ensure(13);
    w.buf[w.pos++] = 0x22;
    if (s.durationUntilResetS > 0) {
      const d = w.pos++;
      w.buf[w.pos++] = 0x08;
      w.varint(s.durationUntilResetS);
      w.buf[d] = w.pos - d - 1;
    } else w.buf[w.pos++] = 0;
  }
  w.close(at);
}

/** A `RateLimitResponse` as a gRPC message (5-byte prefix included). */
export function encodeRateLimitResponse(r: RlsResponse): Buffer {
  const w = writer;
  w.begin();
  if (r.overallCode) {
    w.ensure(11);
    w.buf[w.pos++] = 0x08;
    w.varint(r.overallCode);
  }
  for (const s of r.statuses) writeStatus(w, s);
  for (const [key, value] of r.responseHeadersToAdd) {
    const at = w.open(0x1a);
    w.string(0x0a, key);
    w.string(0x12, value);
    w.close(at);
  }
  if (r.rawBody && r.rawBody.length > 0) w.bytes(0x2a, r.rawBody);
  return w.frame();
}

/** `grpc.health.v1.HealthCheckResponse.ServingStatus`. */
export const SERVING_STATUS = Object.freeze({ SERVING: 1, NOT_SERVING: 2 });

/** A `HealthCheckResponse` with `status` as a gRPC message. */
export function encodeHealthCheckResponse(status: number): Buffer {
  return Buffer.from([0, 0, 0, 0, 2, 0x08, status]);
}
