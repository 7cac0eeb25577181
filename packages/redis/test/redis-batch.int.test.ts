// Micro-batched checks (store option `batch`, packages/redis/src/batch.ts and
// lua/check_batch.lua) on real Redis: the same decisions as one call per check
// in arrival order, a full batch sent at once and a partial one after its
// bound, one error failing the whole batch, and no admission of a batch
// answered before the batch is durable. The region service's use of it (redis.batch)
// is packages/limiter/test/redis-batch-service.int.test.ts.
import { type RedisServer, startRedis, startReplica } from "@geoquota/testkit";
import {
  createRedisStore,
  initFreshRegion,
  keyNames,
  NotDurableError,
  policyIndexKey,
  type RedisRegionStore,
  shardOf,
  type StoreDecision,
} from "@geoquota/redis";
import type { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { KeyPolicy } from "@geoquota/core";
import { policy, TIMING } from "./redis-helpers.js";

let server: RedisServer;
let redis: Redis;
const stores: RedisRegionStore[] = [];

beforeAll(async () => {
  server = await startRedis();
  redis = server.client();
  await initFreshRegion(redis);
});
afterAll(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
  await server?.stop();
});

function storeOn(
  client: Redis,
  batch?: { maxChecks: number; maxWaitUs: number },
  durability?: { replicas: number; timeoutMs: number },
): RedisRegionStore {
  const s = createRedisStore({
    redis: client,
    region: "eu",
    timing: TIMING,
    ...(batch !== undefined ? { batch } : {}),
    ...(durability !== undefined ? { durability } : {}),
  });
  stores.push(s);
  return s;
}

async function evalshaCalls(client: Redis): Promise<number> {
  const m = /cmdstat_evalsha:calls=(\d+)/.exec(await client.info("commandstats"));
  return Number(m?.[1] ?? 0);
}

/** mulberry32: the sequence of a test is fixed by its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const DAY_MS = 86_400_000;
/**
 * A rate too slow to matter within a test (a millionth of a token per second) but whose full
 * refill time has passed since the fresh region's marker (born at 0): a new bucket starts full.
 */
const SLOW = 1e-6;
/**
 * One key per algorithm, with nothing time-dependent in its whole-token decisions: buckets that
 * refill SLOW (what refills during a run is < 1e-5 token: whole tokens compare exactly), windows of
 * a day (a run never crosses into the next one, and the first window has no previous one).
 */
function slotPolicies(): KeyPolicy[] {
  return [
    policy({ capacity: 10, refillPerSecond: SLOW }),
    policy({ algorithm: "gcra", capacity: 6, refillPerSecond: SLOW }),
    policy({ algorithm: "fixed_window", capacity: 7, refillPerSecond: 0, windowMs: DAY_MS }),
    policy({ algorithm: "sliding_window", capacity: 8, refillPerSecond: 0, windowMs: DAY_MS }),
    policy({ algorithm: "sliding_log", capacity: 5, refillPerSecond: 0, windowMs: DAY_MS }),
  ];
}

const view = (d: StoreDecision) => ({
  allowed: d.allowed,
  remaining: Math.floor(d.remaining),
  tokens: Math.floor(d.tokens),
  capacity: d.capacity,
  share: d.share,
});

