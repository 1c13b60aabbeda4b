/**
 * Cloudflare Workers, through workerd from npm (`workerd`, the open-source runtime of Workers
 * that wrangler and miniflare run; driven here directly, since miniflare 4 and wrangler 4 need
 * Node ≥ 22). The suite is a Worker module bundled for the `workerd` condition, configured with
 * no Node compatibility; its outbound fetch may reach the local fixture.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { freePort, waitFor } from "../../../../test/support/ports.js";
import { bundle, declareRuntimeSuite, runtimeBin } from "./harness.js";
import type { SuiteResult } from "./suite.js";

let child: ChildProcess | undefined;
let log = "";

/** workerd's configuration (Cap'n Proto text): the Worker, and a network that allows loopback. */
function capnp(module: string, port: number): string {
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .suite),
    (name = "net", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const suite :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed "${module}")],
  compatibilityDate = "2025-09-01",
  globalOutbound = "net",
);
`;
}

declareRuntimeSuite(
  "workerd",
  async (backend) => {
    const file = await bundle("entry-workerd.ts", "workerd.js", {
      platform: "neutral",
      mainFields: ["module", "main"],
      conditions: ["workerd", "worker", "browser"],
    });
    const port = await freePort();
    const config = join(dirname(file), "workerd.capnp");
    writeFileSync(config, capnp(basename(file), port));
    child = spawn(runtimeBin("workerd"), ["serve", config], { stdio: ["ignore", "pipe", "pipe"] });
    child.stdout!.on("data", (d: Buffer) => (log += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (log += d.toString()));
    const url = `http://127.0.0.1:${port}/`;
    await waitFor(async () => (await fetch(url, { method: "OPTIONS" })).status > 0, 20_000).catch(
      (err: unknown) => {
        throw new Error(`workerd did not start: ${String(err)}\n${log}`);
      },
    );
    const res = await fetch(url, {
      method: "POST",
      body: JSON.stringify(backend.config("workerd")),
    });
    if (!res.ok) throw new Error(`workerd answered ${res.status}: ${await res.text()}\n${log}`);
    return (await res.json()) as SuiteResult[];
  },
  {
    extra: ["workers/top-level"],
    stop: async () => {
      if (child && child.exitCode === null) {
        const exited = new Promise((r) => child!.once("exit", r));
        child.kill();
        await exited;
      }
    },
  },
);
