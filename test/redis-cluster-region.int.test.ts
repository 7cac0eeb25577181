// A region whose Redis is a real Redis Cluster (3 masters), end to end through
// the config switch `redis.cluster`: the limiter service decides for tenants
// whose shards live on every node, and the gossip daemon drains the change
// feeds of every node.
import { fileURLToPath } from "node:url";
import { loadPolicies, parseRegionConfig } from "@geoquota/config";
import { startGossip } from "@geoquota/gossip";
import { startRegionService } from "@geoquota/limiter";
import { type RedisClusterServers, startRedisCluster, waitFor } from "@geoquota/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const policiesPath = fileURLToPath(new URL("../regions/policies.json", import.meta.url));

describe("a region on Redis Cluster", () => {
  let cluster: RedisClusterServers;
  beforeAll(async () => {
    cluster = await startRedisCluster(3);
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it("serves checks for tenants on every node and gossips their changes", async () => {
    const config = parseRegionConfig(
      {
        region: "us-east",
        listen: { host: "127.0.0.1", port: 0 },
        redis: { url: `redis://127.0.0.1:${cluster.servers[0]!.port}`, cluster: true, timeoutMs: 500 },
        regions: [{ id: "us-east", gossip: "127.0.0.1:1" }],
        gossip: {
          listen: { host: "127.0.0.1", port: 0 },
          round: { minMs: 100, maxMs: 200 },
          plaintext: true,
        },
        lease: { epsilonMs: 50, loanDurationMs: 1000 },
        sharedSecret: "cluster-test-shared-secret",
        adminToken: "cluster-test-admin-token",
        policiesFile: policiesPath,
      },
      { file: "cluster-test.json" },
    );
    const policies = loadPolicies(policiesPath, ["us-east"]);
    const svc = await startRegionService({ config, policies, port: 0, fresh: true });
    const gossip = await startGossip(config);
    try {
      const tenants = Array.from({ length: 24 }, (_, i) => `tenant_${i}`);
      for (const tenant of tenants) {
        const res = await fetch(`${svc.url}/v1/check`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ tenant, resource: "payments_checkout" }),
        });
        const body = (await res.json()) as { allowed: boolean; region: string; degraded: boolean };
        expect(res.status, JSON.stringify(body)).toBe(200);
        expect(body).toMatchObject({ allowed: true, region: "us-east", degraded: false });
      }
      // The tenants' shards are spread over the three masters.
      const nodes = await Promise.all(
        cluster.servers.map(async (s) => {
          const c = s.client();
          const keys = await c.keys("gq:{s*}:tenant_*:payments_checkout:b");
          return keys.length;
        }),
      );
      expect(nodes.filter((n) => n > 0).length).toBe(3);
      expect(nodes.reduce((a, b) => a + b, 0)).toBe(tenants.length);
      // The daemon drained every node's change feed into its replicated map.
      await waitFor(
        "the daemon to learn every tenant",
        () => gossip.daemon.status().knownKeys >= tenants.length,
        15_000,
      );
      const view = (await (await fetch(`${svc.url}/v1/quotas/tenant_7/payments_checkout`)).json()) as {
        share: number;
      };
      expect(view.share).toBe(1_000_000);
    } finally {
      await gossip.close();
      await svc.close();
    }
  }, 120_000);
});
