// In-process leases stay counted against the bucket's capacity (DESIGN §7, trap 5).
import { expect, it } from "vitest";
import * as lease from "@geoquota/core";
import { keyLimit } from "@geoquota/redis";
import { shardOf } from "@geoquota/redis";
import { freshRegionPerFile, policy, sleep, TIMING } from "./redis-helpers.js";

const fx = freshRegionPerFile();

it("after leasing N the bucket never refills above capacity − N; release returns the unused", async () => {
  const p = policy({ capacity: 10, refillPerSecond: 100 });
  const lease = await fx.setup.store.acquireLease(p, 6, 2000);
  expect(lease.granted).toBe(6);
  await sleep(150); // long enough to refill 15 tokens
  const v = await fx.setup.store.check(p, 0);
  expect(v.capacity).toBe(4);
  expect(v.tokens).toBe(4);
  const r = await fx.setup.store.releaseLeaseDetailed(p, lease.leaseId, 2);
  expect(r.returned).toBe(4);
  const after = await fx.setup.store.check(p, 0);
  expect(after.capacity).toBe(10);
  // 4 in the bucket + 4 returned (the 2 used stay used), then refill at 100/s since the release.
  expect(after.tokens).toBeCloseTo(Math.min(10, 8 + (100 * (after.nowUs - r.nowUs)) / 1e6), 9);
  const view = await fx.setup.store.inspect(p);
  const [admitted] = Object.values(view.counters.admitted);
  const [refunded] = Object.values(view.counters.refunded);
  expect(admitted).toBe(6);
  expect(refunded).toBe(4);
});

it("a lease takes at most the whole tokens available; the shortfall counts as denied demand", async () => {
  const p = policy({ capacity: 3, refillPerSecond: 1e-6 });
  expect((await fx.setup.store.check(p, 0.5)).allowed).toBe(true);
  expect((await fx.setup.store.acquireLease(p, 10, 1000)).granted).toBe(2);
  expect((await fx.setup.store.acquireLease(p, 10, 1000)).granted).toBe(0);
  // Unmet lease requests are what re-weighting sees of a leasing region's demand.
  const view = await fx.setup.store.inspect(p);
  expect(Object.values(view.counters.denied)).toEqual([8 + 10]);
  expect(Object.values(view.counters.admitted)).toEqual([0.5 + 2]);
});

it("an expired lease counts as used: nothing comes back, capacity is free again", async () => {
  const p = policy({ capacity: 10, refillPerSecond: 1e-6 });
  const lease = await fx.setup.store.acquireLease(p, 10, 100);
  expect((await fx.setup.store.check(p, 0)).capacity).toBe(0);
  await sleep(150);
  const v = await fx.setup.store.check(p, 0);
  expect(v.capacity).toBe(10);
  expect(v.tokens).toBeLessThan(0.001); // no refill to speak of: the leased tokens are spent
  expect((await fx.setup.store.releaseLeaseDetailed(p, lease.leaseId, 0)).returned).toBe(0);
  expect(await fx.redis.hlen(`gq:{s${shardOf(p.tenant)}}:${p.tenant}:api:k`)).toBe(0);
});

it("leases are for the token bucket only, and no longer than D", async () => {
  await expect(fx.setup.store.acquireLease(policy({ algorithm: "gcra" }), 1, 100)).rejects.toMatchObject({
    code: "GQ_ERR_LEASE_ALGORITHM",
  });
  await expect(fx.setup.store.acquireLease(policy(), 1, 10_000)).rejects.toMatchObject({
    code: "GQ_ERR_BAD_ARGUMENT",
  });
});

it("renewLease: releases and the next acquire in one call equal release… then acquire (model replay)", async () => {
  const p = policy({ capacity: 20, refillPerSecond: 50 });
  const region: lease.RegionState = { region: "eu", marker: fx.setup.marker };
  const key = lease.emptyKeyState();
  const limit = keyLimit(p);
  const held: { leaseId: string; granted: number }[] = [];
  const calls: [number, number][] = [
    [7, 0],
    [7, 0],
    [5, 1],
    [9, 2],
    [0, 1], // release only
    [4, 0],
  ];
  for (const [tokens, nRel] of calls) {
    await sleep(15);
    const rel = held.splice(0, nRel).map((h, i) => ({ leaseId: h.leaseId, used: i === 0 ? h.granted : 1 }));
    const got = await fx.setup.store.renewLease(p, rel, tokens, 1000);
    const want = lease.renewLease(
      region,
      key,
      limit,
      TIMING,
      rel,
      got.lease.leaseId,
      tokens,
      1_000_000,
      got.lease.nowUs,
    );
    expect(got.lease.granted).toBe(want.granted);
    expect(got.lease.expiryUs).toBe(want.expiryUs);
    expect(got.returned).toEqual(want.returned);
    if (got.lease.granted > 0) held.push({ leaseId: got.lease.leaseId, granted: got.lease.granted });
    const d = await fx.setup.store.check(p, 0);
    const m = lease.check(region, key, limit, TIMING, 0, d.nowUs);
    expect(d.tokens).toBe(m.remaining);
    expect(d.capacity).toBe(m.capacity);
  }
  // One EVALSHA per renew: the releases left P:k.
  expect(await fx.redis.hlen(`gq:{s${shardOf(p.tenant)}}:${p.tenant}:api:k`)).toBe(held.length);
});
