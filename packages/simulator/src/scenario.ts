// Default options and the random scenario a seed stands for.
import { Rng } from "@geoquota/sim";
import type { ModelOptions } from "./types.js";

export const DEFAULT_MODEL_OPTIONS: Omit<ModelOptions, "seed"> = {
  regions: 3,
  algorithm: "token_bucket",
  capacity: 40,
  refillPerSecond: 100,
  floorPpm: 20_000,
  epsilonUs: 250_000,
  loanDurationUs: 3_000_000,
  clockSpreadUs: 500_000,
  roundMinUs: 200_000,
  roundMaxUs: 500_000,
  durationUs: 8_000_000,
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
    failovers: 0,
    replicaStalls: 0,
    waitFailRate: 0,
    daemonDownAtFailoverUs: 0,
    policyChanges: 0,
  },
  clients: {
    perRegionMax: 0,
    leasedFraction: 0.7,
    batchMax: 10,
    leaseMinUs: 100_000,
    leaseMaxUs: 3_000_000,
    closeEveryUs: 0,
    marginUs: 0,
  },
  reweighting: true,
  policyRule: { growAfterUs: 3_500_000 },
  bugs: {},
};

/**
 * The random scenario of a seed: 3–5 regions, limits, clock offsets at up to
 * the full 2ε spread, lossy/duplicating/reordering links, partitions, state
 * losses, daemon restarts, replica stalls and WAIT timeouts, failovers (some
 * with the daemon down, some behind one address), a late replica, an
 * eviction window, leased clients, a policy change. Overrides win (used by
 * the targeted tests).
 */
export function scenarioFor(seed: number, overrides: Partial<Omit<ModelOptions, "seed">> = {}): ModelOptions {
  const rng = new Rng(seed ^ 0x5eed);
  const refillPerSecond = rng.pick([10, 20, 50]);
  const loanDurationUs = 3_000_000;
  const epsilonUs = 250_000;
  const base: ModelOptions = {
    ...DEFAULT_MODEL_OPTIONS,
    seed,
    regions: rng.pick([3, 3, 4, 5]),
    refillPerSecond,
    capacity: rng.int(Math.max(2, refillPerSecond / 10), refillPerSecond),
    maxCost: rng.chance(0.3) ? 3 : 1,
    epsilonUs,
    loanDurationUs,
    faults: {
      dropRate: rng.pick([0, 0.05, 0.2]),
      duplicateRate: rng.pick([0, 0.05, 0.2]),
      latencyMinUs: 1_000,
      latencyMaxUs: rng.pick([20_000, 150_000, 600_000]),
      partitionEveryUs: rng.pick([0, 3_000_000, 6_000_000]),
      stateLosses: rng.pick([0, 0, 1, 2]),
      daemonRestarts: rng.pick([0, 1, 2]),
      failovers: rng.pick([0, 0, 1, 2]),
      replicaStalls: rng.pick([0, 1, 2]),
      waitFailRate: rng.pick([0, 0, 0.1, 0.3]),
      daemonDownAtFailoverUs: rng.pick([0, 500_000, 2_000_000]),
      policyChanges: rng.chance(0.3) ? 1 : 0,
    },
    clients: {
      ...DEFAULT_MODEL_OPTIONS.clients,
      perRegionMax: rng.pick([0, 1, 2]),
      batchMax: rng.pick([1, 5, Math.max(2, Math.floor(refillPerSecond / 4))]),
      leaseMaxUs: rng.pick([500_000, 1_500_000, loanDurationUs]),
      closeEveryUs: rng.pick([0, 300_000, 2_000_000]),
    },
    policyRule: { growAfterUs: loanDurationUs + 2 * epsilonUs },
  };
  // A third of the seeds with a policy change propose a second one (own stream:
  // the draws above and below stay what they were).
  const faults: ModelOptions["faults"] =
    base.faults.policyChanges === 1 && new Rng(seed ^ 0x2c4a).chance(1 / 3)
      ? { ...base.faults, policyChanges: 2 }
      : base.faults;
  let clients = base.clients;
  let reweighting = true;
  // A quarter of the seeds run leased clients on static slices (at least one
  // client somewhere), the rest as drawn.
  const staticSlices = rng.chance(0.25);
  if (staticSlices) {
    reweighting = false;
    clients = { ...clients, perRegionMax: Math.max(1, clients.perRegionMax) };
  }
  // GCRA (the other rate algorithm) on a quarter of the seeds without clients.
  const algorithm = clients.perRegionMax === 0 && rng.chance(0.25) ? "gcra" : "token_bucket";
  // Issue 21 (own stream, so the draws above stay what they were): a quarter
  // of the seeds get a late replica that lags and is promoted, a quarter an
  // eviction window, half have their failovers behind one address.
  const drift = new Rng(seed ^ 0x21d1);
  const withDrift: ModelOptions["faults"] = {
    ...faults,
    lateReplicas: drift.chance(0.25) ? 1 : 0,
    evictions: drift.chance(0.25) ? 1 : 0,
    failoverBehindAddress: drift.chance(0.5),
  };
  return { ...base, algorithm, faults: withDrift, clients, reweighting, ...overrides, seed };
}
