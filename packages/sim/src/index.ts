export {
  assertCheck,
  CheckFailure,
  type CheckResult,
  checkAgainstOracle,
  checkAll,
  checkConvergence,
  type StateCompare,
} from "./checkers.js";
export { type Clock, type EventId, SimClock } from "./clock.js";
export { type LatencyUs, latency } from "./latency.js";
export {
  type Admission,
  checkGlobalBound,
  type LimitSchedule,
  type LimitSegment,
  matchRefunds,
  type OracleLimit,
  type OracleVerdict,
  type Refund,
} from "./oracle.js";
export { bruteForceExcess, WindowOracle } from "./window-oracle.js";
export {
  type Handler,
  type LinkConfig,
  type NetworkStats,
  SimNetwork,
  type SimNetworkOptions,
} from "./network.js";
export { Rng, subSeed } from "./prng.js";
export {
  type Env,
  isLongMode,
  LONG_ENV,
  runSeeds,
  runSeedsAsync,
  SEED_ENV,
  SeedFailure,
  type SeedPlan,
  seedsToRun,
} from "./seeds.js";
