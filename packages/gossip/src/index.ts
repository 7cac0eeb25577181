// Public API of the gossip package: the daemon and its process entry, the
// WebSocket mesh it runs on and the re-weighting policy. The whole-protocol
// simulation that drives this daemon is its own package (@geoquota/simulator).
export {
  type ClockCheckOptions,
  type ClockStamp,
  type OffsetEstimate,
  offsetInterval,
  PeerClocks,
} from "./daemon/clock-offsets.js";
export {
  type ClockChange,
  type DaemonDeps,
  type DaemonOptions,
  type DaemonStatus,
  type DaemonTimers,
  type FrameLink,
  GossipDaemon,
  type PolicyResolver,
} from "./daemon/daemon.js";
export {
  clockCheckOptions,
  policyResolver,
  type RunGossipOptions,
  type RunningGossip,
  runGossip,
  startGossip,
} from "./daemon/main.js";
export { createDaemonMetrics, type DaemonMetrics } from "./daemon/metrics.js";
export { keyStateOf, mergeOf, type RedisKeyView } from "./daemon/key-translation.js";
export { createRedisDaemonStore } from "./daemon/redis-port.js";
export {
  type RolloutOptions,
  type RolloutPort,
  type RolloutStatus,
  RolloutStep,
  rolloutPolicyResolver,
} from "./daemon/rollout-step.js";
export type { DaemonStore, KeyReading } from "./daemon/store-port.js";
export {
  type CounterReading,
  DEFAULT_POLICY_OPTIONS,
  decideRound,
  type InboundLoan,
  initialPolicyMemory,
  type PolicyMemory,
  type PolicyOptions,
  type RegionQuota,
  type RoundDecision,
} from "./policy/index.js";
export {
  Mesh,
  type MeshConfigInput,
  type PeerStatus,
  PROTOCOL_VERSION,
  TRANSPORT_ERRORS,
} from "./transport/index.js";
