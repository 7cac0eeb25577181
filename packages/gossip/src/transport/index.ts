// Public API of the gossip transport (packages/gossip/src/index.ts re-exports it).
export { backoffDelayMs } from "./backoff.js";
export {
  dialsTo,
  HEARTBEAT_MISSES_MAX,
  type MeshConfig,
  type MeshConfigInput,
  MeshConfigSchema,
  PROTOCOL_VERSION,
  parseMeshConfig,
} from "./config.js";
export {
  errorCodeForClose,
  type PeerDownReason,
  TRANSPORT_ERRORS,
  type TransportErrorCode,
  type TransportErrorInfo,
} from "./errors.js";
export { silentLogger, type TransportLogger } from "./logger.js";
export { type DropCounts, Mesh, type MeshDeps, type MeshHandlers, type PeerStatus } from "./mesh.js";
export { createTransportMetrics, type DropReason, type TransportMetrics } from "./metrics.js";
