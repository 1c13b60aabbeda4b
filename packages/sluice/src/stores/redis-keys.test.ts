import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_RAW_IDENTIFIER, identifierTag, slotOfTag } from "./redis-keys.js";

/** Which identifiers are kept as they are, as the key layout defines it (one regular expression). */
function keptAsIs(id: string): boolean {
  // eslint-disable-next-line no-control-regex
  const odd = /[{}\s\u0000-\u001f\u007f]/;
  const lone = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
  return id.length <= MAX_RAW_IDENTIFIER && !odd.test(id) && id[0] !== "#" && !lone.test(id);
}

describe("identifierTag", () => {
  it("keeps exactly the identifiers the key layout keeps (the one-pass check agrees)", () => {
    const id = fc.oneof(
      fc.string({ maxLength: 70 }),
      fc.string({ unit: "grapheme", maxLength: 70 }),
      fc.string({ unit: "binary", maxLength: 70 }),
      fc.string({
        unit: fc.constantFrom(
          "a",
          " ",
          "\u00a0",
          "\u2028",
          "\ufeff",
          "{",
          "#",
          "\u007f",
          "\uD83D",
          "\uDE00",
        ),
        maxLength: 8,
      }),
    );
    fc.assert(
      fc.property(id, (s) => {
        expect(identifierTag(s) === s, JSON.stringify(s)).toBe(keptAsIs(s));
      }),
      { numRuns: 3000 },
    );
  });

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
