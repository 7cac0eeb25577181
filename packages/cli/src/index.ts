// Programmatic API of the CLI package: the local cluster the commands and the
// integration tests run on.
export {
  type Cluster,
  type ClusterOptions,
  type ClusterRegion,
  ROLE_NODE_FLAGS,
  startCluster,
} from "./cluster/orchestrator.js";
export { dialPairs, regionIds } from "./cluster/ids.js";
export { buildProgram } from "./program.js";
export { type LoneRegion, type LoneRegionOptions, startLoneRegion } from "./cluster/lone-region.js";
