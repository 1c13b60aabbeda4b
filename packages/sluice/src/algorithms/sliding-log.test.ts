import { describe, expect, it } from "vitest";
import { slidingLog } from "./sliding-log.js";

describe("sliding-log in place", () => {
  const rule = { limit: 50, periodMs: 1000, burst: 50 };

  it("answers as decide does, and keeps its array within twice the live log", () => {
    let pure: number[] | undefined;
    let own: number[] = [0, 2];
    let t = 1_700_000_000_000;
    for (let i = 0; i < 20_000; i++) {
      t += (i * 7919) % 13; // 0–12 ms apart: entries merge, expire and pile up in turn
      const cost = 1 + (i % 3);
      const a = slidingLog.decide(pure, t, rule, cost);
      const b = slidingLog.decideInPlace(own, t, rule, cost);
      const { next: na, ...ra } = a;
      const { next: nb, ...rb } = b;
      expect(rb, `call ${i}`).toEqual(ra);
      if (a.allowed) pure = na ?? undefined;
      if (nb === null) own = [0, 2];
      // The entries inside the window are the same in both logs (a denial leaves the pure one
      // unpruned, the in-place one pruned: entries that left the window do not matter).
      const inWindow = (log: number[] | undefined) => {
        const out: number[] = [];
        if (log)
          for (let j = log[1]!; j < log.length; j += 2)
            if (log[j]! > t - 1000) out.push(log[j]!, log[j + 1]!);
        return out;
      };
      const live = inWindow(own);
      expect(live, `call ${i}`).toEqual(inWindow(pure));
      expect(own.length).toBeLessThanOrEqual(2 * (own.length - own[1]!) + 4);
    }
  });
});
