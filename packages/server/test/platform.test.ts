/**
 * The platform of the source design, in real processes: one `sluice serve` on MariaDB and
 * Redis, two app processes deciding in-process with `connectPolicies` on that Redis, and two
 * calling `POST /v1/limit`. 250 concurrent requests from each at a limit of 5 on one key: 5
 * allowed in all. An edit in the admin API reaches both embedded apps within a second; a revoked
 * grant makes their next decision fail with the documented error; with the service stopped they
 * keep enforcing, and a new app process starts from the cache file another wrote.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type MariaDbServer, startMariaDb } from "../../../test/support/mariadb.js";
import { type RedisServer, startRedis } from "../../../test/support/redis.js";
import { waitFor } from "../../../test/support/ports.js";
import { ROOT, type ServeProcess, call, createRootWithCli, signIn, spawnServe } from "./helpers.js";

/** An app process (./policy-app.ts), driven over IPC. */
interface App {
  readonly child: ChildProcess;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are whatever the command returns
  ask(command: Record<string, unknown>): Promise<any>;
  stop(): Promise<void>;
}

function spawnApp(mode: "embedded" | "http", env: Record<string, string>): Promise<App> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(ROOT, "packages/server/test/policy-app.ts")],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        TSX_TSCONFIG_PATH: join(ROOT, "packages/server/test/tsconfig.spawn.json"),
        SLUICE_APP_MODE: mode,
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe", "ipc"],
    },
  );
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
  let next = 0;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return new Promise((resolve, reject) => {
    child.once("exit", (code) =>
      reject(new Error(`app process (${mode}) exited (${code}): ${output}`)),
    );
    child.on("message", (m: { ready?: boolean; id?: number; result?: unknown; error?: string }) => {
      if (m.ready) {
        resolve({
          child,
          ask(command) {
            const id = ++next;
            return new Promise((res, rej) => {
              pending.set(id, { resolve: res, reject: rej });
              child.send({ id, ...command });
            });
          },
          async stop() {
            if (child.exitCode === null && child.connected) child.disconnect();
            const killer = setTimeout(() => child.kill("SIGKILL"), 5000);
            await exited;
            clearTimeout(killer);
          },
        });
        return;
      }
      const p = pending.get(m.id!);
      pending.delete(m.id!);
      if (m.error !== undefined) p?.reject(new Error(m.error));
      else p?.resolve(m.result);
    });
  });
}

let maria: MariaDbServer;
let redis: RedisServer;
let serve: ServeProcess;
let token: string;
let cacheDir: string;
let embedded: App[] = [];
let viaHttp: App[] = [];
let appEnv: Record<string, string>;

beforeAll(async () => {
  [maria, redis] = await Promise.all([startMariaDb(), startRedis()]);
  cacheDir = mkdtempSync(join(tmpdir(), "sluice-platform-"));
  const env = { DATABASE_URL: await maria.createDatabase("platform"), REDIS_URL: redis.url };
  serve = await spawnServe([], env);
  const created = await createRootWithCli(env);
  expect(created.output).toContain('created admin "root"');
  token = await signIn(serve.url);
  const apiKey = (await call(serve.url, "POST", "/v1/admin/apps", { token, body: { name: "web" } }))
    .body.apiKey as string;
  for (const name of ["api", "reports"]) {
    const r = await call(serve.url, "POST", "/v1/admin/policies", {
      token,
      body: { name, rules: [{ limit: 5, period: "1h" }], apps: ["web"] },
    });
    expect(r.status).toBe(201);
  }
  appEnv = { SLUICE_URL: serve.url, SLUICE_KEY: apiKey, REDIS_URL: redis.url };
  [embedded, viaHttp] = await Promise.all([
    Promise.all([
      spawnApp("embedded", { ...appEnv, SLUICE_CACHE_FILE: join(cacheDir, "policies.json") }),
      spawnApp("embedded", appEnv),
    ]),
    Promise.all([spawnApp("http", appEnv), spawnApp("http", appEnv)]),
  ]);
}, 180_000);

afterAll(async () => {
  await Promise.all([...embedded, ...viaHttp].map((a) => a.stop()));
  await serve?.stop();
  await Promise.all([maria?.stop(), redis?.stop()]);
  if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
});

