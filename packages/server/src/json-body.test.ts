import { isUtf8 } from "node:buffer";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ApiError } from "./errors.js";
import { parseJsonBytes } from "./json-body.js";

/** A JSON object whose field `a` holds `bytes` as they are, and `b` a plain string. */
const body = (bytes: Uint8Array): Buffer =>
  Buffer.concat([Buffer.from('{"a":"'), bytes, Buffer.from('","b":"ok"}')]);

describe("parseJsonBytes", () => {
  it("reads UTF-8 as UTF-8, and refuses anything else naming the string that holds it", () => {
    // Any byte a JSON string may hold as it is: not `"`, `\` or a control character.
    const byte = fc.integer({ min: 0x20, max: 0xff }).filter((b) => b !== 0x22 && b !== 0x5c);
    const bytes = fc.oneof(
      fc
        .uint8Array({ maxLength: 12 })
        .map((a) => a.map((b) => (b < 0x20 || b === 0x22 || b === 0x5c ? 0x61 : b))),
      fc.array(byte, { maxLength: 12 }).map((a) => Uint8Array.from(a)),
      // Valid text of every width, cut anywhere: truncated sequences.
      fc.tuple(fc.string({ unit: "binary", maxLength: 4 }), fc.nat()).map(([s, cut]) => {
        // What a JSON string may not hold as it is (`"`, `\`, control characters) becomes "a".
        const b = Buffer.from(s).map((x) => (x < 0x20 || x === 0x22 || x === 0x5c ? 0x61 : x));
        return b.subarray(0, b.length === 0 ? 0 : cut % (b.length + 1));
      }),
    );
    fc.assert(
      fc.property(bytes, (a) => {
        const text = body(a);
        if (isUtf8(text)) {
          expect(parseJsonBytes(text)).toEqual({ a: Buffer.from(a).toString("utf8"), b: "ok" });
          return;
        }
        let thrown: unknown;
        try {
          parseJsonBytes(text);
        } catch (err) {
          thrown = err;
        }
        expect(thrown).toBeInstanceOf(ApiError);
        expect((thrown as ApiError).issues).toEqual([
          { path: "a", message: expect.stringMatching(/^is not valid UTF-8/) },
        ]);
      }),
      { numRuns: 5000 },
    );
  });

  it("names each field that holds invalid bytes, and the object of a field name that does", () => {
    const issues = (text: string) => {
      try {
        parseJsonBytes(Buffer.from(text, "latin1"));
      } catch (err) {
        return (err as ApiError).issues?.map((i) => i.path);
      }
      return undefined;
    };
    expect(issues('{"a":["ok","\xff"],"b":{"c":"\xc3"},"d":"\xe2\x82\xac"}')).toEqual([
      "a.1",
      "b.c",
    ]);
    expect(issues('{"x":{"\xf0\x9f":1}}')).toEqual(["x"]);
    // Outside a string, an invalid byte is no JSON at all.
    expect(issues('{"a":1\xff}')).toEqual([""]);
    // U+FFFD written out (EF BF BD) is a character like any other.
    expect(parseJsonBytes(Buffer.from('{"a":"\ufffd"}'))).toEqual({ a: "\ufffd" });
  });
});
