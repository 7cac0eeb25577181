// Public API of @geoquota/limiter, by name.
export { type AppConfig, type AppDeps, BODY_BYTES_MAX, buildApp } from "./app.js";
export {
  type BreakerOptions,
  type BreakerState,
  CircuitBreaker,
  PERMIT_DENIED,
  PERMIT_NORMAL,
  PERMIT_PROBE,
  type Permit,
} from "./breaker.js";
export { type MonotonicClock, monotonicNow } from "./clock.js";
export { type ErrorCode, ERRORS, errorBody, isStoreUnavailable, LimiterError } from "./errors.js";
export { type FailOpenBound, FailOpenBuckets } from "./fail-open.js";
export { GuardedStore, type GuardedStoreOptions, type StoreErrorKind } from "./guarded-store.js";
export {
  type DecisionBody,
  decisionBody,
  type HeaderFields,
  rateLimitHeaders,
  retryAfterHeader,
  windowSeconds,
} from "./headers.js";
export {
  hashKey,
  ipKey,
  KEY_MAX_LENGTH,
  KEY_PATTERN,
  keyHashSecretOf,
  storedKeyPart,
  validateKeyPart,
} from "./key-hygiene.js";
export { LeasePool, type LeasePoolOptions } from "./lease-pool.js";
export { LeasedClient, type LeasedClientOptions } from "./leased-client.js";
export {
  type CheckResult,
  type CompoundItem,
  type CompoundResult,
  type DecisionSource,
  Limiter,
  type LimiterConfig,
  type LimiterDeps,
  type RefundResult,
  type LimitScope,
} from "./limiter.js";
export {
  connectRegionRedis,
  type RegionService,
  type RunRegionOptions,
  runRegion,
  type StartRegionOptions,
  startRegionService,
  waitReady,
} from "./main.js";
export { RECEIPT_CHARS_MAX, type ReceiptClaims, ReceiptSigner } from "./receipts.js";
export {
  collectRoutes,
  type OpenApiInfo,
  openApiDocument,
  type RegisteredRoute,
  type ResponseDoc,
  type RouteDoc,
  withParser,
  zodValidatorCompiler,
} from "./openapi.js";
export {
  type EventLevel,
  type EventLogger,
  LOG_LEVELS,
  type LogLevel,
  logLevelOf,
  ThrottledEvents,
} from "./log-events.js";
export { createMetrics, type LimiterMetrics, type MetricsOptions, OTHER_RESOURCE } from "./metrics.js";
export {
  geoquotaRateLimit,
  type KeySource,
  type RateLimitPluginOptions,
  type RouteRateLimit,
  rateLimitHook,
} from "./plugin.js";
export {
  assertSpecMatchesHeader,
  bindScripts,
  checkPrimary,
  createGossipStore,
  createRedisStore,
  ALL_SHARDS,
  dirtyKey,
  drainGenKey,
  isCluster,
  markerKey,
  parseCounterKey,
  type RedisClient,
  replidKey,
  SHARDS,
  shardNode,
  shardOf,
  shardSlot,
  shardTag,
  dirtyMember,
  checkRedisSetup,
  createPrimaryWatcher,
  type Durability,
  durabilityWaiter,
  ensureIncarnation,
  type GossipStore,
  type GossipStoreOptions,
  type GrantResult,
  initFreshRegion,
  keyLimit,
  type KeyStateView,
  keyNames,
  luaSource,
  type MarkerResult,
  type PrimaryWatcher,
  probeKey,
  parseHeader,
  type RedisRegionStore,
  RedisStoreError,
  type RedisStoreErrorCode,
  RedisStoreErrors,
  type RedisStoreOptions,
  type ReplicationInfo,
  replicationInfo,
  rotateIncarnation,
  SCRIPTS,
  ScriptCaller,
  type ScriptHeader,
  type ScriptName,
  type ScriptSpec,
  type StoreCompoundDecision,
  type StoreDecision,
  scriptSources,
  toDecision,
  ttlMs,
} from "./redis/index.js";
export {
  type Algorithm,
  type CompoundDecision,
  type Decision,
  type KeyPolicy,
  type Lease,
  type LeaseTiming,
  type LimitSpec,
  type LoanRecord,
  type QuotaView,
  type RefundOutcome,
  type RefundReceiptRef,
  type RefundRefusal,
  type RegionStore,
  SHARE_UNITS,
} from "./types.js";
export {
  CheckBodySchema,
  CheckResponseSchema,
  COMPOUND_LIMITS_MAX,
  CompoundDecisionSchema,
  COST_MAX,
  DecisionSchema,
  ErrorSchema,
  RateLimitedSchema,
} from "./validation.js";
