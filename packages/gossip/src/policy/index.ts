// Re-weighting policy: pure functions the gossip daemon calls each round per key.
export {
  type CounterReading,
  DEFAULT_DEMAND_OPTIONS,
  type DemandOptions,
  type DemandState,
  initialDemand,
  observeDemand,
  totalsByRegion,
} from "./demand.js";
export {
  type BorrowerState,
  DEFAULT_LENDING_OPTIONS,
  type InboundLoan,
  idealLoans,
  type LenderState,
  type LendingOptions,
  lendingHeadroom,
  planLoans,
  planReturns,
} from "./lending.js";
export {
  DEFAULT_POLICY_OPTIONS,
  decideRound,
  initialPolicyMemory,
  type PolicyMemory,
  type PolicyOptions,
  type RoundDecision,
  type RoundInput,
  type ShareBook,
} from "./round.js";
export {
  anyOverloaded,
  baseTargets,
  computeTargets,
  DEFAULT_TARGET_OPTIONS,
  proportionalTargets,
  type RegionQuota,
  type TargetOptions,
  U,
} from "./targets.js";
