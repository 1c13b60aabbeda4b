/**
 * A body over `bodyLimit` is answered 413 at once, while the client is still sending it: the
 * client must be able to read that answer. Closing the connection right after answering makes
 * the close a reset under the upload (the unread body), and a client that sends its whole body
 * before it reads the answer (as most do: Python's http.client and requests, Java's, curl
 * without Expect) gets ECONNRESET or EPIPE instead of the 413. Real sockets, no mock.
 */
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestService, startService } from "./helpers.js";

const CRLF = Buffer.from("\r\n");

/** What the client got: the answer's status line and body, or the error its socket raised. */
type Outcome = { status: number; body: string } | { error: string; sent: number };

/**
 * POSTs `size` bytes to /v1/limit over a plain socket, declared with Content-Length or sent
 * chunked, the way a sequential client does: the whole body first (a failed write is a
 * failure), then the answer, read to the end of the connection or of its body.
 */
function upload(
  url: string,
  size: number,
  chunked: boolean,
  type = "application/json",
): Promise<Outcome> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let received = "";
    let sent = 0;
    let done = false;
    const finish = (o: Outcome) => {
      if (done) return;
      done = true;
      socket.destroy();
      resolve(o);
    };
    const answer = () => {
      const m = /^HTTP\/1\.1 (\d{3}) [^\r]*\r\n([\s\S]*?)\r\n\r\n([\s\S]*)$/.exec(received);
      if (!m) return undefined;
      const length = /content-length: (\d+)/i.exec(m[2]!);
      if (!length || Buffer.byteLength(m[3]!) < Number(length[1])) return undefined;
      return { status: Number(m[1]), body: m[3]!.slice(0, Number(length[1])) };
    };
    socket.setEncoding("utf8");
    socket.on("data", (d: string) => {
      received += d;
      // A sequential client reads the answer only once its body is sent.
      const a = answer();
      if (a && sent === size) finish(a);
    });
    socket.on("error", (err: NodeJS.ErrnoException) =>
      finish({ error: err.code ?? String(err), sent }),
    );
    socket.on("close", () => {
      const a = answer();
      finish(a && sent === size ? a : { error: "closed before the answer was read", sent });
    });
    const head =
      `POST /v1/limit HTTP/1.1\r\nHost: ${hostname}:${port}\r\nContent-Type: ${type}\r\n` +
      (chunked ? "Transfer-Encoding: chunked\r\n\r\n" : `Content-Length: ${size}\r\n\r\n`);
    socket.write(head);
    const chunk = Buffer.alloc(64 * 1024, "[");
    const pump = () => {
      while (sent < size && !done) {
        const n = Math.min(chunk.length, size - sent);
        const data = n === chunk.length ? chunk : chunk.subarray(0, n);
        const more = chunked
          ? socket.write(Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), data, CRLF]))
          : socket.write(data);
        sent += n;
        if (!more) {
          socket.once("drain", pump);
          return;
        }
      }
      if (chunked && !done) socket.write("0\r\n\r\n");
      const a = answer();
      if (a) finish(a);
    };
    socket.once("connect", pump);
  });
}

describe("413 while the client is still uploading", () => {
  let s: TestService;
  beforeAll(async () => {
    s = await startService({ values: { bodyLimit: 1024 } });
  });
  afterAll(async () => {
    await s?.close();
  });

  it.each([
    ["declared with Content-Length", false],
    ["sent chunked", true],
  ])(
    "20 uploads of 8 MiB, %s: every client sends it all, then reads the 413",
    async (_, chunked) => {
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, () => upload(s.url, 8 * 1024 * 1024, chunked)),
      );
      const errors = outcomes.filter((o) => "error" in o);
      expect(errors, `${errors.length} of 20 lost the answer`).toEqual([]);
      for (const o of outcomes) {
        expect(o).toMatchObject({ status: 413 });
        if ("body" in o)
          expect(JSON.parse(o.body)).toMatchObject({ error: { code: "payload_too_large" } });
      }
    },
  );

  it("a 415 for a large body of another type reaches the client too", async () => {
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, () => upload(s.url, 8 * 1024 * 1024, false, "text/plain")),
    );
    expect(outcomes.filter((o) => "error" in o)).toEqual([]);
    for (const o of outcomes) expect(o).toMatchObject({ status: 415 });
  });

  it("reads the rest no longer than requestTimeoutMs: a stalled upload is cut off", async () => {
    const t = await startService({
      values: { bodyLimit: 1024, requestTimeoutMs: 1000, headersTimeoutMs: 400 },
    });
    try {
      const { hostname, port } = new URL(t.url);
      const socket = connect(Number(port), hostname);
      let received = "";
      socket.setEncoding("utf8");
      socket.on("data", (d: string) => (received += d));
      socket.on("error", () => undefined);
      const closed = new Promise<number>((resolve) =>
        socket.once("close", () => resolve(Date.now())),
      );
      socket.write(
        `POST /v1/limit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${2 ** 30}\r\n\r\n`,
      );
      socket.write(Buffer.alloc(1024 * 1024, "["));
      const sentAt = Date.now();
      // Then nothing more: the connection is closed once the request's deadline has passed.
      const closedAt = await Promise.race([
        closed,
        new Promise<number>((resolve) => setTimeout(() => resolve(-1), 5000)),
      ]);
      socket.destroy();
      expect(received).toMatch(/^HTTP\/1\.1 413 /);
      expect(closedAt).toBeGreaterThan(0);
      expect(closedAt - sentAt).toBeLessThan(3000);
    } finally {
      await t.close();
    }
  });
});
