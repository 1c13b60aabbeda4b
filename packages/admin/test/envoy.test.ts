/**
 * The admin page's Envoy view in a real browser against the real service (the built
 * `sluice serve` with its Envoy service on, SQLite in a temp dir, Debian's Chromium through
 * playwright-core): import a reference-format file, see the descriptor tree, the traffic and top
 * keys of real gRPC decisions, peek and reset a descriptor's counter, save a draft and see its
 * diff, compare versions, and a viewer's read-only view.
 */
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../test/support/ports.js";
import { rlsClient } from "../../server/test/envoy-client.js";
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

const ADMIN = { username: "root", password: "root-password-1" };
const VIEWER = { username: "vera", password: "vera-password-1" };
const CONFIG = `domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: day
      requests_per_unit: 3
  - key: path
    value: /api/*
    shadow_mode: true
    rate_limit:
      name: api
      unit: minute
      requests_per_unit: 100
`;

let dataDir: string;
let shots: string;
let base: string;
let grpcPort: number;
let server: Served | undefined;
let chromium: Chromium | undefined;
let page: Page;
const pageErrors: string[] = [];
/** Every request the browser saw answered 404 (the page should provoke none). */
const notFound: string[] = [];

const signIn = (p: Page, u: Credentials) => signInAt(p, base, u);

beforeAll(async () => {
  requireFiles(
    [CLI, ADMIN_DIST, CHROMIUM].map(
      (file) => [file, "npm run build; scripts/install-test-deps.sh"] as const,
    ),
  );
  dataDir = mkdtempSync(join(tmpdir(), "sluice-admin-envoy-"));
  shots =
    process.env.SLUICE_ADMIN_SCREENSHOTS ?? mkdtempSync(join(tmpdir(), "sluice-admin-shots-"));
  mkdirSync(shots, { recursive: true });
  for (const [u, role] of [
    [ADMIN, "admin"],
    [VIEWER, "viewer"],
  ] as const)
    await createUser(dataDir, u, role);
  grpcPort = await freePort();
  server = await startServe({
    args: ["--grpc-port", String(grpcPort), "--data-dir", dataDir, "--log-level", "warn"],
    ready: answers("/healthz"),
  });
  base = server.base;
  chromium = await launchChromium({ pageErrors, notFound });
  page = await chromium.newPage(1280, 900);
}, 60_000);

afterAll(() => closeSuite({ chromium, server, dataDir }));

