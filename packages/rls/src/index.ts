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
  RLS_SERVICE,
  type RlsApi,
  type RlsDescriptor,
  type RlsRequest,
  type RlsResponse,
  type RlsStatus,
  rlsApi,
} from "./protos.js";
export { RuleSet } from "./rules.js";
export { type RuleRow, type TranslateOptions, translate } from "./translate.js";
export { type RegionRls, startRegionRls } from "./region.js";
export { grpcStatusOf, type RlsServer, type RlsServerOptions, startRlsServer } from "./server.js";
export { domainTenant, RLS_COST_MAX, RlsError, type RlsOptions, RlsService } from "./service.js";
