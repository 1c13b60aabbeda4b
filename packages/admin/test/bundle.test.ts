/**
 * The browser bundle (dist/app.js, built by `npm run build`): the page takes its API types from
 * the API contract's schemas (@sluice/api) through `import type`, which leaves no schema code
 * behind.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const bundle = readFileSync(new URL("../dist/app.js", import.meta.url), "utf8");
const schemas = ["schemas.ts", "envoy.ts", "documents.ts"]
  .map((f) => readFileSync(new URL(`../../api/src/${f}`, import.meta.url), "utf8"))
  .join("\n");

describe("the admin page's bundle", () => {
  it("holds the page", () => {
    expect(bundle).toContain("sluice.admin.session");
  });

  it("holds none of the API's schemas", () => {
    // Every description text of the schemas: present in the bundle only if their code were.
    const texts = [...schemas.matchAll(/description: "([^"]{12,})"/g)].map((m) => m[1]!);
    expect(texts.length).toBeGreaterThan(10);
    expect(texts.filter((t) => bundle.includes(t))).toEqual([]);
  });
});
