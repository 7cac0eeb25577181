import { loadPolicies, parseRegionConfig, type RegionConfig } from "@geoquota/config";

export const REGION_IDS = ["us-east", "eu-west", "ap-south"];
export const ADMIN_TOKEN = "test-admin-token-0123456789";
const regionsDir = new URL("../../../../regions/", import.meta.url).pathname;

export function testConfig(patch: Record<string, unknown> = {}): RegionConfig {
  return parseRegionConfig(
    {
      region: "us-east",
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url: "redis://127.0.0.1:1", timeoutMs: 50 },
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
