import { describe, expect, it } from "vitest";
import { identifierTag, slotOfTag } from "./redis-keys.js";

describe("identifierTag", () => {
  it("keeps short plain identifiers", () => {
    expect(identifierTag("user:42")).toBe("user:42");
    expect(identifierTag("2001:db8::/64")).toBe("2001:db8::/64");
    expect(identifierTag("x".repeat(64))).toBe("x".repeat(64));
  });
  it("hashes long, braced, spaced, control-character and '#'-led identifiers", () => {
    for (const id of ["x".repeat(65), "a{b", "a}b", "a b", "a\nb", "#abc"]) {
      const t = identifierTag(id);
      expect(t).toMatch(/^#[A-Za-z0-9_-]{27}$/);
      expect(identifierTag(id)).toBe(t);
    }
    expect(identifierTag("a{b")).not.toBe(identifierTag("a}b"));
  });
  it("keeps identifiers with lone surrogates apart (UTF-8 would merge them)", () => {
    const a = identifierTag("x\uD800");
    const b = identifierTag("x\uD801");
    expect(a).toMatch(/^#/);
    expect(a).not.toBe(b);
    expect(identifierTag("smile \uD83D\uDE00".replace(" ", "-"))).toBe("smile-\uD83D\uDE00");
  });
});

describe("slotOfTag", () => {
  it("matches the Redis Cluster specification (CRC16 XMODEM mod 16384)", () => {
    // Values from the Redis Cluster spec / cluster-key-slot.
    expect(slotOfTag("123456789")).toBe(12739);
    expect(slotOfTag("user1000")).toBe(3443);
  });
  it("hashes the UTF-8 bytes, as Redis does (values from CLUSTER KEYSLOT of redis-server 7)", () => {
    // The same text in NFC (one code point) and NFD (e + combining acute) is two different
    // byte strings, hence two Redis keys in two slots; no normalisation happens on the way.
    expect(slotOfTag("\u00e9")).toBe(10180);
    expect(slotOfTag("e\u0301")).toBe(8715);
    expect(slotOfTag("\u65e5\u672c")).toBe(10949);
    expect(slotOfTag("\uD83D\uDE00")).toBe(2959);
  });
});
