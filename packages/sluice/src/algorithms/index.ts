import { concurrency } from "./concurrency.js";
import { fixedWindow, fixedWindowFromFirstRequest } from "./fixed-window.js";
import { gcra } from "./gcra.js";
import { slidingLog } from "./sliding-log.js";
import { slidingWindow } from "./sliding-window.js";
import { tokenBucket, tokenBucketInterval } from "./token-bucket.js";
import type { Algorithm } from "./types.js";

// What `sluice/algorithms` publishes (entry.ts re-exports all of it); the stores' internals
// (`EPS`, `isFixedAlgorithm`, the in-place and fixed forms) are imported from types.js.
export type { Algorithm, ResolvedRule, RuleOutcome, Step, Adjusted } from "./types.js";
export {
  concurrency,
  fixedWindow,
  fixedWindowFromFirstRequest,
  gcra,
  slidingLog,
  slidingWindow,
  tokenBucket,
  tokenBucketInterval,
};

/** The algorithm names a policy may use. `gcra` is the default. */
export const ALGORITHMS = [
  "gcra",
  "token-bucket",
  "fixed-window",
  "sliding-window",
  "sliding-log",
  "concurrency",
] as const;

/** One of {@link ALGORITHMS}. */
export type AlgorithmName = (typeof ALGORITHMS)[number];

/** The implementation of each algorithm, by name. */
export const algorithms: Readonly<Record<AlgorithmName, Algorithm>> = {
  gcra,
  "token-bucket": tokenBucket,
  "fixed-window": fixedWindow,
  "sliding-window": slidingWindow,
  "sliding-log": slidingLog,
  concurrency,
};
