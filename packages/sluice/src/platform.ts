/**
 * What sluice needs from its runtime, through APIs every runtime has (Node ≥ 20, Deno, Bun,
 * Cloudflare Workers, Vercel Edge, browsers), so that the core imports no Node built-in. The
 * few Node-only features (the policy cache file, the host name) load theirs at run time, out of
 * bundlers' sight.
 */
import { base64url } from "./hash.js";

/** `n` random bytes from the runtime's Web Crypto (`crypto.getRandomValues`). */
export function randomBytes(n: number): Uint8Array {
  return globalThis.crypto.getRandomValues(new Uint8Array(n));
}

/** `n` random bytes as base64url (what Node's `randomBytes(n).toString("base64url")` gave). */
export function randomId(n: number): string {
  return base64url(randomBytes(n));
}

/** `n` random bytes as lowercase hex. */
export function randomHex(n: number): string {
  let out = "";
  for (const b of randomBytes(n)) out += b.toString(16).padStart(2, "0");
  return out;
}

/**
 * Loads a Node built-in (`importBuiltin("fs/promises")`) when first needed. The specifier is
 * not a literal, so that bundlers for runtimes without it (Workers, Edge, browsers) leave it
 * alone; only a feature that needs it (a cache file) fails there, when used.
 */
export function importBuiltin<T>(name: string): Promise<T> {
  const specifier = `node:${name}`;
  return import(/* webpackIgnore: true */ /* @vite-ignore */ specifier) as Promise<T>;
}

/**
 * Lets the process exit while the timer is pending, where timers can be told so (Node, Bun);
 * elsewhere (Deno, Workers: a timer is a number) it does nothing.
 */
export function unrefTimer(timer: unknown): void {
  (timer as { unref?: () => void } | null)?.unref?.();
}
