// Check plumbing and algorithm behaviour on real Redis.
import { type RedisServer, startRedis } from "@geoquota/testkit";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createGossipStore,
  createRedisStore,
  dirtyKey,
  initFreshRegion,
  keyNames,
  markerKey,
  type RedisRegionStore,
  shardOf,
} from "@geoquota/redis";
import {
  type KeyRecord,
  policy,
  readRecord,
  receiptRef,
  setBookkeeping,
  sleep,
  TIMING,
} from "./redis-helpers.js";

let server: RedisServer;
let redis: Redis;
let store: RedisRegionStore;

beforeAll(async () => {
  server = await startRedis();
  redis = server.client();
  await initFreshRegion(redis);
  store = createRedisStore({ redis, region: "eu", timing: TIMING });
});
afterAll(async () => {
  await server?.stop();
});

describe("atomicity", () => {
  it("TOCTOU: 300 concurrent checks on 3 connections against 1 token admit exactly 1", async () => {
    const p = policy({ capacity: 1, refillPerSecond: 1e-6 });
    const stores = [0, 1, 2].map(() =>
      createRedisStore({ redis: server.client(), region: "eu", timing: TIMING }),
    );
    const results = await Promise.all(Array.from({ length: 300 }, (_, i) => stores[i % 3]!.check(p, 1)));
    expect(results.filter((r) => r.allowed)).toHaveLength(1);
  });

  it("after SCRIPT FLUSH the next check still succeeds (NOSCRIPT fallback)", async () => {
    const p = policy();
    expect((await store.check(p, 1)).allowed).toBe(true);
    await redis.script("FLUSH");
    expect((await store.check(p, 1)).allowed).toBe(true);
  });

  it("a denial writes nothing but the denied counter and the change feed", async () => {
    const p = policy({ capacity: 1, refillPerSecond: 1e-6 });
    const b = `gq:{s${shardOf(p.tenant)}}:${p.tenant}:api:b`;
    await store.check(p, 1);
    const before = await redis.hgetallBuffer(b);
    const rec = await readRecord(redis, b);
    const d = await store.check(p, 1);
    expect(d.allowed).toBe(false);
    // The bucket is untouched; the record changed in its denied counter only (not even the
    // bookkeeping: the admission just before recorded it).
    const after = await redis.hgetallBuffer(b);
    expect(Object.keys(after).sort()).toEqual(["c", "v"]);
    expect(after.v).toEqual(before.v);
    expect(await readRecord(redis, b)).toEqual({ ...rec, d: 1 });
    // The counters as gossip reads them (inspect.lua): this region's replica of the marker's id.
    const marker = (await redis.get(markerKey(shardOf(p.tenant))))!;
    const rid = `eu.${marker.slice(0, marker.indexOf(":"))}`;
    expect((await store.inspect(p)).counters).toEqual({
      admitted: { [rid]: 1 },
      refunded: {},
      denied: { [rid]: 1 },
    });
    expect(await redis.sismember(dirtyKey(shardOf(p.tenant)), `${p.tenant}|api`)).toBe(1);
  });

  it("every key gets a TTL: between ttl and 2·ttl, refreshed only when it would fall below ttl", async () => {
    const p = policy({ capacity: 10, refillPerSecond: 10 });
    // ttl = C/r + D + 3ε + 1 s = 1000 + 3000 + 750 + 1000 ms; the scripts set 2·ttl.
    const ttl = 5_750;
    const b = `gq:{s${shardOf(p.tenant)}}:${p.tenant}:api:b`;
    await store.check(p, 1);
    const t = await redis.pttl(b);
    expect(t).toBeGreaterThan(2 * ttl - 500);
    expect(t).toBeLessThanOrEqual(2 * ttl);
    expect(await redis.pttl(dirtyKey(shardOf(p.tenant)))).toBeGreaterThan(0);
    // Far from due: the next check leaves the expiry alone (no PEXPIRE).
    await redis.pexpire(b, 2 * ttl - 2_000);
    await store.check(p, 1);
    expect(await redis.pttl(b)).toBeLessThanOrEqual(2 * ttl - 2_000);
    // Due (the recorded refresh leaves < ttl): refreshed to 2·ttl.
    const rec = (await readRecord(redis, b)) as KeyRecord;
    await setBookkeeping(redis, b, (rec.bk as number) - Math.ceil(ttl / 1000) - 1, rec.dg as number);
    await store.check(p, 1);
    expect(await redis.pttl(b)).toBeGreaterThan(2 * ttl - 500);
    // The recorded refresh never claims more than the real expiry (1 s of slack).
    const [sec, us] = await redis.time();
    const nowUs = Number(sec) * 1e6 + Number(us);
    const claim = ((await readRecord(redis, b)) as KeyRecord).bk as number;
    expect(nowUs + (await redis.pttl(b)) * 1000).toBeGreaterThan(claim * 1e6 + (2 * ttl - 1000) * 1000);
  });

  it("change feed: one SADD per key per drain round; a drain makes the next change mark the key again", async () => {
    const gossip = createGossipStore({ redis, region: "eu", timing: TIMING });
    const p = policy({ capacity: 100, refillPerSecond: 100 });
    const member = `${p.tenant}|api`;
    await store.check(p, 1);
    expect(await redis.sismember(dirtyKey(shardOf(p.tenant)), member)).toBe(1);
    // Until the next drain the key does not SADD again (Redis counts the SADDs scripts make).
    const sadds = async () =>
      Number(/cmdstat_sadd:calls=(\d+)/.exec(await redis.info("commandstats"))?.[1] ?? 0);
    const before = await sadds();
    await store.check(p, 1);
    await store.check(p, 1);
    expect(await sadds()).toBe(before);
    await gossip.drainDirty(10_000);
    expect(await redis.sismember(dirtyKey(shardOf(p.tenant)), member)).toBe(0);
    // After the drain: the next check (and a denial too) marks it again.
    await store.check(p, 1);
    expect(await redis.sismember(dirtyKey(shardOf(p.tenant)), member)).toBe(1);
    await gossip.drainDirty(10_000);
    expect((await store.check(p, 1_000)).allowed).toBe(false);
    expect(await redis.sismember(dirtyKey(shardOf(p.tenant)), member)).toBe(1);
    // A refund and a compound check use the same bookkeeping.
    await gossip.drainDirty(10_000);
    expect((await store.refund(p, 1, receiptRef())).refunded).toBe(true);
    expect(await redis.sismember(dirtyKey(shardOf(p.tenant)), member)).toBe(1);
    await gossip.drainDirty(10_000);
    await store.checkCompound([{ policy: p, cost: 1 }]);
    expect(await redis.sismember(dirtyKey(shardOf(p.tenant)), member)).toBe(1);
  });

  it("change feed: a key marks itself again once the set's TTL it relied on has passed", async () => {
    const p = policy({ capacity: 100, refillPerSecond: 100 });
    const member = `${p.tenant}|api`;
    const b = `gq:{s${shardOf(p.tenant)}}:${p.tenant}:api:b`;
    await store.check(p, 1);
    await redis.srem(dirtyKey(shardOf(p.tenant)), member);
    // As if gq:dirty had expired: the recorded SADD (second 1) is long past the set's TTL.
    const rec = (await readRecord(redis, b)) as KeyRecord;
    await setBookkeeping(redis, b, 1, rec.dg as number);
    await store.check(p, 1);
    expect(await redis.sismember(dirtyKey(shardOf(p.tenant)), member)).toBe(1);
  });

  it("fractional costs", async () => {
    const p = policy({ capacity: 1, refillPerSecond: 1e-6 });
    expect((await store.check(p, 0.25)).allowed).toBe(true);
    expect((await store.check(p, 0.75)).allowed).toBe(true);
    expect((await store.check(p, 0.01)).allowed).toBe(false);
  });
});

