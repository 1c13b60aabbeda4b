/**
 * A WebSocket gateway (@nestjs/websockets on @nestjs/platform-ws) limited per message of a
 * connection, and a TCP microservice (@nestjs/microservices) limited by a payload field naming
 * the caller: each answers limit + 1 with its exception, carrying limit, remaining and reset.
 */
import type { IncomingMessage } from "node:http";
import { Controller, Inject, Module, UseFilters, UseGuards } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import {
  ClientProxyFactory,
  type ClientProxy,
  MessagePattern,
  type MicroserviceOptions,
  Payload,
  Transport,
} from "@nestjs/microservices";
import { WsAdapter } from "@nestjs/platform-ws";
import {
  MessageBody,
  type OnGatewayConnection,
  SubscribeMessage,
  WebSocketGateway,
} from "@nestjs/websockets";
import { lastValueFrom } from "rxjs";
import type { PolicyInput } from "sluice";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { ManualTime } from "../../../test/support/manual-time.js";
import { freePort } from "../../../test/support/ports.js";
import {
  RateLimit,
  SluiceGuard,
  SluiceLimits,
  SluiceModule,
  SluiceWsExceptionFilter,
} from "../src/index.js";
import { startApp } from "./support.js";

// Nest runs no global guard or filter on gateways (its WsContextCreator is given none): both
// are named here.
@WebSocketGateway({ path: "/chat" })
@UseGuards(SluiceGuard)
@UseFilters(SluiceWsExceptionFilter)
class ChatGateway implements OnGatewayConnection {
  constructor(@Inject(SluiceLimits) private readonly limits: SluiceLimits) {}

  /** Connections per client IP: a gateway's connection runs no guard, so it decides by hand. */
  async handleConnection(client: WebSocket, request: IncomingMessage): Promise<void> {
    const address = request.socket.remoteAddress ?? "unknown";
    const d = await this.limits.decide([{ policy: "connections", key: `ip:${address}` }]);
    if (!d.allowed) client.close(4429, `rate limited: retry in ${d.decisions[0]!.retryAfterMs} ms`);
  }

  @SubscribeMessage("say")
  @RateLimit("messages")
  say(@MessageBody() text: string): { event: string; data: string } {
    return { event: "said", data: text };
  }
}

@Controller()
class SumController {
  @MessagePattern({ cmd: "sum" })
  @RateLimit("calls")
  sum(@Payload() payload: { values: number[] }): number {
    return payload.values.reduce((a, b) => a + b, 0);
  }
}

const policies: PolicyInput[] = [
  { name: "messages", algorithm: "fixed-window", rules: [{ limit: 3, period: "1m" }] },
  { name: "calls", algorithm: "fixed-window", rules: [{ limit: 2, period: "1m" }] },
  { name: "connections", algorithm: "fixed-window", rules: [{ limit: 3, period: "1m" }] },
];

const time = new ManualTime();

@Module({
  imports: [SluiceModule.forRoot({ policies, clock: time.now })],
  providers: [ChatGateway],
})
class ChatModule {}

@Module({
  imports: [SluiceModule.forRoot({ policies, clock: time.now })],
  controllers: [SumController],
})
class SumModule {}

const sockets: WebSocket[] = [];
afterEach(() => {
  while (sockets.length > 0) sockets.pop()!.terminate();
});

