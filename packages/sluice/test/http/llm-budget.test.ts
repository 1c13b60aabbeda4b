/**
 * examples/llm-budget.mjs, the LLM budgets preset (docs/quotas.md), as a user runs it: importing
 * the built package, against a fake model, with the store's clock injected. Requests per
 * minute, tokens per minute and a calendar-month token budget in Europe/Berlin; estimates
 * reserved and settled with the model's usage.
 */
import { describe, expect, it } from "vitest";
import { memoryStore } from "../../src/index.js";

// The example imports "sluice" (the built package); the store made here is handed to it.
const example = new URL("../../../../examples/llm-budget.mjs", import.meta.url).href;
const { llmBudget } = (await import(example)) as {
  llmBudget: (o: object) => {
    complete: (
      team: string,
      prompt: string,
      model: (p: string) => Promise<{ text: string; usage: { total_tokens: number } }>,
      o: { estimate: number },
    ) => Promise<{ status: number; by?: string; retryAfterMs?: number; tokens?: number }>;
  };
};

describe("examples/llm-budget.mjs", () => {
  it("charges estimates, settles usage, and refuses by the minute, the requests and the month", async () => {
    // 2026-03-31 23:50 in Berlin (CEST, UTC+2): ten minutes before April's budget.
    let t = Date.UTC(2026, 2, 31, 21, 50);
    let calls = 0;
    const model = (usage: number) => async (p: string) => {
      calls++;
      return { text: p, usage: { total_tokens: usage } };
    };
    const budget = llmBudget({
      store: memoryStore({ now: () => t }),
      requestsPerMinute: 3,
      tokensPerMinute: 1_000,
      tokensPerMonth: 1_500,
      timeZone: "Europe/Berlin",
    });
    const ask = (usage: number, estimate = 400) =>
      budget.complete("team-7", "prompt", model(usage), { estimate });

    expect(await ask(300)).toMatchObject({ status: 200, tokens: 300 });
    expect(await ask(500)).toMatchObject({ status: 200, tokens: 500 });
    // 800 used this minute: an estimate of 400 does not fit; the model is not called, and the
    // request is given back (a third request still fits this minute).
    expect(await ask(400)).toEqual({
      status: 429,
      by: "tokens per minute",
      retryAfterMs: 60_000,
      remaining: 200,
    });
    expect(calls).toBe(2);
    expect(await ask(100, 100)).toMatchObject({ status: 200 });
    expect(await ask(100, 100)).toMatchObject({ status: 429, by: "requests per minute" });

    // The next minute: 900 of the month's 1,500 spent; 400 fits, then 200 more does not.
    t += 60_000;
    expect(await ask(400)).toMatchObject({ status: 200 });
    const month = await ask(200, 300);
    // April starts at 00:00 CEST (22:00 UTC), 9 minutes away.
    expect(month).toMatchObject({ status: 429, by: "tokens per month", retryAfterMs: 540_000 });
    t = Date.UTC(2026, 2, 31, 22);
    expect(await ask(1_000, 1_000)).toMatchObject({ status: 200, tokens: 1_000 });
  });
});