describe("a key of a finished incarnation", () => {
  // The shard's marker replaced by another one born at 0 (as a fresh region's: no recovery), the
  // old one put back afterwards (this file's other keys live under it).
  async function underAnotherMarker(tenant: string, fn: () => Promise<void>) {
    const k = markerKey(shardOf(tenant));
    const old = (await redis.get(k)) as string;
    await redis.set(k, "1234567:0");
    try {
      await fn();
    } finally {
      await redis.set(k, old);
    }
  }

  it("its sliding log counts nothing; its own counters stay that replica's", async () => {
    const p = policy({ algorithm: "sliding_log", capacity: 3, refillPerSecond: 3, windowMs: 60_000 });
    for (let i = 0; i < 3; i++) expect((await store.check(p, 1)).allowed).toBe(true);
    expect((await store.check(p, 1)).allowed).toBe(false);
    const marker = (await redis.get(markerKey(shardOf(p.tenant)))) as string;
    const before = `eu.${marker.slice(0, marker.indexOf(":"))}`;
    await underAnotherMarker(p.tenant, async () => {
      // The old incarnation's 3 admissions are not this one's: both admitted, the log holds 2.
      expect((await store.check(p, 1)).allowed).toBe(true);
      expect((await store.check(p, 1)).allowed).toBe(true);
      const [, , , , z] = keyNames(p.tenant, p.resource);
      expect(await redis.zcard(z as string)).toBe(2);
      expect((await store.inspect(p)).counters).toEqual({
        admitted: { [before]: 3, "eu.1234567": 2 },
        refunded: {},
        denied: { [before]: 1 },
      });
    });
  });
});