describe("the Envoy page in Chromium", () => {
  it("imports a reference file and shows the domain's descriptor tree", async () => {
    await signIn(page, ADMIN);
    await page.goto(`${base}/admin/#/envoy`);
    await page.waitForSelector("#envoy-empty");
    // This node serves the Envoy service (--grpc-port): no notice saying otherwise.
    expect(await page.$("#envoy-service-off")).toBeNull();
    // A bad file is refused with the service's message.
    await page.fill("#envoy-import-yaml", CONFIG.replace("unit: day", "unit: eon"));
    await page.click("#envoy-import-submit");
    await expect
      .poll(() => page.textContent("#envoy-import .form-error"))
      .toMatch(/invalid rate limit unit 'eon'/);
    await page.fill("#envoy-import-yaml", CONFIG);
    await page.click("#envoy-import-submit");
    await page.waitForSelector("#envoy-domains tr[data-domain=edge]");
    expect(await page.textContent("#flash")).toContain("Imported: 1 created");
    await page.screenshot({ path: join(shots, "envoy-domains.png"), fullPage: true });
    await page.click("#envoy-domains a");
    await page.waitForSelector("#envoy-limits");
    const rows = await page.$$eval("#envoy-limits tbody tr", (trs) =>
      trs.map((tr) => Array.from(tr.querySelectorAll("td"), (td) => td.textContent).slice(0, 5)),
    );
    expect(rows).toEqual([
      ["edge.remote_address", "3 / day", "fixed-window", "", ""],
      ["edge.path_/api/*", "100 / minute", "fixed-window", "shadow", "api"],
    ]);
    expect(await page.inputValue("#envoy-yaml")).toContain("requests_per_unit: 3");
  });

  it("peeks and resets a descriptor's counter after real gRPC decisions", async () => {
    const rls = rlsClient(`127.0.0.1:${grpcPort}`);
    try {
      for (let i = 0; i < 2; i++)
        await rls.shouldRateLimit({
          domain: "edge",
          descriptors: [{ entries: [{ key: "remote_address", value: "10.0.0.7" }] }],
        });
    } finally {
      rls.close();
    }
    // Envoy's decisions are in the domain's traffic and its limit's top keys, as every door's.
    await page.reload();
    await page.waitForSelector("#envoy-limits");
    await expect
      .poll(() => page.getAttribute("#traffic-totals", "data-allowed"), { timeout: 15_000 })
      .toBe("2");
    expect(await page.textContent("#traffic-by")).toContain("edge.remote_address");
    await expect
      .poll(() => page.$$eval("#top-busiest tr[data-key]", (trs) => trs.map((t) => t.dataset.key)))
      .toEqual(["remote_address=10.0.0.7"]);
    // Looking a top key up peeks at its counter.
    await page.click("#top-busiest button.pick");
    await expect.poll(() => page.textContent("#envoy-counter")).toContain("remaining: 1 of 3");
    await page.fill("#envoy-entries", "remote_address=10.0.0.7");
    await page.click("#envoy-peek");
    await expect.poll(() => page.textContent("#envoy-counter")).toContain("remaining: 1 of 3");
    expect(await page.textContent("#envoy-counter")).toContain("key: remote_address=10.0.0.7");
    // Reset asks for a second click: the first only arms the button.
    await page.click("#envoy-reset");
    expect(await page.textContent("#envoy-reset")).toBe("Click again to reset");
    expect(await page.textContent("#envoy-counter")).toContain("remaining: 1 of 3");
    await page.click("#envoy-reset");
    await expect.poll(() => page.textContent("#envoy-counter")).toContain("counter reset");
    expect(await page.textContent("#envoy-reset")).toBe("Reset");
    await page.click("#envoy-peek");
    await expect.poll(() => page.textContent("#envoy-counter")).toContain("remaining: 3 of 3");
  });

  it("saves an edit as a draft that runs in shadow", async () => {
    await page.fill("#envoy-yaml", CONFIG.replace("requests_per_unit: 3", "requests_per_unit: 1"));
    await page.click("#envoy-save-draft");
    await page.waitForSelector("#draft");
    expect(await page.textContent("#draft")).toMatch(
      /Draft \d+, saved .* by root, based on version 1/,
    );
    // The draft against the enforced version, field by field.
    const limit = page.locator(
      '#draft-diff tr[data-path="descriptors.0.rate_limit.requests_per_unit"]',
    );
    expect(await limit.locator(".before").textContent()).toBe("3");
    expect(await limit.locator(".after").textContent()).toBe("1");
    await page.screenshot({ path: join(shots, "envoy-domain.png"), fullPage: true });
  });

  it("promotes the draft, and compares any two versions", async () => {
    await page.click("#promote-draft");
    await expect.poll(() => page.textContent("#document-version")).toBe("Version 2");
    expect(await page.$("#draft")).toBeNull();
    expect(await page.locator("#versions tbody tr").count()).toBe(2);
    const row = page.locator(
      '#version-diff-table tr[data-path="descriptors.0.rate_limit.requests_per_unit"]',
    );
    expect(await row.locator(".before").textContent()).toBe("3");
    expect(await row.locator(".after").textContent()).toBe("1");
    expect(await page.inputValue("#envoy-yaml")).toContain("requests_per_unit: 1");
  });

  it("fits a 390 px screen: the domain's tables scroll inside their card, not the page", async () => {
    const phone = await page
      .context()
      .browser()!
      .newPage({ viewport: { width: 390, height: 844 } });
    try {
      phone.on("pageerror", (e) => pageErrors.push(String(e)));
      await signIn(phone, ADMIN);
      for (const hash of ["/envoy", "/envoy/edge"]) {
        await phone.goto(`${base}/admin/#${hash}`);
        await phone.waitForSelector(hash === "/envoy" ? "#envoy-domains" : "#envoy-limits");
        const overflow = await phone.evaluate(
          () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
        );
        expect(overflow, hash).toBeLessThanOrEqual(0);
      }
      // The descriptor table is wider than the phone: its card's scroller takes the overflow.
      expect(
        await phone.$eval("#envoy-limits", (t) => {
          const box = t.parentElement!;
          return box.classList.contains("scroll") && box.scrollWidth > box.clientWidth;
        }),
      ).toBe(true);
    } finally {
      await phone.close();
    }
  });

  it("shows a viewer the same views, read-only", async () => {
    const viewerPage = await page.context().browser()!.newPage();
    try {
      await signIn(viewerPage, VIEWER);
      await viewerPage.goto(`${base}/admin/#/envoy`);
      await viewerPage.waitForSelector("#envoy-domains");
      expect(await viewerPage.$("#envoy-import")).toBeNull();
      await viewerPage.goto(`${base}/admin/#/envoy/edge`);
      await viewerPage.waitForSelector("#envoy-limits");
      expect(await viewerPage.$("#envoy-save")).toBeNull();
      expect(await viewerPage.$("#envoy-reset")).toBeNull();
      expect(
        await viewerPage.$eval("#envoy-yaml", (t) => (t as HTMLTextAreaElement).readOnly),
      ).toBe(true);
    } finally {
      await viewerPage.close();
    }
    expect(pageErrors).toEqual([]);
    // A domain without a draft does not ask for one.
    expect(notFound).toEqual([]);
  });
});