describe("MySQL + Redis + embedded clients, in real processes", () => {
  it("250 concurrent requests from each of four apps (two embedded, two through the service) at a limit of 5: 5 allowed", async () => {
    const allowed: number[] = await Promise.all(
      [...embedded, ...viaHttp].map((a) =>
        a.ask({ cmd: "burst", policy: "api", key: "hot", n: 250 }),
      ),
    );
    expect(allowed.reduce((a, b) => a + b, 0)).toBe(5);
  });

  it("the admin lists both embedded app processes", async () => {
    const r = await call(serve.url, "GET", "/v1/admin/clients", { token });
    expect(r.body.clients).toHaveLength(2);
    const pids = embedded.map((a) => `app-${a.child.pid}`).sort();
    expect(r.body.clients.map((c: { host: string }) => c.host).sort()).toEqual(pids);
    for (const c of r.body.clients)
      expect(c).toMatchObject({ app: "web", version: "sluice/0.1.0" });
  });

  it("an edit in the admin API reaches both embedded apps within a second", async () => {
    const t0 = Date.now();
    const r = await call(serve.url, "PUT", "/v1/admin/policies/api", {
      token,
      body: { rules: [{ limit: 6, period: "1h" }], apps: ["web"] },
    });
    expect(r.status).toBe(200);
    await Promise.all(
      embedded.map((a) =>
        waitFor(async () => (await a.ask({ cmd: "limitOf", policy: "api" })) === 6, 1000, 10),
      ),
    );
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it("a revoked grant: the embedded apps' next decision fails with SLUICE_ERR_POLICY_NOT_FOUND", async () => {
    const r = await call(serve.url, "PUT", "/v1/admin/policies/reports", {
      token,
      body: { rules: [{ limit: 5, period: "1h" }], apps: [] },
    });
    expect(r.status).toBe(200);
    await Promise.all(
      embedded.map((a) =>
        waitFor(
          async () => (await a.ask({ cmd: "limitOf", policy: "reports" })) === null,
          1000,
          10,
        ),
      ),
    );
    for (const a of embedded)
      expect(await a.ask({ cmd: "decide", policy: "reports", key: "k" })).toMatchObject({
        error: "SLUICE_ERR_POLICY_NOT_FOUND",
        message: expect.stringContaining('policy "reports" is not granted to this app'),
      });
    // Through the service, the same: refused.
    expect(await viaHttp[0]!.ask({ cmd: "decide", policy: "reports", key: "k" })).toMatchObject({
      error: "forbidden",
      status: 403,
    });
  });

  it("with the service stopped, the embedded apps keep enforcing the last good set, and a new one starts from the cache", async () => {
    expect(await serve.stop()).toBe(0);
    // The apps find out (their long poll ends, the next request is refused).
    await Promise.all(
      embedded.map((a) =>
        waitFor(async () => (await a.ask({ cmd: "status" })).connected === false, 15_000, 50),
      ),
    );
    const allowed: number[] = await Promise.all(
      embedded.map((a) => a.ask({ cmd: "burst", policy: "api", key: "after", n: 50 })),
    );
    expect(allowed.reduce((a, b) => a + b, 0)).toBe(6);

    // A third app process, with the service still down: it starts from the cache the first wrote.
    const third = await spawnApp("embedded", {
      ...appEnv,
      SLUICE_CACHE_FILE: join(cacheDir, "policies.json"),
    });
    embedded.push(third);
    expect(await third.ask({ cmd: "status" })).toMatchObject({ source: "cache", connected: false });
    expect(await third.ask({ cmd: "limitOf", policy: "api" })).toBe(6);
    expect(await third.ask({ cmd: "limitOf", policy: "reports" })).toBe(null);
    // The limit is shared with the others through Redis: nothing left on "after".
    expect(await third.ask({ cmd: "decide", policy: "api", key: "after" })).toMatchObject({
      allowed: false,
    });
    expect(await third.ask({ cmd: "decide", policy: "api", key: "fresh" })).toMatchObject({
      allowed: true,
      limit: 6,
    });
  });
});
