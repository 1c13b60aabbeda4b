/**
 * examples/nest.mjs, run as its reader runs it (`node examples/nest.mjs`, the built package):
 * /health is never limited, /items stops at the default policy's 60, /search at its own 5 per
 * user, with sluice's headers and a problem+json 429.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, expect, it } from "vitest";
import { freePort, waitFor } from "../../../test/support/ports.js";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const pkg = join(root, "packages/nest");

function distIsCurrent(): boolean {
  const built = join(pkg, "dist/index.js");
  if (!existsSync(built)) return false;
  const newest = Math.max(
    ...readdirSync(join(pkg, "src")).map((f) => statSync(join(pkg, "src", f)).mtimeMs),
  );
  return statSync(built).mtimeMs >= newest;
}

beforeAll(() => {
  if (!distIsCurrent())
    execFileSync("npm", ["run", "build", "-w", "@sluice/nest"], { cwd: root, stdio: "ignore" });
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

async function start(): Promise<string> {
  const port = await freePort();
  let output = "";
  child = spawn(process.execPath, [join(root, "examples/nest.mjs")], {
    cwd: root,
    env: { ...process.env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (b: Buffer) => (output += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (output += b.toString()));
  await waitFor(() => {
    if (child!.exitCode !== null) throw new Error(`example exited: ${output}`);
    return output.includes("listening on");
  }, 15_000);
  return `http://127.0.0.1:${port}`;
}

/** How many requests pass before the first 429, and that 429. */
async function passedBefore429(url: string, headers: Record<string, string> = {}) {
  for (let i = 0; i < 100; i++) {
    const res = await fetch(url, { headers });
    const body = await res.text();
    if (res.status === 429) return { passed: i, denied: res, body };
    expect(res.status).toBe(200);
  }
  throw new Error("never limited");
}

it("examples/nest.mjs limits as its comments say", async () => {
  const base = await start();
  for (let i = 0; i < 70; i++) expect((await fetch(`${base}/health`)).status).toBe(200);
  const search = await passedBefore429(`${base}/search`, { authorization: "Bearer ann" });
  expect(search.passed).toBe(5);
  expect(search.denied.headers.get("retry-after")).toMatch(/^\d+$/);
  expect(search.denied.headers.get("content-type")).toMatch(/^application\/problem\+json/);
  expect(JSON.parse(search.body)).toMatchObject({ status: 429, "violated-policies": ["search"] });
  // The five searches counted against "per-ip" too: 55 items pass, then 429.
  const items = await passedBefore429(`${base}/items`);
  expect(items.passed).toBe(55);
  expect(items.denied.headers.get("ratelimit")).toMatch(/^"per-ip";r=0;t=\d+$/);
}, 60_000);
