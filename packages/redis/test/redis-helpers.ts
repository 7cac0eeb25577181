// Shared fixtures of the redis-*.int tests: the store fixtures of the test kit
// (a policy on a fresh tenant, the timing, receipt references, sleep; the limiter's
// tests import them from there too) and a Redis per file with a fresh region on it.
import { createRedisStore, initFreshRegion } from "@geoquota/redis";
import { redisPerFile, TIMING } from "@geoquota/testkit";

export { policy, receiptRef, sleep, TIMING } from "@geoquota/testkit";

/**
 * One redis-server for the test file with a fresh region on it (marker born
 * at 0) and the Redis store of region "eu": `fx.redis`, `fx.setup.store`,
 * `fx.setup.marker`.
 */
export function freshRegionPerFile() {
  return redisPerFile(async (redis) => ({
    marker: (await initFreshRegion(redis)).marker,
    store: createRedisStore({ redis, region: "eu", timing: TIMING }),
  }));
}
