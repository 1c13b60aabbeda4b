/**
 * Runs a bundled Worker in workerd (from npm), as `wrangler dev` would: its Durable Object
 * classes bound, their storage on disk or in memory, outbound fetch allowed to loopback (the
 * test fixtures), no Node compatibility flag.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { freePort, waitFor } from "../../../../test/support/ports.js";
import type { BuildOptions } from "esbuild";
import { runtimeBin } from "./harness.js";
import { stopProcess } from "./process.js";

/** How a Worker is bundled (as wrangler does): no Node, the `workerd` export condition. */
export const WORKERS_BUILD: BuildOptions = {
  platform: "neutral",
  mainFields: ["module", "main"],
  conditions: ["workerd", "worker", "browser"],
};

/** What a Worker is given. */
export interface WorkerdConfig {
  /** The bundled module (an ES module file). */
  readonly module: string;
  /** Durable Object classes the module exports, each bound under `binding`. */
  readonly durableObjects?: ReadonlyArray<{ readonly className: string; readonly binding: string }>;
  /** A directory for the objects' storage (kept across restarts); default in memory. */
  readonly storageDir?: string;
  /** Text bindings (wrangler's `[vars]`). */
  readonly vars?: Readonly<Record<string, string>>;
  readonly compatibilityDate?: string;
}

/** A running workerd. */
export interface Workerd {
  readonly url: string;
  /** What workerd printed. */
  readonly log: () => string;
  /** Starts it again on the same port with the same configuration (objects' storage kept on disk). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

function capnp(c: WorkerdConfig, port: number): string {
  const objects = c.durableObjects ?? [];
  const bindings = [
    ...objects.map((o) => `(name = "${o.binding}", durableObjectNamespace = "${o.className}")`),
    ...Object.entries(c.vars ?? {}).map(([k, v]) => `(name = "${k}", text = ${JSON.stringify(v)})`),
  ];
  return `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "net", network = (allow = ["public", "private", "local"])),
    ${c.storageDir ? `(name = "objects", disk = (path = ${JSON.stringify(c.storageDir)}, writable = true)),` : ""}
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const worker :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed "${basename(c.module)}")],
  compatibilityDate = "${c.compatibilityDate ?? "2025-09-01"}",
  globalOutbound = "net",
  durableObjectNamespaces = [${objects.map((o) => `(className = "${o.className}", uniqueKey = "${o.className}-${port}")`).join(", ")}],
  durableObjectStorage = ${c.storageDir ? `(localDisk = "objects")` : "(inMemory = void)"},
  bindings = [${bindings.join(", ")}],
);
`;
}

/** Starts workerd serving the module on a free loopback port; resolves once it answers. */
export async function startWorkerd(c: WorkerdConfig): Promise<Workerd> {
  const port = await freePort();
  const file = join(dirname(c.module), `${basename(c.module)}.capnp`);
  // The objects' unique keys name their storage: keep them across restarts (same port).
  writeFileSync(file, capnp(c, port));
  const url = `http://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let log = "";
  const start = async (): Promise<void> => {
    const proc = spawn(runtimeBin("workerd"), ["serve", file], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    child = proc;
    proc.stdout.on("data", (d: Buffer) => (log += d.toString()));
    proc.stderr.on("data", (d: Buffer) => (log += d.toString()));
    await waitFor(async () => (await fetch(url)).status > 0, 20_000).catch((err: unknown) => {
      throw new Error(`workerd did not start: ${String(err)}\n${log}`);
    });
  };
  const stop = async (): Promise<void> => {
    const proc = child;
    child = undefined;
    await stopProcess(proc);
  };
  await start();
  return {
    url,
    log: () => log,
    restart: async () => {
      await stop();
      await start();
    },
    stop,
  };
}
