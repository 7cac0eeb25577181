// Public API of @geoquota/redis: everything that talks to a region's Redis.
// The Lua loader (scripts.ts, the one module that knows where lua/ lives),
// the per-script bindings and their typed replies, connectRedis, the key
// schema and its shards, failover safety (replication.ts), the RegionStore
// the limiter runs on (store.ts) and the daemon's loan and change-feed
// functions (gossip.ts).
export { type CounterSets, counterFieldsOf, counterSetsOf } from "./counter-fields.js";
export {
  type CheckHead,
  checkCost,
  checkHead,
  type KeyArgs,
  keyArgsBuilder,
  keyLimit,
  policyVersionOf,
  type ScriptKeys,
  ttlMs,
} from "./args.js";
export {
  type Certifier,
  createCertifier,
  type Durability,
  type Place,
  probeKey,
  socketGeneration,
  type Ticket,
} from "./certificate.js";
export { type RedisStoreErrorCode, RedisStoreError, RedisStoreErrors } from "./errors.js";
export { createGossipStore, type GossipStore, type GossipStoreOptions, type GrantResult } from "./gossip.js";
export { parseHeader, type ScriptHeader } from "./header.js";
export {
  ALL_SHARDS,
  dirtyKey,
  dirtyMember,
  drainGenKey,
  hashTagOf,
  isCluster,
  keySlot,
  keyNames,
  markerKey,
  refundedReceiptsKey,
  parseKeyName,
  policyIndexKey,
  policyKey,
  type RedisClient,
  replidKey,
  SHARDS,
  shardOf,
  shardSlot,
  shardTag,
  WAKE_CHANNEL,
} from "./keys.js";
export {
  checkPrimary,
  checkRedisSetup,
  createPrimaryWatcher,
  ensureIncarnation,
  initFreshRegion,
  type MarkerResult,
  type PrimaryCheck,
  type PrimaryWatcher,
  type PrimaryWatcherOptions,
  readShardMarkers,
  redisSetupProblems,
  type ReplicationInfo,
  replicationInfo,
  rotateIncarnation,
  SETUP_SETTINGS,
  type SetupDriftChange,
  type SetupProblem,
  type SetupSetting,
  shardNode,
} from "./replication.js";
export {
  assertSpecMatchesHeader,
  bindScripts,
  luaFiles,
  luaSource,
  ScriptCaller,
  scriptSources,
} from "./scripts.js";
export type {
  CheckReply,
  CompoundReply,
  DecisionReply,
  DrainDirtyReply,
  InspectReply,
  LeaseAcquireReply,
  LeaseReleaseReply,
  LoanGrantReply,
  LoanMergeReply,
  LoanRefusal,
  LoanReturnReceivedReply,
  LoanReturnReply,
  RefundReply,
  RegionInitReply,
  ScriptReplies,
} from "./replies.js";
export { assertBatching, type CheckBatching, MAX_BATCH_CHECKS, MAX_BATCH_WAIT_US } from "./batch.js";
export { SCRIPTS, type ScriptName, type ScriptSpec } from "./specs.js";
export {
  assignReserveArgs,
  assignUsageArgs,
  checkCompoundArgs,
  type CompoundItemArgs,
  drainDirtyArgs,
  type KeyHeadArgv,
  keyHeadArgs,
  leaseAcquireArgs,
  leaseReleaseArgs,
  type LeaseReleaseArgv,
  loanGrantArgs,
  loanMergeArgs,
  type LoanMergeLoanArgv,
  loanReturnArgs,
  loanReturnReceivedArgs,
  refundArgs,
  regionInitArgs,
  type ScriptArgs,
  type ScriptCall,
  type TypedScriptName,
} from "./script-args.js";
export {
  createRedisStore,
  type KeyStateView,
  type LeaseReport,
  MAX_RELEASES_PER_CALL,
  NotDurableError,
  type RedisRegionStore,
  type RedisStoreOptions,
  type StoreCompoundDecision,
  type StoreDecision,
  toDecision,
} from "./store.js";
export {
  type ConnectRedisOptions,
  connectRedis,
  connectRegionRedis,
  type NodeOptions,
  type RedisConnectPlan,
  type RedisRole,
  redisConnectPlan,
  waitReady,
} from "./connect.js";
export type { LoanRecord } from "@geoquota/core";
