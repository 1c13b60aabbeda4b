/**
 * Client IP addresses: parsing, canonical form, prefix grouping, CIDR matching and the
 * trusted-proxy walk over `X-Forwarded-For` / `Forwarded`.
 *
 * Addresses are handled as bytes (4 or 16), never as strings, so `::ffff:1.2.3.4`,
 * `0:0:0:0:0:ffff:102:304` and `1.2.3.4` are one client, and `2001:db8::1` and
 * `2001:DB8:0::1` are one address. Parsed here, without `node:net`, so that this runs on every
 * runtime (Workers, Edge, Deno, Bun); `ip.test.ts` checks it against Node's `isIP`.
 */
import { ValidationError } from "../errors.js";

/** A parsed address. IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`) are returned as IPv4. */
export interface ParsedIp {
  /** 4 or 6. */
  readonly family: 4 | 6;
  /** 4 bytes for IPv4, 16 for IPv6, network order. */
  readonly bytes: Uint8Array;
}

/** A network: an address and how many leading bits of it matter. */
export interface Cidr {
  readonly ip: ParsedIp;
  readonly bits: number;
}

/**
 * Parses an address as it appears in a socket, `X-Forwarded-For` or `Forwarded`: brackets,
 * a port (`1.2.3.4:80`, `[::1]:80`) and a zone (`fe80::1%eth0`) are accepted and dropped.
 * Returns `undefined` for anything that is not an IP address.
 */
export function parseIp(input: string): ParsedIp | undefined {
  let s = input.trim();
  if (s.startsWith('"') && s.endsWith('"') && s.length >= 2) s = s.slice(1, -1);
  if (s.startsWith("[")) {
    const end = s.indexOf("]");
    if (end < 0) return undefined;
    s = s.slice(1, end);
  } else if (s.indexOf(":") === s.lastIndexOf(":") && s.includes(".") && s.includes(":")) {
    s = s.slice(0, s.indexOf(":")); // IPv4 with a port
  }
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  const v4 = parseIPv4(s);
  if (v4 !== undefined) return { family: 4, bytes: v4 };
  const bytes = parseIPv6(s);
  if (bytes === undefined) return undefined;
  // ::ffff:0:0/96 — an IPv4 client seen through a dual-stack socket counts as that IPv4 client.
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) {
    return { family: 4, bytes: bytes.slice(12) };
  }
  return { family: 6, bytes };
}

