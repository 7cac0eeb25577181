// Redis Cluster: every script touches one hash slot (the tenant's shard tag),
// so the store, the daemon's side and the region functions run unchanged on a
// real 3-node cluster. Two regions = two separate clusters.
import { type RedisClusterServers, startRedisCluster } from "@geoquota/testkit";
import type { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ALL_SHARDS,
  checkPrimary,
  createGossipStore,
  createRedisStore,
  initFreshRegion,
  markerKey,
  RedisStoreError,
  shardNode,
  shardOf,
  shardSlot,
} from "@geoquota/redis";
import type { KeyPolicy } from "@geoquota/core";
import { policy, receiptRef, TIMING } from "./redis-helpers.js";

interface TestCluster {
  readonly servers: RedisClusterServers;
  readonly client: Cluster;
}

async function startCluster(): Promise<TestCluster> {
  const servers = await startRedisCluster(3);
  return { servers, client: await servers.client() };
}

async function stopCluster(c: TestCluster | undefined): Promise<void> {
  await c?.servers.stop();
}

/** `host:port` of the master serving a tenant's shard. */
function nodeOf(c: Cluster, tenant: string): string {
  return c.slots[shardSlot(shardOf(tenant))]?.[0] ?? "";
}

/** One policy per master node (tenants picked so their shards live on different nodes). */
function policiesOnEveryNode(c: Cluster, shares: { base?: number; floor?: number } = {}): KeyPolicy[] {
  const byNode = new Map<string, KeyPolicy>();
  for (let i = 0; i < 200 && byNode.size < 3; i++) {
    const p = policy({ capacity: 100, refillPerSecond: 10 }, shares);
    const n = nodeOf(c, p.tenant);
    if (!byNode.has(n)) byNode.set(n, p);
  }
  return [...byNode.values()];
}

let eu: TestCluster | undefined;
let us: TestCluster | undefined;

beforeAll(async () => {
  [eu, us] = await Promise.all([startCluster(), startCluster()]);
});
afterAll(async () => {
  await Promise.all([stopCluster(eu), stopCluster(us)]);
});

