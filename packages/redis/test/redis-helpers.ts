// Shared fixtures of the redis-*.int tests: policies, timing, a Redis per file.
import { parseRegionConfig, type RegionConfig } from "@geoquota/config";
import { createRedisStore, initFreshRegion } from "@geoquota/redis";
import { keyPolicy, redisPerFile } from "@geoquota/testkit";
import type { KeyPolicy, RefundReceiptRef, Timing } from "@geoquota/core";

export const TIMING: Timing = { epsilonUs: 250_000, loanDurationUs: 3_000_000 };

let n = 0;
/** A policy on a fresh tenant (tests never share keys). */
export function policy(
  limit: Partial<KeyPolicy["limit"]> = {},
  shares: { base?: number; floor?: number } = {},
): KeyPolicy {
  n += 1;
  const p = keyPolicy({
    tenant: `t${process.pid}x${n}`,
    ...(shares.base !== undefined ? { baseShare: shares.base } : {}),
    ...(shares.floor !== undefined ? { floorShare: shares.floor } : {}),
  });
  return { ...p, limit: { ...p.limit, ...limit } };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let receipts = 0;
/**
 * A fresh receipt reference for `store.refund` (what the limiter takes from a verified
 * receipt): admitted at `admittedUs` (default: the host clock, which Redis TIME shares in
 * these tests), refundable for a minute.
 */
export function receiptRef(admittedUs = Date.now() * 1000): RefundReceiptRef {
  receipts += 1;
  return { id: `r${process.pid}x${receipts}`, admittedUs, expiresUs: admittedUs + 60_000_000 };
}

/** A two-region limiter service config on `url` (the gossip endpoints are never dialled). */
export function serviceConfig(url: string, replicas: number, primaryCheckMs = 1000): RegionConfig {
  return regionConfig({ url, timeoutMs: 200, replicas, primaryCheckMs });
}

/**
 * The region config of region us-east (of us-east and eu-west) with the given
 * `redis` block and further top-level fields (`extra`: breaker, leased, …).
 */
export function regionConfig(
  redis: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): RegionConfig {
  return parseRegionConfig(
    {
      region: "us-east",
      listen: { host: "127.0.0.1", port: 0 },
      redis,
      regions: [
        { id: "us-east", gossip: "127.0.0.1:1" },
        { id: "eu-west", gossip: "127.0.0.1:2" },
      ],
      gossip: { listen: { host: "127.0.0.1", port: 1 }, plaintext: true },
      sharedSecret: "test-shared-secret-0123456789",
      adminToken: "test-admin-token-0123456789",
      ...extra,
    },
    { file: "test.json", env: {} },
  );
}

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