/** A `ws` connection; `messages(n)` resolves with its first `n` messages, parsed. */
async function connect(port: number): Promise<{
  socket: WebSocket;
  messages: (n: number) => Promise<unknown[]>;
}> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/chat`);
  sockets.push(socket);
  const received: unknown[] = [];
  let waiting: { n: number; resolve: (m: unknown[]) => void } | undefined;
  socket.on("message", (data: Buffer) => {
    received.push(JSON.parse(data.toString("utf8")));
    if (waiting !== undefined && received.length >= waiting.n) waiting.resolve(received);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve());
    socket.once("error", reject);
  });
  const messages = (n: number) =>
    received.length >= n
      ? Promise.resolve(received)
      : new Promise<unknown[]>((resolve) => {
          waiting = { n, resolve };
        });
  return { socket, messages };
}

describe("a WebSocket gateway (platform-ws)", () => {
  it("limits messages per connection: the fourth answers a WsException with limit, remaining and reset", async () => {
    const { port } = await startApp(ChatModule, "express", (app) =>
      app.useWebSocketAdapter(new WsAdapter(app)),
    );
    const one = await connect(port);
    for (let i = 0; i < 4; i++) one.socket.send(JSON.stringify({ event: "say", data: `hi ${i}` }));
    const received = await one.messages(4);
    expect(received).toHaveLength(4);
    // The answers may come in any order (each message is decided and answered on its own).
    const said = received.filter((m) => (m as { event: string }).event === "said");
    expect(said).toEqual([
      { event: "said", data: "hi 0" },
      { event: "said", data: "hi 1" },
      { event: "said", data: "hi 2" },
    ]);
    const denial = received.find((m) => (m as { event: string }).event === "exception") as {
      event: string;
      data: Record<string, unknown>;
    };
    expect(denial.data).toMatchObject({
      status: "error",
      code: "RATE_LIMITED",
      limit: 3,
      remaining: 0,
      policies: ["messages"],
    });
    expect(denial.data.reset).toBeGreaterThan(0);
    expect(denial.data.retryAfter).toBeGreaterThan(0);
    // A second connection counts on its own.
    const two = await connect(port);
    two.socket.send(JSON.stringify({ event: "say", data: "hello" }));
    expect(await two.messages(1)).toEqual([{ event: "said", data: "hello" }]);
  });

  it("admits connections per client IP in handleConnection: the fourth is closed with 4429", async () => {
    const { port } = await startApp(ChatModule, "express", (app) =>
      app.useWebSocketAdapter(new WsAdapter(app)),
    );
    const open = [await connect(port), await connect(port), await connect(port)];
    const fourth = await connect(port);
    const [code, reason] = await new Promise<[number, string]>((resolve) =>
      fourth.socket.once("close", (c: number, r: Buffer) => resolve([c, r.toString("utf8")])),
    );
    expect(code).toBe(4429);
    expect(reason).toMatch(/^rate limited: retry in \d+ ms$/);
    // The three admitted still talk.
    open[2]!.socket.send(JSON.stringify({ event: "say", data: "still here" }));
    expect(await open[2]!.messages(1)).toEqual([{ event: "said", data: "still here" }]);
  });
});

describe("a TCP microservice", () => {
  let client: ClientProxy | undefined;
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });

  it("limits a pattern by the caller its payload names: the third call answers an RpcException", async () => {
    const port = await freePort();
    const app = await NestFactory.createMicroservice<MicroserviceOptions>(SumModule, {
      transport: Transport.TCP,
      options: { host: "127.0.0.1", port },
      logger: false,
      abortOnError: false,
    });
    await app.listen();
    try {
      client = ClientProxyFactory.create({
        transport: Transport.TCP,
        options: { host: "127.0.0.1", port },
      });
      const call = (clientId: string) =>
        lastValueFrom(client!.send<number>({ cmd: "sum" }, { clientId, values: [1, 2, 3] }));
      expect(await call("tenant-a")).toBe(6);
      expect(await call("tenant-a")).toBe(6);
      const refused = await call("tenant-a").then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toMatchObject({
        status: "error",
        code: "RATE_LIMITED",
        limit: 2,
        remaining: 0,
        policies: ["calls"],
      });
      expect((refused as { reset: number }).reset).toBeGreaterThan(0);
      expect((refused as { retryAfter: number }).retryAfter).toBeGreaterThan(0);
      // Another caller has a count of its own.
      expect(await call("tenant-b")).toBe(6);
    } finally {
      await app.close();
    }
  });
});
