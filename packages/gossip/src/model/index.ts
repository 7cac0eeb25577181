// Whole-protocol deterministic simulation of geoquota's re-weighting.
export { type DaemonEnv, type DaemonStats, type Frame, MODEL_KEY, ModelDaemon } from "./daemon.js";
export { bruteForceExcess, WindowOracle } from "./oracle.js";
export { ModelRegion } from "./region.js";
export { runModel } from "./run.js";
export { DEFAULT_MODEL_OPTIONS, scenarioFor } from "./scenario.js";
export type { DemandMode, FaultOptions, ModelOptions, ModelResult, PlantedBugs } from "./types.js";
