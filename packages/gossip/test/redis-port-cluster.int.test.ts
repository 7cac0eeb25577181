// The daemon's Redis port on a real Redis Cluster: the change feed of every
// shard is drained, the sweep walks every master, reads and merges are routed
// to the tenant's slot.
import type { KeyPolicy } from "@geoquota/core";
import { encodeKey } from "@geoquota/crdt";
import { createRedisStore, initFreshRegion } from "@geoquota/limiter";
import { shardOf, shardSlot } from "@geoquota/redis";
import { type RedisClusterServers, startRedisCluster } from "@geoquota/testkit";
import type { Cluster } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createRedisDaemonStore } from "../src/daemon/redis-port.js";

let servers: RedisClusterServers | undefined;
let redis: Cluster;

beforeAll(async () => {
  servers = await startRedisCluster(3);
  redis = await servers.client();
  await initFreshRegion(redis);
});
afterAll(async () => {
  await servers?.stop();
});

function policy(tenant: string): KeyPolicy {
  return {
    tenant,
    resource: "api",
    limit: { algorithm: "token_bucket", capacity: 100, refillPerSecond: 10 },
    baseShare: 500_000,
    floorShare: 20_000,
  };
}

const key = (p: KeyPolicy) => {
  const k = encodeKey(p.tenant, p.resource);
  if (!k.ok) throw new Error("bad key");
  return k.value;
};

it("drains, sweeps and reads keys living on every node", async () => {
  const lease = { epsilonMs: 250, loanDurationMs: 3000 };
  const port = await createRedisDaemonStore(redis, { region: "eu", lease } as Parameters<
    typeof createRedisDaemonStore
  >[1]);
  const store = createRedisStore({
    redis,
    region: "eu",
    timing: { epsilonUs: 250_000, loanDurationUs: 3_000_000 },
  });
  const ps = Array.from({ length: 24 }, (_, i) => policy(`sweep${i}`));
  const nodes = new Set(ps.map((p) => redis.slots[shardSlot(shardOf(p.tenant))]?.[0]));
  expect(nodes.size).toBe(3);
  await port.drainDirty(10_000);
  for (const p of ps) expect((await store.check(p, 1)).allowed).toBe(true);
  expect(new Set(await port.drainDirty(10_000))).toEqual(new Set(ps.map(key)));

  const swept = new Set<string>();
  let cursor = "0";
  let steps = 0;
  do {
    const r = await port.sweepKeys(cursor, 5);
    for (const k of r.keys) swept.add(k);
    cursor = r.cursor;
    steps += 1;
  } while (cursor !== "0" && steps < 1000);
  expect(swept).toEqual(new Set(ps.map(key)));

  const s = await port.readKey(ps[0]!);
  expect(s.recovering).toBe(false);
  expect([...s.record.consumed.p.values()]).toEqual([1]);
  await port.checkPrimary();
  await port.close();
});
