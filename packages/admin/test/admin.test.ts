/**
 * The console in a real browser against the real service: `sluice serve` (the built CLI) on a
 * free loopback port with SQLite in a temp dir, started with no admin — the first one is made
 * in the browser with the setup link it prints — and Debian's Chromium driven through
 * playwright-core (one browser for the file; a context per role).
 *
 * It covers the first run, the overview, traffic history across a reload, top keys, looking up
 * and unblocking a key, diffs (versions, draft, audit) and the audit filters, as admin, owner
 * and viewer, plus the rough edges of issue 13 (messages that followed you, armed buttons,
 * forms a role may not use, the simulator's errors and lines, 390 px, 404s in the console).
 *
 * Needs the built packages (`npm run build`, which `npm test` runs first) and /usr/bin/chromium
 * (scripts/install-test-deps.sh installs it). The pictures of docs/admin.md come from
 * `npm run screenshots` (scripts/screenshots.mjs), not from here.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { connectPolicies, memoryStore } from "sluice";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { flatLoad } from "../../../test/support/flat-load.js";
import {
  ADMIN_DIST,
  CHROMIUM,
  CLI,
  type Chromium,
  type Credentials,
  type Served,
  closeSuite,
  launchChromium,
  requireFiles,
  signIn as signInAt,
  startServe,
} from "./helpers.js";

// What the page shows comes from a real service that hashes passwords at full cost (scrypt
// N=2^17) and writes its counts every second: a poll waits up to 10 s, not vitest's 1 s.
vi.setConfig({ expect: { poll: { timeout: 10_000, interval: 50 } } });

const ADMIN = { username: "root", password: "root-password-1" };
const VIEWER = { username: "vera", password: "vera-password-1" };
const OWNER = { username: "olga", password: "olga-password-1" };
const POLICY = "api.search";

let dataDir: string;
let base: string;
let setupLink = "";
let server: Served | undefined;
let chromium: Chromium | undefined;
let page: Page;
let apiKey = "";
const pageErrors: string[] = [];
/** Every request the browser saw answered 404 (the console should provoke none). */
const notFound: string[] = [];

/** Calls the service directly (setup and checks that the API refuses what the page hides). */
const api = (method: string, path: string, options?: { token?: string; body?: unknown }) =>
  server!.api(method, path, options);

async function login(u: Credentials): Promise<string> {
  const r = await api("POST", "/v1/admin/login", { body: u });
  expect(r.status).toBe(200);
  return r.body.token as string;
}

let adminTokenCache: string | undefined;
/** One API session for the admin (sign-ins are rate limited: 5 failures per user per minute). */
async function adminToken(): Promise<string> {
  adminTokenCache ??= await login(ADMIN);
  return adminTokenCache;
}

