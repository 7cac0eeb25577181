// Public API of @geoquota/rls, by name: Envoy's rate limit service (RLS v3) in front of a
// region's limiter, and envoyproxy/ratelimit's YAML configuration read as it is.
export {
  type EnvoyDescriptor,
  type EnvoyDomain,
  EnvoyConfigError,
  type EnvoyLimit,
  type EnvoyUnit,
  loadEnvoyConfigFile,
  loadEnvoyConfigs,
  parseEnvoyConfig,
  UNIT_SECONDS,
} from "./envoy-config.js";
export {
  checkRlqsFilterConfig,
  RLQS_BUCKET_SETTINGS_TYPE,
  RLQS_FILTER_FIELDS,
  RLQS_FILTER_TYPE,
  type RlqsFilterOptions,
  rlqsFilterConfig,
} from "./envoy-rlqs-filter.js";
export {
  RLS_SERVICE,
  type RlsApi,
  type RlsDescriptor,
  type RlsRequest,
  type RlsResponse,
  type RlsStatus,
  rlsApi,
} from "./protos.js";
export {
  bucketEntries,
  bucketKey,
  RLQS_DEFAULTS,
  RLQS_SERVICE,
  type RlqsAction,
  type RlqsApi,
  type RlqsAsk,
  type RlqsBackend,
  type RlqsBucketId,
  type RlqsGrant,
  type RlqsOptions,
  type RlqsPolicyTarget,
  type RlqsReports,
  type RlqsResponse,
  RlqsService,
  RlqsStreamError,
  type RlqsTarget,
  rlqsApi,
  tokenBucketAction,
} from "./rlqs.js";
export { type LimiterRlqsOptions, limiterRlqsBackend, RLQS_BUCKET_ENTRIES_MAX } from "./rlqs-backend.js";
export {
  askSize,
  DemandEstimate,
  fairAskSize,
  RLQS_ASSIGNED_PART,
  RLQS_BURST_SECONDS,
  RLQS_DEMAND_HEADROOM,
  RLQS_MIN_SLICE_FRACTION,
  type RlqsAskSize,
  type RlqsLimits,
  wantsMore,
} from "./rlqs-sizing.js";
export { RuleSet } from "./rules.js";
export { type RuleRow, type TranslateOptions, translate } from "./translate.js";
export { type RegionRls, startRegionRls } from "./region.js";
export { grpcStatusOf, type RlsServer, type RlsServerOptions, startRlsServer } from "./server.js";
export {
  domainTenant,
  RLS_COST_MAX,
  RlsError,
  type RlsOptions,
  RlsService,
  type RlsTarget,
} from "./service.js";
