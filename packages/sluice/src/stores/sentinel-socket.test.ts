import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RespError, RespReader, encodeCommand } from "./sentinel-socket.js";

const bytes = (s: string) => new TextEncoder().encode(s);

describe("RespReader", () => {
  const stream =
    "+OK\r\n-ERR no such master\r\n:42\r\n$-1\r\n$4\r\nhé!\r\n*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$19\r\nm 1.1.1.1 1 2.2.2.2\r\n*2\r\n*0\r\n*1\r\n:7\r\n";
  const expected = [
    "OK",
    new RespError("ERR no such master"),
    42,
    null,
    "hé!",
    ["message", "+switch-master", "m 1.1.1.1 1 2.2.2.2"],
    [[], [7]],
  ];

  it("reads every type, whole", () => {
    const r = new RespReader();
    r.push(bytes(stream));
    const got = [];
    for (let v = r.next(); v !== undefined; v = r.next()) got.push(v.value);
    expect(got).toEqual(expected);
  });

  it("reads the same values however the bytes are split into chunks", () => {
    const all = bytes(stream);
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: all.length - 1 })), (cuts) => {
        const r = new RespReader();
        const got = [];
        let at = 0;
        for (const cut of [...cuts.sort((a, b) => a - b), all.length]) {
          r.push(all.subarray(at, cut));
          at = cut;
          for (let v = r.next(); v !== undefined; v = r.next()) got.push(v.value);
        }
        expect(got).toEqual(expected);
      }),
    );
  });

  it("encodes a command as bulk strings, lengths in bytes", () => {
    expect(encodeCommand(["SENTINEL", "sentinels", "é"])).toBe(
      "*3\r\n$8\r\nSENTINEL\r\n$9\r\nsentinels\r\n$2\r\né\r\n",
    );
  });
});
