// Whole-protocol deterministic simulation of geoquota: the production gossip
// daemon over a simulated network and clock, each region's Redis the pure model.
export {
  DEFAULT_SEED_KINDS,
  HARSH_SEED_KINDS,
  harshScenario,
  type KindTotals,
  replayCommand,
  runSeedKind,
  type SeedKind,
  seedCountOf,
  shortScenarioFor,
} from "./mix.js";
export { ModelRedis } from "./region.js";
export { runModel } from "./run.js";
export { DEFAULT_MODEL_OPTIONS, scenarioFor } from "./scenario.js";
export { createModelDaemonStore, keyLimitOf, MODEL_KEY, type ModelStoreEnv } from "./store.js";
export type {
  ClientOptions,
  DemandMode,
  FaultOptions,
  ModelOptions,
  ModelResult,
  PlantedBugs,
  PolicyChangeRule,
} from "./types.js";
