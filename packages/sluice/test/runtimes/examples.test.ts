/**
 * The runtime examples in examples/, run as their readers run them: the Deno and Bun servers
 * with `deno run` and `bun`, the Worker bundled as wrangler bundles it and served by workerd
 * with the bindings its wrangler.toml declares, and the Vercel middleware in the Edge runtime
 * against Redis over HTTP (the Upstash REST fixture in front of a real redis-server).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { EdgeRuntime } from "edge-runtime";
import { build } from "esbuild";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { freePort, waitFor } from "../../../../test/support/ports.js";
import { type RedisServer, startRedis } from "../../../../test/support/redis.js";
import { type UpstashRest, startUpstashRest } from "../../../../test/support/upstash-rest.js";
import { EDGE_BUILD, bundle, root, runtimeBin } from "./harness.js";
import { stopProcess } from "./process.js";
import { WORKERS_BUILD, type Workerd, startWorkerd } from "./workerd.js";

const examples = join(root, "examples");
let child: ChildProcess | undefined;
let workerd: Workerd | undefined;
let redis: RedisServer | undefined;
let rest: UpstashRest | undefined;

afterEach(async () => {
  const proc = child;
  child = undefined;
  await stopProcess(proc);
  await workerd?.stop();
  workerd = undefined;
});

afterAll(async () => {
  await rest?.stop();
  await redis?.stop();
});

/** Starts a server example and waits for its "listening on" line; returns its base URL. */
async function serve(bin: string, args: string[]): Promise<string> {
  const port = await freePort();
  let output = "";
  const proc = spawn(bin, args, {
    cwd: root,
    env: { ...process.env, PORT: String(port), NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child = proc;
  proc.stdout.on("data", (d: Buffer) => (output += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (output += d.toString()));
  await waitFor(() => {
    if (proc.exitCode !== null) throw new Error(`the example exited: ${output}`);
    return output.includes("listening on");
  }, 20_000).catch((err: unknown) => {
    throw new Error(`${String(err)}\n${output}`);
  });
  return `http://127.0.0.1:${port}`;
}

/** `n` requests in a row; the statuses. */
async function statuses(n: number, send: () => Promise<Response>): Promise<Response[]> {
  const out: Response[] = [];
  for (let i = 0; i < n; i++) out.push(await send());
  return out;
}

describe("examples/", () => {
  it("deno.mjs: 10 a minute per client, then 429 with Retry-After", async () => {
    const base = await serve(runtimeBin("deno"), [
      "run",
      "--allow-net=127.0.0.1",
      "--allow-env",
      join(examples, "deno.mjs"),
    ]);
    const rs = await statuses(11, () => fetch(base));
    expect(rs.map((r) => r.status)).toEqual([...Array<number>(10).fill(200), 429]);
    expect(await rs[9]!.text()).toBe("hello from Deno, 0 left\n");
    expect(Number(rs[10]!.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("bun.mjs: 10 a minute per client, then 429 with Retry-After", async () => {
    const base = await serve(runtimeBin("bun"), [join(examples, "bun.mjs")]);
    const rs = await statuses(11, () => fetch(base));
    expect(rs.map((r) => r.status)).toEqual([...Array<number>(10).fill(200), 429]);
    expect(await rs[0]!.text()).toBe("hello from Bun, 9 left\n");
    expect(Number(rs[10]!.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  it("workers/worker.mjs with its wrangler.toml: 20 a minute per client through Durable Objects", async () => {
    const toml = readFileSync(join(examples, "workers/wrangler.toml"), "utf8");
    const binding = /name = "(\w+)"\s*\nclass_name = "(\w+)"/.exec(toml);
    expect(binding?.slice(1)).toEqual(["LIMITER", "SluiceDurableObject"]);
    expect(toml).toMatch(/^main = "worker\.mjs"$/m);
    const date = /^compatibility_date = "([\d-]+)"$/m.exec(toml)![1]!;
    const module = await bundle(
      "../../../../examples/workers/worker.mjs",
      "example-worker.js",
      WORKERS_BUILD,
    );
    workerd = await startWorkerd({
      module,
      compatibilityDate: date,
      durableObjects: [{ className: binding![2]!, binding: binding![1]! }],
    });
    const url = `${workerd.url}/api/hello`;
    const from = (ip: string) => () => fetch(url, { headers: { "cf-connecting-ip": ip } });
    const rs = await statuses(21, from("203.0.113.9"));
    expect(rs.map((r) => r.status)).toEqual([...Array<number>(20).fill(200), 429]);
    expect(await rs[0]!.json()).toEqual({ hello: "world", remaining: 19 });
    expect((await from("198.51.100.1")()).status).toBe(200);
    expect((await fetch(workerd.url)).status).toBe(200);
  });

  it("vercel-edge/middleware.mjs in the Edge runtime: 10 per 10 s per client over Upstash REST", async () => {
    redis = await startRedis();
    rest = await startUpstashRest({ redisUrl: redis.url });
    // Vercel runs the middleware as an Edge function: bundled, answering fetch events.
    const bundled = await build({
      stdin: {
        contents: `import middleware from "./middleware.mjs";
addEventListener("fetch", (event) => event.respondWith(middleware(event.request)));`,
        resolveDir: join(examples, "vercel-edge"),
      },
      ...EDGE_BUILD,
      bundle: true,
      write: false,
      logLevel: "silent",
    });
    const env = { UPSTASH_REDIS_REST_URL: rest.url, UPSTASH_REDIS_REST_TOKEN: rest.token };
    const runtime = new EdgeRuntime({
      initialCode: bundled.outputFiles[0]!.text,
      // Vercel's Edge runtime has process.env (the project's variables), and nothing else of Node.
      extend: (context) => Object.assign(context, { process: { env } }),
    });
    const from = (ip: string) => () =>
      runtime.dispatchFetch("https://app.example/api/items", { headers: { "x-real-ip": ip } });
    const rs = await statuses(11, from("203.0.113.20"));
    expect(rs.slice(0, 10).map((r) => r.headers.get("x-middleware-next"))).toEqual(
      Array<string>(10).fill("1"),
    );
    expect(rs[10]!.status).toBe(429);
    expect(rs[10]!.headers.get("content-type")).toBe("application/problem+json");
    expect(Number(rs[10]!.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await from("203.0.113.21")()).headers.get("x-middleware-next")).toBe("1");
    // The counts are in the redis-server behind the fixture, under sluice's keys.
    expect(rest.requests.get("/pipeline")).toBeGreaterThanOrEqual(12);
  });
});
