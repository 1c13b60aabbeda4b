import { describe, expect, it } from "vitest";
import { API_ERROR_CODES, ApiError, invalid } from "./errors.js";

describe("ApiError", () => {
  it("carries what was refused apart from its issues, whatever the subject holds", () => {
    const issues = [{ path: "rules.0.limit", message: "must be positive" }];
    const e = invalid('Invalid policy "tenant:42"', issues);
    expect(e.subject).toBe('Invalid policy "tenant:42"');
    expect(e.issues).toEqual(issues);
    expect(e.message).toBe('Invalid policy "tenant:42": rules.0.limit: must be positive');
    expect(e.status).toBe(400);
    expect(new ApiError("conflict", "taken").subject).toBeUndefined();
  });

  it("has a status for every code", () => {
    for (const [code, status] of Object.entries(API_ERROR_CODES))
      expect(new ApiError(code as keyof typeof API_ERROR_CODES, "x").status).toBe(status);
  });
});