describe("compound checks", () => {
  it("all-or-nothing: one failing limit leaves every other untouched", async () => {
    const a = policy({ capacity: 5, refillPerSecond: 1e-6 });
    const b = policy({ capacity: 1, refillPerSecond: 1e-6, algorithm: "fixed_window", windowMs: 60_000 });
    const ok = await store.checkCompound([
      { policy: a, cost: 1 },
      { policy: b, cost: 1 },
    ]);
    expect(ok.allowed).toBe(true);
    expect(ok.failedIndex).toBe(-1);
    const denied = await store.checkCompound([
      { policy: a, cost: 1 },
      { policy: b, cost: 1 },
    ]);
    expect(denied).toMatchObject({ allowed: false, failedIndex: 1 });
    expect(denied.parts[0]!.allowed).toBe(true);
    expect((await store.inspect(a)).tokens).toBeCloseTo(4, 3);
    await expect(
      store.checkCompound([
        { policy: a, cost: 1 },
        { policy: a, cost: 1 },
      ]),
    ).rejects.toMatchObject({ code: "GQ_ERR_COMPOUND_DUPLICATE" });
  });
});

describe("window boundary burst", () => {
  // L = 10 per 3 s window. Traffic: a burst late in one window, then one right after the boundary.
  // The window is long so that a loaded machine (CI at load 20 took longer than the 60 ms a 300 ms
  // window left) still finishes the first burst before the boundary; the boundary itself is read
  // from the Redis TIME of the first burst's answers, not assumed from a sleep.
  it("fixed window admits 2L across a boundary; the sliding counter stays within C + r·T", async () => {
    const W = 3000;
    const rate = 10 / (W / 1000);
    const fixed = policy({ algorithm: "fixed_window", capacity: 10, refillPerSecond: rate, windowMs: W });
    const sliding = policy({ algorithm: "sliding_window", capacity: 10, refillPerSecond: rate, windowMs: W });
    const redisMs = async () => {
      const [sec, us] = await redis.time();
      return Number(sec) * 1000 + Math.floor(Number(us) / 1000);
    };
    // Start 1 s before a boundary, in a window at least 1.2 s away (the fixed key is new: any window).
    const toBoundary = W - ((await redisMs()) % W);
    await sleep(toBoundary >= 1200 ? toBoundary - 1000 : toBoundary + W - 1000);
    const admitted = { fixed: [] as number[], sliding: [] as number[] };
    const burst = async () => {
      for (let i = 0; i < 12; i++) {
        const f = await store.check(fixed, 1);
        const s = await store.check(sliding, 1);
        if (f.allowed) admitted.fixed.push(f.nowUs);
        if (s.allowed) admitted.sliding.push(s.nowUs);
      }
    };
    await burst();
    const windowOf = (us: number) => Math.floor(us / 1000 / W);
    const first = windowOf(admitted.fixed[0]!);
    expect(admitted.fixed.map(windowOf), "the first burst ends before the boundary").toEqual(
      Array(10).fill(first),
    );
    await sleep(Math.max(0, (first + 1) * W - (await redisMs())) + 30); // cross the boundary
    await burst();
    const span = (xs: number[]) => (xs[xs.length - 1]! - xs[0]!) / 1e6;
    // Fixed: 2L within about a second, far above C + r·T.
    expect(admitted.fixed.length).toBe(20);
    expect(admitted.fixed.length).toBeGreaterThan(10 + rate * span(admitted.fixed));
    // Sliding counter on the same traffic: within C + r·T for every sub-interval of its admissions.
    const s = admitted.sliding;
    for (let i = 0; i < s.length; i++) {
      for (let j = i; j < s.length; j++) {
        expect(j - i + 1).toBeLessThanOrEqual(10 + (rate * (s[j]! - s[i]!)) / 1e6);
      }
    }
  });
});
