/**
 * Limits and timeouts of the HTTP server, with real sockets against a started service: a body
 * that trickles in is cut off at `requestTimeoutMs`, headers that never finish at
 * `headersTimeoutMs`, and connections beyond `maxConnections` are closed. The timeouts are
 * short here so the test waits only as long as they need.
 */
import { type Socket, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestService, startService } from "./helpers.js";

/** A raw connection to the service; resolves once connected. */
async function open(s: TestService): Promise<{
  socket: Socket;
  received: () => string;
  closed: Promise<number>;
}> {
  const socket = connect(Number(new URL(s.url).port), "127.0.0.1");
  let data = "";
  socket.on("data", (d: Buffer) => (data += d.toString()));
  socket.on("error", () => {});
  const started = Date.now();
  const closed = new Promise<number>((resolve) =>
    socket.once("close", () => resolve(Date.now() - started)),
  );
  await new Promise((resolve) => socket.once("connect", resolve));
  return { socket, received: () => data, closed };
}

describe("limits and timeouts", () => {
  let s: TestService;
  beforeAll(async () => {
    s = await startService({
      values: { headersTimeoutMs: 200, requestTimeoutMs: 400, maxConnections: 3 },
    });
  });
  afterAll(async () => {
    await s?.close();
  });

  it("cuts off a body that trickles in, at requestTimeoutMs", async () => {
    const c = await open(s);
    c.socket.write(
      "POST /v1/admin/login HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    );
    // One byte every 50 ms: never silent for long, never done.
    const drip = setInterval(() => c.socket.write(" "), 50);
    try {
      const ms = await c.closed;
      expect(ms).toBeGreaterThanOrEqual(350);
      expect(ms).toBeLessThan(3000);
      expect(c.received()).toMatch(/^HTTP\/1\.1 408 /);
    } finally {
      clearInterval(drip);
      c.socket.destroy();
    }
  });

  it("cuts off headers that never finish, at headersTimeoutMs", async () => {
    const c = await open(s);
    c.socket.write("GET /healthz HTTP/1.1\r\nHost: t\r\n");
    const drip = setInterval(() => c.socket.write("X-Slow: 1\r\n"), 50);
    try {
      const ms = await c.closed;
      expect(ms).toBeGreaterThanOrEqual(150);
      expect(ms).toBeLessThan(3000);
      expect(c.received()).toMatch(/^HTTP\/1\.1 408 /);
    } finally {
      clearInterval(drip);
      c.socket.destroy();
    }
  });

  it("closes connections beyond maxConnections as they arrive, and takes new ones after", async () => {
    // Fill up to the cap (the test client may keep a connection of its own open).
    const connections = () =>
      new Promise<number>((resolve, reject) =>
        s.service.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
      );
    const held: Awaited<ReturnType<typeof open>>[] = [];
    while ((await connections()) < 3) held.push(await open(s));
    expect(held.length).toBeGreaterThan(0);
    try {
      const extra = await open(s);
      await extra.closed; // closed by the server, without a word
      expect(extra.received()).toBe("");
      // The held ones still work.
      held[0]!.socket.write("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
      await expect.poll(() => held[0]!.received()).toMatch(/^HTTP\/1\.1 200 /);
    } finally {
      for (const c of held) c.socket.destroy();
    }
    await Promise.all(held.map((c) => c.closed));
    const res = await fetch(`${s.url}/healthz`);
    expect(res.status).toBe(200);
  });
});
