// A policy naming a key the check API takes (any characters, hashed when stored) or a
// wildcard override must resolve to the same policy in the limiter (by the names the client
// sent) and in the gossip daemon (by the stored names, all Redis knows): otherwise the two
// would disagree on the key's capacity and base shares (docs/design.md §7, key hygiene).
import type { RegionStore } from "@geoquota/core";
import { parsePolicies, parseRegionConfig, type RegionConfig } from "@geoquota/config";
import { Limiter } from "@geoquota/limiter";
import { describe, expect, it } from "vitest";
import { policyResolver } from "../src/daemon/main.js";

const IDS = ["us-east", "eu-west", "ap-south"];

function config(patch: Record<string, unknown> = {}): RegionConfig {
  return parseRegionConfig(
    {
      region: "us-east",
      listen: { host: "127.0.0.1", port: 0 },
      redis: { url: "redis://127.0.0.1:1", timeoutMs: 50 },
      regions: IDS.map((id, i) => ({ id, gossip: `127.0.0.1:${7301 + i}` })),
      gossip: { listen: { host: "127.0.0.1", port: 7301 }, plaintext: true },
      sharedSecret: "test-shared-secret-0123456789",
      adminToken: "test-admin-token-0123456789",
      ...patch,
    },
    { file: "test-config.json", baseDir: "/tmp", env: {} },
  );
}

const email = "user:123@example.com";
const long = `${"é@".repeat(63)}ab`;
const set = parsePolicies(
  {
    default: { capacity: 5, refillPerSecond: 1 },
    policies: [
      {
        tenant: email,
        resource: "api",
        capacity: 90,
        refillPerSecond: 3,
        weights: { "us-east": 3, "eu-west": 1 },
      },
      { tenant: long, resource: "api", capacity: 70, refillPerSecond: 2 },
      { tenant: "*", resource: "a:b", capacity: 60, refillPerSecond: 2 },
      { tenant: "acme-1", resource: "api", capacity: 50, refillPerSecond: 2 },
    ],
    overrides: [
      { tenant: email, resource: "a:b", capacity: 11 },
      { key: "acme-*/api", capacity: 40, weights: { "ap-south": 1 } },
      { key: "*/other", capacity: 30 },
      { key: "h-*/*", capacity: 20 },
    ],
  },
  "p.json",
  IDS,
);

const keys: [string, string][] = [
  [email, "api"],
  [long, "api"],
  [email, "a:b"],
  ["someone@else", "a:b"],
  ["acme-1", "api"],
  ["acme-7", "api"],
  ["plain", "api"],
  ["x:y", "api"],
  ["plain", "other"],
  ["x:y", "other"],
];

describe("limiter and daemon resolve a key to the same policy", () => {
  for (const keyHash of [undefined, "a-key-hash-secret-0123456789"]) {
    it(`for every kind of name (keyHashSecret ${keyHash === undefined ? "unset" : "set"})`, () => {
      const c = config(keyHash !== undefined ? { keyHashSecret: keyHash } : {});
      const limiter = new Limiter({ store: {} as RegionStore, config: c, policies: set });
      const daemon = policyResolver(c, set);
      for (const [tenant, resource] of keys) {
        const p = limiter.resolve(tenant, resource);
        const d = daemon.resolve(p.tenant, p.resource);
        expect({ key: `${tenant}/${resource}`, ...d.policy }).toEqual({ key: `${tenant}/${resource}`, ...p });
        expect(d.regions.map((r) => r.baseShare)).toEqual(
          limiter.regionShares(tenant, resource).map((r) => r.baseShare),
        );
      }
      // The raw names reach the policy that names them; a wildcard matches the stored name
      // (h-*/* matches the hashed tenants, on top of their own entries).
      expect(limiter.resolve(email, "api").limit).toMatchObject({ capacity: 20, refillPerSecond: 3 });
      expect(limiter.resolve(email, "api").tenant).toMatch(/^h-[0-9a-f]{16}$/);
      expect(limiter.resolve(long, "api").limit).toMatchObject({ capacity: 20, refillPerSecond: 2 });
      expect(limiter.resolve(email, "a:b").limit.capacity).toBe(11);
      expect(limiter.resolve("someone@else", "a:b").limit.capacity).toBe(20);
      expect(limiter.resolve("acme-7", "api").limit.capacity).toBe(40);
      expect(limiter.resolve("acme-1", "api").limit).toMatchObject({ capacity: 40, refillPerSecond: 2 });
      expect(limiter.resolve("plain", "other").limit.capacity).toBe(30);
      // With keyHashSecret an unnamed tenant is stored hashed too: h-*/* matches it.
      expect(limiter.resolve("plain", "api").limit.capacity).toBe(keyHash === undefined ? 5 : 20);
    });
  }
});
