// GET /v1/quotas through a store whose address reaches a replica (a VIP moved
// before the promotion): 503 naming the store's refusal, not a stale view
// (packages/redis/test/redis-replica-view.int.test.ts says why inspect.lua
// refuses there).
import { type RedisServer, startRedis, startReplica } from "@geoquota/testkit";
import { createRedisStore, initFreshRegion, type RedisRegionStore } from "@geoquota/redis";
import { afterEach, expect, it } from "vitest";
import { TIMING } from "@geoquota/testkit";
import { limiterApp } from "./helpers/app.js";
import { testConfig, testPolicies } from "./helpers/config.js";

const servers: RedisServer[] = [];
const stores: RedisRegionStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

it("a view asked of a replica is a 503 GQ_ERR_STORE_UNAVAILABLE that names READONLY; the primary's is a 200", async () => {
  const primary = await startRedis();
  servers.push(primary);
  const replica = await startReplica(primary);
  servers.push(replica);
  await initFreshRegion(primary.client());
  const url = "/v1/quotas/cust_ent_9942/payments_checkout";
  for (const [server, status] of [
    [primary, 200],
    [replica, 503],
  ] as const) {
    const store = createRedisStore({ redis: server.client(), region: "us-east", timing: TIMING });
    stores.push(store);
    const app = await limiterApp({ store, config: testConfig(), policies: testPolicies() });
    try {
      const res = await app.inject({ method: "GET", url });
      expect(res.statusCode, res.body).toBe(status);
      if (status === 503) {
        expect(res.json()).toMatchObject({ code: "GQ_ERR_STORE_UNAVAILABLE" });
        expect(res.body).toMatch(/READONLY/);
      }
    } finally {
      await app.close();
    }
  }
});