/** One decimal octet without leading zeros: 0–255. */
const OCTET = /^(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$/;

/** One IPv6 group: 1–4 hex digits. */
const GROUP = /^[0-9a-fA-F]{1,4}$/;

/** Dotted-quad IPv4 (`1.2.3.4`; no leading zeros, as Node's `isIPv4`), or undefined. */
function parseIPv4(s: string): Uint8Array | undefined {
  const parts = s.split(".");
  if (parts.length !== 4 || !parts.every((p) => OCTET.test(p))) return undefined;
  return Uint8Array.from(parts.map(Number));
}

/** IPv6 text (groups, one `::` at most, an IPv4 tail) as 16 bytes, or undefined. */
function parseIPv6(s: string): Uint8Array | undefined {
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const groups = (part: string | undefined, last: boolean): number[] | undefined => {
    if (part === undefined || part === "") return [];
    const out: number[] = [];
    const texts = part.split(":");
    for (let i = 0; i < texts.length; i++) {
      const g = texts[i]!;
      if (GROUP.test(g)) out.push(parseInt(g, 16));
      else if (last && i === texts.length - 1 && g.includes(".")) {
        // An embedded IPv4 tail (`::ffff:1.2.3.4`) is two 16-bit groups.
        const v4 = parseIPv4(g);
        if (v4 === undefined) return undefined;
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else return undefined;
    }
    return out;
  };
  const head = groups(halves[0], halves.length === 1);
  const rest = halves.length === 2 ? groups(halves[1], true) : [];
  if (head === undefined || rest === undefined) return undefined;
  const fill = 8 - head.length - rest.length;
  // With `::`, it stands for at least one group; without, there are exactly eight.
  if (halves.length === 2 ? fill < 1 : fill !== 0) return undefined;
  const all = [...head, ...new Array<number>(fill).fill(0), ...rest];
  const out = new Uint8Array(16);
  all.forEach((g, i) => {
    out[i * 2] = (g >> 8) & 0xff;
    out[i * 2 + 1] = g & 0xff;
  });
  return out;
}

/** The canonical text form: dotted quad, or RFC 5952 IPv6 (lowercase, longest zero run as `::`). */
export function formatIp(ip: ParsedIp): string {
  if (ip.family === 4) return Array.from(ip.bytes).join(".");
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((ip.bytes[i]! << 8) | ip.bytes[i + 1]!);
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLen).join(":")}`;
}

/** Keeps the first `bits` bits of the address and zeroes the rest. */
export function maskIp(ip: ParsedIp, bits: number): ParsedIp {
  const out = new Uint8Array(ip.bytes);
  for (let i = 0; i < out.length; i++) {
    const keep = Math.max(0, Math.min(8, bits - i * 8));
    out[i] = out[i]! & ((0xff << (8 - keep)) & 0xff);
  }
  return { family: ip.family, bytes: out };
}

/** True when `ip` lies inside `net` (families must match; IPv4-mapped addresses are IPv4 here). */
export function cidrContains(net: Cidr, ip: ParsedIp): boolean {
  if (net.ip.family !== ip.family) return false;
  const a = maskIp(net.ip, net.bits).bytes;
  const b = maskIp(ip, net.bits).bytes;
  return a.every((v, i) => v === b[i]);
}

/** Named address sets accepted by `trustProxy` and `allowList`, after proxy-addr's names. */
export const NAMED_RANGES = {
  loopback: ["127.0.0.0/8", "::1/128"],
  linklocal: ["169.254.0.0/16", "fe80::/10"],
  uniquelocal: ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"],
} as const;

/** A name from {@link NAMED_RANGES}. */
export type NamedRange = keyof typeof NAMED_RANGES;

/** Parses `10.0.0.0/8`, `::1`, `2001:db8::/32`; `undefined` when invalid. A bare address is a full-length prefix. */
export function parseCidr(input: string): Cidr | undefined {
  const slash = input.indexOf("/");
  const ip = parseIp(slash < 0 ? input : input.slice(0, slash));
  if (ip === undefined) return undefined;
  const max = ip.family === 4 ? 32 : 128;
  if (slash < 0) return { ip, bits: max };
  const text = input.slice(slash + 1).trim();
  if (!/^\d{1,3}$/.test(text)) return undefined;
  let bits = Number(text);
  // `::ffff:10.0.0.0/104` became IPv4: shift the prefix into IPv4 terms.
  if (ip.family === 4 && input.includes(":")) bits -= 96;
  if (bits < 0 || bits > max) return undefined;
  return { ip, bits };
}

/** Parses a list of CIDRs, IPs and {@link NamedRange} names; throws a `ValidationError` naming `field` on a bad entry. */
export function parseCidrList(list: readonly string[], field: string): Cidr[] {
  const out: Cidr[] = [];
  list.forEach((entry, i) => {
    const named = (NAMED_RANGES as Record<string, readonly string[] | undefined>)[entry];
    const parts = named ?? [entry];
    for (const p of parts) {
      const c = typeof p === "string" ? parseCidr(p) : undefined;
      if (c === undefined) {
        throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid rateLimit options", [
          {
            path: `${field}.${i}`,
            message: `${JSON.stringify(entry)} is not an IP address, a CIDR or one of ${Object.keys(NAMED_RANGES).join(", ")}`,
          },
        ]);
      }
      out.push(c);
    }
  });
  return out;
}

/**
 * Which proxies to believe:
 * - `false` (default): none; the socket's peer address is the client, forwarding headers are ignored;
 * - `true`: every hop; the left-most address in the forwarding header is the client
 *   (only safe when a proxy you run always overwrites the header);
 * - a number `n`: the `n` hops nearest the server are proxies (1 = one load balancer in front);
 * - a list of IPs, CIDRs or names (`loopback`, `linklocal`, `uniquelocal`): those peers are proxies.
 */
export type TrustProxy = boolean | number | string | readonly string[];

/** Decides whether the hop at distance `hop` (0 = the socket peer) with address `ip` is a trusted proxy. */
export type TrustFn = (ip: ParsedIp, hop: number) => boolean;

/** Compiles a {@link TrustProxy} option into a {@link TrustFn}; throws a `ValidationError` when invalid. */
export function compileTrust(option: TrustProxy | undefined): TrustFn {
  if (option === undefined || option === false) return () => false;
  if (option === true) return () => true;
  if (typeof option === "number") {
    if (!Number.isInteger(option) || option < 0) {
      throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid rateLimit options", [
        {
          path: "trustProxy",
          message: `a hop count must be a whole number ≥ 0 (got ${String(option)})`,
        },
      ]);
    }
    return (_ip, hop) => hop < option;
  }
  const list =
    typeof option === "string"
      ? option
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean)
      : option;
  if (!Array.isArray(list)) {
    throw new ValidationError("SLUICE_ERR_OPTIONS", "Invalid rateLimit options", [
      { path: "trustProxy", message: "must be false, true, a hop count, or a list of IPs/CIDRs" },
    ]);
  }
  const nets = parseCidrList(list, "trustProxy");
  return (ip) => nets.some((n) => cidrContains(n, ip));
}

/** Which forwarding header a trusted proxy writes. Only one is read, so a client cannot smuggle the other through. */
export type ProxyHeader = "x-forwarded-for" | "forwarded";

/** The `for=` addresses of a `Forwarded` header (RFC 7239), in order. Obfuscated or unknown nodes are kept as-is. */
export function parseForwarded(value: string): string[] {
  const out: string[] = [];
  for (const element of value.split(",")) {
    for (const pair of element.split(";")) {
      const eq = pair.indexOf("=");
      if (eq < 0) continue;
      if (pair.slice(0, eq).trim().toLowerCase() !== "for") continue;
      out.push(pair.slice(eq + 1).trim());
    }
  }
  return out;
}

/**
 * Finds the client address: start at the socket peer and, while the current hop is a trusted
 * proxy, step one entry left in the forwarding header. An untrusted peer ends the walk at once,
 * so headers it sent change nothing. An unparsable entry ends the walk at the last good address.
 */
export function resolveClientIp(
  peer: string | undefined,
  forwarded: string | undefined,
  trust: TrustFn,
  header: ProxyHeader = "x-forwarded-for",
): ParsedIp | undefined {
  const first = peer === undefined ? undefined : parseIp(peer);
  if (first === undefined) return undefined;
  if (forwarded === undefined || forwarded === "") return first;
  const hops = header === "forwarded" ? parseForwarded(forwarded) : forwarded.split(",");
  let client = first;
  for (let hop = 0; trust(client, hop); hop++) {
    const entry = hops[hops.length - 1 - hop];
    if (entry === undefined) break;
    const next = parseIp(entry);
    if (next === undefined) break;
    client = next;
  }
  return client;
}

/** Prefix lengths used to group client addresses into one rate-limit identity. */
export interface IpGrouping {
  /** IPv4 prefix length, 0–32. Default 32 (each address on its own). */
  ipv4Prefix?: number;
  /** IPv6 prefix length, 0–128. Default 64: one /64 is usually one subscriber, who can pick any address in it. */
  ipv6Prefix?: number;
}

/**
 * The identity of a client address: its canonical text, masked to the configured prefix, with
 * the prefix appended when shorter than the full address (`2001:db8:1:2::/64`, `1.2.3.4`).
 */
export function ipIdentity(ip: ParsedIp, grouping: IpGrouping = {}): string {
  const bits = ip.family === 4 ? (grouping.ipv4Prefix ?? 32) : (grouping.ipv6Prefix ?? 64);
  const max = ip.family === 4 ? 32 : 128;
  if (bits >= max) return formatIp(ip);
  return `${formatIp(maskIp(ip, bits))}/${bits}`;
}