/** A decision as app `key`. */
async function decide(key: string, policy: string, id: string): Promise<{ allowed: boolean }> {
  const r = await api("POST", "/v1/limit", { token: key, body: { policy, key: id } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body as { allowed: boolean };
}

/** A page of its own (a role) that records errors and 404s like the main one. */
const newPage = (width?: number, height?: number) => chromium!.newPage(width, height);

const signIn = (p: Page, u: Credentials) => signInAt(p, base, u);

beforeAll(async () => {
  requireFiles([
    [CLI, "the service (npm run build)"],
    [ADMIN_DIST, "the admin page (npm run build)"],
    [CHROMIUM, "chromium (scripts/install-test-deps.sh)"],
  ]);
  dataDir = mkdtempSync(join(tmpdir(), "sluice-admin-data-"));
  // No admin yet: the first run, as a new user meets it.
  server = await startServe({
    args: ["--data-dir", dataDir, "--log-level", "warn", "--poll-interval-ms", "100"],
    ready: (s) => {
      const m = /(http:\/\/\S+\/admin\/#\/setup\?token=su_[A-Za-z0-9_-]+)/.exec(s.log());
      if (m) setupLink = m[1]!;
      return m !== null;
    },
  });
  base = server.base;

  chromium = await launchChromium({ pageErrors, notFound });
  page = await newPage();
  page.on("console", (m) => {
    // The browser logs every 4xx the page provokes on purpose (validation, refusals).
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) {
      pageErrors.push(m.text());
    }
  });
}, 60_000);

afterAll(() => closeSuite({ chromium, server, dataDir }));

describe("the console in Chromium", () => {
  it("serves the page at /admin/ with content types, and refuses traversal", async () => {
    const redirect = await fetch(`${base}/admin`, { redirect: "manual" });
    expect(redirect.status).toBe(301);
    expect(redirect.headers.get("location")).toBe("/admin/");
    const index = await fetch(`${base}/admin/`);
    expect(index.headers.get("content-type")).toMatch(/^text\/html/);
    const js = await fetch(`${base}/admin/app.js`);
    expect(js.headers.get("content-type")).toMatch(/^text\/javascript/);
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

  it("first run: the setup link makes the first admin in the browser, and the overview says what to do next", async () => {
    // Without the link, the page says where to find it.
    await page.goto(`${base}/admin/`);
    await page.waitForSelector("#setup-form");
    expect(await page.inputValue("#setup-form input[name=token]")).toBe("");
    // The same page, another hash: the form is drawn again with the token from the link.
    await page.goto(setupLink);
    await expect.poll(() => page.inputValue("#setup-form input[name=token]")).toMatch(/^su_/);
    await page.fill("#setup-form input[name=username]", ADMIN.username);
    // Every problem at once: too short and not repeated.
    await page.fill("#setup-form input[name=password]", "short");
    await page.fill("#setup-form input[name=repeat]", "shirt");
    await page.click("#create-admin");
    await expect
      .poll(() => page.textContent('#setup-form [data-field="password"] .field-error'))
      .toBe("must be at least 8 characters");
    expect(await page.textContent('#setup-form [data-field="repeat"] .field-error')).toBe(
      "does not match the password",
    );
    await page.fill("#setup-form input[name=password]", ADMIN.password);
    await page.fill("#setup-form input[name=repeat]", "something else");
    await page.click("#create-admin");
    await expect
      .poll(() => page.textContent('#setup-form [data-field="repeat"] .field-error'))
      .toBe("does not match the password");
    await page.fill("#setup-form input[name=repeat]", ADMIN.password);
    await page.click("#create-admin");
    await page.waitForSelector("#getting-started");
    expect(await page.textContent("#whoami")).toBe("root (admin)");
    expect(await page.textContent("#flash")).toContain("you are the first admin");
    // Each step with its command, filled in with this service's address.
    expect(await page.textContent("#curl-app")).toContain(`${base}/v1/admin/apps`);
    expect(await page.textContent("#curl-limit")).toContain(`${base}/v1/limit`);
    expect(await page.$('[data-step="1"].done')).toBeNull();

    // The link works once: another browser is sent to sign in.
    const other = await newPage();
    try {
      await other.goto(setupLink);
      await other.waitForSelector("#signed-out");
      expect(await other.textContent("#signed-out")).toBe("An admin already exists: sign in.");
    } finally {
      await other.context().close();
    }
  });

  it("creates an app, shows its key once with the line for the snippets; the first step is done", async () => {
    await page.click('nav a[data-page="apps"]');
    await page.waitForSelector("#apps-empty");
    await page.fill("#app-form input[name=name]", "checkout");
    await page.fill("#app-form input[name=description]", "The checkout service");
    await page.click("#create-app");
    await page.waitForSelector("#api-key");
    apiKey = (await page.textContent("#api-key")) ?? "";
    expect(apiKey).toMatch(/^sk_/);
    expect(await page.textContent("#new-key")).toMatch(/shown only this once/);
    expect(await page.textContent("#export-key")).toContain(`export SLUICE_API_KEY='${apiKey}'`);
    await page.click('nav a[data-page="overview"]');
    await page.waitForSelector('[data-step="1"].done');
    expect(await page.$('[data-step="2"].done')).toBeNull();
    await page.goto(`${base}/admin/#/apps`);
    await page.waitForSelector('tr[data-app="checkout"]');
    expect(await page.content()).not.toContain(apiKey);
  });

  it("creates a policy; a bad limit is shown next to its field and nothing is saved", async () => {
    await page.goto(`${base}/admin/#/policies`);
    await page.waitForSelector("#policies-empty");
    await page.click("#new-policy");
    await page.waitForSelector("#policy-form");
    // Three problems: all three are marked after one submit (issue 32), not one at a time.
    await page.fill("#policy-form input[name=name]", "");
    await page.fill('[data-field="rules.0.limit"] input', "0");
    await page.fill('[data-field="rules.0.period"] input', "-5s");
    await page.click("#save-policy");
    const fieldError = (path: string) =>
      page.locator(`#policy-form [data-field="${path}"] .field-error`);
    await expect
      .poll(() => fieldError("name").textContent())
      .toMatch(/name must be 1–128 characters/);
    expect(await fieldError("rules.0.limit").textContent()).toMatch(
      /limit must be a positive integer \(got 0\)/,
    );
    expect(await fieldError("rules.0.period").textContent()).toContain('(got "-5s")');
    expect(await page.locator("#policy-form [data-field].invalid").count()).toBe(3);
    await page.fill("#policy-form input[name=name]", POLICY);
    await page.fill('[data-field="rules.0.limit"] input', "0");
    await page.fill('[data-field="rules.0.period"] input', "1m");
    await page.check('#policy-form input[name=apps][value="checkout"]');
    await page.click("#save-policy");
    const err = page.locator('[data-field="rules.0.limit"] .field-error');
    await expect
      .poll(() => err.textContent())
      .toMatch(/limit must be a positive integer \(got 0\)/);
    const admin = await adminToken();
    expect((await api("GET", `/v1/admin/policies/${POLICY}`, { token: admin })).status).toBe(404);
    await page.fill('[data-field="rules.0.limit"] input', "5");
    await page.click("#save-policy");
    await page.waitForSelector("#document-version");
    expect(await page.textContent("#document-version")).toBe("Version 1");
    expect(await page.textContent("#flash")).toMatch(/Created api\.search: version 1/);
    // The library snippet is plain JavaScript, and does not claim the service runs on Redis
    // (this one runs memory counters).
    const express = (await page.textContent("#snippet-express")) ?? "";
    expect(express).toContain("new Redis(process.env.REDIS_URL)");
    expect(express).not.toContain("REDIS_URL!");
    expect(express).not.toContain("on the service's Redis");
    // A copy does not follow the console: the snippet says so and names connectPolicies, which
    // does, and the next snippet is that program.
    expect(express).toContain("the connectPolicies snippet follows them");
    const connect = (await page.textContent("#snippet-express-connect")) ?? "";
    expect(connect).toContain("await connectPolicies({");
    expect(connect).toContain(`url: "${base}"`);
    expect(connect).toContain(`policies.limiter("${POLICY}")`);
    // One policy is "1 policy" in the overview.
    await page.click('nav a[data-page="overview"]');
    await expect
      .poll(() => page.textContent("#overview-summary > div:first-child"))
      .toBe("1 policy");
    await page.goto(`${base}/admin/#/policies/${POLICY}`);
    await page.waitForSelector("#edit-policy");
  });

  it("edits, restores, and shows the difference between any two versions", async () => {
    await page.click("#edit-policy");
    await page.waitForSelector("#policy-form");
    await page.fill('[data-field="rules.0.limit"] input', "8");
    await page.fill('[data-field="rules.0.burst"] input', "8");
    await page.click("#save-policy");
    await expect.poll(() => page.textContent("#document-version")).toBe("Version 2");
    expect(await page.textContent("#enforced")).toContain("8 / 1m (burst 8)");
    // Times are 24-hour everywhere (the chart's format), never AM/PM.
    expect(await page.textContent("p.meta")).toMatch(
      /updated \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} by root/,
    );
    expect(await page.textContent("main")).not.toMatch(/\d (AM|PM)\b/);
    // v1 → v2, the latest change, is shown at once.
    const row = (path: string) => page.locator(`#version-diff-table tr[data-path="${path}"]`);
    expect(await row("rules.0.limit").locator("td.before").textContent()).toBe("5");
    expect(await row("rules.0.limit").locator("td.after").textContent()).toBe("8");
    expect(await row("rules.0.burst").locator("td.after").textContent()).toBe("8");

    await page.click('tr[data-version="1"] button.restore');
    await expect.poll(() => page.textContent("#document-version")).toBe("Version 3");
    expect(await page.textContent("#enforced")).toContain("5 / 1m");
    expect(await page.locator("#versions tbody tr").count()).toBe(3);
    // v1 and v3 are the same document.
    await page.selectOption("#diff-from", "1");
    await page.selectOption("#diff-to", "3");
    await expect.poll(() => page.textContent("#version-diff")).toContain("No difference.");
    await page.click('tr[data-version="3"] button.show-diff');
    await expect.poll(() => row("rules.0.limit").locator("td.after").textContent()).toBe("5");
  });

  it("saves a draft, shows it against the enforced version, and promotes it", async () => {
    await page.click("#edit-policy");
    await page.waitForSelector("#policy-form");
    await page.fill('[data-field="rules.0.limit"] input', "3");
    await page.click("#save-draft");
    await page.waitForSelector("#draft");
    expect(await page.textContent("#draft")).toContain("3 / 1m");
    const limit = page.locator('#draft-diff tr[data-path="rules.0.limit"]');
    expect(await limit.locator("td.before").textContent()).toBe("5");
    expect(await limit.locator("td.after").textContent()).toBe("3");
    // A second draft from the form replaces the first one (the form names the draft it saw).
    await page.click("#edit-policy");
    await page.waitForSelector("#draft-notice");
    await page.fill('[data-field="rules.0.limit"] input', "4");
    await page.click("#save-draft");
    await expect.poll(() => limit.locator("td.after").textContent()).toBe("4");
    await page.click("#promote-draft");
    await expect.poll(() => page.textContent("#document-version")).toBe("Version 4");
    expect(await page.$("#draft")).toBeNull();
  });

  it("turns leases on with their tuning; the document and its diff show them; not for sliding-log", async () => {
    await page.click("#edit-policy");
    await page.waitForSelector("#policy-form");
    expect(await page.isVisible('[data-field="lease.maxShare"]')).toBe(false);
    await page.check("#policy-form input[name=lease]");
    await page.fill('#policy-form input[name="lease.maxShare"]', "0.25");
    await page.click("#save-policy");
    await expect.poll(() => page.textContent("#document-version")).toBe("Version 5");
    expect(await page.textContent("#enforced")).toContain("yes — at most 25% per node");
    // This service counts in memory: the lease is kept, and the console says what it does here.
    expect(await page.textContent("#flash")).toMatch(
      /Saved api\.search: version 5\. Warning — lease: this service counts in memory/,
    );
    expect(await page.textContent("#document-warnings")).toMatch(
      /lease: this service counts in memory \(no Redis counters\): its own decisions ignore lease/,
    );
    const admin = await adminToken();
    expect((await api("GET", `/v1/admin/policies/${POLICY}`, { token: admin })).body.lease).toEqual(
      {
        maxShare: 0.25,
      },
    );
    expect(
      await page.locator('#version-diff-table tr[data-path="lease"] td.after').textContent(),
    ).toBe("{ maxShare: 0.25 }");
    // Leases serve gcra, token-bucket, fixed-window and concurrency: the field goes for the others.
    await page.click("#edit-policy");
    await page.waitForSelector("#policy-form");
    expect(await page.isChecked("#policy-form input[name=lease]")).toBe(true);
    await page.selectOption("#policy-form select[name=algorithm]", "sliding-log");
    expect(await page.isVisible('[data-field="lease"]')).toBe(false);
    await page.selectOption("#policy-form select[name=algorithm]", "gcra");
    expect(await page.isVisible('[data-field="lease"]')).toBe(true);
    await page.goto(`${base}/admin/#/policies/${POLICY}`);
    await page.waitForSelector("#edit-policy");
  });

  it("a token bucket refilled by interval: the document says so, an edit keeps it, a change of algorithm drops it", async () => {
    const admin = await adminToken();
    const name = "steps.bucket";
    const made = await api("POST", "/v1/admin/policies", {
      token: admin,
      body: {
        name,
        algorithm: "token-bucket",
        refill: "interval",
        rules: [{ limit: 2, period: "1s", burst: 5 }],
      },
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    await page.goto(`${base}/admin/#/policies/${name}`);
    await page.waitForSelector("#edit-policy");
    expect(await page.textContent("#enforced")).toContain(
      "Refillthe rule's limit at once, every whole period from each key's first request",
    );
    await page.click("#edit-policy");
    await page.waitForSelector("#policy-form");
    await page.fill('[data-field="rules.0.limit"] input', "3");
    await page.click("#save-policy");
    await expect.poll(() => page.textContent("#document-version")).toBe("Version 2");
    const doc = async () => (await api("GET", `/v1/admin/policies/${name}`, { token: admin })).body;
    expect(await doc()).toMatchObject({ refill: "interval", rules: [{ limit: 3 }] });
    // Another algorithm: the form does not send what only applies to token buckets.
    await page.click("#edit-policy");
    await page.waitForSelector("#policy-form");
    await page.selectOption("#policy-form select[name=algorithm]", "gcra");
    await page.click("#save-policy");
    await expect.poll(() => page.textContent("#document-version")).toBe("Version 3");
    expect(await doc()).not.toHaveProperty("refill");
    expect(
      (await api("DELETE", `/v1/admin/policies/${name}`, { token: admin })).status,
    ).toBeLessThan(300);
    await page.goto(`${base}/admin/#/policies/${POLICY}`);
    await page.waitForSelector("#edit-policy");
  });

  it("a calendar quota: a period of `month` shows the time zone and anchor; a bad zone is named, a good one saved", async () => {
    const admin = await adminToken();
    const name = "monthly.quota";
    await page.goto(`${base}/admin/#/policies`);
    await page.click("#new-policy");
    await page.waitForSelector("#policy-form");
    await page.fill("#policy-form input[name=name]", name);
    await page.selectOption("#policy-form select[name=algorithm]", "fixed-window");
    const zone = page.locator('#policy-form [data-field="rules.0.timeZone"]');
    expect(await zone.isHidden()).toBe(true);
    await page.fill('[data-field="rules.0.limit"] input', "5000");
    await page.fill('[data-field="rules.0.period"] input', "month");
    await expect.poll(() => zone.isVisible()).toBe(true);
    await page.fill('[data-field="rules.0.timeZone"] input', "Europe/Atlantis");
    await page.fill('[data-field="rules.0.anchor"] input', "15");
    await page.check('#policy-form input[name=apps][value="checkout"]');
    await page.click("#save-policy");
    await expect
      .poll(() => zone.locator(".field-error").textContent())
      .toContain('timeZone "Europe/Atlantis" is not a time zone');
    expect((await api("GET", `/v1/admin/policies/${name}`, { token: admin })).status).toBe(404);
    await page.fill('[data-field="rules.0.timeZone"] input', "Europe/Berlin");
    await page.click("#save-policy");
    await expect.poll(() => page.textContent("#document-version")).toBe("Version 1");
    const doc = (await api("GET", `/v1/admin/policies/${name}`, { token: admin })).body;
    expect(doc).toMatchObject({
      algorithm: "fixed-window",
      rules: [{ limit: 5000, calendar: "month", timeZone: "Europe/Berlin", anchor: 15 }],
    });
    expect(await page.textContent("#enforced")).toContain(
      "5000 / month (Europe/Berlin, anchor 15)",
    );
    // An edit keeps the calendar rule as it was.
    await page.click("#edit-policy");
    await page.waitForSelector("#policy-form");
    expect(await page.inputValue('[data-field="rules.0.calendar"] input')).toBe("month");
    await page.fill('[data-field="rules.0.limit"] input', "6000");
    await page.click("#save-policy");
    await expect.poll(() => page.textContent("#document-version")).toBe("Version 2");
    expect((await api("GET", `/v1/admin/policies/${name}`, { token: admin })).body).toMatchObject({
      rules: [{ limit: 6000, calendar: "month", timeZone: "Europe/Berlin", anchor: 15 }],
    });
    expect(
      (await api("DELETE", `/v1/admin/policies/${name}`, { token: admin })).status,
    ).toBeLessThan(300);
    await page.goto(`${base}/admin/#/policies/${POLICY}`);
    await page.waitForSelector("#edit-policy");
  });

  it("a refused action disarms its button, and its message does not follow you", async () => {
    // Deleting an app that a policy is granted to is refused.
    await page.goto(`${base}/admin/#/apps`);
    const del = page.locator('tr[data-app="checkout"] button.danger', { hasText: /delete/i });
    await del.click();
    expect(await del.textContent()).toBe("Click again to delete");
    await del.click();
    await expect.poll(() => page.textContent("#flash")).toContain("revoke them first");
    expect(await del.textContent()).toBe("Delete");
    // The next page starts without the last one's message.
    await page.click('nav a[data-page="policies"]');
    await page.waitForSelector(`tr[data-policy="${POLICY}"]`);
    expect(await page.textContent("#flash")).toBe("");
  });

  it("charts traffic from the service's history: the same after a reload, shadow would-denials shown", async () => {
    const admin = await adminToken();
    for (const body of [
      { name: "search.shadow", rules: [{ limit: 1, period: "1m" }], shadow: true },
      { name: "idle.policy", rules: [{ limit: 1, period: "1s" }] },
    ])
      expect(
        (
          await api("POST", "/v1/admin/policies", {
            token: admin,
            body: { ...body, apps: ["checkout"] },
          })
        ).status,
      ).toBe(201);
    // Limit 4/min since the promotion: 4 pass, 6 are denied.
    for (let i = 0; i < 10; i++)
      expect((await decide(apiKey, POLICY, "user-1")).allowed, `request ${i + 1}`).toBe(i < 4);
    // A shadow policy lets everything pass: one allowed, two would have been denied.
    for (let i = 0; i < 3; i++)
      expect((await decide(apiKey, "search.shadow", "u")).allowed).toBe(true);

    await page.goto(`${base}/admin/#/policies/${POLICY}?window=5m`);
    const totals = page.locator("#traffic-totals");
    await expect.poll(() => totals.getAttribute("data-denied"), { timeout: 10_000 }).toBe("6");
    expect(await totals.getAttribute("data-allowed")).toBe("4");
    expect(await page.locator('#traffic g[data-series="denied"]').getAttribute("data-total")).toBe(
      "6",
    );
    expect(await page.textContent('#traffic-by tr[data-app="checkout"]')).toContain("60%");
    // Not counted since the page opened: read from the service, so a reload shows the same.
    await page.reload();
    await expect.poll(() => totals.getAttribute("data-denied")).toBe("6");
    expect(await totals.getAttribute("data-allowed")).toBe("4");

    await page.goto(`${base}/admin/#/policies/search.shadow`);
    await expect.poll(() => totals.getAttribute("data-shadow")).toBe("2");
    expect(await totals.textContent()).toContain("shadow would-deny 2");
    // Would-denials passed: not denied, and shown apart as such.
    expect(await totals.textContent()).toContain("0% denied");
    expect(await totals.textContent()).toContain("67% would deny (shadow)");
    await expect
      .poll(() => page.locator('#top-shadow tr[data-key="u"]').getAttribute("data-count"))
      .toBe("2");
    expect(await page.textContent("#top-shadow h3")).toBe("Most would-deny (shadow)");
    expect(await page.textContent("#top-denied")).toContain("No denials.");
    // An idle policy takes a line, not a chart.
    await page.goto(`${base}/admin/#/policies/idle.policy`);
    await page.waitForSelector("#traffic-idle");
    expect(await page.$("#traffic figure.chart")).toBeNull();
  });

  it("shows every policy in the overview, denials first, with a sparkline; idle ones take a row", async () => {
    await page.goto(`${base}/admin/#/`);
    const rows = page.locator("#overview tbody tr");
    await expect.poll(() => rows.count()).toBe(3);
    expect(await rows.evaluateAll((rs) => rs.map((r) => r.getAttribute("data-policy")))).toEqual([
      POLICY,
      "search.shadow",
      "idle.policy",
    ]);
    const first = page.locator(`#overview tr[data-policy="${POLICY}"]`);
    expect(await first.locator("svg.spark").getAttribute("data-denied")).toBe("6");
    expect(await first.locator("td.share").textContent()).toBe("60%");
    // The shadow policy denied nothing: its would-deny share is apart, and so is its count.
    expect(
      await page.locator('#overview tr[data-policy="search.shadow"] td.share').textContent(),
    ).toBe("0% · 67% would deny");
    const summary = (await page.textContent("#overview-summary")) ?? "";
    expect(await page.textContent("#overview-summary > div:first-child")).toBe("3 policies");
    expect(summary).toContain("6 denied in 5 min");
    expect(summary).toContain("2 would deny (shadow) in 5 min");
    expect(await page.locator('#overview tr[data-policy="idle.policy"]').textContent()).toContain(
      "idle",
    );
    expect(await page.$('#overview tr[data-policy="idle.policy"] svg')).toBeNull();
    // One time format, 24-hour like the chart's axis.
    expect(await page.textContent("#overview-status")).toMatch(/^Updated \d{2}:\d{2}:\d{2} · /);
    // Traffic exists now: the first steps are no longer shown.
    expect(await page.$("#getting-started")).toBeNull();
  });

  it("lists the top keys, looks one up and unblocks it (audited)", async () => {
    await page.goto(`${base}/admin/#/policies/${POLICY}`);
    const denied = page.locator('#top-denied tr[data-key="user-1"]');
    await expect.poll(() => denied.getAttribute("data-count")).toBe("6");
    expect(await page.textContent("#top-denied thead th:nth-child(2)")).toBe("Denials");
    expect(await page.textContent("#top-busiest thead th:nth-child(2)")).toBe("Decisions");
    expect(
      await page.locator('#top-busiest tr[data-key="user-1"]').getAttribute("data-count"),
    ).toBe("10");
    await denied.locator("button.pick").click();
    const result = page.locator("#lookup-result .decision").first();
    await expect.poll(() => result.getAttribute("data-allowed")).toBe("false");
    expect(await result.locator(".remaining").getAttribute("data-remaining")).toBe("0");
    // Why: the one rule (4 a minute) denies, and frees when the next decision would say.
    const why = page.locator("#explain-live");
    await expect.poll(() => why.getAttribute("data-allowed-now")).toBe("false");
    expect(await why.getAttribute("data-denying-rule")).toBe("0");
    expect(await why.getAttribute("data-denying-now")).toBe("true");
    expect(await why.getAttribute("data-answered-by")).toBe("store");
    expect(Number(await why.getAttribute("data-frees-in-ms"))).toBeGreaterThan(0);
    expect(await why.locator(".verdict").textContent()).toMatch(
      /^Denied by rule 1 \(4 per 60 s\) · frees in /,
    );
    expect(await why.locator('tr[data-rule="0"]').getAttribute("data-denies")).toBe("true");
    expect(await why.locator('tr[data-rule="0"]').textContent()).toContain("0 of 4");
    expect(await page.$("#explain-draft")).toBeNull();
    await page.click("#unblock-key");
    expect(await page.textContent("#unblock-key")).toBe("Click again to unblock");
    await page.click("#unblock-key");
    await expect.poll(() => page.textContent("#lookup-result")).toContain('Unblocked "user-1"');
    expect(await result.getAttribute("data-allowed")).toBe("true");
    expect(await result.locator(".remaining").getAttribute("data-remaining")).toBe("4");
    expect(await why.getAttribute("data-allowed-now")).toBe("true");
    expect(await why.locator(".verdict").textContent()).toBe(
      "Passes · rule 1 (4 per 60 s) will deny first (4 left)",
    );
    expect((await decide(apiKey, POLICY, "user-1")).allowed).toBe(true);
    // On the Keys page a lookup goes into the address: a reload shows the same key.
    await page.goto(`${base}/admin/#/keys?policy=${POLICY}`);
    await page.fill("#lookup-key", "user-1");
    await page.click("#lookup");
    await page.waitForSelector("#lookup-result .decision");
    expect(new URL(page.url()).hash).toBe(`#/keys?policy=${POLICY}&key=user-1`);
    await page.reload();
    await page.waitForSelector("#lookup-result .decision");
    expect(await page.inputValue("#lookup-key")).toBe("user-1");
    const admin = await adminToken();
    const audit = await api("GET", "/v1/admin/audit?action=key.reset", { token: admin });
    expect(audit.body.entries[0]).toMatchObject({
      actor: ADMIN.username,
      target: POLICY,
      detail: { key: "user-1", before: { allowed: false }, after: { allowed: true } },
    });
  });

  it("ranks a flat load's busiest keys as they were, each count exact or a range from its lower bound to its upper", async () => {
    const admin = await adminToken();
    const send = async (policy: string, keys: readonly string[]) => {
      for (let i = 0; i < keys.length; i += 1000) {
        const requests = keys.slice(i, i + 1000).map((key) => ({ policy, key }));
        const r = await api("POST", "/v1/limit/batch", { token: apiKey, body: { requests } });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
      }
    };
    const rowsOf = (p: Page) =>
      p.$$eval("#top-busiest tr[data-key]", (trs) =>
        trs.map((tr) => ({
          key: tr.getAttribute("data-key"),
          upper: Number(tr.getAttribute("data-count")),
          lower: Number(tr.getAttribute("data-lower")),
          shown: tr.querySelector("td.num")?.textContent,
        })),
      );
    for (const name of ["flat.load", "wide.load"]) {
      const created = await api("POST", "/v1/admin/policies", {
        token: admin,
        body: { name, rules: [{ limit: 1_000_000, period: "1m" }], apps: ["checkout"] },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
    }

    // Issue 32's load: 30% on one key, the rest over 300 keys (14–18 each), in this minute.
    const load = flatLoad(1);
    await send("flat.load", load.parts[0]!);
    await page.goto(`${base}/admin/#/policies/flat.load`);
    await expect.poll(async () => (await rowsOf(page)).length).toBe(20);
    const rows = await rowsOf(page);
    expect(new Set(rows.slice(0, 10).map((r) => r.key))).toEqual(
      new Set(load.ranked.slice(0, 10).map((r) => r.key)),
    );
    for (const r of rows) {
      const truth = load.truth.get(r.key!)!;
      expect(r.upper, r.key!).toBeLessThanOrEqual(2 * truth);
      expect(r.lower, r.key!).toBeLessThanOrEqual(truth);
      // Exact: one number, the true count.
      expect(r.shown, r.key!).toBe(truth.toLocaleString("en-US"));
    }
    expect(await page.textContent("#top-keys-bounds")).toBe("Every count shown is exact.");

    // More distinct keys in a minute than a sketch holds (1,000): the tail shows ranges. The
    // hot key comes every tenth decision, so each minute's sketch watches it from its start.
    const wide: string[] = [];
    for (let i = 0; i < 2500; i++) wide.push(...(i % 10 === 0 ? ["hot", `w${i}`] : [`w${i}`]));
    await send("wide.load", wide);
    await page.goto(`${base}/admin/#/policies/wide.load`);
    await expect.poll(async () => (await rowsOf(page)).length).toBe(20);
    const [hot, ...tail] = await rowsOf(page);
    expect(hot).toEqual({ key: "hot", upper: 250, lower: 250, shown: "250" });
    const range = tail.find((r) => r.lower < r.upper)!;
    expect(range.shown).toBe(`${range.lower}–${range.upper}`);
    expect(await page.getAttribute("#top-keys-bounds", "data-ranges")).toBe("true");
    expect(await page.textContent("#top-keys-bounds")).toContain(
      "the key made at least the first number and at most the second",
    );
  });

  it("refreshes a draft's shadow counts while the policy page is open", async () => {
    const admin = await adminToken();
    const name = "draft.refresh";
    const created = await api("POST", "/v1/admin/policies", {
      token: admin,
      body: { name, rules: [{ limit: 100, period: "1h", burst: 5 }], apps: ["checkout"] },
    });
    expect(created.status).toBe(201);
    const put = await api("PUT", `/v1/admin/policies/${name}/draft`, {
      token: admin,
      body: { name, rules: [{ limit: 1, period: "1m" }], apps: ["checkout"], expectVersion: 1 },
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    await page.goto(`${base}/admin/#/policies/${name}`);
    await page.waitForSelector("#draft-stats");
    expect(await page.textContent("#draft-stats")).not.toContain("Evaluated 3");
    for (let i = 0; i < 3; i++) expect((await decide(apiKey, name, "k")).allowed).toBe(true);
    // No reload: the counts follow on the Traffic card's cadence.
    await expect
      .poll(() => page.textContent("#draft-stats"))
      .toContain("Evaluated 3 · would deny 2 · would newly deny 2");
    // A lookup counts against the capacity (burst 5 of gcra 100/h), not the limit.
    await page.fill("#lookup-key", "k");
    await page.click("#lookup");
    const enforced = page.locator("#lookup-result .decision").first();
    await expect.poll(() => enforced.textContent()).toContain("2 of 5 left");
    expect(await enforced.textContent()).toContain("fully replenished in");
    // Why, beside each other: the enforced version passes; the draft (1 a minute, on its own
    // keys) denies by its one rule.
    const live = page.locator("#explain-live");
    const draft = page.locator("#explain-draft");
    await expect.poll(() => draft.getAttribute("data-allowed-now")).toBe("false");
    expect(await live.getAttribute("data-allowed-now")).toBe("true");
    expect(await live.locator(".verdict").textContent()).toBe(
      "Passes · rule 1 (100 per 60 min) will deny first (2 left)",
    );
    expect(await draft.getAttribute("data-denying-rule")).toBe("0");
    expect(await draft.locator("h3").textContent()).toMatch(/^Draft #\d+$/);
    expect(await draft.locator(".verdict").textContent()).toMatch(
      /^Denied by rule 1 \(1 per 60 s\) · frees in /,
    );
    expect(await draft.locator('tr[data-rule="0"]').getAttribute("data-denies")).toBe("true");
    // Untouched: everything left is "full", with no replenish time.
    await page.fill("#lookup-key", "fresh");
    await page.click("#lookup");
    await expect.poll(() => enforced.textContent()).toContain("5 of 5 left · full");
    expect(await enforced.textContent()).not.toContain("replenished");
    // A new version behind the page's back: the draft is stale, and promoting it is refused
    // in the console's words, not the API's.
    const updated = await api("PUT", `/v1/admin/policies/${name}`, {
      token: admin,
      body: { name, rules: [{ limit: 50, period: "1h", burst: 5 }], apps: ["checkout"] },
    });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    await page.reload();
    await page.waitForSelector("#draft .notice.error");
    await page.click("#promote-draft");
    await expect
      .poll(() => page.textContent("#flash"))
      .toContain("Save it again from the form, or discard it.");
    expect(await page.textContent("#flash")).not.toContain("PUT");
  });

  it("as viewer: reads the overview, history and top keys; may not unblock, edit, or open the new-policy form", async () => {
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

    const v = await newPage();
    try {
      await signIn(v, VIEWER);
      expect(await v.textContent("#whoami")).toBe("vera (viewer)");
      await v.waitForSelector(`#overview tr[data-policy="${POLICY}"]`);
      await v.click(`#overview tr[data-policy="${POLICY}"] a`);
      await v.waitForSelector("#read-only");
      expect(await v.textContent("#read-only")).toBe(
        "Read-only: your role cannot change this policy.",
      );
      await expect.poll(() => v.locator("#traffic-totals").getAttribute("data-denied")).toBe("6");
      await v.waitForSelector('#top-denied tr[data-key="user-1"]');
      await v.click('#top-denied tr[data-key="user-1"] button.pick');
      await v.waitForSelector("#lookup-result .decision");
      expect(await v.$("#unblock-key")).toBeNull();
      expect(await v.$("#edit-policy")).toBeNull();
      expect(await v.$("#delete-document")).toBeNull();
      expect(await v.$("button.restore")).toBeNull();
      await v.goto(`${base}/admin/#/policies`);
      await v.waitForSelector(`tr[data-policy="${POLICY}"]`);
      expect(await v.$("#new-policy")).toBeNull();
      // By URL: a message, not a form the service would refuse.
      await v.goto(`${base}/admin/#/policies/new`);
      await v.waitForSelector(".notice.error");
      expect(await v.textContent(".notice.error")).toContain("cannot create policies");
      expect(await v.$("#policy-form")).toBeNull();
      await v.goto(`${base}/admin/#/policies/${POLICY}/edit`);
      await v.waitForSelector(".notice.error");
      expect(await v.$("#policy-form")).toBeNull();
      const token = await login(VIEWER);
      const reset = await api("POST", `/v1/admin/policies/${POLICY}/key/reset`, {
        token,
        body: { key: "user-1" },
      });
      expect(reset.status).toBe(403);
    } finally {
      await v.context().close();
    }
  });

  it("as owner: unblocks keys of its policies; no Delete on a policy shared with another team's app", async () => {
    const admin = await adminToken();
    expect(
      (await api("POST", "/v1/admin/apps", { token: admin, body: { name: "billing" } })).status,
    ).toBe(201);
    for (const body of [
      { name: "billing.api", rules: [{ limit: 10, period: "1s" }], apps: ["billing"] },
      { name: "shared.api", rules: [{ limit: 10, period: "1s" }], apps: ["checkout", "billing"] },
    ])
      expect((await api("POST", "/v1/admin/policies", { token: admin, body })).status).toBe(201);
    expect(
      (
        await api("POST", "/v1/admin/users", {
          token: admin,
          body: { ...OWNER, role: "owner", apps: ["checkout"] },
        })
      ).status,
    ).toBe(201);

    const o = await newPage();
    try {
      await signIn(o, OWNER);
      await o.goto(`${base}/admin/#/policies/billing.api`);
      await o.waitForSelector("#read-only");
      expect(await o.textContent("#read-only")).toBe(
        "Read-only: this policy is not granted to any of your apps.",
      );
      expect(await o.$("#edit-policy")).toBeNull();
      // Shared with billing, which olga does not own: she may edit it but not delete it.
      await o.goto(`${base}/admin/#/policies/shared.api`);
      await o.waitForSelector("#shared-policy");
      expect(await o.$("#edit-policy")).not.toBeNull();
      expect(await o.$("#delete-document")).toBeNull();
      // Its own policy: Delete, and Unblock.
      await o.goto(`${base}/admin/#/policies/${POLICY}`);
      await o.waitForSelector("#delete-document");
      for (let i = 0; i < 4; i++) await decide(apiKey, POLICY, "user-2");
      await o.fill("#lookup-key", "user-2");
      await o.click("#lookup");
      await expect
        .poll(() => o.locator("#lookup-result .decision").first().getAttribute("data-allowed"))
        .toBe("false");
      await o.click("#unblock-key");
      await o.click("#unblock-key");
      await expect.poll(() => o.textContent("#lookup-result")).toContain('Unblocked "user-2"');
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
    } finally {
      await o.context().close();
    }
  });

  it("filters the audit log by who, action, object and time, each entry as before → after", async () => {
    await page.goto(`${base}/admin/#/audit`);
    await page.waitForSelector("#audit tbody tr[data-audit]");
    const actions = () =>
      page
        .locator("#audit tbody tr[data-audit]")
        .evaluateAll((rs) => rs.map((r) => r.getAttribute("data-action")));
    // From and Until are wide enough for a whole date and time with the picker (not cut short).
    for (const id of ["#audit-since", "#audit-until"])
      expect((await page.locator(id).boundingBox())?.width, id).toBeGreaterThanOrEqual(230);
    // The suggestions are every action the service records (its own list).
    const suggested = await page
      .locator("#audit-actions option")
      .evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value));
    expect(suggested).toEqual(
      expect.arrayContaining([
        "policy",
        "policy.draft.discard",
        "envoy",
        "envoy.draft.discard",
        "envoy.counters.reset",
        "app.rotate-key",
        "session.login",
      ]),
    );
    await page.fill("#audit-action", "policy");
    await page.fill("#audit-object", "SEARCH");
    await page.click("#audit-filter");
    await expect
      .poll(async () => (await actions()).every((a) => a?.startsWith("policy.")))
      .toBe(true);
    const objects = await page
      .locator("#audit tbody tr[data-audit] td:nth-child(4)")
      .allTextContents();
    expect(objects.every((t) => /search/i.test(t))).toBe(true);
    expect(await actions()).toEqual(
      expect.arrayContaining([
        "policy.create",
        "policy.update",
        "policy.restore",
        "policy.draft",
        "policy.promote",
      ]),
    );
    // The filter is in the address: a reload keeps it.
    expect(page.url()).toContain("action=policy");
    await page.reload();
    await page.waitForSelector("#audit tbody tr[data-audit]");
    expect(await page.inputValue("#audit-object")).toBe("SEARCH");
    // The update of v2, as a diff.
    const update = page
      .locator('#audit tr[data-action="policy.update"]', {
        has: page.locator('tr[data-path="rules.0.limit"]'),
      })
      .last();
    const limit = update.locator('tr[data-path="rules.0.limit"]');
    expect(await limit.locator("td.before").textContent()).toBe("5");
    expect(await limit.locator("td.after").textContent()).toBe("8");
    // Who: only vera's entries; a time range before everything: none.
    await page.click("#audit-clear");
    await page.fill("#audit-actor", VIEWER.username);
    await page.click("#audit-filter");
    await expect
      .poll(async () => {
        const who = await page
          .locator("#audit tbody tr[data-audit] td:nth-child(2)")
          .allTextContents();
        return who.length > 0 && who.every((w) => w === VIEWER.username);
      })
      .toBe(true);
    await page.fill("#audit-until", "2000-01-01T00:00");
    await page.click("#audit-filter");
    await page.waitForSelector("#audit-empty");
  });

  it("changes one's own password (as viewer)", async () => {
    const v = await newPage();
    try {
      await signIn(v, VIEWER);
      await v.click("#whoami");
      await v.waitForSelector("#password-form");
      await v.fill("#password-form input[name=currentPassword]", "wrong-password");
      await v.fill("#password-form input[name=newPassword]", "vera-password-2");
      await v.fill("#password-form input[name=repeat]", "vera-password-2");
      await v.click("#change-password");
      await expect
        .poll(() => v.textContent('#password-form [data-field="currentPassword"] .field-error'))
        .toBe("is not your current password");
      await v.fill("#password-form input[name=currentPassword]", VIEWER.password);
      await v.click("#change-password");
      await expect.poll(() => v.textContent("#flash")).toContain("Password changed");
      expect((await api("POST", "/v1/admin/login", { body: VIEWER })).status).toBe(401);
      VIEWER.password = "vera-password-2";
      expect(await login(VIEWER)).toMatch(/^st_/);
    } finally {
      await v.context().close();
    }
  });

  it("simulates a burst: every error at once in words, and lines that coincide drawn once", async () => {
    await page.goto(`${base}/admin/#/simulator?policy=${POLICY}`);
    await page.waitForSelector("#sim-form");
    // The policy takes leases (set above): the simulator says they change nothing it admits.
    expect(await page.isVisible("#sim-lease-note")).toBe(true);
    await page.selectOption("#sim-policy", "");
    expect(await page.isVisible("#sim-lease-note")).toBe(false);
    await page.fill('#sim-form [data-field="rules.0.limit"] input', "x");
    await page.fill('#sim-form [data-field="rules.0.period"] input', "1m");
    await page.fill('#sim-form [data-field="rules.0.burst"] input', "");
    await page.selectOption("#sim-kind", "burst");
    await page.fill("#sim-size", "lots");
    await page.fill("#sim-every", "0");
    await page.fill("#sim-duration", "");
    await page.click("#sim-run");
    const error = (f: string) => page.textContent(`#sim-form [data-field="${f}"] .field-error`);
    expect(await error("size")).toBe('Burst size must be a whole number (got "lots")');
    expect(await error("durationMs")).toBe("Duration is required: a number of at least 0.001");
    expect(await error("rules.0.limit")).toMatch(/limit must be a positive integer/);
    const box = (await page.textContent("#sim-error")) ?? "";
    expect(box).toBe("Cannot simulate: fix the fields marked above.");
    expect(await page.textContent("#sim-form")).not.toMatch(/NaN|durationMs|ratePerSec/);

    await page.fill('#sim-form [data-field="rules.0.limit"] input', "20");
    await page.fill("#sim-size", "100");
    await page.fill("#sim-duration", "60");
    await page.click("#sim-run");
    for (const alg of [
      "gcra",
      "token-bucket",
      "fixed-window",
      "sliding-window",
      "sliding-log",
      "concurrency",
    ])
      expect(await page.textContent(`tr[data-algorithm="${alg}"] .admitted`), alg).toBe(
        "admitted 20 of 100",
      );
    // Six algorithms admitting alike: one line, named after all of them.
    const lines = page.locator("#sim-results polyline");
    expect(await lines.count()).toBe(1);
    expect(await lines.first().getAttribute("data-series")).toBe("gcra");
    expect(await page.textContent("#sim-results figure .legend")).toContain(
      "gcra = token-bucket = fixed-window = sliding-window = sliding-log = concurrency",
    );
    expect(await lines.first().getAttribute("data-last")).toBe("20");
    // Bursts of 100 every 10 s: the windows admit 20 a minute, gcra refills (36 in all).
    await page.fill("#sim-every", "10");
    await page.click("#sim-run");
    expect(await page.textContent('tr[data-algorithm="fixed-window"] .admitted')).toBe(
      "admitted 20 of 600",
    );
    expect(await page.textContent('tr[data-algorithm="gcra"] .admitted')).toBe(
      "admitted 36 of 600",
    );
    expect(await lines.count()).toBe(2);
  });

  it("lists the embedded clients: app, host, version and the revision each runs", async () => {
    const policies = await connectPolicies({
      url: base,
      apiKey,
      store: memoryStore(),
      host: "checkout-1.internal",
    });
    try {
      expect((await policies.limit(POLICY, "user-2")).policy).toBe(POLICY);
      await page.click('nav a[data-page="clients"]');
      const row = page.locator("#clients tbody tr[data-client^='checkout/']");
      await row.waitFor();
      const cells = await row.locator("td").allTextContents();
      expect(cells[0]).toBe("checkout");
      expect(cells[1]).toContain("checkout-1.internal");
      expect(cells[2]).toBe("sluice/0.1.0");
      expect(cells[3]).toBe(String(policies.status().revision));
      expect(await page.textContent("#clients-summary")).toMatch(/^1 of 1 reporting/);
    } finally {
      await policies.close();
    }
  });

  it("says on the Envoy page that this node (no --grpc-port) does not serve the Envoy service", async () => {
    await page.goto(`${base}/admin/#/envoy`);
    await page.waitForSelector("#envoy-service-off");
    expect(await page.textContent("#envoy-service-off")).toContain(
      "This node does not serve the Envoy rate limit service: start sluice serve with --grpc-port",
    );
  });

  it("fits a 390 px screen: no page-wide horizontal scroll, the navigation reachable", async () => {
    const phone = await newPage(390, 844);
    try {
      await signIn(phone, ADMIN);
      for (const hash of [
        "/",
        `/policies/${POLICY}`,
        "/audit",
        "/apps",
        "/users",
        "/clients",
        "/simulator",
      ]) {
        await phone.goto(`${base}/admin/#${hash}`);
        await phone.waitForSelector("main#main h1");
        await phone.waitForLoadState("networkidle");
        const overflow = await phone.evaluate(
          () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
        );
        expect(overflow, hash).toBeLessThanOrEqual(0);
      }
      await phone.click('nav a[data-page="audit"]');
      await phone.waitForSelector("#audit-filters");
      // Each audit entry's Change is on screen, and a diff's Field column readable.
      const update = phone.locator('#audit tr[data-action="policy.update"]').first();
      const change = await update.locator("td.detail").boundingBox();
      expect(change && change.x >= 0 && change.x + change.width <= 390).toBe(true);
      const fieldCell = await update.locator("table.diff td").first().boundingBox();
      expect(fieldCell?.width).toBeGreaterThanOrEqual(80);
      // Users: the role menus are readable and Save is on screen.
      await phone.goto(`${base}/admin/#/users`);
      const olga = phone.locator(`tr[data-user="${OWNER.username}"]`);
      const role = await olga.locator("select").boundingBox();
      expect(role?.width).toBeGreaterThanOrEqual(80);
      const save = await olga.locator("button", { hasText: "Save" }).boundingBox();
      expect(save && save.x >= 0 && save.x + save.width <= 390).toBe(true);
    } finally {
      await phone.context().close();
    }
  });

  it("deletes an app and a user on a second click: said in the flash, gone from the list", async () => {
    const admin = await adminToken();
    const created = [
      await api("POST", "/v1/admin/apps", { token: admin, body: { name: "scratch" } }),
      await api("POST", "/v1/admin/users", {
        token: admin,
        body: { username: "sam", password: "sam-password", role: "viewer", apps: [] },
      }),
    ];
    expect(created.map((r) => r.status)).toEqual([201, 201]);
    for (const [hash, row, said] of [
      ["/apps", 'tr[data-app="scratch"]', "Deleted app scratch"],
      ["/users", 'tr[data-user="sam"]', "Deleted sam"],
    ] as const) {
      await page.goto(`${base}/admin/#${hash}`);
      const del = page.locator(`${row} button.danger`, { hasText: /delete/i });
      await del.click();
      expect(await page.$(row)).not.toBeNull();
      await del.click();
      await expect.poll(() => page.textContent("#flash")).toContain(said);
      await page.waitForSelector(row, { state: "detached" });
    }
    const apps = (await api("GET", "/v1/admin/apps", { token: admin })).body.apps;
    expect(apps.map((a: { name: string }) => a.name)).not.toContain("scratch");
  });

  it("provoked no 404 and no script error along the way", () => {
    expect(notFound).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});
