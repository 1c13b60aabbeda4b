import { createHash } from "node:crypto";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import {
  base64url,
  fnv1a,
  sha1Base64url,
  sha256Base64url,
  usePureHashes,
  utf16leBytes,
  utf8Bytes,
} from "./hash.js";
import { digest } from "./http/keys.js";
import { identifierTag, slotOfTag } from "./stores/redis-keys.js";

/** Any string, lone surrogates and astral characters included. */
const anyText = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.string({ unit: "grapheme", maxLength: 100 }),
  fc.string({ unit: "binary", maxLength: 100 }),
  fc.string({
    unit: fc.constantFrom("a", "é", "\uD83D", "\uDE00", "\uD83D\uDE00", "{"),
    maxLength: 80,
  }),
);

afterEach(() => usePureHashes(false));

describe("the pure digests give Node's bytes (keys shared across runtimes)", () => {
  it("utf8Bytes and utf16leBytes are Buffer.from's", () => {
    fc.assert(
      fc.property(anyText, (s) => {
        expect(Buffer.from(utf8Bytes(s)).equals(Buffer.from(s, "utf8"))).toBe(true);
        expect(Buffer.from(utf16leBytes(s)).equals(Buffer.from(s, "utf16le"))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it("base64url is Node's, for every length", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 70 }), (bytes) => {
        expect(base64url(bytes)).toBe(Buffer.from(bytes).toString("base64url"));
      }),
      { numRuns: 2000 },
    );
  });

  it("SHA-1 and SHA-256, pure and native, equal node:crypto's", () => {
    for (const pure of [true, false]) {
      usePureHashes(pure);
      fc.assert(
        fc.property(anyText, fc.constantFrom("utf8" as const, "utf16le" as const), (s, enc) => {
          const want1 = createHash("sha1").update(Buffer.from(s, enc)).digest("base64url");
          expect(sha1Base64url(s, enc)).toBe(want1);
          const want256 = createHash("sha256").update(s).digest("base64url");
          expect(sha256Base64url(s)).toBe(want256);
        }),
        { numRuns: 1000 },
      );
    }
  });

  it("keeps today's key names and API-key digests, with the pure functions too", () => {
    // Computed with node:crypto before the core stopped importing it; keys in running
    // deployments have these names.
    const pinned: Array<[string, string]> = [
      ["x".repeat(65), "#eMdB3cSC5M34xHSgh2NHoJBbYjM"],
      [
        "route:GET /users/:id|ip:2001:db8:1:2::/64 with a long tail to pass 64",
        "#TyLdr6zdGVADPWmYLRZG6hG17-o",
      ],
      ["a b", "#fb3pNQQSKnB_hJ8sEr3Z3nG0GSk"],
      ["x\uD800", "#IxY4L5hDdFJHgozjoN5iXkZ8OB0"],
      ["žluťoučký kůň 🐎 " + "é".repeat(40), "#ss55ghQ0DWocLj_QrNaQhUUpKww"],
    ];
    for (const pure of [true, false]) {
      usePureHashes(pure);
      for (const [id, tag] of pinned) expect(identifierTag(id), id).toBe(tag);
      expect(digest("sk_live_0123456789")).toBe("edEbhqi8DcksVFew41sIzWgR4st");
    }
  });

  it("slotOfTag hashes the UTF-8 bytes, as before (Buffer)", () => {
    const crc16 = (bytes: Buffer): number => {
      let crc = 0;
      for (const b of bytes) {
        crc ^= b << 8;
        for (let i = 0; i < 8; i++)
          crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
      }
      return crc % 16384;
    };
    fc.assert(
      fc.property(anyText, (s) => {
        expect(slotOfTag(s)).toBe(crc16(Buffer.from(s, "utf8")));
      }),
      { numRuns: 2000 },
    );
  });
});

describe("fnv1a", () => {
  it("is FNV-1a 32 (the reference vectors), unsigned", () => {
    expect(fnv1a("")).toBe(0x811c9dc5);
    expect(fnv1a("a")).toBe(0xe40c292c);
    expect(fnv1a("foobar")).toBe(0xbf9cf968);
    // Names the faces derived from it before it was shared (their long names) do not move:
    // values of the copy rate-limiter-flexible's face had.
    expect(fnv1a("rlflx:".repeat(40)).toString(36)).toBe("1tvrzr9");
    expect(fnv1a("é\uD83D\uDE00").toString(36)).toBe("j37d7l");
  });
});
