/**
 * Digests for keys, synchronous and the same on every runtime: Node's own `node:crypto` where
 * the runtime hands it over without an import (`process.getBuiltinModule`, Node ≥ 20.16, Bun,
 * Deno), else @noble/hashes (pure JS: Cloudflare Workers, Vercel Edge, browsers, older Node).
 * Both give the same bytes (`hash.test.ts` checks them against each other), so a key written
 * by one runtime is the key another reads.
 */
import { sha1 } from "@noble/hashes/legacy";
import { sha256 } from "@noble/hashes/sha2";

/** How the text is turned into bytes before hashing. */
export type TextEncoding = "utf8" | "utf16le";

/** The part of `node:crypto` used here. */
interface NodeCrypto {
  createHash(algorithm: "sha1" | "sha256"): {
    update(data: string, encoding: TextEncoding): { digest(encoding: "base64url"): string };
  };
}

let native: NodeCrypto | null | undefined;

/** `node:crypto` when the runtime gives it synchronously, else null (looked up once). */
function nodeCrypto(): NodeCrypto | null {
  if (native !== undefined) return native;
  native = null;
  try {
    const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } })
      .process;
    const mod = proc?.getBuiltinModule?.("node:crypto") as Partial<NodeCrypto> | undefined;
    if (typeof mod?.createHash === "function") native = mod as NodeCrypto;
  } catch {
    // A runtime whose `process` refuses: the pure functions serve.
  }
  return native;
}

const encoder = new TextEncoder();

/** The UTF-8 bytes of `text` (a lone surrogate becomes U+FFFD, as Node's Buffer does). */
export function utf8Bytes(text: string): Uint8Array {
  return encoder.encode(text);
}

/** The UTF-16 code units of `text`, little-endian (every string, lone surrogates included). */
export function utf16leBytes(text: string): Uint8Array {
  const out = new Uint8Array(text.length * 2);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    out[2 * i] = c & 0xff;
    out[2 * i + 1] = c >>> 8;
  }
  return out;
}

const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/** base64url of `bytes`, without padding (RFC 4648 §5; what Node's `"base64url"` gives). */
export function base64url(bytes: Uint8Array): string {
  let out = "";
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += B64URL[v >>> 18]! + B64URL[(v >>> 12) & 63]! + B64URL[(v >>> 6) & 63]! + B64URL[v & 63]!;
  }
  if (i < bytes.length) {
    const v = (bytes[i]! << 16) | ((bytes[i + 1] ?? 0) << 8);
    out += B64URL[v >>> 18]! + B64URL[(v >>> 12) & 63]!;
    if (i + 1 < bytes.length) out += B64URL[(v >>> 6) & 63]!;
  }
  return out;
}

/** base64url(SHA-1(the bytes of `text` in `encoding`)): 27 characters. */
export function sha1Base64url(text: string, encoding: TextEncoding): string {
  const n = nodeCrypto();
  if (n !== null) return n.createHash("sha1").update(text, encoding).digest("base64url");
  return base64url(sha1(encoding === "utf8" ? utf8Bytes(text) : utf16leBytes(text)));
}

/** base64url(SHA-256(the UTF-8 bytes of `text`)): 43 characters. */
export function sha256Base64url(text: string): string {
  const n = nodeCrypto();
  if (n !== null) return n.createHash("sha256").update(text, "utf8").digest("base64url");
  return base64url(sha256(utf8Bytes(text)));
}

/**
 * FNV-1a (32 bits, unsigned) over the text's UTF-16 code units: a fast, stable, non-secure hash
 * for short names and for spreading keys.
 */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** For tests: the pure functions only (`true`), or the runtime's own again (`false`). */
export function usePureHashes(pure: boolean): void {
  native = pure ? null : undefined;
}
