// Default options and the random scenario a seed stands for.
import { Rng } from "@geoquota/sim";
import type { ModelOptions } from "./types.js";

export const DEFAULT_MODEL_OPTIONS: Omit<ModelOptions, "seed"> = {
  regions: 3,
  capacity: 40,
  refillPerSecond: 100,
  floorPpm: 20_000,
  epsilonUs: 250_000,
  loanDurationUs: 3_000_000,
  clockSpreadUs: 500_000,
  roundMinUs: 200_000,
  roundMaxUs: 500_000,
  durationUs: 12_000_000,
  quiesceUs: 3_500_000,
  fullSyncEveryRounds: 6,
  maxCost: 1,
  demand: { kind: "random" },
  faults: {
    dropRate: 0,
    duplicateRate: 0,
    latencyMinUs: 1_000,
    latencyMaxUs: 80_000,
    partitionEveryUs: 0,
    stateLosses: 0,
    daemonRestarts: 0,
  },
  bugs: {},
};

/**
 * The random scenario of a seed: 3–5 regions, limits, clock offsets at up to
 * the full 2ε spread, lossy/duplicating/reordering links, partitions, state
 * losses and daemon restarts. Overrides win (used by the targeted tests).
 */
export function scenarioFor(seed: number, overrides: Partial<Omit<ModelOptions, "seed">> = {}): ModelOptions {
  const rng = new Rng(seed ^ 0x5eed);
  const refillPerSecond = rng.pick([20, 50, 100]);
  const base: ModelOptions = {
    ...DEFAULT_MODEL_OPTIONS,
    seed,
    regions: rng.int(3, 5),
    refillPerSecond,
    capacity: rng.int(Math.max(2, refillPerSecond / 10), refillPerSecond),
    maxCost: rng.chance(0.3) ? 3 : 1,
    faults: {
      dropRate: rng.pick([0, 0.05, 0.2]),
      duplicateRate: rng.pick([0, 0.05, 0.2]),
      latencyMinUs: 1_000,
      latencyMaxUs: rng.pick([20_000, 150_000, 600_000]),
      partitionEveryUs: rng.pick([0, 3_000_000, 6_000_000]),
      stateLosses: rng.pick([0, 0, 1, 2]),
      daemonRestarts: rng.pick([0, 1, 2]),
    },
  };
  return { ...base, ...overrides, seed };
}
