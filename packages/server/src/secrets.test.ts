import { describe, expect, it } from "vitest";
import {
  hashPassword,
  issueSecret,
  needsRehash,
  secretId,
  secretMatches,
  sha256,
  verifyPassword,
} from "./secrets.js";

describe("secrets", () => {
  it("issues keys with a public id and stores only their hash", () => {
    const k = issueSecret("sk");
    expect(k.secret).toMatch(/^sk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/);
    expect(secretId("sk", k.secret)).toBe(k.id);
    expect(secretId("st", k.secret)).toBeUndefined();
    expect(secretId("sk", "sk_zz_short")).toBeUndefined();
    expect(k.hash).toBe(sha256(k.secret));
    expect(secretMatches(k.secret, k.hash)).toBe(true);
    const last = k.secret.at(-1) === "x" ? "y" : "x";
    expect(secretMatches(`${k.secret.slice(0, -1)}${last}`, k.hash)).toBe(false);
    expect(secretMatches(k.secret, "abc")).toBe(false);
    expect(issueSecret("sk").secret).not.toBe(k.secret);
  });

  it("hashes passwords with scrypt at N=2^17, r=8, p=1 and checks them", async () => {
    const h = await hashPassword("correct horse");
    expect(h).toMatch(/^scrypt\$131072\$8\$1\$/);
    expect(h).not.toContain("correct horse");
    expect(await hashPassword("correct horse")).not.toBe(h);
    expect(await verifyPassword("correct horse", h)).toBe(true);
    expect(await verifyPassword("correct horsf", h)).toBe(false);
    expect(await verifyPassword("anything", undefined)).toBe(false);
    expect(await verifyPassword("anything", "garbage")).toBe(false);
  });

  it("tells a hash made with less work from a current one", async () => {
    const old = await hashPassword("pw", { N: 2 ** 14, r: 8, p: 1 });
    expect(await verifyPassword("pw", old)).toBe(true);
    expect(needsRehash(old)).toBe(true);
    expect(needsRehash(old, { N: 2 ** 14, r: 8, p: 1 })).toBe(false);
    expect(needsRehash(`scrypt$${2 ** 17}$8$1$a$b`)).toBe(false);
    expect(needsRehash(`scrypt$${2 ** 18}$8$1$a$b`)).toBe(false);
  });
});
