import { loadPolicies, parseRegionConfig, type RegionConfig } from "@geoquota/config";

export const REGION_IDS = ["us-east", "eu-west", "ap-south"];
export const ADMIN_TOKEN = "test-admin-token-0123456789";
const regionsDir = new URL("../../../../regions/", import.meta.url).pathname;

export function testConfig(patch: Record<string, unknown> = {}): RegionConfig {
  return parseRegionConfig(
    {
      region: "us-east",
      listen: { host: "127.0.0.1", port: 0 },
      // Not the production 50 ms: these tests assert exact decisions against a real
      // Redis, and a loaded machine can stall one call past 50 ms, turning the test
      // into one of the breaker. Tests of the timeout set their own (app.test.ts).
      redis: { url: "redis://127.0.0.1:1", timeoutMs: 2000 },
      regions: REGION_IDS.map((id, i) => ({ id, gossip: `127.0.0.1:${7301 + i}` })),
      gossip: { listen: { host: "127.0.0.1", port: 7301 }, plaintext: true },
      sharedSecret: "test-shared-secret-0123456789",
      adminToken: ADMIN_TOKEN,
      ...patch,
    },
    { file: "test-config.json", baseDir: regionsDir, env: {} },
  );
}

export function testPolicies() {
  return loadPolicies(`${regionsDir}policies.json`, REGION_IDS);
}

/** A manual monotonic clock. */
export function manualClock(startMs = 1000) {
  let now = startMs;
  return {
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
  };
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
