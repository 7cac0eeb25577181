// DESIGN §4 in the limiter service on real Redis (the store's durability and start checks are
// packages/redis/test/redis-durability.int.test.ts): its redis.replicas / redis.primaryCheckMs
// config, refusing to start on an evicting Redis, and a limiter alone (no daemon) that notices
// a failover and enters recovery.
import { parsePolicies } from "@geoquota/config";
import { initFreshRegion, markerKey, shardOf } from "@geoquota/redis";
import { type RedisServer, startPrimaryWithReplica, startRedis, waitFor } from "@geoquota/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { startRegionService } from "../src/main.js";
import { serviceConfig } from "./helpers/config.js";

const started: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop()));
});

const POLICIES = parsePolicies(
  { default: { capacity: 10, refillPerSecond: 10 }, policies: [] },
  "test-policies.json",
);

describe("start checks", () => {
  it("config: redis.replicas and redis.primaryCheckMs are validated, naming the field", () => {
    expect(() => serviceConfig("redis://127.0.0.1:1", -1)).toThrow(/redis\.replicas/);
    expect(() => serviceConfig("redis://127.0.0.1:1", 1.5)).toThrow(/redis\.replicas/);
    expect(() => serviceConfig("redis://127.0.0.1:1", 0, 0)).toThrow(/redis\.primaryCheckMs/);
    expect(serviceConfig("redis://127.0.0.1:1", 2, 250).redis).toMatchObject({
      replicas: 2,
      primaryCheckMs: 250,
    });
  });

  it("the limiter service refuses to start on an evicting Redis", async () => {
    const server = await startRedis({ args: ["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"] });
    started.push(server);
    await expect(
      startRegionService({ config: serviceConfig(server.url, 0), policies: POLICIES, port: 0 }),
    ).rejects.toThrow(/GQ_ERR_REDIS_SETUP.*maxmemory-policy allkeys-lru/);
  });
});

describe("failover seen by the limiter alone (no gossip daemon)", () => {
  it("a new primary's replication id puts the region into recovery within redis.primaryCheckMs", async () => {
    const { primary, replica } = await startPrimaryWithReplica(started);
    await initFreshRegion(primary.client());
    const svc = await startRegionService({
      config: serviceConfig(primary.url, 1, 100),
      policies: POLICIES,
      port: 0,
      fresh: true,
    });
    try {
      const check = async () => {
        const res = await fetch(`${svc.url}/v1/check`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ tenant: "fo_t", resource: "api" }),
        });
        return (await res.json()) as { allowed: boolean };
      };
      expect((await check()).allowed).toBe(true);
      const shard = shardOf("fo_t");
      const promoted = replica.client();
      await waitFor(
        "the replica has the marker",
        async () => (await promoted.get(markerKey(shard))) !== null,
      );
      expect(await promoted.get(markerKey(shard))).toMatch(/:0$/);
      // Failover: the replica becomes a primary (new master_replid) and takes
      // over the primary's address, as a virtual IP or a DNS switch would.
      await promoted.replicaof("NO", "ONE");
      await primary.kill();
      await promoted.config("SET", "port", String(primary.port));
      // ioredis in the limiter reconnects to the same address: the new primary.
      await waitFor(
        "the limiter rotated the marker on the new primary",
        async () => !/:0$/.test((await promoted.get(markerKey(shard))) ?? ":0"),
        5000,
      );
      // Recovery: the bucket is rebuilt empty, the check is denied.
      expect((await check()).allowed).toBe(false);
    } finally {
      await svc.close();
    }
  });
});
