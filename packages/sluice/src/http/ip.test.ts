import { isIPv4, isIPv6 } from "node:net";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  cidrContains,
  compileTrust,
  formatIp,
  ipIdentity,
  parseCidr,
  parseForwarded,
  parseIp,
  resolveClientIp,
} from "./ip.js";

const fmt = (s: string) => {
  const p = parseIp(s);
  return p ? formatIp(p) : undefined;
};

describe("parseIp / formatIp", () => {
  it.each([
    ["1.2.3.4", "1.2.3.4"],
    [" 1.2.3.4 ", "1.2.3.4"],
    ["1.2.3.4:8080", "1.2.3.4"],
    ["::1", "::1"],
    ["[::1]:443", "::1"],
    ["2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
    ["fe80::1%eth0", "fe80::1"],
    ["::ffff:127.0.0.1", "127.0.0.1"],
    ["::ffff:7f00:1", "127.0.0.1"],
    ["0:0:0:0:0:ffff:102:304", "1.2.3.4"],
    ["64:ff9b::1.2.3.4", "64:ff9b::102:304"],
    ['"[2001:db8::17]:4711"', "2001:db8::17"],
    ["1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"],
    ["1:0:0:4:0:0:0:8", "1:0:0:4::8"],
  ])("%s → %s", (input, out) => {
    expect(fmt(input)).toBe(out);
  });

  it.each([
    "",
    "unknown",
    "1.2.3",
    "256.1.1.1",
    "01.2.3.4",
    "1::2::3",
    "12345::",
    "_hidden",
    "2001:db8::g",
  ])("rejects %j", (input) => {
    expect(parseIp(input)).toBeUndefined();
  });
});

describe("ipIdentity", () => {
  it("groups IPv6 by /64 by default and keeps IPv4 whole", () => {
    expect(ipIdentity(parseIp("2001:db8:1:2:aaaa::1")!)).toBe("2001:db8:1:2::/64");
    expect(ipIdentity(parseIp("2001:db8:1:2:ffff:ffff:ffff:ffff")!)).toBe("2001:db8:1:2::/64");
    expect(ipIdentity(parseIp("2001:db8:1:3::1")!)).toBe("2001:db8:1:3::/64");
    expect(ipIdentity(parseIp("203.0.113.9")!)).toBe("203.0.113.9");
    expect(ipIdentity(parseIp("::ffff:203.0.113.9")!)).toBe("203.0.113.9");
  });
  it("takes configured prefixes", () => {
    expect(ipIdentity(parseIp("2001:db8:1:2::1")!, { ipv6Prefix: 48 })).toBe("2001:db8:1::/48");
    expect(ipIdentity(parseIp("2001:db8:1:2::1")!, { ipv6Prefix: 128 })).toBe("2001:db8:1:2::1");
    expect(ipIdentity(parseIp("203.0.113.9")!, { ipv4Prefix: 24 })).toBe("203.0.113.0/24");
    expect(ipIdentity(parseIp("2001:db8:1:2::1")!, { ipv6Prefix: 60 })).toBe("2001:db8:1::/60");
  });
});

describe("CIDR", () => {
  it("matches v4, v6 and mapped addresses", () => {
    const net = parseCidr("10.0.0.0/8")!;
    expect(cidrContains(net, parseIp("10.200.3.4")!)).toBe(true);
    expect(cidrContains(net, parseIp("::ffff:10.1.1.1")!)).toBe(true);
    expect(cidrContains(net, parseIp("11.0.0.1")!)).toBe(false);
    expect(cidrContains(parseCidr("172.16.0.0/12")!, parseIp("172.31.255.255")!)).toBe(true);
    expect(cidrContains(parseCidr("172.16.0.0/12")!, parseIp("172.32.0.0")!)).toBe(false);
    expect(cidrContains(parseCidr("2001:db8::/32")!, parseIp("2001:db8:ffff::1")!)).toBe(true);
    expect(cidrContains(parseCidr("2001:db8::/32")!, parseIp("2001:db9::1")!)).toBe(false);
    expect(cidrContains(parseCidr("::ffff:10.0.0.0/104")!, parseIp("10.9.9.9")!)).toBe(true);
    expect(cidrContains(parseCidr("0.0.0.0/0")!, parseIp("::1")!)).toBe(false);
    expect(cidrContains(parseCidr("127.0.0.1")!, parseIp("127.0.0.1")!)).toBe(true);
    expect(cidrContains(parseCidr("127.0.0.1")!, parseIp("127.0.0.2")!)).toBe(false);
  });
  it("rejects bad CIDRs", () => {
    for (const s of ["10.0.0.0/33", "::/129", "10.0.0.0/x", "nonsense/8", "10.0.0.0/"])
      expect(parseCidr(s)).toBeUndefined();
  });
  it("compileTrust validates its input", () => {
    expect(() => compileTrust(["10.0.0.0/8", "bogus"])).toThrow(/trustProxy\.1/);
    expect(() => compileTrust(-1)).toThrow(/hop count/);
  });
});

describe("resolveClientIp", () => {
  const walk = (
    peer: string,
    xff: string | undefined,
    trust: Parameters<typeof compileTrust>[0],
    header?: "x-forwarded-for" | "forwarded",
  ) => {
    const p = resolveClientIp(peer, xff, compileTrust(trust), header);
    return p ? formatIp(p) : undefined;
  };
  it("ignores forwarding headers from an untrusted peer", () => {
    expect(walk("203.0.113.5", "1.1.1.1", false)).toBe("203.0.113.5");
    expect(walk("203.0.113.5", "1.1.1.1", ["10.0.0.0/8"])).toBe("203.0.113.5");
    expect(walk("203.0.113.5", "1.1.1.1", 0)).toBe("203.0.113.5");
  });
  it("walks trusted proxies from the right", () => {
    // client 198.51.100.7 → spoofed "6.6.6.6" prefix → proxy 10.0.0.2 → proxy 10.0.0.1 (peer)
    const xff = "6.6.6.6, 198.51.100.7, 10.0.0.2";
    expect(walk("10.0.0.1", xff, ["10.0.0.0/8"])).toBe("198.51.100.7");
    expect(walk("10.0.0.1", xff, 2)).toBe("198.51.100.7");
    expect(walk("10.0.0.1", xff, 1)).toBe("10.0.0.2");
    expect(walk("10.0.0.1", xff, true)).toBe("6.6.6.6");
    expect(walk("10.0.0.1", xff, "loopback, uniquelocal")).toBe("198.51.100.7");
  });
  it("stops at the last good address on garbage", () => {
    expect(walk("10.0.0.1", "garbage", true)).toBe("10.0.0.1");
    expect(walk("10.0.0.1", "1.2.3.4, garbage", true)).toBe("10.0.0.1");
    expect(walk("10.0.0.1", "", true)).toBe("10.0.0.1");
  });
  it("reads RFC 7239 Forwarded when configured", () => {
    expect(
      parseForwarded('for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711"'),
    ).toEqual(["192.0.2.60", '"[2001:db8:cafe::17]:4711"']);
    expect(
      walk("::1", 'for=192.0.2.60, for="[2001:db8:cafe::17]:4711"', ["loopback"], "forwarded"),
    ).toBe("2001:db8:cafe::17");
  });
  it("counts IPv4-mapped peers as IPv4 when matching trust lists", () => {
    expect(walk("::ffff:127.0.0.1", "198.51.100.7", ["127.0.0.1"])).toBe("198.51.100.7");
  });
  it("returns undefined without a peer", () => {
    expect(resolveClientIp(undefined, "1.2.3.4", compileTrust(true))).toBeUndefined();
  });
});

/**
 * parseIp as it was with `node:net` (isIPv4 / isIPv6 then the same byte layout): the oracle for
 * the parser that runs without it, so that no client is counted under another identity.
 */
function parseIpWithNodeNet(input: string): { family: 4 | 6; bytes: number[] } | undefined {
  let s = input.trim();
  if (s.startsWith('"') && s.endsWith('"') && s.length >= 2) s = s.slice(1, -1);
  if (s.startsWith("[")) {
    const end = s.indexOf("]");
    if (end < 0) return undefined;
    s = s.slice(1, end);
  } else if (s.indexOf(":") === s.lastIndexOf(":") && s.includes(".") && s.includes(":")) {
    s = s.slice(0, s.indexOf(":"));
  }
  const zone = s.indexOf("%");
  if (zone >= 0) s = s.slice(0, zone);
  if (isIPv4(s)) return { family: 4, bytes: s.split(".").map(Number) };
  if (!isIPv6(s)) return undefined;
  let text = s;
  const lastColon = text.lastIndexOf(":");
  const tail = text.slice(lastColon + 1);
  if (tail.includes(".")) {
    const [a, b, c, d] = tail.split(".").map(Number) as [number, number, number, number];
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split("::");
  const groups = (part: string | undefined) =>
    part ? part.split(":").map((g) => parseInt(g, 16)) : [];
  const head = groups(halves[0]);
  const rest = halves.length === 2 ? groups(halves[1]) : [];
  const all = [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest];
  const bytes = all.flatMap((g) => [g >> 8, g & 0xff]);
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff)
    return { family: 4, bytes: bytes.slice(12) };
  return { family: 6, bytes };
}

describe("parseIp without node:net", () => {
  const plain = (p: ReturnType<typeof parseIp>) =>
    p === undefined ? undefined : { family: p.family, bytes: Array.from(p.bytes) };
  const check = (s: string): void => {
    expect(plain(parseIp(s)), JSON.stringify(s)).toEqual(parseIpWithNodeNet(s));
  };

  it("accepts and reads exactly what it read with Node's isIPv4 / isIPv6", () => {
    const group = fc.oneof(
      fc.integer({ min: 0, max: 0xffff }).map((n) => n.toString(16)),
      fc.constantFrom(
        "0",
        "00000",
        "ffff",
        "FFFF",
        "g",
        "",
        "1.2.3.4",
        "255.255.255.255",
        "01.2.3.4",
      ),
    );
    const v6 = fc
      .tuple(
        fc.array(group, { maxLength: 9 }),
        fc.nat(9),
        fc.boolean(),
        fc.constantFrom("", "%eth0", "%"),
      )
      .map(([gs, at, gap, zone]) => {
        const parts = [...gs];
        if (gap) parts.splice(Math.min(at, parts.length), 0, "");
        return parts.join(":") + zone;
      });
    const octet = fc.oneof(fc.nat(300).map(String), fc.constantFrom("00", "01", "", "a"));
    const v4 = fc
      .tuple(fc.array(octet, { minLength: 3, maxLength: 5 }), fc.constantFrom("", ":80", ":"))
      .map(([os, port]) => os.join(".") + port);
    const noise = fc.string({
      unit: fc.constantFrom("0", "1", "f", ":", ".", "%", "[", "]", " "),
      maxLength: 16,
    });
    let valid = 0;
    fc.assert(
      fc.property(
        fc.oneof(
          fc.ipV4(),
          fc.ipV6(),
          fc.ipV6().map((s) => s.toUpperCase()),
          v6,
          v4,
          noise,
          v6.map((s) => `[${s}]:443`),
        ),
        (s) => {
          check(s);
          if (parseIp(s) !== undefined) valid++;
        },
      ),
      { numRuns: 20_000 },
    );
    // The generators reach real addresses, not only garbage.
    expect(valid).toBeGreaterThan(5000);
  });

  it("agrees on the edge cases", () => {
    for (const s of [
      "::",
      "::1",
      "1::",
      ":::",
      "1:2:3:4:5:6:7::",
      "::1:2:3:4:5:6:7",
      "1::2:3:4:5:6:7:8",
      "1:2:3:4:5:6:7:8:9",
      "1:2:3:4:5:6:1.2.3.4",
      "1:2:3:4:5:6:7:1.2.3.4",
      "::1.2.3.4",
      "1.2.3.4::",
      "::ffff:1.2.3.04",
      "1.2.3.4%eth0",
      "fe80::1%",
      "0x1.2.3.4",
      "1e1.2.3.4",
      " 1.2.3.4",
    ])
      check(s);
  });
});
