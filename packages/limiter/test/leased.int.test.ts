// Leased in-process clients against the real Redis store: use is reported and
// the unused returned on close; many clients on one bucket never admit more
// than C + r·T over any sub-interval (DESIGN §8 oracle, exact).
import { checkGlobalBound, type RedisServer, startRedis } from "@geoquota/testkit";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LeasedClient } from "../src/leased-client.js";
import { createRedisStore, initFreshRegion, shardOf } from "@geoquota/redis";
import type { KeyPolicy, RegionStore } from "@geoquota/core";

let server: RedisServer;
let redis: Redis;
let store: RegionStore;
let n = 0;

function policy(capacity: number, refillPerSecond: number): KeyPolicy {
  n += 1;
  return {
    tenant: `leased${process.pid}x${n}`,
    resource: "api",
    limit: { algorithm: "token_bucket", capacity, refillPerSecond },
    baseShare: 1_000_000,
    floorShare: 20_000,
  };
}

beforeAll(async () => {
  server = await startRedis();
  redis = server.client();
  await initFreshRegion(redis);
  store = createRedisStore({
    redis,
    region: "us-east",
    timing: { epsilonUs: 250_000, loanDurationUs: 3_000_000 },
  });
});
afterAll(async () => {
  await server?.stop();
});

describe("leased client on the real store", () => {
  it("reports use and returns the unused on close; leased tokens stay counted meanwhile", async () => {
    const p = policy(100, 0.0001);
    const started = performance.now();
    const c = new LeasedClient(store, p, { batch: 50, lowWater: 10 });
    for (let i = 0; i < 7; i++) expect(await c.take(1)).toBe(true);
    const during = await store.inspect(p);
    // 50 leased out of 100: the bucket holds at most the other 50 (+ refill ≤ 1e-4/s).
    expect(during.tokens).toBeLessThanOrEqual(50 + (0.0001 * (performance.now() - started)) / 1000);
    await c.close();
    const after = await store.inspect(p);
    const refillBound = (0.0001 * (performance.now() - started)) / 1000;
    expect(after.tokens).toBeGreaterThanOrEqual(93);
    expect(after.tokens).toBeLessThanOrEqual(93 + refillBound);
    const net =
      Object.values(after.counters.admitted).reduce((a, b) => a + b, 0) -
      Object.values(after.counters.refunded).reduce((a, b) => a + b, 0);
    expect(net).toBe(7);
  });

  it("a used-up lease rides along with the next acquire: one script call per batch (+ close)", async () => {
    const p = policy(1_000, 0.0001);
    const calls = async () => {
      const m = /cmdstat_evalsha:calls=(\d+)/.exec(await redis.info("commandstats"));
      return Number(m?.[1] ?? 0);
    };
    const before = await calls();
    const c = new LeasedClient(store, p, { batch: 50, lowWater: 10 });
    for (let i = 0; i < 250; i++) expect(await c.take(1)).toBe(true);
    await c.close();
    // 6 acquires (at 0, 40, 90, 140, 190, 240 used), each carrying the lease used up before,
    // and one release-only call on close for what is left. Separate releases would add 5.
    expect((await calls()) - before).toBeLessThanOrEqual(7);
    const after = await store.inspect(p);
    const net =
      Object.values(after.counters.admitted).reduce((a, b) => a + b, 0) -
      Object.values(after.counters.refunded).reduce((a, b) => a + b, 0);
    expect(net).toBe(250);
    expect(await redis.hlen(`gq:{s${shardOf(p.tenant)}}:${p.tenant}:${p.resource}:k`)).toBe(0);
  });

  it("many leased clients on one bucket: admitted ≤ C + r·T over every sub-interval", async () => {
    const C = 40;
    const r = 20;
    const p = policy(C, r);
    const clients = Array.from(
      { length: 8 },
      () => new LeasedClient(store, p, { batch: 10, lowWater: 3, durationMs: 1000, marginMs: 50 }),
    );
    const admissions: { sentMs: number; answeredMs: number; cost: number }[] = [];
    const runUntil = performance.now() + 2500;
    let denied = 0;
    await Promise.all(
      clients.map(async (c) => {
        while (performance.now() < runUntil) {
          const sentMs = performance.now();
          const ok = await c.take(1);
          const answeredMs = performance.now();
          if (ok) admissions.push({ sentMs, answeredMs, cost: 1 });
          else {
            denied++;
            await new Promise((res) => setTimeout(res, 2));
          }
          await new Promise((res) => setImmediate(res));
        }
      }),
    );
    await Promise.all(clients.map((c) => c.close()));
    const verdict = checkGlobalBound(admissions, { capacity: C, refillPerSecond: r });
    expect(verdict.ok, JSON.stringify(verdict.worstInterval)).toBe(true);
    // Demand far above the limit, so the run is not vacuous.
    expect(denied).toBeGreaterThan(0);
    expect(verdict.admitted).toBeGreaterThan(C);
  });
});
