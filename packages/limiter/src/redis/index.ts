// Public API of the Redis-backed store (re-exported by the limiter's index).
export { keyLimit, ttlMs } from "./args.js";
export { type RedisStoreErrorCode, RedisStoreError, RedisStoreErrors } from "./errors.js";
export { createGossipStore, type GossipStore, type GossipStoreOptions, type GrantResult } from "./gossip.js";
export { parseHeader, type ScriptHeader } from "./header.js";
export {
  ALL_SHARDS,
  dirtyKey,
  dirtyMember,
  drainGenKey,
  isCluster,
  keyNames,
  markerKey,
  refundedReceiptsKey,
  parseCounterKey,
  type RedisClient,
  replidKey,
  SHARDS,
  shardOf,
  shardSlot,
  shardTag,
} from "./keys.js";
export {
  checkPrimary,
  checkRedisSetup,
  createPrimaryWatcher,
  type Durability,
  durabilityWaiter,
  ensureIncarnation,
  initFreshRegion,
  type MarkerResult,
  type PrimaryWatcher,
  probeKey,
  type ReplicationInfo,
  replicationInfo,
  rotateIncarnation,
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
export { SCRIPTS, type ScriptName, type ScriptSpec } from "./specs.js";
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
export type { LoanRecord } from "../types.js";
