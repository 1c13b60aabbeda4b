import { describe, expect, it } from "vitest";
import { ApiError } from "../../errors.js";
import type { PolicyDocument } from "../../model.js";
import { assertCanEditPolicy } from "./policies.js";

const doc = (apps: string[]): PolicyDocument => ({
  name: "p",
  rules: [{ limit: 1, period: "1s" }],
  apps,
  enabled: true,
});
const allowed = (
  user: { role: "viewer" | "owner" | "admin"; apps: string[] },
  before?: string[],
  after?: string[],
) => {
  try {
    assertCanEditPolicy(user, before && doc(before), after && doc(after));
    return true;
  } catch (err) {
    // Only a refusal counts as "not allowed"; any other error fails the test.
    if (err instanceof ApiError && err.code === "forbidden") return false;
    throw err;
  }
};

describe("assertCanEditPolicy", () => {
  const owner = { role: "owner" as const, apps: ["web"] };
  it.each([
    ["admin edits anything", { role: "admin" as const, apps: [] }, ["x"], ["y"], true],
    ["viewer edits nothing", { role: "viewer" as const, apps: ["web"] }, ["web"], ["web"], false],
    ["owner edits a policy granted to its app", owner, ["web"], ["web"], true],
    [
      "owner edits a shared policy, keeping the other grant",
      owner,
      ["web", "x"],
      ["web", "x"],
      true,
    ],
    ["owner adds and removes its own app", owner, ["web", "x"], ["x", "web"], true],
    ["owner cannot touch a policy of another app", owner, ["x"], ["x", "web"], false],
    ["owner cannot grant an app it does not own", owner, ["web"], ["web", "x"], false],
    ["owner cannot revoke an app it does not own", owner, ["web", "x"], ["web"], false],
    ["owner cannot orphan a policy from its apps", owner, ["web"], [], false],
    ["owner creates a policy for its app", owner, undefined, ["web"], true],
    ["owner cannot create a policy for another app", owner, undefined, ["x"], false],
    ["owner deletes a policy of its app", owner, ["web"], undefined, true],
  ])("%s", (_name, user, before, after, expected) => {
    expect(allowed(user, before, after)).toBe(expected);
  });
});
