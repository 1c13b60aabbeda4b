// LLM budgets: requests per minute, tokens per minute and a calendar-month token budget.
// Run: npm run build && node examples/llm-budget.mjs   (a fake model stands in for the provider)
//
// Tokens are charged as an estimate before the call (`reserve`) and settled with the provider's
// usage after it; the minute and the month are one policy, so an estimate either fits both or
// is charged to neither. Requests count in other units (one per call), so they are a policy of
// their own, decided first and given back when the tokens are refused. docs/quotas.md explains.
import { createLimiter, memoryStore } from "sluice";

/**
 * A budget per team. `store` is any sluice store (memoryStore by default; redisStore to share
 * it across processes); the month follows `timeZone` and starts on day `anchor` (the billing day).
 */
export function llmBudget({
  store = memoryStore(),
  requestsPerMinute = 60,
  tokensPerMinute = 100_000,
  tokensPerMonth = 20_000_000,
  timeZone = "UTC",
  anchor = 1,
} = {}) {
  const requests = createLimiter({
    store,
    policy: {
      name: "llm.requests",
      algorithm: "fixed-window",
      rules: [{ limit: requestsPerMinute, period: "1m" }],
    },
  });
  const tokens = createLimiter({
    store,
    policy: {
      name: "llm.tokens",
      algorithm: "fixed-window",
      rules: [
        { limit: tokensPerMinute, period: "1m" },
        { limit: tokensPerMonth, calendar: "month", timeZone, anchor },
      ],
    },
  });
  const refused = (decision, by) => ({
    status: 429,
    by,
    retryAfterMs: decision.retryAfterMs,
    remaining: decision.remaining,
  });

  return {
    /**
     * Calls `model(prompt)` for `team` if the budget allows `estimate` tokens; `model` resolves
     * to `{ text, usage: { total_tokens } }` as providers answer.
     */
    async complete(team, prompt, model, { estimate }) {
      const request = await requests.limit(team);
      if (!request.allowed) return refused(request, "requests per minute");
      const reservation = await tokens.reserve(team, estimate);
      const d = reservation.decision;
      if (!d.allowed) {
        await requests.refund(team);
        return refused(d, d.rule === 0 ? "tokens per minute" : "tokens per month");
      }
      let answer;
      try {
        answer = await model(prompt);
      } catch (err) {
        await reservation.cancel();
        throw err;
      }
      // Refunds what the estimate over-charged, or charges the overrun (later calls wait it out).
      await reservation.settle(answer.usage.total_tokens);
      return { status: 200, text: answer.text, tokens: answer.usage.total_tokens };
    },
  };
}

// Run directly: a few calls against a fake model.
if (import.meta.url === `file://${process.argv[1]}`) {
  const fakeModel = async (prompt) => ({
    text: `echo: ${prompt}`,
    usage: { total_tokens: 10 * prompt.length },
  });
  const budget = llmBudget({ requestsPerMinute: 3, tokensPerMinute: 1_000, tokensPerMonth: 5_000 });
  for (const prompt of ["hello", "a longer prompt", "and another one", "one too many"]) {
    const r = await budget.complete("team-7", prompt, fakeModel, { estimate: 200 });
    console.log(prompt, "→", r);
  }
}
