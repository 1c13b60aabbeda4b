/**
 * Runs each server in examples/ as a user would: `node examples/<x>.mjs`, importing the built
 * package ("sluice/express", …), and checks that CommonJS and TypeScript consumers can import it.
 * Builds the package first when dist is missing or older than the HTTP sources.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort, waitFor } from "../../../../test/support/ports.js";

const root = fileURLToPath(new URL("../../../../", import.meta.url));
const pkg = join(root, "packages/sluice");
const ENTRIES = ["index", "http", "node", "express", "fastify", "koa", "hono"];

function newestSource(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (e.name.endsWith(".ts") && !e.name.endsWith(".test.ts"))
      newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

function distIsCurrent(): boolean {
  const files = ENTRIES.flatMap((e) => [`dist/${e}.js`, `dist/${e}.cjs`]).map((f) => join(pkg, f));
  if (!files.every((f) => existsSync(f))) return false;
  const built = Math.min(...files.map((f) => statSync(f).mtimeMs));
  return built >= newestSource(join(pkg, "src/http"));
}

beforeAll(() => {
  if (!distIsCurrent())
    execFileSync("npm", ["run", "build", "-w", "sluice"], { cwd: root, stdio: "ignore" });
}, 120_000);

let child: ChildProcess | undefined;
afterEach(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child!.once("exit", r));
    child.kill("SIGTERM");
    await exited;
  }
  child = undefined;
});

async function run(name: string): Promise<string> {
  const port = await freePort();
  let output = "";
  child = spawn(process.execPath, [join(root, "examples", name)], {
    cwd: root,
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (b: Buffer) => (output += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (output += b.toString()));
  const base = `http://127.0.0.1:${port}`;
  await waitFor(async () => {
    if (child!.exitCode !== null) throw new Error(`example exited: ${output}`);
    return output.includes("listening on");
  }, 15_000);
  return base;
}

/** Sends requests until one is answered 429; returns how many passed first. */
async function passedBefore429(
  url: string,
  headers: Record<string, string> = {},
  max = 200,
): Promise<{ passed: number; denied: Response }> {
  for (let i = 0; i < max; i++) {
    const res = await fetch(url, { headers });
    await res.arrayBuffer();
    if (res.status === 429) return { passed: i, denied: res };
    expect(res.status).toBe(200);
  }
  throw new Error("never limited");
}

describe("examples", () => {
  it("node.mjs: 10 per minute, then 429 with Retry-After", async () => {
    const base = await run("node.mjs");
    const { passed, denied } = await passedBefore429(base);
    expect(passed).toBe(10);
    expect(Number(denied.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(denied.headers.get("ratelimit-policy")).toBe('"api";q=10;w=60');
    expect(denied.headers.get("content-type")).toMatch(/problem\+json/);
  });

  it("express.mjs: 60/h anonymous, 5000/h authenticated, /health unlimited", async () => {
    const base = await run("express.mjs");
    const anon = await passedBefore429(base);
    expect(anon.passed).toBe(60);
    expect(anon.denied.headers.get("x-ratelimit-limit")).toBe("60");
    const authed = await fetch(base, { headers: { authorization: "Bearer alice" } });
    expect(authed.status).toBe(200);
    expect(authed.headers.get("x-ratelimit-limit")).toBe("5000");
    expect(authed.headers.get("x-ratelimit-remaining")).toBe("4999");
    expect(await authed.json()).toEqual({ limit: 5000 });
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);
    expect(health.headers.get("x-ratelimit-limit")).toBeNull();
  });

  it("fastify.mjs: route-level policy on /search, none on /health", async () => {
    const base = await run("fastify.mjs");
    const first = await fetch(`${base}/search?q=a`);
    expect(first.status).toBe(200);
    expect(first.headers.get("ratelimit-policy")).toBe('"search-0";q=1;w=1, "search-1";q=5;w=60');
    const second = await fetch(`${base}/search?q=b`);
    expect(second.status).toBe(429);
    const problem = (await second.json()) as { "violated-policies": string[] };
    expect(problem["violated-policies"]).toEqual(["search-0"]);
    const root = await fetch(base);
    expect(root.headers.get("ratelimit-policy")).toBe('"api";q=100;w=60');
    const health = await fetch(`${base}/health`);
    expect(health.headers.get("ratelimit-policy")).toBeNull();
  });

  it("koa.mjs: a burst above the limit waits instead of failing", async () => {
    const base = await run("koa.mjs");
    const t = performance.now();
    const statuses = await Promise.all(
      Array.from({ length: 7 }, () => fetch(base).then((r) => r.status)),
    );
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200]);
    // 5 pass at once, the 6th and 7th wait ~200 and ~400 ms for the bucket to refill.
    expect(performance.now() - t).toBeGreaterThanOrEqual(350);
  });

  it("hono.mjs: per-API-key limit with a degraded answer over it", async () => {
    const base = await run("hono.mjs");
    const key = { "x-api-key": "k-123" };
    for (let i = 0; i < 20; i++)
      expect(await (await fetch(`${base}/quotes/latest`, { headers: key })).json()).toEqual({
        quote: "fresh",
        stale: false,
      });
    const over = await fetch(`${base}/quotes/latest`, { headers: key });
    expect(over.status).toBe(200);
    expect(await over.json()).toEqual({ quote: "cached", stale: true });
    expect(over.headers.get("x-ratelimit-remaining")).toBe("0");
    const other = await fetch(`${base}/quotes/latest`, { headers: { "x-api-key": "k-456" } });
    expect(await other.json()).toEqual({ quote: "fresh", stale: false });
  });

  it("the package is importable as CommonJS", () => {
    const out = execFileSync(
      process.execPath,
      [
        "-e",
        `const { createLimiter, ValidationError } = require("sluice");
         const adapters = ["node", "express", "fastify", "koa", "hono"].map((n) => require("sluice/" + n));
         let code = "none";
         try { adapters[1].rateLimit({}); } catch (e) { code = e instanceof ValidationError ? e.code : "other"; }
         console.log(typeof createLimiter, adapters.map((a) => typeof a.rateLimit).join(","), code);`,
      ],
      { cwd: root, encoding: "utf8" },
    );
    expect(out.trim()).toBe(
      "function function,function,function,function,function SLUICE_ERR_OPTIONS",
    );
  });

  it("TypeScript consumers (ESM and CJS) type-check against the built declarations", () => {
    const tsc = join(root, "node_modules/typescript/bin/tsc");
    const result = spawnSync(
      process.execPath,
      [tsc, "-p", join(pkg, "test/http/consumer/tsconfig.json")],
      {
        cwd: root,
        encoding: "utf8",
      },
    );
    expect(result.stdout + result.stderr).toBe("");
    expect(result.status).toBe(0);
  }, 60_000);
});
