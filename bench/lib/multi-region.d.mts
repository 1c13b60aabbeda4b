// Types of multi-region.mjs, for the test that runs it (packages/sluice/test/redis/multi-region.test.ts).

/** The regions, in the order of their figures. */
export declare const REGIONS: readonly ["eu", "us", "ap"];

/** A region's name. */
export type Region = (typeof REGIONS)[number];

/** The one global policy (600 a second, fixed window, with allotments), as `definePolicy` takes it. */
export declare const POLICY: {
  readonly name: "global";
  readonly algorithm: "fixed-window";
  readonly rules: readonly [{ readonly limit: 600; readonly period: "1s" }];
  readonly lease: true;
};

/** What a run does, beyond its contestant. */
export interface ScenarioOptions {
  /** One-second windows of demand (default 6). */
  windows?: number;
  /** The window in which the hot key's home is cut off from the other regions (default 3). */
  cutWindow?: number;
  /** Decisions a second per region (default eu 1,000, us 1,000, ap 4,000). */
  demand?: Readonly<Record<Region, number>>;
  /** How often each region fires the decisions due (ms, default 5). */
  batchMs?: number;
  /** Delay each way on a link between regions (ms, default 40). */
  delayMs?: number;
  /** The hot key's home (default eu). */
  home?: Region;
  /** The region that decides the cold keys (default us). */
  coldRegion?: Region;
  /** The limit (600) and the demand both times this (default 1). */
  scale?: number;
  /** How many cold keys (default 30). */
  coldKeys?: number;
  /** Progress lines (default: none). */
  log?: (message: string) => void;
}

/** The scenario's defaults. */
export declare const DEFAULTS: Required<Omit<ScenarioOptions, "log" | "scale">>;

/**
 * Who decides: sluice's multiRegionStore in a mode, over ioredis clients (the default) or
 * node-redis ones, or @upstash/ratelimit's MultiRegionRatelimit.
 */
export type Contestant =
  | { kind: "sluice"; mode: "strict"; borrow?: undefined; client?: RedisClientName }
  | { kind: "sluice"; mode: "bounded"; borrow: number; client?: RedisClientName }
  | { kind: "upstash"; mode?: undefined; borrow?: undefined; client?: undefined };

/** The Redis client each region's `redisStore` runs on. */
export type RedisClientName = "ioredis" | "node-redis";

/** The three regions' redis-servers. */
export interface Regions {
  readonly ports: Readonly<Record<Region, number>>;
  stop(): Promise<void>;
}

/** A contestant's figures (see runContestant in multi-region.mjs). */
export interface ContestantResult {
  label: string;
  kind: "sluice" | "upstash";
  mode: "strict" | "bounded" | undefined;
  borrow: number | undefined;
  limit: number;
  windows: number;
  cutWindow: number;
  demand: Record<Region, number>;
  delayMs: number;
  /** Admitted per window, all regions (`windows` + 1 entries: the last is after the last window). */
  admitted: number[];
  admittedByRegion: Record<Region, number[]>;
  decisionsPerWindow: number[];
  decisions: number;
  /** Decisions that rejected (none expected). */
  failed: number;
  /** Decisions made by `onStoreError` (sluice) or by Upstash's timeout: the store was not heard. */
  storeErrors: number;
  storeErrorsPerWindow: number[];
  /** Hot decisions' latencies (ms), from the second window on (all regions, and per region). */
  hot: { p50: number; p99: number };
  hotByRegion: Record<Region, { p50: number; p99: number }>;
  /** The first window's latencies (ms): the key is new, its first requests wait for the home. */
  first: { p50: number; p99: number };
  /** The limit and the demand times this (1: as given). */
  scale: number;
  /** sluice only: the store's bound and figures over the hot phase, all regions. */
  bound: number | undefined;
  crossRegionCalls: number | undefined;
  crossRegionPer1000: number | undefined;
  unitsLeased: number | undefined;
  underAdmitted: number | undefined;
  borrowed: number | undefined;
  cold: {
    region: Region;
    keys: number;
    admitted: number;
    p50: number;
    p99: number;
    crossRegionCalls: number | undefined;
  };
}

/** Starts the three regions' redis-servers (no persistence). */
export function startRegions(): Promise<Regions>;

/** Runs one contestant over the regions; everything it starts is stopped at the end. */
export function runContestant(
  regions: Regions,
  options: Contestant & ScenarioOptions,
): Promise<ContestantResult>;

/** The value at quantile `q` (0..1) of numbers, or NaN. */
export function quantile(xs: readonly number[], q: number): number;

/** One line of a contestant's figures. */
export function summaryLine(result: ContestantResult): string;
