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
