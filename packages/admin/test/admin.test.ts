/**
 * The admin page in a real browser against the real service: `sluice serve` (the built CLI)
 * on a free loopback port with SQLite in a temp dir, the first admin made with
 * `sluice admin create-user`, and Debian's Chromium driven through playwright-core.
 *
 * Needs the built packages (`npm run build`, which `npm test` runs first) and /usr/bin/chromium
 * (scripts/install-test-deps.sh installs it). Screenshots of each page go to a temp dir
 * (or $SLUICE_ADMIN_SCREENSHOTS), printed at the end.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { type Browser, type BrowserContext, type Page, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../test/support/ports.js";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const CLI = join(ROOT, "packages/server/dist/cli.js");
const ADMIN_DIST = join(ROOT, "packages/admin/dist/index.html");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const run = promisify(execFile);

const ADMIN = { username: "root", password: "root-password-1" };
const VIEWER = { username: "vera", password: "vera-password-1" };
const POLICY = "api.search";

let dataDir: string;
let shots: string;
let base: string;
let server: ChildProcess | undefined;
let serverLog = "";
let browser: Browser | undefined;
let context: BrowserContext;
let page: Page;
let apiKey = "";
const pageErrors: string[] = [];

/** Calls the service directly (setup and checks that the API refuses what the page hides). */
async function api(
  method: string,
  path: string,
  options: { token?: string; body?: unknown } = {},
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests reach into bodies freely
): Promise<{ status: number; body: any }> {
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

async function login(u: { username: string; password: string }): Promise<string> {
  const r = await api("POST", "/v1/admin/login", { body: u });
  expect(r.status).toBe(200);
  return r.body.token as string;
}

let adminTokenCache: string | undefined;
/** One API session for the admin (sign-ins are rate limited: 5 per user per minute). */
async function adminToken(): Promise<string> {
  adminTokenCache ??= await login(ADMIN);
  return adminTokenCache;
}

async function shot(p: Page, name: string): Promise<void> {
  await p.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

async function signIn(p: Page, u: { username: string; password: string }): Promise<void> {
  await p.goto(`${base}/admin`);
  await p.fill("#login-form input[name=username]", u.username);
  await p.fill("#login-form input[name=password]", u.password);
  await p.click("#sign-in");
  await p.waitForSelector("#whoami");
}

beforeAll(async () => {
  for (const [file, what] of [
    [CLI, "the service (npm run build)"],
    [ADMIN_DIST, "the admin page (npm run build)"],
    [CHROMIUM, "chromium (scripts/install-test-deps.sh)"],
  ] as const) {
    if (!existsSync(file)) throw new Error(`missing ${file}: needs ${what}`);
  }
  dataDir = mkdtempSync(join(tmpdir(), "sluice-admin-data-"));
  shots =
    process.env.SLUICE_ADMIN_SCREENSHOTS ?? mkdtempSync(join(tmpdir(), "sluice-admin-shots-"));
  mkdirSync(shots, { recursive: true });

  // The first admin, the documented way.
  await run(process.execPath, [
    CLI,
    "admin",
    "create-user",
    "--data-dir",
    dataDir,
    "--username",
    ADMIN.username,
    "--password",
    ADMIN.password,
    "--role",
    "admin",
  ]);

  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  server = spawn(
    process.execPath,
    [
      CLI,
      "serve",
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--data-dir",
      dataDir,
      "--log-level",
      "warn",
      "--poll-interval-ms",
      "100",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  server.stdout?.on("data", (d: Buffer) => (serverLog += d.toString()));
  server.stderr?.on("data", (d: Buffer) => (serverLog += d.toString()));
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (server.exitCode !== null)
      throw new Error(`sluice serve exited (${server.exitCode}):\n${serverLog}`);
    if (
      await fetch(`${base}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (Date.now() > deadline) throw new Error(`sluice serve did not start in 20 s:\n${serverLog}`);
    await new Promise((r) => setTimeout(r, 50));
  }

  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
  context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  page = await context.newPage();
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.setDefaultTimeout(10_000);
  page.on("console", (m) => {
    // The browser logs every 4xx the page provokes on purpose (validation, refusals).
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) {
      pageErrors.push(m.text());
    }
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server?.once("exit", r));
    server.kill("SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (server.exitCode === null) server.kill("SIGKILL");
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  if (shots) console.log(`admin page screenshots: ${shots}`);
});

describe("admin page in Chromium", () => {
  it("serves the page at /admin/ with content types, and refuses traversal", async () => {
    const redirect = await fetch(`${base}/admin`, { redirect: "manual" });
    expect(redirect.status).toBe(301);
    expect(redirect.headers.get("location")).toBe("/admin/");
    const index = await fetch(`${base}/admin/`);
    expect(index.headers.get("content-type")).toMatch(/^text\/html/);
    const js = await fetch(`${base}/admin/app.js`);
    expect(js.headers.get("content-type")).toMatch(/^text\/javascript/);
    const css = await fetch(`${base}/admin/app.css`);
    expect(css.headers.get("content-type")).toMatch(/^text\/css/);
    for (const evil of [
      "/admin/../package.json",
      "/admin/%2e%2e/%2e%2e/package.json",
      "/admin/..%2f..%2fpackage.json",
    ]) {
      // fetch normalises "..", so send the raw path with node:http.
      const status = await new Promise<number>((resolve, reject) => {
        import("node:http")
          .then(({ request }) => {
            const req = request(`${base}${evil}`, { method: "GET" }, (res) => {
              res.resume();
              resolve(res.statusCode ?? 0);
            });
            req.path = evil;
            req.on("error", reject);
            req.end();
          })
          .catch(reject);
      });
      expect(status, evil).toBe(404);
    }
  });

  it("signs in", async () => {
    await page.goto(`${base}/admin`);
    await page.waitForSelector("#login-form");
    // A wrong password is refused with the service's message.
    await page.fill("#login-form input[name=username]", ADMIN.username);
    await page.fill("#login-form input[name=password]", "wrong-password");
    await page.click("#sign-in");
    await expect
      .poll(() => page.textContent("#login-form .form-error"))
      .toMatch(/wrong username or password/);
    await shot(page, "01-sign-in");
    await page.fill("#login-form input[name=password]", ADMIN.password);
    await page.click("#sign-in");
    await page.waitForSelector("#whoami");
    expect(await page.textContent("#whoami")).toBe("root (admin)");
    expect(await page.evaluate(() => sessionStorage.getItem("sluice.admin.session"))).toContain(
      "token",
    );
  });

  it("creates an app and shows its key once", async () => {
    await page.goto(`${base}/admin/#/apps`);
    await page.fill("#app-form input[name=name]", "checkout");
    await page.fill("#app-form input[name=description]", "The checkout service");
    await page.click("#create-app");
    await page.waitForSelector("#api-key");
    apiKey = (await page.textContent("#api-key")) ?? "";
    expect(apiKey.length).toBeGreaterThan(20);
    expect(await page.textContent("#new-key")).toMatch(/shown only this once/);
    await shot(page, "02-apps-new-key");
    // Leave and come back: the key is gone, the app is listed.
    await page.goto(`${base}/admin/#/policies`);
    await page.goto(`${base}/admin/#/apps`);
    await page.waitForSelector('tr[data-app="checkout"]');
    expect(await page.$("#api-key")).toBeNull();
    expect(await page.content()).not.toContain(apiKey);
  });

  it("creates a policy; a bad limit is shown next to its field and nothing is saved", async () => {
    await page.goto(`${base}/admin/#/policies`);
    await page.click("#new-policy");
    await page.waitForSelector("#policy-form");
    await page.fill("#policy-form input[name=name]", POLICY);
    await page.selectOption("#policy-form select[name=algorithm]", "gcra");
    await page.fill('[data-field="rules.0.limit"] input', "0");
    await page.fill('[data-field="rules.0.period"] input', "1m");
    await page.check('#policy-form input[name=apps][value="checkout"]');
    await page.click("#save-policy");
    const err = page.locator('[data-field="rules.0.limit"] .field-error');
    await expect
      .poll(() => err.textContent())
      .toMatch(/limit must be a positive integer \(got 0\)/);
    expect(await page.getAttribute('[data-field="rules.0.limit"] input', "aria-invalid")).toBe(
      "true",
    );
    await shot(page, "03-policy-validation-error");
    const admin = await adminToken();
    expect((await api("GET", `/v1/admin/policies/${POLICY}`, { token: admin })).status).toBe(404);

    await page.fill('[data-field="rules.0.limit"] input', "5");
    await page.click("#save-policy");
    await page.waitForSelector("#policy-version");
    expect(await page.textContent("#policy-version")).toBe("Version 1");
    expect(await page.textContent("#flash")).toMatch(/Created api\.search: version 1/);
  });

  it("edits, then restores a version", async () => {
    await page.click("#edit-policy");
    await page.waitForSelector("#policy-form");
    await page.fill('[data-field="rules.0.limit"] input', "8");
    await page.fill('[data-field="rules.0.burst"] input', "8");
    await page.click("#save-policy");
    await expect.poll(() => page.textContent("#policy-version")).toBe("Version 2");
    expect(await page.locator("section.card dl.doc").first().textContent()).toContain(
      "8 / 1m (burst 8)",
    );

    await page.click('tr[data-version="1"] button.restore');
    await expect.poll(() => page.textContent("#policy-version")).toBe("Version 3");
    expect(await page.locator("section.card dl.doc").first().textContent()).toContain("5 / 1m");
    expect(await page.locator("#versions tbody tr").count()).toBe(3);
    await shot(page, "04-policy-versions");
  });

  it("saves a draft (shadow) and promotes it", async () => {
    await page.click("#edit-policy");
    await page.waitForSelector("#policy-form");
    await page.fill('[data-field="rules.0.limit"] input', "3");
    await page.click("#save-draft");
    await page.waitForSelector("#draft");
    expect(await page.textContent("#draft")).toContain("3 / 1m");
    expect(await page.textContent("#policy-version")).toBe("Version 3");
    // A second draft from the form replaces the first one (the form names the draft it saw).
    await page.click("#edit-policy");
    await page.waitForSelector("#draft-notice");
    await page.fill('[data-field="rules.0.limit"] input', "4");
    await page.click("#save-draft");
    await expect.poll(() => page.textContent("#draft")).toContain("4 / 1m");
    await shot(page, "04a-policy-draft");
    await page.click("#promote-draft");
    await expect.poll(() => page.textContent("#policy-version")).toBe("Version 4");
    expect(await page.$("#draft")).toBeNull();
    await page.goto(`${base}/admin/#/policies`);
    await page.waitForSelector(`tr[data-policy="${POLICY}"]`);
    expect(await page.textContent(`tr[data-policy="${POLICY}"]`)).toContain("v4");
    await shot(page, "04b-policies");
  });

  it("creates a viewer, who sees read-only views (and the API refuses anyway)", async () => {
    await page.goto(`${base}/admin/#/users`);
    await page.fill("#user-form input[name=username]", VIEWER.username);
    await page.fill("#user-form input[name=password]", "short");
    await page.click("#create-user");
    await expect
      .poll(() => page.textContent('#user-form [data-field="password"] .field-error'))
      .toMatch(/at least 8 characters/);
    await page.fill("#user-form input[name=password]", VIEWER.password);
    await page.selectOption("#user-form select[name=role]", "viewer");
    await page.click("#create-user");
    await page.waitForSelector(`tr[data-user="${VIEWER.username}"]`);
    await shot(page, "05-users");

    const viewerContext = await browser!.newContext({ viewport: { width: 1280, height: 860 } });
    const v = await viewerContext.newPage();
    try {
      await signIn(v, VIEWER);
      expect(await v.textContent("#whoami")).toBe("vera (viewer)");
      await v.waitForSelector(`tr[data-policy="${POLICY}"]`);
      expect(await v.$("#new-policy")).toBeNull();
      await v.click(`tr[data-policy="${POLICY}"] a`);
      await v.waitForSelector("#read-only");
      expect(await v.$("#edit-policy")).toBeNull();
      expect(await v.$("button.restore")).toBeNull();
      await shot(v, "06-viewer-policy");
      await v.goto(`${base}/admin/#/apps`);
      await v.waitForSelector('tr[data-app="checkout"]');
      expect(await v.$("#app-form")).toBeNull();
      expect(await v.$("#apps button")).toBeNull();
      await v.goto(`${base}/admin/#/policies/${POLICY}/edit`);
      await v.waitForSelector(".notice.error");
      expect(await v.$("#policy-form")).toBeNull();

      const token = await login(VIEWER);
      const put = await api("PUT", `/v1/admin/policies/${POLICY}`, {
        token,
        body: { rules: [{ limit: 1000, period: "1m" }], apps: ["checkout"] },
      });
      expect(put.status).toBe(403);
    } finally {
      await viewerContext.close();
    }
  });

  it("an owner edits only the policies of its apps; a revoked session returns to sign-in", async () => {
    const admin = await adminToken();
    expect(
      (await api("POST", "/v1/admin/apps", { token: admin, body: { name: "billing" } })).status,
    ).toBe(201);
    const created = await api("POST", "/v1/admin/policies", {
      token: admin,
      body: { name: "billing.api", rules: [{ limit: 10, period: "1s" }], apps: ["billing"] },
    });
    expect(created.status).toBe(201);
    const owner = { username: "olga", password: "olga-password-1" };
    const made = await api("POST", "/v1/admin/users", {
      token: admin,
      body: { ...owner, role: "owner", apps: ["checkout"] },
    });
    expect(made.status).toBe(201);

    const ownerContext = await browser!.newContext({ viewport: { width: 1280, height: 860 } });
    const o = await ownerContext.newPage();
    o.setDefaultTimeout(10_000);
    try {
      await signIn(o, owner);
      await o.goto(`${base}/admin/#/policies/billing.api`);
      await o.waitForSelector("#read-only");
      expect(await o.$("#edit-policy")).toBeNull();
      await o.goto(`${base}/admin/#/policies/${POLICY}`);
      await o.waitForSelector("#edit-policy");
      await o.click("#edit-policy");
      await o.waitForSelector("#policy-form");
      expect(await o.isDisabled('#policy-form input[name=apps][value="billing"]')).toBe(true);
      expect(await o.isEnabled('#policy-form input[name=apps][value="checkout"]')).toBe(true);

      // Revoke the session behind the page's back: the next call lands on sign-in.
      const token = await o.evaluate(
        () =>
          (JSON.parse(sessionStorage.getItem("sluice.admin.session") ?? "{}") as { token?: string })
            .token,
      );
      expect((await api("POST", "/v1/admin/logout", { token })).status).toBe(204);
      await o.goto(`${base}/admin/#/apps`);
      await o.waitForSelector("#signed-out");
      expect(await o.$("#login-form")).not.toBeNull();
    } finally {
      await ownerContext.close();
    }
  });

  it("charts live traffic: allowed and denied after decisions", async () => {
    await page.goto(`${base}/admin/#/traffic?policy=${POLICY}`);
    await expect
      .poll(() => page.textContent("#traffic-status"), { timeout: 10_000 })
      .toMatch(/Updated/);
    // Limit 4/min since the promotion: 4 pass, 6 are denied.
    for (let i = 0; i < 10; i++) {
      const r = await fetch(`${base}/v1/limit`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ policy: POLICY, key: "user-1" }),
      });
      const d = (await r.json()) as { allowed: boolean };
      expect(d.allowed, `request ${i + 1}: ${JSON.stringify(d)}`).toBe(i < 4);
    }
    const card = page.locator(`section.traffic[data-policy="${POLICY}"]`);
    await expect
      .poll(() => card.locator("[data-denied]").getAttribute("data-denied"), { timeout: 10_000 })
      .toBe("6");
    expect(await card.locator("[data-allowed]").getAttribute("data-allowed")).toBe("4");
    expect(await card.locator('g[data-series="allowed"]').getAttribute("data-total")).toBe("4");
    expect(await card.locator('g[data-series="denied"]').getAttribute("data-total")).toBe("6");
    expect(await card.locator('g[data-series="denied"] rect').count()).toBeGreaterThan(0);
    await shot(page, "07-traffic");
  });

  it("simulates a burst: admitted 20 of 100 under every algorithm", async () => {
    await page.goto(`${base}/admin/#/simulator`);
    await page.waitForSelector("#sim-form");
    await page.selectOption("#sim-policy", "");
    await page.fill('#sim-form [data-field="rules.0.limit"] input', "20");
    await page.fill('#sim-form [data-field="rules.0.period"] input', "1m");
    await page.fill('#sim-form [data-field="rules.0.burst"] input', "");
    await page.selectOption("#sim-kind", "burst");
    await page.fill("#sim-size", "100");
    await page.fill("#sim-every", "0");
    await page.fill("#sim-duration", "60");
    await page.click("#sim-run");
    for (const alg of [
      "gcra",
      "token-bucket",
      "fixed-window",
      "sliding-window",
      "sliding-log",
      "concurrency",
    ]) {
      expect(await page.textContent(`tr[data-algorithm="${alg}"] .admitted`), alg).toBe(
        "admitted 20 of 100",
      );
    }
    // Cumulative by default: the last point is the total; per interval, the points sum to it.
    const gcraLine = page.locator('#sim-results polyline[data-series="gcra"]');
    expect(await gcraLine.getAttribute("data-last")).toBe("20");
    await page.selectOption("#sim-view", "bucket");
    expect(await gcraLine.getAttribute("data-total")).toBe("20");
    // 100 offered would flatten 20 admitted: hidden until asked for.
    expect(await page.$('#sim-results polyline[data-series="offered"]')).toBeNull();
    await page.check("#sim-offered");
    expect(
      await page.locator('#sim-results polyline[data-series="offered"]').getAttribute("data-total"),
    ).toBe("100");
    await page.selectOption("#sim-view", "cumulative");
    // Bursts of 100 every 10 s against the same rules: a window admits 20 a minute, gcra refills.
    await page.fill("#sim-every", "10");
    await page.click("#sim-run");
    expect(await page.textContent('tr[data-algorithm="fixed-window"] .admitted')).toBe(
      "admitted 20 of 600",
    );
    // gcra: 20 at once, then 20/min refills one every 3 s: 3 more at each of the 5 later bursts
    // (10 s = 3.33 cells, the fraction carries over) — 36 in all.
    expect(await page.textContent('tr[data-algorithm="gcra"] .admitted')).toBe(
      "admitted 36 of 600",
    );
    await shot(page, "08-simulator");
  });

  it("shows the audit log", async () => {
    await page.goto(`${base}/admin/#/audit`);
    await page.waitForSelector("#audit tbody tr[data-audit]");
    const text = (await page.textContent("#audit")) ?? "";
    for (const action of ["policy.create", "policy.restore", "app.create", "user.create"]) {
      expect(text).toContain(action);
    }
    await page.fill("#audit-target", VIEWER.username);
    await page.click(".filters button");
    await expect
      .poll(async () => {
        const targets = await page
          .locator("#audit tbody tr[data-audit] td:nth-child(4)")
          .allTextContents();
        return targets.length > 0 && targets.every((t) => t === `user ${VIEWER.username}`);
      })
      .toBe(true);
    expect(await page.textContent("#audit")).toContain("user.create");
    expect(await page.textContent("#audit")).not.toContain("policy.create");
    await shot(page, "09-audit");
    expect(pageErrors).toEqual([]);
  });
});
