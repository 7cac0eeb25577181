// Public API of @geoquota/limiter: what a user embedding or running a regional
// limiter needs (27 names). The Redis store, the script bindings and the
// daemon's Redis functions are the package `@geoquota/redis`; building blocks shared with the other
// geoquota packages are `@geoquota/limiter/internal` (no stability promise).
export { type AppConfig, type AppOptions, buildApp } from "./app.js";
export { type ErrorCode, LimiterError } from "./errors.js";
export { LeasedClient, type LeasedClientOptions } from "./leased-client.js";
export {
  type AssignmentOutcome,
  type CheckResult,
  type CompoundResult,
  Limiter,
  type LimiterDeps,
  type RefundResult,
} from "./limiter.js";
export {
  type RegionService,
  runRegion,
  type StartRegionOptions,
  startRegionService,
} from "./main.js";
export {
  type ExceededContext,
  type GeoquotaHook,
  type GeoquotaPluginOptions,
  type GeoquotaRouteOptions,
  geoquotaRateLimit,
} from "./plugin.js";
export {
  connectRegionRedis,
  createRedisStore,
  initFreshRegion,
  NotDurableError,
  type RedisStoreOptions,
} from "@geoquota/redis";
// The vocabulary (KeyPolicy, Decision, RegionStore, Timing, …) is imported from
// @geoquota/core, its one home: this index does not re-export it.
