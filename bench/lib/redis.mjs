// Starts and stops the benchmark's own redis-server, and reads INFO.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptInstall, freePort, run, sleep, which } from "./util.mjs";

/**
 * Makes sure redis-server and redis-benchmark exist: installs Debian's redis-server and
 * redis-tools with apt-get (as root, or through sudo) when one is missing.
 */
export async function ensureRedisInstalled(log = console.error) {
  const need = [];
  if (!(await which("redis-server"))) need.push("redis-server");
  if (!(await which("redis-benchmark")) || !(await which("redis-cli"))) need.push("redis-tools");
  if (need.length === 0) return;
  if (!(await aptInstall(need, log)))
    throw new Error(`could not install ${need.join(" ")}; install them and run again`);
}

function ping(port) {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.setTimeout(500);
    s.on("connect", () => s.write("PING\r\n"));
    s.on("data", (d) => {
      resolve(d.toString().startsWith("+PONG"));
      s.destroy();
    });
    s.on("error", () => resolve(false));
    s.on("timeout", () => {
      resolve(false);
      s.destroy();
    });
  });
}

/**
 * Starts redis-server on a free loopback port, without persistence.
 * Resolves { port, version, stop() }.
 */
export async function startRedis() {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "sluice-bench-redis-"));
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"].concat([
      "--dir",
      dir,
      "--protected-mode",
      "no",
      "--loglevel",
      "warning",
    ]),
    { stdio: "ignore" },
  );
  let exited = false;
  child.on("exit", () => (exited = true));
  const deadline = Date.now() + 10_000;
  while (!(await ping(port))) {
    if (exited || Date.now() > deadline) throw new Error("redis-server did not start");
    await sleep(50);
  }
  const version = (await run("redis-server", ["--version"])).stdout.match(/v=(\S+)/)?.[1] ?? "?";
  return {
    port,
    version,
    pid: child.pid,
    async stop() {
      if (!exited) {
        child.kill("SIGTERM");
        await Promise.race([new Promise((r) => child.once("exit", r)), sleep(2000)]);
        if (!exited) child.kill("SIGKILL");
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Parses an INFO reply into { field: value }. */
export function parseInfo(text) {
  const out = {};
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i > 0 && !line.startsWith("#")) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/** `calls` of every command from INFO commandstats: { evalsha: 123, … }. */
export async function commandCalls(client) {
  const info = parseInfo(await client.info("commandstats"));
  const out = {};
  for (const [k, v] of Object.entries(info)) {
    const m = /^cmdstat_(.+)$/.exec(k);
    const calls = /calls=(\d+)/.exec(v);
    if (m && calls) out[m[1]] = Number(calls[1]);
  }
  return out;
}

/** INFO memory used_memory, after letting the server settle. */
export async function usedMemory(client) {
  await sleep(50);
  return Number(parseInfo(await client.info("memory")).used_memory);
}
