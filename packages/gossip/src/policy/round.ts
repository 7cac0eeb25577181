// One round of the policy for one key, as the daemon runs it: fold the new
// counter reading into the demand estimate, recompute targets (with
// hysteresis against last round's), then decide grants and early returns.
// The daemon keeps `PolicyMemory` in memory only: after a restart it starts
// from initialDemand() and no previous targets, which costs a few rounds of
// utilization and nothing else.
import {
  type CounterReading,
  DEFAULT_DEMAND_OPTIONS,
  type DemandOptions,
  type DemandState,
  initialDemand,
  observeDemand,
} from "./demand.js";
import {
  DEFAULT_LENDING_OPTIONS,
  type InboundLoan,
  type LendingOptions,
  planLoans,
  planReturns,
} from "./lending.js";
import { computeTargets, DEFAULT_TARGET_OPTIONS, type RegionQuota, type TargetOptions } from "./targets.js";

export interface PolicyOptions {
  readonly demand: DemandOptions;
  readonly targets: TargetOptions;
  readonly lending: LendingOptions;
}

export const DEFAULT_POLICY_OPTIONS: PolicyOptions = {
  demand: DEFAULT_DEMAND_OPTIONS,
  targets: DEFAULT_TARGET_OPTIONS,
  lending: DEFAULT_LENDING_OPTIONS,
};

/** What the daemon carries from round to round (in memory only). */
export interface PolicyMemory {
  readonly demand: DemandState;
  readonly targets: Readonly<Record<string, number>> | undefined;
}

export function initialPolicyMemory(): PolicyMemory {
  return { demand: initialDemand(), targets: undefined };
}

/**
 * A key's share book in this region at one instant, as its region's Redis holds it: what a
 * round decides from besides the counters. The daemon's store reading (`KeyReading`,
 * daemon/store-port.ts) extends it, so the two cannot drift apart.
 */
export interface ShareBook {
  /** Redis TIME of the read, µs. */
  readonly nowUs: number;
  readonly recovering: boolean;
  /** This region's reservations per borrower now (max over outstanding grants). */
  readonly reserved: Readonly<Record<string, number>>;
  /** This region's latest outstanding grant per borrower. */
  readonly current: Readonly<Record<string, number>>;
  /** Loans this region uses now. */
  readonly inUse: readonly InboundLoan[];
  /** Share (ppm) backing this region's outstanding in-process leases: never returned (lending.ts). */
  readonly leasePinnedPpm?: number | undefined;
}

export interface RoundInput extends ShareBook {
  readonly self: string;
  readonly regions: readonly RegionQuota[];
  readonly refillPerSecond: number;
  readonly counters: CounterReading;
}

export interface RoundDecision {
  readonly memory: PolicyMemory;
  readonly targets: Readonly<Record<string, number>>;
  /** Desired units per borrower: grant/renew each with deadline = now + D. */
  readonly grants: Readonly<Record<string, number>>;
  /** Loans to return early (stop using, record durably, then tell the lender). */
  readonly returns: readonly InboundLoan[];
}

export function decideRound(
  memory: PolicyMemory,
  input: RoundInput,
  opts: PolicyOptions = DEFAULT_POLICY_OPTIONS,
): RoundDecision {
  const demand = observeDemand(memory.demand, input.counters, input.nowUs, opts.demand);
  const targets = computeTargets(
    input.regions,
    demand.ratePerSec,
    input.refillPerSecond,
    memory.targets,
    opts.targets,
  );
  const me = input.regions.find((q) => q.region === input.self);
  if (me === undefined) throw new Error(`decideRound: ${input.self} is not among the key's regions`);
  const grants = planLoans(
    {
      region: me.region,
      baseShare: me.baseShare,
      floorShare: me.floorShare,
      recovering: input.recovering,
      reserved: input.reserved,
      current: input.current,
    },
    input.regions,
    targets,
    opts.lending,
  );
  const returns = planReturns(
    {
      region: me.region,
      baseShare: me.baseShare,
      recovering: input.recovering,
      inUse: input.inUse,
      leasePinnedPpm: input.leasePinnedPpm,
    },
    targets,
    opts.lending,
  );
  return { memory: { demand, targets }, targets, grants, returns };
}
