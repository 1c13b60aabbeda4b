/**
 * Policies from the sluice service: `SluiceModule.forRootAsync` whose factory awaits
 * `connectPolicies` against a real `sluice serve` (in this process, SQLite in a temp dir). A
 * handler limited by a service policy answers 429 at its limit; the policy edited on the
 * service changes the limit without a restart of the app; a policy the app is not granted
 * stops the app at start.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Controller, Get, Injectable, Module } from "@nestjs/common";
import { NestFactory } from "@nestjs/core";
import { createService, loadConfig } from "@sluice/server";
import { pino } from "pino";
import { type PolicyClient, connectPolicies, memoryStore } from "sluice";
import { afterAll, beforeAll, expect, it } from "vitest";
import { waitFor } from "../../../test/support/ports.js";
import { RateLimit, SluiceModule } from "../src/index.js";
import { get, startApp } from "./support.js";

let service: Awaited<ReturnType<typeof createService>>;
let url: string;
let dataDir: string;
let adminToken: string;
let apiKey: string;
const clients: PolicyClient[] = [];

async function admin(method: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${url}${path}`, {
    method,
    headers: { "content-type": "application/json", authorization: `Bearer ${adminToken}` },
    body: JSON.stringify(body),
  });
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "sluice-nest-"));
  service = await createService(
    loadConfig({
      values: { port: 0, host: "127.0.0.1", dataDir, logLevel: "silent", pollIntervalMs: 100 },
    }),
    { logger: pino({ level: "silent" }), scrypt: { N: 2 ** 10, r: 8, p: 1 } },
  );
  url = await service.listen();
  await service.context.repo.createUser(
    { username: "root", password: "root-password", role: "admin", apps: [] },
    "test",
  );
  const login = await fetch(`${url}/v1/admin/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username: "root", password: "root-password" }),
  });
  adminToken = ((await login.json()) as { token: string }).token;
  const app = await admin("POST", "/v1/admin/apps", { name: "shop" });
  apiKey = ((await app.json()) as { apiKey: string }).apiKey;
  const policy = await admin("POST", "/v1/admin/policies", {
    name: "tenant-api",
    algorithm: "fixed-window",
    rules: [{ limit: 2, period: "1m" }],
    apps: ["shop"],
  });
  expect(policy.status).toBe(201);
  await service.context.registry.poll();
});

afterAll(async () => {
  // The service first: a client giving up its long poll would hold its shutdown up.
  await service?.close();
  for (const c of clients) await c.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Where the factory's dependency comes from: the service's address, as config would give it. */
@Injectable()
class SluiceConfig {
  get url(): string {
    return url;
  }
  get apiKey(): string {
    return apiKey;
  }
}

@Module({ providers: [SluiceConfig], exports: [SluiceConfig] })
class ConfigModule {}

function appModule(policy: string) {
  @Controller()
  class OrdersController {
    @Get("orders")
    @RateLimit(policy)
    orders(): string {
      return "orders";
    }
  }

  @Module({
    imports: [
      SluiceModule.forRootAsync({
        imports: [ConfigModule],
        inject: [SluiceConfig],
        useFactory: async (config: SluiceConfig) => {
          const client = await connectPolicies({
            url: config.url,
            apiKey: config.apiKey,
            store: memoryStore(),
            waitMs: 1000,
            onError: () => undefined,
          });
          clients.push(client);
          return { policies: client };
        },
      }),
    ],
    controllers: [OrdersController],
  })
  class AppModule {}
  return AppModule;
}

it("limits by a policy of the service, and follows its edit without a restart", async () => {
  const { url: app } = await startApp(appModule("tenant-api"));
  const statuses = async (n: number) => {
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push((await get(`${app}/orders`)).status);
    return out;
  };
  expect(await statuses(3)).toEqual([200, 200, 429]);
  const edited = await admin("PUT", "/v1/admin/policies/tenant-api", {
    algorithm: "fixed-window",
    rules: [{ limit: 4, period: "1m" }],
    apps: ["shop"],
  });
  expect(edited.status).toBe(200);
  // The client's long poll brings the new version (real time: that propagation is the point).
  const client = clients.at(-1)!;
  await waitFor(() => client.limiter("tenant-api").policy.rules[0]!.limit === 4, 5000, 10);
  // The two requests counted under the old version still count: two more pass.
  expect(await statuses(3)).toEqual([200, 200, 429]);
  const denied = await get(`${app}/orders`);
  expect(denied.headers.get("ratelimit-policy")).toBe('"tenant-api";q=4;w=60');
});

it("stops the app at start when a handler names a policy the app is not granted", async () => {
  const app = await NestFactory.create(appModule("not-granted"), {
    logger: false,
    abortOnError: false,
  });
  // The module's init (app.init(), or listen) reads the handlers' decorators.
  const started = await app.init().then(
    () => undefined,
    (err: unknown) => err,
  );
  await app.close();
  expect(String(started)).toContain(
    '@RateLimit on OrdersController.orders: unknown policy "not-granted" (known: "tenant-api")',
  );
});
