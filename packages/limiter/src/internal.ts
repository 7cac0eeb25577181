// Building blocks of the limiter that the other geoquota packages share
// (stream, gossip, bench, cli): `@geoquota/limiter/internal`. Not a user API:
// names here may move (issue 13: a ground-floor vocabulary package).
export { type MonotonicClock, monotonicNow } from "./clock.js";
export { leasedHeldBound, leaseWindow } from "./leased-client.js";
export { LeasePool, type LeasePoolOptions } from "./lease-pool.js";
export { rateLimitHeaders } from "./headers.js";
export type { CompoundItem } from "./limiter.js";
