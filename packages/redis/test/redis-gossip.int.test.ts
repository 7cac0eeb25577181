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

it("an idle round is one script call that writes nothing; a small budget serves every shard in turn", async () => {
  const store = createRedisStore({ redis: fx.redis, region: "eu", timing: TIMING });
  const gossip = createGossipStore({ redis: fx.redis, region: "eu", timing: TIMING });
  await gossip.drainDirty(1000);
  const stats = async () => {
    const info = await fx.redis.info("commandstats");
    const calls = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
    return {
      evalsha: calls("evalsha") + calls("eval"),
      scard: calls("scard"),
      set: calls("set"),
      spop: calls("spop"),
    };
  };
  await fx.redis.config("RESETSTAT");
  expect((await gossip.drainDirty(1000)).keys).toEqual([]);
  // 256 shards looked at inside one call; no shard's generation moved, nothing popped.
  expect(await stats()).toEqual({ evalsha: 1, scard: 256, set: 0, spop: 0 });
  // Keys of several shards and a budget of one: each drain takes one, from the next shard on.
  const ps = Array.from({ length: 6 }, () => policy());
  const tenants = ps.map((p) => p.tenant);
  const shards = new Set(tenants.map(shardOf));
  for (const p of ps) await store.check(p, 1);
  const seen = new Set<string>();
  for (let i = 0; i < 256 * 2 && seen.size < tenants.length; i++) {
    const d = await gossip.drainDirty(1);
    expect(d.keys.length).toBeLessThanOrEqual(1);
    for (const k of d.keys) seen.add(k.tenant);
  }
  expect(seen).toEqual(new Set(tenants));
  expect(shards.size).toBeGreaterThan(1);
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
