#!/usr/bin/env node
/**
 * `npm run screenshots`: the pictures of docs/admin.md, taken from a running service so that
 * they stay current. Starts `sluice serve` (the built CLI) on a free loopback port with SQLite
 * in a temp dir and memory counters, creates the first admin through the setup link it prints,
 * adds apps, policies, users and half a minute of traffic through the API, then drives
 * Debian's Chromium (playwright-core) over each page and writes docs/admin/*.png.
 *
 * Needs `npm run build` first and /usr/bin/chromium (or CHROMIUM_PATH). Takes about a minute.
 * The pictures are replaced (the folder is emptied first), so a page dropped here leaves none.
 */
/* global fetch */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLI = join(ROOT, "packages/server/dist/cli.js");
const OUT = join(ROOT, "docs/admin");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

for (const [file, what] of [
  [CLI, "npm run build"],
  [join(ROOT, "packages/admin/dist/app.js"), "npm run build"],
  [CHROMIUM, "scripts/install-test-deps.sh (apt-get install chromium)"],
]) {
  if (!existsSync(file)) {
    console.error(`missing ${file}: run ${what}`);
    process.exit(1);
  }
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const dataDir = mkdtempSync(join(tmpdir(), "sluice-shots-"));
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
let stderr = "";
const server = spawn(
  process.execPath,
  [CLI, "serve", "--port", String(port), "--data-dir", dataDir, "--log-level", "warn"],
  { stdio: ["ignore", "ignore", "pipe"] },
);
server.stderr.on("data", (d) => (stderr += d.toString()));

let browser;
try {
  const deadline = Date.now() + 20_000;
  while (!/#\/setup\?token=su_/.test(stderr)) {
    if (server.exitCode !== null) throw new Error(`sluice serve exited:\n${stderr}`);
    if (Date.now() > deadline) throw new Error(`sluice serve did not start:\n${stderr}`);
    await sleep(50);
  }
  const setupLink = /(http:\/\/\S+#\/setup\?token=su_[A-Za-z0-9_-]+)/.exec(stderr)[1];

  const call = async (method, path, { token, body } = {}) => {
    const res = await fetch(base + path, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };

  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const shot = async (name, target) => {
    await sleep(150); // the last repaint
    if (target)
      await page
        .locator(target)
        .first()
        .screenshot({ path: join(OUT, `${name}.png`) });
    else await page.screenshot({ path: join(OUT, `${name}.png`) });
    console.log(`docs/admin/${name}.png`);
  };

  // First run: the setup link, then the overview's first steps.
  await page.goto(setupLink);
  await page.waitForSelector("#setup-form");
  await page.fill("#setup-form input[name=username]", "ada");
  await page.fill("#setup-form input[name=password]", "ada-password-1");
  await page.fill("#setup-form input[name=repeat]", "ada-password-1");
  await shot("01-setup");
  await page.click("#create-admin");
  await page.waitForSelector("#getting-started");
  await shot("02-first-run");

  // Apps, policies, users and a draft, through the API.
  const token = (
    await call("POST", "/v1/admin/login", {
      body: { username: "ada", password: "ada-password-1" },
    })
  ).token;
  const web = (
    await call("POST", "/v1/admin/apps", {
      token,
      body: { name: "web", description: "The public website" },
    })
  ).apiKey;
  const mobile = (
    await call("POST", "/v1/admin/apps", {
      token,
      body: { name: "mobile", description: "iOS and Android apps" },
    })
  ).apiKey;
  await call("POST", "/v1/admin/apps", { token, body: { name: "billing" } });
  const policy = (name, rules, extra = {}) =>
    call("POST", "/v1/admin/policies", { token, body: { name, rules, ...extra } });
  await policy("api.search", [{ limit: 20, period: "10s" }], {
    description: "Search, per user",
    apps: ["web", "mobile"],
  });
  await call("PUT", "/v1/admin/policies/api.search", {
    token,
    body: {
      description: "Search, per user",
      rules: [{ limit: 30, period: "10s", burst: 10 }],
      apps: ["web", "mobile"],
    },
  });
  await policy("login", [{ limit: 5, period: "1m" }], {
    algorithm: "sliding-log",
    shadow: true,
    apps: ["web", "mobile"],
  });
  await policy("checkout", [{ limit: 50, period: "1s" }], { apps: ["web", "mobile"] });
  await policy("invoices.export", [{ limit: 2, period: "1h" }], { apps: ["billing"] });
  await policy("webhooks", [{ limit: 100, period: "1m" }], { apps: ["billing"] });
  await call("PUT", "/v1/admin/policies/api.search/draft", {
    token,
    body: {
      description: "Search, per user",
      rules: [{ limit: 20, period: "10s", burst: 10 }],
      blockDuration: "1m",
      apps: ["web", "mobile"],
    },
  });
  await call("POST", "/v1/admin/users", {
    token,
    body: { username: "olga", password: "olga-password-1", role: "owner", apps: ["web"] },
  });
  await call("POST", "/v1/admin/users", {
    token,
    body: { username: "vera", password: "vera-password-1", role: "viewer" },
  });

  // Half a minute of traffic: a few heavy users on search, a login scraper, steady checkout.
  const users = ["user:1042", "user:7", "user:3318", "user:88", "user:501", "user:12"];
  for (let t = 0; t < 30; t++) {
    const requests = [];
    for (let i = 0; i < 6 + (t % 7); i++)
      requests.push({ policy: "api.search", key: users[i % users.length] });
    for (let i = 0; i < 8; i++) requests.push({ policy: "api.search", key: "user:1042" });
    if (t > 10) for (let i = 0; i < 3; i++) requests.push({ policy: "login", key: "203.0.113.7" });
    requests.push({ policy: "login", key: `198.51.100.${t % 5}` });
    for (let i = 0; i < 4; i++) requests.push({ policy: "checkout", key: `cart:${t}-${i}` });
    await call("POST", "/v1/limit/batch", {
      token: t % 3 === 0 ? mobile : web,
      body: { requests },
    });
    await sleep(500);
  }
  await sleep(1500); // the node writes its counts every second

  const go = async (hash, selector) => {
    await page.goto(`${base}/admin/#${hash}`);
    await page.waitForSelector(selector);
  };
  await go("/apps", "#apps tbody tr");
  await go("/", "#overview tbody tr");
  await page.waitForSelector("#overview svg.spark");
  await shot("03-overview");

  await go("/policies/api.search?window=5m", "#traffic-totals");
  await page.waitForSelector("#top-denied tbody tr");
  await page.waitForSelector("#traffic figure.chart");
  await shot("04-policy");
  await page.click('#top-denied tr[data-key="user:1042"] button.pick');
  await page.waitForSelector("#lookup-result .decision");
  await shot("05-key-lookup", "#key-lookup");
  await page.click("#unblock-key");
  await page.click("#unblock-key");
  await page.waitForSelector("#lookup-result .notice.ok");
  await shot("06-key-unblocked", "#key-lookup");
  await page.locator("#draft").scrollIntoViewIfNeeded();
  await shot("07-draft-diff", "#draft");
  await shot("08-versions", "#versions-card");
  await shot("09-snippets", "#snippets");

  await go("/audit?action=policy", "#audit tbody tr[data-audit]");
  await shot("10-audit");

  await go("/apps", "#apps tbody tr");
  await shot("11-apps");
  await go("/apps/web?window=5m", "#traffic-totals");
  await page.waitForSelector("#traffic figure.chart");
  await shot("12-app");

  await go("/simulator?policy=api.search", "#sim-table");
  await shot("13-simulator");

  await go("/account", "#password-form");
  await shot("14-account");

  // A phone (390 px): the overview and a policy.
  const phone = await browser.newContext({
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 1,
  });
  const p2 = await phone.newPage();
  await p2.goto(`${base}/admin/`);
  await p2.fill("#login-form input[name=username]", "vera");
  await p2.fill("#login-form input[name=password]", "vera-password-1");
  await p2.click("#sign-in");
  await p2.waitForSelector("#overview tbody tr");
  await sleep(150);
  await p2.screenshot({ path: join(OUT, "15-overview-phone.png") });
  console.log("docs/admin/15-overview-phone.png");
  await phone.close();
} finally {
  await browser?.close();
  server.kill("SIGTERM");
  await new Promise((r) => server.once("exit", r));
  rmSync(dataDir, { recursive: true, force: true });
}
