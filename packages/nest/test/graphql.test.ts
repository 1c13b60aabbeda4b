/**
 * GraphQL through @nestjs/graphql and Apollo: a query limited per user, a field with a cost
 * (settled after it answered), and a subscription limited per connection — real graphql-ws
 * clients over real sockets. Each answers limit + 1 with a GraphQLError whose extensions say
 * why (code, retryAfter, limit, remaining, reset).
 */
import { ApolloDriver, type ApolloDriverConfig } from "@nestjs/apollo";
import { Module } from "@nestjs/common";
import { Args, GraphQLModule, Query, Resolver, Subscription } from "@nestjs/graphql";
import { PubSub } from "graphql-subscriptions";
import { type Client, createClient } from "graphql-ws";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { ManualTime } from "../../../test/support/manual-time.js";
import {
  RateLimit,
  RateLimitCost,
  RateLimitKey,
  SluiceLimits,
  SluiceModule,
} from "../src/index.js";
import { startApp } from "./support.js";

const time = new ManualTime();
const pubsub = new PubSub();

const typeDefs = /* GraphQL */ `
  type Query {
    me: String!
    search(first: Int!, found: Int): [Int!]!
  }
  type Subscription {
    ticks: Int!
  }
`;

interface GqlContext {
  req?: { headers: Record<string, string | undefined> };
}

@Resolver()
class QueryResolver {
  @Query("me")
  @RateLimit("per-user")
  @RateLimitKey((ctx) => ctx.getArgByIndex<GqlContext>(2).req?.headers["x-user"])
  me(): string {
    return "me";
  }

  /** Costs `first` units, settled to the items actually found once it answered. */
  @Query("search")
  @RateLimit("points")
  @RateLimitCost((ctx) => ctx.getArgByIndex<{ first: number }>(1).first, {
    settle: (items) => (items as number[]).length,
  })
  @RateLimitKey((ctx) => ctx.getArgByIndex<GqlContext>(2).req?.headers["x-user"])
  search(@Args("first") first: number, @Args("found") found?: number): number[] {
    return Array.from({ length: Math.min(first, found ?? first) }, (_, i) => i);
  }
}

@Resolver("Subscription")
class SubscriptionResolver {
  @Subscription("ticks")
  @RateLimit("subscriptions")
  ticks(): AsyncIterableIterator<unknown> {
    return pubsub.asyncIterableIterator("ticks");
  }
}

@Module({
  imports: [
    SluiceModule.forRoot({
      policies: [
        { name: "per-user", algorithm: "fixed-window", rules: [{ limit: 2, period: "1m" }] },
        { name: "points", algorithm: "fixed-window", rules: [{ limit: 10, period: "1m" }] },
        { name: "subscriptions", algorithm: "fixed-window", rules: [{ limit: 2, period: "1m" }] },
      ],
      clock: time.now,
    }),
    GraphQLModule.forRoot<ApolloDriverConfig>({
      driver: ApolloDriver,
      typeDefs,
      playground: false,
      subscriptions: { "graphql-ws": true },
      // HTTP: Apollo's { req, res }; graphql-ws: its context ({ connectionParams, extra }).
      context: (ctx: unknown) => ctx,
    }),
  ],
  providers: [QueryResolver, SubscriptionResolver],
})
class AppModule {}

interface GqlAnswer {
  data?: Record<string, unknown> | null;
  errors?: Array<{ message: string; extensions?: Record<string, unknown> }>;
}

async function query(url: string, user: string, text: string): Promise<GqlAnswer> {
  const res = await fetch(`${url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-user": user },
    body: JSON.stringify({ query: text }),
  });
  return (await res.json()) as GqlAnswer;
}

const clients: Client[] = [];
afterEach(async () => {
  while (clients.length > 0) await clients.pop()!.dispose();
});

/** A graphql-ws client: one connection, opened lazily by its first subscription. */
function wsClient(port: number): Client {
  const client = createClient({
    url: `ws://127.0.0.1:${port}/graphql`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
  });
  clients.push(client);
  return client;
}

