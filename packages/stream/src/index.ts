// Public API of @geoquota/stream, by name.
export {
  type FloodClientOptions,
  type FloodResult,
  framePayload,
  frameSeq,
  runFloodClient,
} from "./example-client.js";
export {
  type ExampleServer,
  type ExampleServerOptions,
  startExampleServer,
  tenantOf,
} from "./example-server.js";
export { LocalBucket } from "./local-bucket.js";
export {
  CLOSE_CODES,
  type ConnectionLimits,
  type ConnectionStats,
  type FrameHandler,
  type FrameInfo,
  MeteredConnection,
  type PauseReason,
  rawByteLength,
} from "./metered-connection.js";
export { createStreamMetrics, type StreamMetrics } from "./metrics.js";
export {
  type AttachOptions,
  type AttachResult,
  DEFAULT_RESOURCES,
  STREAM_LEASE_MODE,
  StreamLimiter,
  type StreamLimiterOptions,
  type StreamResources,
} from "./stream-limiter.js";
export {
  type LeaseSizing,
  leaseSizing,
  type TenantQuota,
  TenantQuotas,
} from "./tenant-quota.js";
