import type { AlgorithmName } from "../algorithms/index.js";
import { sha1Base64url, utf8Bytes } from "../hash.js";
import type { Policy } from "../policy.js";
import { OPERATION_CODES } from "./redis-protocol.js";

/**
 * Key layout of the Redis store (see docs/redis.md):
 *
 *   <prefix><policy>:{<identifier>}:<algorithm code><rule index>   one key per rule
 *   <prefix><policy>:{<identifier>}:<algorithm code>b              the penalty block
 *
 * The `{…}` hash tag puts every key of one identifier in one Cluster slot, so one script can
 * touch them all. The algorithm code keeps a policy whose algorithm changed from reading the
 * old algorithm's state.
 */

/** The code of the operation whose constant is `constant` (redis-protocol.ts's table). */
function opCode(constant: (typeof OPERATION_CODES)[number]["constant"]): number {
  return OPERATION_CODES.find((op) => op.constant === constant)!.code;
}

/**
 * The operation codes of the script (lua/sluice.lua), also the wire codes of the Durable
 * Object store: one table for both, in redis-protocol.ts.
 */
export const OP_DECIDE = opCode("OP_DECIDE");
export const OP_PEEK = opCode("OP_PEEK");
export const OP_ADJUST = opCode("OP_ADJUST");
export const OP_RELEASE = opCode("OP_RELEASE");
export const OP_RESET = opCode("OP_RESET");
export const OP_SET = opCode("OP_SET");
export const OP_ALLOT = opCode("OP_ALLOT");
export const OP_GIVE_BACK = opCode("OP_GIVE_BACK");

/** One-letter code of each algorithm, used in keys and in the script's arguments. */
export const ALGORITHM_CODES: Readonly<Record<AlgorithmName, string>> = {
  gcra: "g",
  "token-bucket": "t",
  "fixed-window": "f",
  "sliding-window": "s",
  "sliding-log": "l",
  concurrency: "c",
};

/**
 * The code in a policy's keys: its algorithm's, or `i` for a token bucket refilled by interval
 * (`refill: "interval"`), whose state is not the continuous bucket's: a policy whose refill
 * changed starts fresh instead of misreading the other's state.
 */
export function keyCode(policy: Policy): string {
  return policy.refill === "interval" ? "i" : ALGORITHM_CODES[policy.algorithm];
}

/**
 * The code the script decides a policy by: its keys' code, or `F` for a fixed window started by
 * the first request (over `f`'s keys and layout).
 */
export function scriptCode(policy: Policy): string {
  return policy.windowStart === "first-request" ? "F" : keyCode(policy);
}

/** Longest identifier kept as is inside the hash tag; longer ones are hashed. */
export const MAX_RAW_IDENTIFIER = 64;

// Braces would end or start the hash tag; whitespace and control characters make keys hard to
// read in redis-cli; a leading '#' marks hashed identifiers.
// eslint-disable-next-line no-control-regex
const ODD = /[{}\s\u0000-\u001f\u007f]/;

/**
 * The hash-tag content for an identifier: the identifier itself when it is short and plain,
 * else `#` + base64url(SHA1(identifier)) (28 characters).
 */
export function identifierTag(identifier: string): string {
  if (isPlain(identifier)) return identifier;
  const lone = LONE_SURROGATE.test(identifier);
  if (
    identifier.length <= MAX_RAW_IDENTIFIER &&
    !ODD.test(identifier) &&
    identifier[0] !== "#" &&
    !lone
  ) {
    return identifier;
  }
  // UTF-8 would turn every lone surrogate into U+FFFD (two identifiers, one key): hash the
  // UTF-16 code units of such identifiers instead.
  return "#" + sha1Base64url(identifier, lone ? "utf16le" : "utf8");
}

/**
 * True when the identifier can be the tag as it is: short, not starting with `#`, and free of
 * braces, whitespace, control characters and surrogates: the common case, checked in one pass
 * over the characters (this runs for every decision). Anything else takes the full check.
 */
function isPlain(id: string): boolean {
  const n = id.length;
  if (n > MAX_RAW_IDENTIFIER || n === 0 || id.charCodeAt(0) === 0x23) return false;
  for (let i = 0; i < n; i++) {
    const c = id.charCodeAt(i);
    if (c <= 0x20 || c === 0x7b || c === 0x7d || c === 0x7f) return false;
    if (c >= 0x80 && ((c >= 0xd800 && c <= 0xdfff) || isSpace(c))) return false;
  }
  return true;
}

/** Non-ASCII characters that `\s` matches. */
function isSpace(c: number): boolean {
  return (
    c === 0x85 ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const CRC16_TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let j = 0; j < 8; j++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

/**
 * The Redis Cluster slot of a hash tag: CRC16-CCITT (XMODEM) of its UTF-8 bytes mod 16384,
 * as in the Redis Cluster specification.
 */
export function slotOfTag(tag: string): number {
  let crc = 0;
  for (let i = 0; i < tag.length; i++) {
    const c = tag.charCodeAt(i);
    // ASCII is its own UTF-8; anything else takes the encoder.
    if (c >= 0x80) return crc16(utf8Bytes(tag)) % 16384;
    crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ c) & 0xff]!;
  }
  return crc % 16384;
}

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ b) & 0xff]!;
  return crc;
}

/** {@link tagForSlot}'s answers, by slot. */
const slotTags = new Map<number, string>();

/**
 * A short hash tag whose keys fall in `slot` (found by trying base-36 numbers; cached): the
 * tag of a key a script must reach in the slot of the keys it already touches.
 */
export function tagForSlot(slot: number): string {
  let tag = slotTags.get(slot);
  if (tag === undefined) {
    for (let i = 0; ; i++) {
      const t = i.toString(36);
      if (slotOfTag(t) === slot) {
        tag = t;
        break;
      }
    }
    slotTags.set(slot, tag);
  }
  return tag;
}