describe("micro-batched checks", () => {
  it("differential: batched decisions equal one call per check for the same sequence, in arrival order", async () => {
    const rand = prng(24);
    const steps = Array.from({ length: 96 }, () => ({
      slot: Math.floor(rand() * 5),
      cost: Math.floor(rand() * 4),
    }));
    const single = storeOn(redis);
    const batched = storeOn(server.client(), { maxChecks: 8, maxWaitUs: 1000 });
    await batched.check(policy(), 1); // loads check_batch.lua (NOSCRIPT fallback) before counting
    const a = slotPolicies();
    const b = slotPolicies();
    const expected: ReturnType<typeof view>[] = [];
    for (const s of steps) expected.push(view(await single.check(a[s.slot] as KeyPolicy, s.cost)));
    const before = await evalshaCalls(redis);
    // Issued together: they join batches in this order.
    const got = await Promise.all(steps.map((s) => batched.check(b[s.slot] as KeyPolicy, s.cost)));
    expect(got.map(view)).toEqual(expected);
    // Every algorithm both admits and denies in the sequence.
    for (let slot = 0; slot < 5; slot++) {
      const mine = expected.filter((_, i) => (steps[i] as { slot: number }).slot === slot);
      expect(mine.some((d) => d.allowed) && mine.some((d) => !d.allowed)).toBe(true);
    }
    // 96 checks, 8 per batch: 12 script calls (the INFO call itself is not an EVALSHA).
    expect((await evalshaCalls(redis)) - before).toBe(12);
  });

  it("one TIME and one read of each shard's marker and policy per batch, read again after an item creates them", async () => {
    // Two new keys of one tenant (one shard) under a new policy version: the first item creates the
    // version's entry (and numbers it), the second reads it again rather than the batch's stale
    // read (which would number the same version twice).
    const base = policy({ capacity: 9, refillPerSecond: SLOW });
    const a: KeyPolicy = { ...base, resource: "one" };
    const b: KeyPolicy = { ...base, resource: "two" };
    const s = storeOn(server.client(), { maxChecks: 2, maxWaitUs: 1_000_000 });
    await s.check(policy(), 1); // loads check_batch.lua first
    const versions = async () => Number((await redis.hget(policyIndexKey(shardOf(base.tenant)), "#")) ?? 0);
    const before = await versions();
    const [da, db] = await Promise.all([s.check(a, 1), s.check(b, 1)]);
    expect(da.nowUs).toBe(db.nowUs);
    expect([da.allowed, db.allowed]).toEqual([true, true]);
    expect((await versions()) - before).toBe(1);
  });

  it("a full batch is sent at once, before its bound", async () => {
    const bound = 1_000_000; // 1 s: only a full batch can be answered sooner
    const s = storeOn(server.client(), { maxChecks: 4, maxWaitUs: bound });
    await Promise.all([0, 1, 2, 3].map(() => s.check(policy(), 1))); // warm: script loaded
    const before = await evalshaCalls(redis);
    const t0 = performance.now();
    const ds = await Promise.all([0, 1, 2, 3].map(() => s.check(policy(), 1)));
    expect(performance.now() - t0).toBeLessThan(bound / 1000);
    expect(ds.every((d) => d.allowed)).toBe(true);
    expect((await evalshaCalls(redis)) - before).toBe(1);
  });

  for (const bound of [500, 1000, 30_000]) {
    it(`a partial batch is sent once its bound (${bound} µs) has passed, as one call`, async () => {
      const s = storeOn(server.client(), { maxChecks: 64, maxWaitUs: bound });
      await s.check(policy(), 1);
      const before = await evalshaCalls(redis);
      const t0 = performance.now();
      const ds = await Promise.all([0, 1, 2].map(() => s.check(policy(), 1)));
      expect(performance.now() - t0).toBeGreaterThanOrEqual(bound / 1000);
      expect(ds.every((d) => d.allowed)).toBe(true);
      expect((await evalshaCalls(redis)) - before).toBe(1);
    });
  }

  it("a script error fails every decision of its batch, as it fails a single check", async () => {
    const bad = policy();
    // P:b of the wrong type: the check's HMGET fails with WRONGTYPE.
    await redis.set(keyNames(bad.tenant, bad.resource)[0], "not a hash");
    await expect(storeOn(redis).check(bad, 1)).rejects.toThrow(/WRONGTYPE/);
    const s = storeOn(server.client(), { maxChecks: 3, maxWaitUs: 1_000_000 });
    const settled = await Promise.allSettled([s.check(policy(), 1), s.check(bad, 1), s.check(policy(), 1)]);
    expect(settled.map((r) => r.status)).toEqual(["rejected", "rejected", "rejected"]);
    for (const r of settled) expect(String((r as PromiseRejectedResult).reason)).toMatch(/WRONGTYPE/);
    // A misused check fails alone, before it joins a batch.
    await expect(s.check(policy(), -1)).rejects.toThrow(/GQ_ERR_BAD_ARGUMENT/);
  });

  it("bad settings are refused with the setting named", () => {
    expect(() => storeOn(redis, { maxChecks: 1, maxWaitUs: 500 })).toThrow(/batch\.maxChecks 1/);
    expect(() => storeOn(redis, { maxChecks: 8, maxWaitUs: 0 })).toThrow(/batch\.maxWaitUs 0/);
  });
});

describe("micro-batched checks, durability per batch", () => {
  const servers: RedisServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((x) => x.stop()));
  });
  const pair = async () => {
    const primary = await startRedis();
    servers.push(primary);
    const replica = await startReplica(primary);
    servers.push(replica);
    await initFreshRegion(primary.client());
    return { primary, replica };
  };

  it("no admission of a batch is answered before WAIT acknowledges the batch", async () => {
    const { primary, replica } = await pair();
    const s = storeOn(
      primary.client(),
      { maxChecks: 4, maxWaitUs: 1000 },
      { replicas: 1, timeoutMs: 10_000 },
    );
    const p = policy({ capacity: 100, refillPerSecond: SLOW });
    await s.check(p, 1);
    let acked = false;
    const answeredAfterAck: boolean[] = [];
    replica.pause();
    let pending: Promise<StoreDecision[]>;
    try {
      pending = Promise.all(
        [0, 1, 2, 3].map((i) =>
          s.check(i === 2 ? policy({ capacity: 1, refillPerSecond: SLOW }) : p, i === 2 ? 5 : 1).then((d) => {
            answeredAfterAck.push(acked);
            return d;
          }),
        ),
      );
      await new Promise((r) => setTimeout(r, 300));
    } finally {
      acked = true;
      replica.resume();
    }
    const ds = await pending;
    expect(ds.map((d) => d.allowed)).toEqual([true, true, false, true]);
    // Every decision, the denial in the batch included, was answered after the replica acked.
    expect(answeredAfterAck).toEqual([true, true, true, true]);
  });

  it("a batch whose WAIT fails fails its admissions (NotDurableError) and answers its denials", async () => {
    const { primary, replica } = await pair();
    const s = storeOn(primary.client(), { maxChecks: 3, maxWaitUs: 1000 }, { replicas: 1, timeoutMs: 50 });
    const p = policy({ capacity: 10, refillPerSecond: SLOW });
    await s.check(p, 1);
    replica.pause();
    try {
      const settled = await Promise.allSettled([s.check(p, 1), s.check(p, 50), s.check(p, 2)]);
      expect((settled[0] as PromiseRejectedResult).reason).toBeInstanceOf(NotDurableError);
      expect((settled[1] as PromiseFulfilledResult<StoreDecision>).value.allowed).toBe(false);
      expect((settled[2] as PromiseRejectedResult).reason).toBeInstanceOf(NotDurableError);
    } finally {
      replica.resume();
    }
    // The failed admissions' tokens stay consumed (under-admission only): 10 − 1 − 1 − 2.
    const d = await storeOn(primary.client()).check(p, 0);
    expect(Math.floor(d.tokens)).toBe(6);
  });
});
