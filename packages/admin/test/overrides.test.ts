/**
 * A policy's per-key overrides in the console, in a real browser against the real service (the
 * built `sluice serve`, SQLite in a temp dir, Debian's Chromium through playwright-core): the
 * list a page at a time, adding one (and the decision API answering by it), a refusal shown at
 * the field it names, changing one, deleting one (audited), and a viewer's read-only list.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  ADMIN_DIST,
  CHROMIUM,
  CLI,
  type Chromium,
  type Credentials,
  type Served,
  answers,
  closeSuite,
  createUser,
  launchChromium,
  requireFiles,
  signIn as signInAt,
  startServe,
} from "./helpers.js";

vi.setConfig({ expect: { poll: { timeout: 10_000, interval: 50 } } });

const ADMIN = { username: "root", password: "root-password-1" };
const VIEWER = { username: "vera", password: "vera-password-1" };

let dataDir: string;
let base: string;
let server: Served | undefined;
let chromium: Chromium | undefined;
let page: Page;
let token = "";
let appKey = "";
const pageErrors: string[] = [];
const notFound: string[] = [];

const api = (method: string, path: string, body?: unknown) =>
  server!.api(method, path, { token, ...(body !== undefined ? { body } : {}) });
const signIn = (p: Page, u: Credentials) => signInAt(p, base, u);
/** The limit a decision of `key` under `plan` reports. */
const limitOf = async (key: string) =>
  (await server!.api("POST", "/v1/limit", { token: appKey, body: { policy: "plan", key } })).body
    .limit as number;
const rowKeys = (p: Page) =>
  p.$$eval("#overrides-table tbody tr", (rows) => rows.map((r) => r.getAttribute("data-key")));

beforeAll(async () => {
  requireFiles(
    [CLI, ADMIN_DIST, CHROMIUM].map(
      (file) => [file, "npm run build; scripts/install-test-deps.sh"] as const,
    ),
  );
  dataDir = mkdtempSync(join(tmpdir(), "sluice-admin-overrides-"));
  await createUser(dataDir, ADMIN, "admin");
  await createUser(dataDir, VIEWER, "viewer");
  server = await startServe({
    args: ["--data-dir", dataDir, "--log-level", "warn", "--poll-interval-ms", "100"],
    ready: answers("/healthz"),
  });
  base = server.base;
  token = (await server.api("POST", "/v1/admin/login", { body: ADMIN })).body.token as string;
  appKey = (await api("POST", "/v1/admin/apps", { name: "web" })).body.apiKey as string;
  const created = await api("POST", "/v1/admin/policies", {
    name: "plan",
    algorithm: "fixed-window",
    rules: [{ limit: 2, period: "1m" }],
    apps: ["web"],
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  // 25 overrides: two pages of the console's 20.
  for (let i = 0; i < 25; i++) {
    const r = await api(
      "PUT",
      `/v1/admin/policies/plan/overrides/t:${String(i).padStart(2, "0")}`,
      {
        rules: [{ limit: 10 + i, period: "1m" }],
      },
    );
    expect(r.status).toBe(201);
  }
  chromium = await launchChromium({ pageErrors, notFound });
  page = await chromium.newPage();
  await signIn(page, ADMIN);
}, 120_000);

afterAll(() => closeSuite({ chromium, server, dataDir }));

describe("per-key overrides in the console", () => {
  it("lists them a page at a time", async () => {
    await page.goto(`${base}/admin/#/policies/plan`);
    await page.waitForSelector("#overrides-table");
    expect(await rowKeys(page)).toHaveLength(20);
    expect(await page.textContent("#overrides-total")).toBe("25 in all");
    expect(await page.textContent('#overrides-table tr[data-key="t:03"]')).toContain("13 / 1m");
    await page.click("#overrides-next");
    await expect.poll(() => rowKeys(page)).toEqual(["t:20", "t:21", "t:22", "t:23", "t:24"]);
    await page.click("#overrides-prev");
    await expect.poll(async () => (await rowKeys(page))[0]).toBe("t:00");
    // Filtered by a key prefix.
    await page.fill("#override-prefix", "t:2");
    await page.press("#override-prefix", "Enter");
    await expect.poll(() => page.textContent("#overrides-total")).toBe("5 in all");
    await page.fill("#override-prefix", "");
    await page.press("#override-prefix", "Enter");
    await expect.poll(() => page.textContent("#overrides-total")).toBe("25 in all");
  });

  it("adds one, and the decision API answers by it", async () => {
    await page.fill("#override-form input[name=key]", "acme");
    await page.fill("#override-form input[name=limit]", "7");
    await page.click("#save-override");
    await page.waitForSelector('#overrides-table tr[data-key="acme"]');
    expect(await page.textContent('#overrides-table tr[data-key="acme"]')).toContain("7 / 1m");
    expect(await limitOf("acme")).toBe(7);
    expect(await limitOf("globex")).toBe(2);
  });

  it("shows a refusal at the field it names, and saves nothing", async () => {
    await page.fill("#override-form input[name=key]", "bad");
    await page.fill("#override-form input[name=limit]", "-1");
    await page.click("#save-override");
    await expect
      .poll(() => page.textContent('#override-form [data-field="rules.0.limit"] .field-error'))
      .toMatch(/\S/);
    expect((await api("GET", "/v1/admin/policies/plan/overrides/bad")).status).toBe(404);
    await page.fill("#override-form input[name=key]", "");
    await page.fill("#override-form input[name=limit]", "3");
    await page.click("#save-override");
    await expect
      .poll(() => page.textContent('#override-form [data-field="key"] .field-error'))
      .toBe("is required");
  });

  it("changes one", async () => {
    await page.click('#overrides-table tr[data-key="acme"] .edit-override');
    await expect.poll(() => page.inputValue("#override-form input[name=key]")).toBe("acme");
    await page.fill("#override-form input[name=limit]", "9");
    await page.click("#save-override");
    await expect
      .poll(() => page.textContent('#overrides-table tr[data-key="acme"]'))
      .toContain("9 / 1m");
    expect(await limitOf("acme")).toBe(9);
  });

  it("deletes one (a second click confirms), audited", async () => {
    const del = '#overrides-table tr[data-key="acme"] button.danger';
    await page.click(del);
    await page.click(del);
    await expect.poll(() => page.$('#overrides-table tr[data-key="acme"]')).toBeNull();
    expect((await api("GET", "/v1/admin/policies/plan/overrides/acme")).status).toBe(404);
    expect(await limitOf("acme")).toBe(2);
    const audit = await api("GET", "/v1/admin/audit?action=policy.override");
    expect(audit.body.entries.slice(0, 3).map((e: { action: string }) => e.action)).toEqual([
      "policy.override.delete",
      "policy.override.put",
      "policy.override.put",
    ]);
  });

  it("a viewer sees the list, and no form", async () => {
    const viewer = await chromium!.newPage();
    await signIn(viewer, VIEWER);
    await viewer.goto(`${base}/admin/#/policies/plan`);
    await viewer.waitForSelector("#overrides-table");
    expect(await rowKeys(viewer)).toHaveLength(20);
    expect(await viewer.$("#override-form")).toBeNull();
    expect(await viewer.$(".edit-override")).toBeNull();
  });

  it("met no script error and no 404", () => {
    expect(pageErrors).toEqual([]);
    expect(notFound).toEqual([]);
  });
});
