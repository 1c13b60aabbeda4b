// Types of adaptive-sim.mjs, for the test that runs it (packages/sluice/test/memory/adaptive-harness.test.ts).
import type { createLimiter, memoryStore } from "../../packages/sluice/src/index.js";

/** The library the simulation drives: its source (tests) or its build (bench). */
export interface SluiceModule {
  createLimiter: typeof createLimiter;
  memoryStore: typeof memoryStore;
}

export interface Figures {
  goodput: number;
  p99Ms: number;
  rejected: number;
  late: number;
}

export interface Bin {
  tMs: number;
  good: number;
  goodput: number;
  limit: number;
  inFlight: number;
}

export interface TierFigures {
  priority: number;
  offered: number;
  goodput: number;
  rejected: number;
  late: number;
}

export interface Row {
  load: number;
  oracle: Figures & { limit: number };
  none: Figures;
  tooHigh: Figures & { limit: number };
  tooLow: Figures & { limit: number };
  gradient2: Figures & { limit: number };
  vegas: Figures & { limit: number };
  aimd: Figures & { limit: number };
}

export interface Comparison {
  capacity: number;
  durationMs: number;
  rows: Row[];
  unloadedP99Ms: number;
  drop: {
    atMs: number;
    newOracle: { limit: number; goodput: number };
    algorithms: Record<
      "gradient2" | "vegas" | "aimd",
      { recoveryMs: number; after: number; series: Bin[] }
    >;
  };
  priority: Record<
    "gradient2" | "vegas" | "aimd",
    { top: TierFigures; lowest: TierFigures; goodput: number }
  >;
}

export const LOADS: number[];
export const ADAPTIVE: Array<"gradient2" | "vegas" | "aimd">;
export function capacityOf(workers?: number, serviceMeanMs?: number): number;
export function adaptiveComparison(options: {
  sluice: SluiceModule;
  seed?: number;
  durationMs?: number;
  sweep?: number[];
  loads?: number[];
}): Promise<Comparison>;
