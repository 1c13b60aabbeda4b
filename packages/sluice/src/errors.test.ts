import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ERROR_CODES, SluiceError, ValidationError, isSluiceError } from "./errors.js";

describe("errors", () => {
  it("every code is documented in docs/errors.md", () => {
    const doc = readFileSync(new URL("../../../docs/errors.md", import.meta.url), "utf8");
    for (const code of ERROR_CODES) expect(doc, code).toContain(`\`${code}\``);
  });

  it("carry code, issues and cause", () => {
    const cause = new Error("low level");
    const e = new SluiceError("SLUICE_ERR_STORE", "store failed", { cause });
    expect(e.cause).toBe(cause);
    expect(isSluiceError(e, "SLUICE_ERR_STORE")).toBe(true);
    expect(isSluiceError(e, "SLUICE_ERR_KEY")).toBe(false);
    const v = new ValidationError("SLUICE_ERR_POLICY", "Invalid policy", [
      { path: "rules.0.limit", message: "must be positive" },
    ]);
    expect(v.message).toBe("Invalid policy: rules.0.limit: must be positive");
  });
});
