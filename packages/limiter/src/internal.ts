// Building blocks of the limiter that the other geoquota packages share
// (stream, gossip, bench, cli): `@geoquota/limiter/internal`. Not a user API:
// names here may move (issue 13: a ground-floor vocabulary package).
export { type MonotonicClock, monotonicNow } from "./clock.js";
export { keyPartHasher } from "./key-hygiene.js";
export { leaseWindow } from "./leased-client.js";
export { LeasePool, type LeasePoolOptions } from "./lease-pool.js";
export { type EventLogger, logLevelOf, ThrottledEvents } from "./log-events.js";
export { collectProcessMetrics } from "./metrics.js";
export type { LoanRecord, QuotaView } from "./types.js";
export { rateLimitHeaders } from "./headers.js";
export type { CompoundItem } from "./limiter.js";
export { bindWithFallback, isAddressInUse, type ListenOptions, listenServer } from "./listen.js";
