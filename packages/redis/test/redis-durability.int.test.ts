// DESIGN §4 on real Redis with a real replica (`redis-server --replicaof`):
// what counts as durable (every configured replica acknowledged, whoever
// wrote), a configured but disconnected replica is not durable, the start
// checks (noeviction, declared replicas), and the primary watcher that notices
// a failover. The limiter service on them (its config, refusing an evicting
// Redis, recovery after a failover) is packages/limiter/test/service-durability.int.test.ts.
import { type RedisServer, startPrimaryWithReplica, startRedis, waitFor } from "@geoquota/testkit";
import type { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import {
  checkRedisSetup,
  createGossipStore,
  createPrimaryWatcher,
  initFreshRegion,
  RedisStoreError,
} from "@geoquota/redis";
import { policy, TIMING } from "./redis-helpers.js";

const started: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop()));
});

async function pair(): Promise<{ primary: RedisServer; replica: RedisServer; redis: Redis }> {
  const { primary, replica } = await startPrimaryWithReplica(started);
  const redis = primary.client();
  await initFreshRegion(redis);
  return { primary, replica, redis };
}

/** A lender with base 500 000 ppm that can lend to eu. */
const lenderPolicy = () => policy({ capacity: 100, refillPerSecond: 10 }, { base: 500_000 });

describe("durability of grants and returns", () => {
  it("a grant is durable once the replica has it; not while the replica is paused", async () => {
    const { replica, redis } = await pair();
    const gossip = createGossipStore({ redis, region: "us", timing: TIMING, replicas: 1 });
    const p = lenderPolicy();
    const ok = await gossip.grantLoan(p, "eu", 100_000);
    expect(ok).toMatchObject({ ok: true, durable: true });
    replica.pause();
    try {
      const held = await gossip.grantLoan(p, "eu", 100_000);
      expect(held).toMatchObject({ ok: true, durable: false });
      expect(await gossip.waitDurable(p)).toBe(false);
    } finally {
      replica.resume();
    }
    expect(await gossip.waitDurable(p)).toBe(true);
  });

  it("a configured replica that is disconnected (connected_slaves:0) is not durable", async () => {
    const { primary, replica, redis } = await pair();
    const gossip = createGossipStore({ redis, region: "us", timing: TIMING, replicas: 1 });
    await replica.stop();
    const admin = primary.client();
    await waitFor("primary sees no replica", async () =>
      /^connected_slaves:0\r?$/m.test(await admin.info("replication")),
    );
    const p = lenderPolicy();
    const g = await gossip.grantLoan(p, "eu", 100_000);
    expect(g).toMatchObject({ ok: true, durable: false });
    expect(await gossip.waitDurable(p)).toBe(false);
    // A borrower's early return is held the same way.
    const borrower = policy({ capacity: 100, refillPerSecond: 10 }, { base: 500_000 });
    const { nowUs } = await gossip.currentIncarnation(borrower.tenant);
    const loan = { lender: "eu", borrower: "us", units: 50_000, deadlineUs: nowUs + 3_000_000, seq: 7 };
    await gossip.mergeRemote(borrower, [loan], {});
    const r = await gossip.returnLoan(borrower, "eu");
    expect(r.seq).toBe(7);
    expect(r.durable).toBe(false);
  });

  it("two replicas declared, one connected: not durable", async () => {
    const { redis } = await pair();
    const gossip = createGossipStore({ redis, region: "us", timing: TIMING, replicas: 2 });
    expect(await gossip.grantLoan(lenderPolicy(), "eu", 100_000)).toMatchObject({ ok: true, durable: false });
  });

  it("the wait covers a write made on another connection (a record read back by another process)", async () => {
    const { replica, primary, redis } = await pair();
    const writer = createGossipStore({ redis, region: "us", timing: TIMING, replicas: 1 });
    // A second process on its own connection (a restarted daemon reading the
    // grant back). Its last write (a drain) is older than the grant.
    const reader = createGossipStore({ redis: primary.client(), region: "us", timing: TIMING, replicas: 1 });
    await reader.drainDirty(10);
    const p = lenderPolicy();
    expect(await reader.waitDurable(p)).toBe(true);
    replica.pause();
    try {
      expect(await writer.grantLoan(p, "eu", 100_000)).toMatchObject({ durable: false });
      // A bare WAIT on the reader's connection would wait only for the
      // reader's own drain and answer 1, although the replica lacks the grant.
      expect(await reader.waitDurable(p)).toBe(false);
    } finally {
      replica.resume();
    }
    expect(await reader.waitDurable(p)).toBe(true);
  });

  it("without replicas (replicas: 0) nothing is waited for", async () => {
    const server = await startRedis();
    started.push(server);
    const redis = server.client();
    await initFreshRegion(redis);
    const gossip = createGossipStore({ redis, region: "us", timing: TIMING });
    expect(await gossip.grantLoan(lenderPolicy(), "eu", 100_000)).toMatchObject({ ok: true, durable: true });
  });
});

describe("start checks", () => {
  const refused = async (redis: Redis, replicas: number) => {
    try {
      await checkRedisSetup(redis, { replicas });
    } catch (err) {
      expect(err).toBeInstanceOf(RedisStoreError);
      expect((err as RedisStoreError).code).toBe("GQ_ERR_REDIS_SETUP");
      return (err as Error).message;
    }
    return undefined;
  };

  it("an evicting maxmemory-policy with maxmemory set is refused, naming the setting", async () => {
    const server = await startRedis({ args: ["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"] });
    started.push(server);
    const redis = server.client();
    expect(await refused(redis, 0)).toMatch(/maxmemory-policy allkeys-lru/);
    await redis.config("SET", "maxmemory-policy", "volatile-ttl");
    expect(await refused(redis, 0)).toMatch(/maxmemory-policy volatile-ttl/);
    await redis.config("SET", "maxmemory-policy", "noeviction");
    expect(await refused(redis, 0)).toBeUndefined();
    // No maxmemory: nothing is ever evicted, whatever the policy says.
    await redis.config("SET", "maxmemory-policy", "allkeys-lru");
    await redis.config("SET", "maxmemory", "0");
    expect(await refused(redis, 0)).toBeUndefined();
  });

  it("more connected replicas than redis.replicas is refused", async () => {
    const { redis } = await pair();
    const message = await refused(redis, 0);
    expect(message).toMatch(/1 connected replicas but redis\.replicas is 0/);
    // It names the setting it is about, and nothing else (not eviction first).
    expect(message).toMatch(/^GQ_ERR_REDIS_SETUP: [^:]*: replicas: /);
    expect(message).not.toMatch(/evict|maxmemory/);
    expect(await refused(redis, 1)).toBeUndefined();
  });
});

describe("failover seen by the primary watcher", () => {
  it("the watcher runs scripts only when a replid changed: a tick is one INFO", async () => {
    const { redis } = await pair();
    const evals = async () => {
      const stats = await redis.info("commandstats");
      return Number(/^cmdstat_evalsha:calls=(\d+)/m.exec(stats)?.[1] ?? "0");
    };
    const watcher = createPrimaryWatcher(redis);
    expect((await watcher.check()).changedShards).toBe(0);
    const before = await evals();
    for (let i = 0; i < 3; i++) expect((await watcher.check()).changedShards).toBe(0);
    expect(await evals()).toBe(before);
  });
});
