/**
 * Secrets: API keys, session tokens and passwords. Keys and tokens are high-entropy random
 * strings stored as their SHA-256; passwords are hashed with scrypt. Every comparison of a
 * secret runs in constant time (`crypto.timingSafeEqual`).
 */
import { createHash, randomBytes, scrypt, timingSafeEqual } from "node:crypto";

/** A secret as shown once to its owner, with the parts stored to find and check it later. */
export interface IssuedSecret {
  /** The whole secret, e.g. `sk_3f2a9c1b_…`: shown once, never stored. */
  readonly secret: string;
  /** The public id embedded in the secret, used to look the record up. */
  readonly id: string;
  /** Hex SHA-256 of the whole secret: what is stored. */
  readonly hash: string;
}

/** SHA-256 of a string, hex. */
export function sha256(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}

/**
 * Issues a secret `<prefix>_<id>_<random>`: the id (8 random bytes, hex) finds the record, the
 * random part (32 bytes, base64url) is the secret proper.
 */
export function issueSecret(prefix: "sk" | "st"): IssuedSecret {
  const id = randomBytes(8).toString("hex");
  const secret = `${prefix}_${id}_${randomBytes(32).toString("base64url")}`;
  return { secret, id, hash: sha256(secret) };
}

/** Splits a presented secret into its id, or undefined when it does not have the shape. */
export function secretId(prefix: "sk" | "st", presented: string): string | undefined {
  const m = /^([a-z]{2})_([0-9a-f]{16})_[A-Za-z0-9_-]{43}$/.exec(presented);
  return m && m[1] === prefix ? m[2] : undefined;
}

/** Constant-time comparison of a presented secret with a stored SHA-256 (hex). */
export function secretMatches(presented: string, storedHash: string): boolean {
  const a = Buffer.from(sha256(presented), "hex");
  const b = Buffer.from(storedHash, "hex");
  return a.length === b.length && timingSafeEqual(a, b);
}

/** scrypt's cost parameters: `N` (CPU and memory, a power of two), `r` (block size), `p` (parallelism). */
export interface ScryptParams {
  readonly N: number;
  readonly r: number;
  readonly p: number;
}

/**
 * The parameters new password hashes get: OWASP's floor for scrypt (N=2^17, r=8, p=1), which
 * takes 128 MiB and a few hundred milliseconds per hash. A stored hash made with less is
 * replaced on the user's next successful sign-in.
 */
export const SCRYPT_PARAMS: ScryptParams = Object.freeze({ N: 2 ** 17, r: 8, p: 1 });

const KEY_LENGTH = 64;

/**
 * How many scrypt computations run at once. Each holds 128 × N × r bytes (128 MiB at the
 * default) on libuv's thread pool; a burst of sign-ins queues here instead of taking all the
 * memory and every pool thread (which file and DNS work share).
 */
const MAX_CONCURRENT_HASHES = 2;
let running = 0;
const queue: (() => void)[] = [];

async function limited<T>(fn: () => Promise<T>): Promise<T> {
  if (running >= MAX_CONCURRENT_HASHES) await new Promise<void>((r) => queue.push(r));
  running++;
  try {
    return await fn();
  } finally {
    running--;
    queue.shift()?.();
  }
}

function scryptAsync(
  password: string,
  salt: Buffer,
  params: ScryptParams,
  keyLen: number,
): Promise<Buffer> {
  const { N, r, p } = params;
  return limited(
    () =>
      new Promise<Buffer>((resolve, reject) => {
        // Node refuses scrypt above `maxmem` (32 MiB by default); the work needs 128·N·r·p bytes.
        scrypt(password, salt, keyLen, { N, r, p, maxmem: 256 * N * r * p }, (err, key) =>
          err ? reject(err) : resolve(key),
        );
      }),
  );
}

/** Hashes a password with scrypt: `scrypt$N$r$p$<salt b64>$<hash b64>`. */
export async function hashPassword(
  password: string,
  params: ScryptParams = SCRYPT_PARAMS,
): Promise<string> {
  const salt = randomBytes(16);
  const key = await scryptAsync(password, salt, params, KEY_LENGTH);
  return [
    "scrypt",
    params.N,
    params.r,
    params.p,
    salt.toString("base64"),
    key.toString("base64"),
  ].join("$");
}

/** A hash of no password, checked against when the user does not exist, so timing tells nothing. */
function dummyHash(params: ScryptParams): string {
  return `scrypt$${params.N}$${params.r}$${params.p}$${Buffer.alloc(16).toString("base64")}$${Buffer.alloc(KEY_LENGTH).toString("base64")}`;
}

/**
 * Checks a password against a stored scrypt hash in constant time. With no stored hash (unknown
 * user) it still does the same work (at `params`) and returns false.
 */
export async function verifyPassword(
  password: string,
  stored: string | undefined,
  params: ScryptParams = SCRYPT_PARAMS,
): Promise<boolean> {
  const parts = (stored ?? dummyHash(params)).split("$");
  const [kind, n, r, p, salt, hash] = parts;
  if (parts.length !== 6 || kind !== "scrypt" || !salt || !hash) return false;
  const expected = Buffer.from(hash, "base64");
  const key = await scryptAsync(
    password,
    Buffer.from(salt, "base64"),
    { N: Number(n), r: Number(r), p: Number(p) },
    expected.length,
  );
  return timingSafeEqual(key, expected) && stored !== undefined;
}

/** True when a stored hash was made with less work than `params` asks for (rehash it). */
export function needsRehash(stored: string, params: ScryptParams = SCRYPT_PARAMS): boolean {
  const [kind, n, r, p] = stored.split("$");
  if (kind !== "scrypt") return true;
  return Number(n) < params.N || Number(r) < params.r || Number(p) < params.p;
}
