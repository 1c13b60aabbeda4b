/**
 * Cloudflare Workers, through workerd from npm (`workerd`, the open-source runtime of Workers
 * that wrangler and miniflare run; driven here directly, since miniflare 4 and wrangler 4 need
 * Node ≥ 22). The suite is a Worker module bundled for the `workerd` condition, configured with
 * no Node compatibility, with Durable Objects kept on disk; its outbound fetch may reach the
 * local fixture. Beside the suite, from outside: concurrent requests through the Durable Object
 * store, its state across a restart of workerd, and its sweep of expired keys.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { waitFor } from "../../../../test/support/ports.js";
import { bundle, declareRuntimeSuite } from "./harness.js";
import type { SuiteResult } from "./suite.js";
import { WORKERS_BUILD, type Workerd, startWorkerd } from "./workerd.js";

let workerd: Workerd | undefined;
let base = "";
const storage = mkdtempSync(join(tmpdir(), "sluice-workerd-"));

afterAll(() => rmSync(storage, { recursive: true, force: true }));

declareRuntimeSuite(
  "workerd",
  async (backend) => {
    const module = await bundle("entry-workerd.ts", "workerd.js", WORKERS_BUILD);
    workerd = await startWorkerd({
      module,
      durableObjects: [
        { className: "SluiceDurableObject", binding: "SLUICE" },
        { className: "InspectedDurableObject", binding: "INSPECT" },
      ],
      storageDir: storage,
      vars: { SLUICE_SWEEP_MS: "300" },
    });
    base = workerd.url;
    const res = await fetch(`${base}/suite`, {
      method: "POST",
      body: JSON.stringify(backend.config("workerd")),
    });
    if (!res.ok)
      throw new Error(`workerd answered ${res.status}: ${await res.text()}\n${workerd.log()}`);
    return (await res.json()) as SuiteResult[];
  },
  {
    stores: ["durable-object"],
    extra: ["workers/top-level"],
    stop: () => workerd?.stop() ?? Promise.resolve(),
  },
);

/** One request to the Hono app limited through Durable Objects (37 per hour per client). */
async function hit(name: string, client = "203.0.113.7"): Promise<Response> {
  return fetch(`${base}/app/${name}`, { headers: { "x-test-peer": client } });
}

describe("the Durable Object store, from outside workerd", () => {
  it("is exact across concurrent requests: 200 at once, exactly 37 served", async () => {
    const codes = await Promise.all(
      Array.from({ length: 200 }, () => hit("exact").then((r) => r.status)),
    );
    expect(codes.filter((c) => c === 200)).toHaveLength(37);
    expect(codes.filter((c) => c === 429)).toHaveLength(163);
    // Another client is counted apart.
    expect((await hit("exact", "2001:db8::7")).status).toBe(200);
  });

  it("keeps its counts when workerd restarts (state in the object's storage)", async () => {
    for (let i = 0; i < 5; i++) expect((await hit("restart")).status).toBe(200);
    await workerd!.restart();
    const res = await hit("restart");
    expect(res.status).toBe(200);
    expect(res.headers.get("x-ratelimit-remaining")).toBe("31");
  });

  it("deletes expired keys (the object's alarm), so storage does not grow", async () => {
    expect(await (await fetch(`${base}/sweep/write`, { method: "POST" })).text()).toBe("written");
    const keys = async (): Promise<string[]> =>
      (await (await fetch(`${base}/sweep/keys`)).json()) as string[];
    expect((await keys()).filter((k) => k.startsWith("sweep:"))).toHaveLength(3);
    // The window is 1 s; sweeps come at most every 300 ms (SLUICE_SWEEP_MS).
    await waitFor(async () => (await keys()).every((k) => !k.startsWith("sweep:")), 15_000, 200);
  });
});
