// Public API of @geoquota/bench, by name.
export { benchCrdtGossip, type CrdtGossipResult, type GossipBytes } from "./crdt-gossip.js";
export { benchHttpPath, type HttpPathResult, type HttpRun } from "./http-path.js";
export { benchLeasedPath, type LeasedPathResult, type LeasedVariant } from "./leased-path.js";
export { describeMachine, type Machine } from "./machine.js";
export { benchMemory, type MemoryResult, type MemoryRow } from "./memory.js";
export { benchPeers, type PeerRun, type PeersResult, peersRows, type StartPeersCluster } from "./peers.js";
export { ensurePeer, PEER_MODULES, type PeerBinary, type PeerName } from "./peers-build.js";
export { benchRedisCost, type CostFigures, type RedisCostResult } from "./redis-cost.js";
export { benchRedisPath, type PathFigures, type RedisPathResult } from "./redis-path.js";
export {
  benchRlqsPath,
  type RlqsCluster,
  type RlqsPathResult,
  rlqsRows,
  type StartRlqsCluster,
} from "./rlqs-path.js";
export { benchRlsPath, type RlsPathResult, type RlsRatio, type RlsRun } from "./rls-path.js";
export {
  type BenchReport,
  budgetFor,
  type RunBenchOptions,
  runBench,
  SECTIONS,
  selectSections,
} from "./run-bench.js";
export {
  benchScale,
  type ScaleLoneRegion,
  type ScaleResult,
  type ScaleSizes,
  type ScaleStep,
  type StartLoneRegion,
  type StartScaleCluster,
  scaleRows,
  scaleSizes,
} from "./scale.js";
export { benchSkew, type SkewCluster, type SkewPhase, type SkewResult, type StartCluster } from "./skew.js";
export { renderTable } from "./table.js";
export type { Budget, Row, Write } from "./types.js";
