/**
 * Shutdown of the built `sluice serve` whatever its stdout does. The JSON log goes to stdout;
 * when the reader of that pipe stalls (the pipe is full) or goes away with lines still pending,
 * SIGTERM must still end the process within `shutdownTimeoutMs`. And a reader that goes away
 * (`sluice serve 2>&1 | head -n 1`) never stops the service.
 */
import { type ChildProcessByStdio, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "../../../test/support/ports.js";
import { ROOT } from "./helpers.js";

const BIN = join(ROOT, "packages/server/bin/sluice.js");
const SHUTDOWN_TIMEOUT_MS = 1000;

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanup.splice(0)) c();
});

/** `sluice serve` with stdout to a pipe this test does not read. */
async function serveWithStalledStdout(): Promise<{
  child: ChildProcessByStdio<null, Readable, Readable>;
  url: string;
  exit: Promise<{ code: number | null; ms: number }>;
  signal(): void;
}> {
  const dir = mkdtempSync(join(tmpdir(), "sluice-shutdown-"));
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      BIN,
      "serve",
      "--port",
      String(port),
      "--data-dir",
      dir,
      "--shutdown-timeout-ms",
      String(SHUTDOWN_TIMEOUT_MS),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  cleanup.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });
  child.stdout.pause(); // nobody reads: the pipe fills up
  let stderr = "";
  const started = new Promise<void>((resolve, reject) => {
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
      if (stderr.includes("sluice is listening")) resolve();
    });
    child.once("exit", () => reject(new Error(`sluice serve exited: ${stderr}`)));
  });
  await started;
  let signalledAt = 0;
  const exit = new Promise<{ code: number | null; ms: number }>((resolve) =>
    child.once("exit", (code) => resolve({ code, ms: Date.now() - signalledAt })),
  );
  return {
    child,
    url: `http://127.0.0.1:${port}`,
    exit,
    signal() {
      signalledAt = Date.now();
      child.kill("SIGTERM");
    },
  };
}

/** Fills the log: every 404 is logged with its (long) URL. About 250 KiB, well over a pipe's 64. */
async function fillTheLog(url: string): Promise<void> {
  const path = `/no-such-page-${"x".repeat(4000)}`;
  for (let i = 0; i < 60; i++) await (await fetch(`${url}${path}`)).arrayBuffer();
}

/** Waits for the exit, or gives up (and fails) after `ms`. */
function exitWithin(
  exit: Promise<{ code: number | null; ms: number }>,
  ms: number,
): Promise<{ code: number | null; ms: number } | "still running"> {
  return Promise.race([
    exit,
    new Promise<"still running">((r) => setTimeout(() => r("still running"), ms)),
  ]);
}

describe("SIGTERM with stdout going nowhere", () => {
  it("exits within shutdownTimeoutMs while the pipe is full and never read", async () => {
    const s = await serveWithStalledStdout();
    await fillTheLog(s.url);
    s.signal();
    const r = await exitWithin(s.exit, SHUTDOWN_TIMEOUT_MS + 3000);
    expect(r).not.toBe("still running");
    if (r === "still running") return;
    // The log could not be written out: the shutdown ran to its deadline and says so.
    expect(r.code).toBe(1);
    expect(r.ms).toBeGreaterThanOrEqual(SHUTDOWN_TIMEOUT_MS - 100);
    expect(r.ms).toBeLessThan(SHUTDOWN_TIMEOUT_MS + 3000);
  });

  it("exits within shutdownTimeoutMs when the pipe is closed with lines still pending", async () => {
    const s = await serveWithStalledStdout();
    await fillTheLog(s.url);
    s.signal();
    // The reader goes away while the process is busy writing its last lines.
    await new Promise((r) => setTimeout(r, 200));
    s.child.stdout.destroy();
    const r = await exitWithin(s.exit, SHUTDOWN_TIMEOUT_MS + 3000);
    expect(r).not.toBe("still running");
    if (r === "still running") return;
    expect(r.ms).toBeLessThan(SHUTDOWN_TIMEOUT_MS + 500);
  });
});

describe("sluice serve 2>&1 | head -n 1", () => {
  it("keeps serving after the reader of its output is gone, and exits 0 on SIGTERM", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sluice-epipe-"));
    const port = await freePort();
    // The real `head`: it reads the first line and exits, closing the pipe's only read end.
    const head = spawn("head", ["-n", "1"], { stdio: ["pipe", "pipe", "ignore"] });
    let firstLine = "";
    head.stdout.on("data", (d: Buffer) => (firstLine += d.toString()));
    const headExited = new Promise<void>((resolve) => head.once("exit", () => resolve()));
    // stdout and stderr both into head's stdin (2>&1).
    const child = spawn(
      process.execPath,
      [BIN, "serve", "--port", String(port), "--data-dir", dir, "--shutdown-timeout-ms", "3000"],
      { stdio: ["ignore", head.stdin, head.stdin] },
    );
    head.stdin.destroy(); // the child holds the write end; this process keeps none
    let exitCode: number | null | undefined;
    const exited = new Promise<number | null>((resolve) =>
      child.once("exit", (code) => resolve((exitCode = code))),
    );
    cleanup.push(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    });
    await headExited;
    expect(firstLine).not.toBe("");
    const url = `http://127.0.0.1:${port}`;
    // Up, and still up after writing more to the closed pipe (each 404 is a log line).
    const deadline = Date.now() + 30_000;
    let healthy = false;
    while (!healthy && exitCode === undefined && Date.now() < deadline) {
      healthy = await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (!healthy) await new Promise((r) => setTimeout(r, 50));
    }
    expect(exitCode).toBeUndefined();
    expect(healthy).toBe(true);
    for (let i = 0; i < 20; i++) expect((await fetch(`${url}/no-such-page`)).status).toBe(404);
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(exitCode).toBeUndefined();
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });
});
