/**
 * Per-key overrides through the HTTP middleware, on every adapter (real HTTP on loopback): the
 * middleware decides through the limiter, so a key with an override gets its rules — in the
 * decision and in the headers — and every other key the policy's.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createLimiter, memoryStore } from "sluice";
import { type Running, harnesses } from "../http/harness.js";

describe.each(harnesses)("$name adapter", (h) => {
  let running: Running | undefined;
  afterEach(async () => {
    await running?.close();
    running = undefined;
  });

  it("answers a key with an override by its rules, and others by the policy's", async () => {
    const t = 1_700_000_000_000;
    const limiter = createLimiter({
      store: memoryStore({ now: () => t }),
      policy: { name: "api", algorithm: "fixed-window", rules: [{ limit: 1, period: "1m" }] },
      overrides: { "tenant:big": { rules: [{ limit: 3, period: "1m" }] } },
    });
    running = await h.start({
      limiter,
      clock: () => t,
      key: (_req, http) => `tenant:${http.header("x-tenant") ?? "none"}`,
    });
    const status = async (tenant: string) => {
      const res = await fetch(running!.url, { headers: { "x-tenant": tenant } });
      await res.text();
      return [res.status, res.headers.get("x-ratelimit-limit")];
    };
    const big = [
      await status("big"),
      await status("big"),
      await status("big"),
      await status("big"),
    ];
    expect(big).toEqual([
      [200, "3"],
      [200, "3"],
      [200, "3"],
      [429, "3"],
    ]);
    expect([await status("small"), await status("small")]).toEqual([
      [200, "1"],
      [429, "1"],
    ]);
  });
});