describe("Redis Cluster", () => {
  it("initFreshRegion creates a fresh marker on every shard (on every node), once", async () => {
    const redis = eu!.client;
    const r = await initFreshRegion(redis);
    expect(r.changed).toBe(true);
    expect(r.changedShards).toBe(ALL_SHARDS.length);
    expect(r.marker).toMatch(/^\d+:0$/);
    const markers = await Promise.all(ALL_SHARDS.map((k) => redis.get(markerKey(k))));
    expect(new Set(markers)).toEqual(new Set([r.marker]));
    // The shards really are spread over the three masters.
    expect(new Set(ALL_SHARDS.map((k) => redis.slots[shardSlot(k)]?.[0])).size).toBe(3);
    const again = await initFreshRegion(redis);
    expect(again).toMatchObject({ changed: false, marker: r.marker });
    expect((await initFreshRegion(us!.client)).changed).toBe(true);
    // Each shard's replid record is its own master's: no failover seen.
    expect((await checkPrimary(redis)).changed).toBe(false);
  });

  it("checks for tenants on different nodes are decided (scripts routed by their first key, no CROSSSLOT)", async () => {
    const redis = eu!.client;
    const store = createRedisStore({ redis, region: "eu", timing: TIMING });
    const ps = policiesOnEveryNode(redis);
    expect(new Set(ps.map((p) => nodeOf(redis, p.tenant))).size).toBe(3);
    for (const p of ps) {
      const d = await store.check(p, 1);
      expect(d).toMatchObject({ allowed: true, recovering: false, remaining: 99 });
      expect((await store.refund(p, 1, receiptRef(d.nowUs))).refunded).toBe(true);
      const lease = await store.acquireLease(p, 5, 1000);
      expect(lease.granted).toBe(5);
      await store.releaseLease(p, lease.leaseId, 2);
    }
    // A compound check within one shard works; across shards it is refused before Redis.
    const [a, b] = ps as [KeyPolicy, KeyPolicy];
    const sameShard: KeyPolicy = { ...a, resource: "other" };
    const c = await store.checkCompound([
      { policy: a, cost: 1 },
      { policy: sameShard, cost: 1 },
    ]);
    expect(c.allowed).toBe(true);
    await expect(
      store.checkCompound([
        { policy: a, cost: 1 },
        { policy: b, cost: 1 },
      ]),
    ).rejects.toBeInstanceOf(RedisStoreError);
  });

  it("micro-batched checks: a batch per shard (one slot), so checks on every node are decided in arrival order", async () => {
    const redis = eu!.client;
    await initFreshRegion(redis); // idempotent: the first test may have run it
    const store = createRedisStore({
      redis,
      region: "eu",
      timing: TIMING,
      batch: { maxChecks: 64, maxWaitUs: 1000 },
    });
    // Two keys of one shard per node (same tenant, two resources), three checks each, issued together.
    const keys = policiesOnEveryNode(redis).flatMap((p) => [p, { ...p, resource: "second" }]);
    const calls = keys.flatMap((p) => [0, 1, 2].map(() => ({ p, d: store.check(p, 1) })));
    const settled = await Promise.allSettled(calls.map((c) => c.d));
    expect(settled.map((r) => r.status)).toEqual(calls.map(() => "fulfilled"));
    const got = settled.map(
      (r) => (r as PromiseFulfilledResult<{ allowed: boolean; remaining: number }>).value,
    );
    expect(got.map((d) => [d.allowed, Math.floor(d.remaining)])).toEqual(
      keys.flatMap(() => [
        [true, 99],
        [true, 98],
        [true, 97],
      ]),
    );
  });

  it("drainDirty returns the changed keys from every node", async () => {
    const redis = eu!.client;
    const store = createRedisStore({ redis, region: "eu", timing: TIMING });
    const gossip = createGossipStore({ redis, region: "eu", timing: TIMING });
    await gossip.drainDirty(10_000);
    const ps = policiesOnEveryNode(redis);
    for (const p of ps) await store.check(p, 1);
    const r = await gossip.drainDirty(10_000);
    expect(r.keys).toEqual(expect.arrayContaining(ps.map((p) => ({ tenant: p.tenant, resource: "api" }))));
    expect(r.keys).toHaveLength(ps.length);
    expect(r.nowUs).toBeGreaterThan(0);
    expect((await gossip.drainDirty(10_000)).keys).toEqual([]);
    // A budget smaller than the backlog: bounded, and the rest comes on the next calls.
    for (const p of ps) await store.check(p, 1);
    const first = await gossip.drainDirty(1);
    expect(first.keys).toHaveLength(1);
    const rest = [...(await gossip.drainDirty(10_000)).keys];
    expect([...first.keys, ...rest]).toHaveLength(ps.length);
  });

  it("grant, merge, return and inspect between two regions (two clusters)", async () => {
    const euStore = createRedisStore({ redis: eu!.client, region: "eu", timing: TIMING });
    const usStore = createRedisStore({ redis: us!.client, region: "us", timing: TIMING });
    const euGossip = createGossipStore({ redis: eu!.client, region: "eu", timing: TIMING });
    const usGossip = createGossipStore({ redis: us!.client, region: "us", timing: TIMING });
    for (const p of policiesOnEveryNode(eu!.client, { base: 500_000, floor: 20_000 })) {
      expect((await euStore.check(p, 3)).allowed).toBe(true);
      const g = await euGossip.grantLoan(p, "us", 100_000);
      if (!g.ok) throw new Error(`grant refused: ${g.reason}`);
      expect(g.durable).toBe(true);
      const euView = await euGossip.readKeyState(p);
      expect(euView.share).toBe(400_000);
      const m = await usGossip.mergeRemote(p, [g.loan], euView.counterFields);
      expect(m.loansChanged).toBe(1);
      expect(m.countersChanged).toBeGreaterThan(0);
      const usView = await usStore.inspect(p);
      expect(usView.share).toBe(600_000);
      expect(usView.loansIn).toHaveLength(1);
      expect(usView.counters.admitted[`eu.${euView.marker.split(":")[0]}`]).toBe(3);
      const ret = await usGossip.returnLoan(p, "eu");
      expect(ret.seq).toBe(g.loan.seq);
      expect(ret.durable).toBe(true);
      expect((await usStore.inspect(p)).share).toBe(500_000);
      expect((await euGossip.receiveReturn(p, "us", ret.seq)).dropped).toBeGreaterThanOrEqual(1);
      const back = await euStore.inspect(p);
      expect(back).toMatchObject({ tenant: p.tenant, share: 500_000, recovering: false, loansOut: [] });
    }
  });

  it("a node's lost data sends only that node's shards into recovery", async () => {
    const redis = eu!.client;
    const store = createRedisStore({ redis, region: "eu", timing: TIMING });
    const [lost, kept] = policiesOnEveryNode(redis) as [KeyPolicy, KeyPolicy];
    await shardNode(redis, shardOf(lost.tenant)).flushall();
    expect(await store.check(lost, 1)).toMatchObject({ recovering: true, allowed: false });
    expect(await store.check(kept, 1)).toMatchObject({ recovering: false, allowed: true });
    const gossip = createGossipStore({ redis, region: "eu", timing: TIMING });
    const inc = await gossip.currentIncarnation(lost.tenant);
    expect(inc.bornUs).toBeGreaterThan(0);
    expect((await gossip.currentIncarnation(kept.tenant)).bornUs).toBe(0);
  });
});
