/**
 * Helpers of the console's suites: the built `sluice` CLI (`sluice serve` on a free loopback
 * port, and its commands run to their end), the service's API called directly, and Debian's
 * Chromium driven through playwright-core — pages that record the script errors and 404s they
 * meet, and a sign-in as the console's users make it.
 */
import { execFile, spawn } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { type Browser, type Page, chromium } from "playwright-core";
import { repoRoot } from "../../../test/support/markdown.js";
import { freePort, waitFor } from "../../../test/support/ports.js";

/** The built CLI (`npm run build`). */
export const CLI = join(repoRoot, "packages/server/dist/cli.js");
/** The built console (`npm run build`). */
export const ADMIN_DIST = join(repoRoot, "packages/admin/dist/index.html");
/** The browser (scripts/install-test-deps.sh installs Debian's). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** A user's name and password, as typed into the sign-in form. */
export interface Credentials {
  username: string;
  password: string;
}

/** Throws for the first file that is missing, naming it and what makes it. */
export function requireFiles(files: ReadonlyArray<readonly [file: string, maker: string]>): void {
  for (const [file, maker] of files)
    if (!existsSync(file)) throw new Error(`missing ${file}: needs ${maker}`);
}

/** An answer of the API (bodies are `any`: tests reach into them freely). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests reach into bodies freely
export type ApiAnswer = { status: number; body: any };

/** Calls the API of the service at `base`: JSON in, JSON out. */
export async function callApi(
  base: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown } = {},
): Promise<ApiAnswer> {
  const res = await fetch(base + path, {
    method,
    headers: {
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...(options.body !== undefined ? { "content-type": "application/json" } : {}),
    },
    ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Runs the built `sluice` CLI to its end: its exit code, and stdout and stderr together. */
export function runCli(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], (err, stdout, stderr) =>
      resolve({
        code: err ? (typeof err.code === "number" ? err.code : 1) : 0,
        output: stdout + stderr,
      }),
    );
  });
}

/** `sluice admin create-user` on `dataDir`; throws with the CLI's output when it fails. */
export async function createUser(
  dataDir: string,
  user: Credentials,
  role: "admin" | "owner" | "viewer",
): Promise<string> {
  const r = await runCli([
    "admin",
    "create-user",
    "--data-dir",
    dataDir,
    "--username",
    user.username,
    "--password",
    user.password,
    "--role",
    role,
  ]);
  if (r.code !== 0) throw new Error(`sluice admin create-user exited (${r.code}):\n${r.output}`);
  return r.output;
}

/** A built `sluice serve` running on a free loopback port. */
export interface Served {
  /** `http://127.0.0.1:<port>`. */
  readonly base: string;
  /** What it printed so far (stdout and stderr). */
  log(): string;
  /** Calls its API ({@link callApi}). */
  api(
    method: string,
    path: string,
    options?: { token?: string; body?: unknown },
  ): Promise<ApiAnswer>;
  /** SIGTERM, then SIGKILL if it has not exited within 5 s; resolves once it has exited. */
  stop(): Promise<void>;
}

/**
 * Spawns the built `sluice serve --host 127.0.0.1 --port <free port>` with `args` and `env`,
 * and waits (up to 30 s) until `ready` says it is, given the process's output so far. Throws
 * with that output if it exits first or never gets ready.
 */
export async function startServe(options: {
  args: string[];
  env?: Record<string, string>;
  ready: (served: Served) => Promise<boolean> | boolean;
}): Promise<Served> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(
    process.execPath,
    [CLI, "serve", "--host", "127.0.0.1", "--port", String(port), ...options.args],
    { env: { ...process.env, ...options.env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let log = "";
  child.stdout.on("data", (d: Buffer) => (log += d.toString()));
  child.stderr.on("data", (d: Buffer) => (log += d.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const served: Served = {
    base,
    log: () => log,
    api: (method, path, o) => callApi(base, method, path, o),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGKILL");
        await exited;
      }
    },
  };
  let exitedEarly = false;
  await waitFor(async () => {
    if (child.exitCode !== null) {
      exitedEarly = true;
      return true;
    }
    return options.ready(served);
  }, 30_000).catch(async (err: unknown) => {
    await served.stop();
    throw new Error(`sluice serve did not get ready: ${String(err)}\n${log}`);
  });
  if (exitedEarly) throw new Error(`sluice serve exited (${child.exitCode}):\n${log}`);
  return served;
}

/** Until `GET <path>` answers 2xx: for {@link startServe}'s `ready`. */
export function answers(path: string): (served: Served) => Promise<boolean> {
  return async (served) => (await fetch(`${served.base}${path}`)).ok;
}

/** One headless Chromium for a test file. */
export interface Chromium {
  readonly browser: Browser;
  /** A page in a context of its own (a role), recording errors and 404s into the test's lists. */
  newPage(width?: number, height?: number): Promise<Page>;
}

/** Launches {@link CHROMIUM} headless; its pages record what they meet into the test's lists. */
export async function launchChromium({
  pageErrors,
  notFound,
}: {
  /** Every script error a page of {@link Chromium.newPage} throws. */
  pageErrors: string[];
  /** Every request such a page sees answered 404 (the console should provoke none). */
  notFound: string[];
}): Promise<Chromium> {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  return {
    browser,
    async newPage(width = 1280, height = 860) {
      const context = await browser.newContext({ viewport: { width, height } });
      const p = await context.newPage();
      p.setDefaultTimeout(10_000);
      p.on("pageerror", (e) => pageErrors.push(String(e)));
      p.on("response", (r) => {
        if (r.status() === 404) notFound.push(r.url());
      });
      return p;
    },
  };
}

/** Signs `user` in on the console of the service at `base`, as a user does. */
export async function signIn(p: Page, base: string, user: Credentials): Promise<void> {
  await p.goto(`${base}/admin/`);
  await p.fill("#login-form input[name=username]", user.username);
  await p.fill("#login-form input[name=password]", user.password);
  await p.click("#sign-in");
  await p.waitForSelector("#whoami");
}

/**
 * The end of a console suite: closes its browser, stops its service and removes its data
 * directory — each one that its start got to make.
 */
export async function closeSuite(made: {
  chromium: Chromium | undefined;
  server: Served | undefined;
  dataDir: string | undefined;
}): Promise<void> {
  await made.chromium?.browser.close();
  await made.server?.stop();
  if (made.dataDir) rmSync(made.dataDir, { recursive: true, force: true });
}