/** Subscribes to `ticks`: resolves with the first result or the errors the server answers. */
function subscribe(client: Client): Promise<GqlAnswer> {
  return new Promise((resolve, reject) => {
    let answered = false;
    client.subscribe(
      { query: "subscription { ticks }" },
      {
        next: (value) => {
          answered = true;
          resolve(value as GqlAnswer);
        },
        error: (err) => {
          answered = true;
          if (Array.isArray(err)) resolve({ errors: err as GqlAnswer["errors"] });
          else reject(err instanceof Error ? err : new Error(JSON.stringify(err)));
        },
        complete: () => {
          if (!answered) reject(new Error("completed without an answer"));
        },
      },
    );
  });
}

/** Resolves once the server holds `n` subscriptions to `ticks` (the resolver has run). */
async function published(n: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const subs = (
      pubsub as unknown as { ee: { listenerCount(e: string): number } }
    ).ee.listenerCount("ticks");
    if (subs >= n) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`fewer than ${n} subscriptions`);
}

function expectRateLimited(answer: GqlAnswer, limit: number, remaining = 0): void {
  expect(answer.data ?? null).toBeNull();
  expect(answer.errors).toHaveLength(1);
  const e = answer.errors![0]!;
  expect(e.message).toMatch(/^Rate limit exceeded/);
  expect(e.extensions).toMatchObject({ code: "RATE_LIMITED", limit, remaining });
  expect(e.extensions!.retryAfter).toBeGreaterThan(0);
  expect(e.extensions!.reset).toBeGreaterThan(0);
}

describe("GraphQL (Apollo through @nestjs/graphql)", () => {
  it("limits a query per user: limit + 1 answers a GraphQLError with code and retry time", async () => {
    const { url } = await startApp(AppModule);
    for (let i = 0; i < 2; i++)
      expect(await query(url, "alice", "{ me }")).toEqual({ data: { me: "me" } });
    expectRateLimited(await query(url, "alice", "{ me }"), 2);
    // Another user has a count of their own.
    expect(await query(url, "bob", "{ me }")).toEqual({ data: { me: "me" } });
  });

  it("charges a field its cost, and settles it to what the field answered", async () => {
    const { app, url } = await startApp(AppModule);
    const points = app.get(SluiceLimits).limiter("points");
    // Estimate 4, settled to 1 item found: 1 unit charged.
    expect(await query(url, "carol", "{ search(first: 4, found: 1) }")).toEqual({
      data: { search: [0] },
    });
    expect((await points.peek("carol")).remaining).toBe(9);
    // 4 + 4 = 8 more: 9 used, 1 left; a cost of 4 is refused, a cost of 1 passes.
    for (let i = 0; i < 2; i++)
      expect((await query(url, "carol", "{ search(first: 4) }")).data).toEqual({
        search: [0, 1, 2, 3],
      });
    expectRateLimited(await query(url, "carol", "{ search(first: 4) }"), 10, 1);
    expect((await points.peek("carol")).remaining).toBe(1);
    expect((await query(url, "carol", "{ search(first: 1) }")).data).toEqual({ search: [0] });
  });

  it("limits subscriptions per connection over graphql-ws: the third on one connection is refused", async () => {
    const { port } = await startApp(AppModule);
    const first = wsClient(port);
    const a = subscribe(first);
    const b = subscribe(first);
    await published(2);
    const refused = await subscribe(first);
    expectRateLimited(refused, 2);
    // Another connection has its own count.
    const other = wsClient(port);
    const c = subscribe(other);
    await published(3);
    await pubsub.publish("ticks", { ticks: 7 });
    expect(await a).toEqual({ data: { ticks: 7 } });
    expect(await b).toEqual({ data: { ticks: 7 } });
    expect(await c).toEqual({ data: { ticks: 7 } });
  });
});
