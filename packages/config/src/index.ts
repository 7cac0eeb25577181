export { endpointSchema, ID_PATTERN, idSchema, SHARE_UNITS } from "./common.js";
export {
  type KeyLimit,
  keyLimitResource,
  keyLimitSpec,
  RLS_UNITS,
  type RlsAlgorithm,
  type RlsUnit,
} from "./key-limits.js";
export { CONFIG_ERROR_CODE, ConfigError, formatPath } from "./errors.js";
export {
  ALGORITHMS,
  type Algorithm,
  type KeyPolicy,
  type LimitSpec,
  parseQuotaKey,
  quotaKey,
} from "@geoquota/core";
export {
  ACCESS_LIST_MAX,
  type Access,
  type AccessList,
  accessOf,
  baseShares,
  DEFAULT_FLOOR_PPM,
  globMatch,
  KEY_NAME_MAX,
  type KeyNames,
  keyNameSchema,
  loadPolicies,
  type LookupOptions,
  lookupPolicy,
  PoliciesFileSchema,
  type PolicySet,
  type PolicySpec,
  type PolicySpecInput,
  PolicySpecSchema,
  parsePolicies,
  type PolicyOverride,
  type PolicyOverrideFields,
  parsePolicySpec,
  type ResolvedKey,
  resolveEffective,
  resolveKey,
  resolvePolicy,
  WILDCARD_OVERRIDES_MAX,
  type WildcardOverride,
  wildcardOf,
  withPolicy,
} from "./policies.js";
export { type StaticChange, sizingChange } from "./static-change.js";
export {
  defaultLeasedMaxBatch,
  deriveRefundSecret,
  type LeasedConfig,
  leasedDefaults,
  loadRegionConfig,
  type ParseOptions,
  parseRegionConfig,
  type RegionConfig,
  type RegionConfigInput,
  RegionConfigSchema,
  readJsonFile,
} from "./region.js";
export {
  type EventLevel,
  type EventLogger,
  LOG_LEVELS,
  type LogLevel,
  logLevelOf,
  ThrottledEvents,
} from "./log-events.js";
export { resolveSecret, type SecretRef, SecretRefSchema } from "./secrets.js";
