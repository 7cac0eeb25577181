// The daemon's side: change feed, counter max-merge, marker rotation on a new primary.
import { redisPerFile } from "@geoquota/testkit";
import { expect, it } from "vitest";
import {
  checkPrimary,
  createGossipStore,
  createRedisStore,
  initFreshRegion,
  replidKey,
  shardOf,
} from "@geoquota/redis";
import { policy, TIMING } from "./redis-helpers.js";

const fx = redisPerFile(initFreshRegion);

it("drainDirty pops the changed keys once", async () => {
  const store = createRedisStore({ redis: fx.redis, region: "eu", timing: TIMING });
  const gossip = createGossipStore({ redis: fx.redis, region: "eu", timing: TIMING });
  await gossip.drainDirty(1000);
  const p = policy();
  await store.check(p, 1);
  await store.check(p, 1);
  const d = await gossip.drainDirty(10);
  expect(d.keys).toEqual([{ tenant: p.tenant, resource: "api" }]);
  expect((await gossip.drainDirty(10)).keys).toEqual([]);
});

it("mergeRemote max-merges counter entries and ignores smaller ones", async () => {
  const gossip = createGossipStore({ redis: fx.redis, region: "eu", timing: TIMING });
  const p = policy();
  const a = await gossip.mergeRemote(p, [], { "p|us.1": 5, "d|us.1": 2 });
  expect(a.countersChanged).toBe(2);
  const b = await gossip.mergeRemote(p, [], { "p|us.1": 3, "d|us.1": 4 });
  expect(b.countersChanged).toBe(1);
  const v = await gossip.readKeyState(p);
  expect(v.counterFields).toMatchObject({ "p|us.1": 5, "d|us.1": 4 });
});

it("a change of the primary's replication id rotates the marker (recovery)", async () => {
  const gossip = createGossipStore({ redis: fx.redis, region: "eu", timing: TIMING });
  const first = await checkPrimary(fx.redis);
  expect(first.changed).toBe(false);
  // A failover seen by one shard's record rotates that shard's marker only.
  const p = policy();
  const shard = shardOf(p.tenant);
  await fx.redis.set(replidKey(shard), "a-previous-primary");
  const rotated = await checkPrimary(fx.redis);
  expect(rotated.changed).toBe(true);
  expect(rotated.changedShards).toBe(1);
  const inc = await gossip.currentIncarnation(p.tenant);
  expect(inc.bornUs).toBeGreaterThanOrEqual(rotated.nowUs);
  expect(inc.bornUs).toBeLessThan(rotated.nowUs + 5_000_000);
  const d = await createRedisStore({ redis: fx.redis, region: "eu", timing: TIMING }).check(p, 1);
  expect(d).toMatchObject({ recovering: true, allowed: false });
});
