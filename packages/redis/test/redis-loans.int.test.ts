// Share changes on real Redis produce exactly the capacities DESIGN §3–4
// prescribe. Two regions, each with its own redis-server (same host clock).
import { type RedisServer, startRedisServers } from "@geoquota/testkit";
import type { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createGossipStore,
  createRedisStore,
  type GossipStore,
  ALL_SHARDS,
  initFreshRegion,
  markerKey,
  type RedisRegionStore,
} from "@geoquota/redis";
import type { KeyPolicy, LoanRecord, Timing } from "@geoquota/core";
import { policy, sleep } from "./redis-helpers.js";

/** Short D and ε so lapses happen within a test; ε still ≫ scheduling noise is not needed: expectations use the scripts' TIME. */
const FAST: Timing = { epsilonUs: 50_000, loanDurationUs: 400_000 };
const BASE = 500_000;
const FLOOR = 20_000;

let servers: RedisServer[] = [];
let eu: { redis: Redis; store: RedisRegionStore; gossip: GossipStore };
let us: { redis: Redis; store: RedisRegionStore; gossip: GossipStore };

function region(server: RedisServer, name: string) {
  const redis = server.client();
  return {
    redis,
    store: createRedisStore({ redis, region: name, timing: FAST }),
    gossip: createGossipStore({ redis, region: name, timing: FAST }),
  };
}

beforeAll(async () => {
  servers = await startRedisServers(2);
  eu = region(servers[0]!, "eu");
  us = region(servers[1]!, "us");
  await initFreshRegion(eu.redis);
  await initFreshRegion(us.redis);
});
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

const shared = (limit: Partial<KeyPolicy["limit"]> = {}): KeyPolicy =>
  policy({ capacity: 100, refillPerSecond: 100, ...limit }, { base: BASE, floor: FLOOR });

async function grant(p: KeyPolicy, units: number, durationUs?: number): Promise<LoanRecord> {
  const g = await eu.gossip.grantLoan(p, "us", units, durationUs);
  if (!g.ok) throw new Error(`grant refused: ${g.reason}`);
  expect(g.durable).toBe(true);
  return g.loan;
}

describe("loans move capacity", () => {
  it("a grant lowers the lender at once; the borrower rises only after the merge", async () => {
    const p = shared();
    const loan = await grant(p, 300_000);
    const lender = await eu.store.inspect(p);
    expect(lender.share).toBe(BASE - 300_000);
    expect(lender.tokens).toBe(20); // full 50 clamped to the new capacity C·s/U = 20
    expect((await us.store.inspect(p)).share).toBe(BASE);
    const m = await us.gossip.mergeRemote(p, [loan], {});
    expect(m.loansChanged).toBe(1);
    const borrower = await us.store.inspect(p);
    expect(borrower.share).toBe(BASE + 300_000);
    // Tokens do not jump: the bucket (created full at 50 by the merge, at the old share) only
    // refills at the new rate 80/s from the merge on; capacity is now 80.
    expect(borrower.tokens).toBeCloseTo(Math.min(80, 50 + (80 * (borrower.nowUs - m.nowUs)) / 1e6), 9);
    expect(borrower.loansIn).toEqual([loan]);
  });

  it("borrower stops at deadline − ε, lender reserves until deadline + ε (ε margins)", async () => {
    const p = shared();
    const loan = await grant(p, 200_000, 150_000);
    await us.gossip.mergeRemote(p, [loan], {});
    const eps = FAST.epsilonUs;
    const seen = { bUsing: false, bDone: false, lReserved: false, lFree: false };
    for (let i = 0; i < 60 && !(seen.bDone && seen.lFree); i++) {
      const b = await us.store.inspect(p);
      const l = await eu.store.inspect(p);
      const bUsing = b.nowUs < loan.deadlineUs - eps;
      const lReserved = l.nowUs < loan.deadlineUs + eps;
      expect(b.share).toBe(bUsing ? BASE + 200_000 : BASE);
      expect(l.share).toBe(lReserved ? BASE - 200_000 : BASE);
      if (bUsing) seen.bUsing = true;
      else seen.bDone = true;
      if (lReserved) seen.lReserved = true;
      else seen.lFree = true;
      // Between deadline − ε and deadline + ε nobody uses the units: Σ s ≤ U with a 2ε clock offset.
      expect(b.share + l.share).toBeLessThanOrEqual(2 * BASE);
      await sleep(10);
    }
    expect(seen).toEqual({ bUsing: true, bDone: true, lReserved: true, lFree: true });
  });

  it("a lapsed loan stays reserved from its deadline until deadline + ε: a grant inside that window counts it", async () => {
    // The share a bucket holds moves only at the schedule's steps (deadline + ε), so the window is
    // seen where the reservation is read at an arbitrary instant: a grant's room. ε is 1 s here and
    // the test waits for the lender's own TIME to pass the deadline (the loop above polls every
    // 10 ms over a 50 ms window: a loaded machine steps over it).
    const WIDE: Timing = { epsilonUs: 1_000_000, loanDurationUs: 400_000 };
    const lender = createGossipStore({ redis: eu.redis, region: "eu", timing: WIDE });
    const view = createRedisStore({ redis: eu.redis, region: "eu", timing: WIDE });
    const p = shared();
    const first = await lender.grantLoan(p, "us", 150_000, 100_000);
    if (!first.ok) throw new Error(`grant refused: ${first.reason}`);
    const d = first.loan.deadlineUs;
    for (let i = 0; i < 200 && (await view.inspect(p)).nowUs < d; i++) await sleep(10);
    // Room left beside the lapsed-but-reserved 150k: BASE − 150k − FLOOR; one more unit is too much.
    const over = await lender.grantLoan(p, "ap", BASE - 150_000 - FLOOR + 1);
    expect(over.nowUs).toBeGreaterThanOrEqual(d);
    expect(over.nowUs, "the grant ran past deadline + ε: the machine stalled a second").toBeLessThan(
      d + WIDE.epsilonUs,
    );
    expect(over).toMatchObject({ ok: false, reason: "floor" });
    const fits = await lender.grantLoan(p, "ap", BASE - 150_000 - FLOOR);
    expect(fits.ok).toBe(true);
  });

  it("early return frees the lender; a late duplicate of the returned loan is ignored (trap 12)", async () => {
    const p = shared();
    const loan = await grant(p, 250_000, 2_000_000);
    await us.gossip.mergeRemote(p, [loan], {});
    expect((await us.store.inspect(p)).share).toBe(BASE + 250_000);
    const ret = await us.gossip.returnLoan(p, "eu");
    expect(ret).toMatchObject({ seq: loan.seq, durable: true });
    expect((await us.store.inspect(p)).share).toBe(BASE);
    expect((await eu.store.inspect(p)).share).toBe(BASE - 250_000);
    expect((await eu.gossip.receiveReturn(p, "us", ret.seq)).dropped).toBe(1);
    expect((await eu.store.inspect(p)).share).toBe(BASE);
    // The same record arrives again (late or duplicated gossip): never used again.
    expect((await us.gossip.mergeRemote(p, [loan, loan], {})).loansChanged).toBe(0);
    expect((await us.store.inspect(p)).share).toBe(BASE);
    // A returning twice is a no-op; a newer loan is used.
    expect((await us.gossip.returnLoan(p, "eu")).seq).toBe(0);
    const next = await grant(p, 100_000, 2_000_000);
    expect(next.seq).toBeGreaterThan(loan.seq);
    await us.gossip.mergeRemote(p, [next], {});
    expect((await us.store.inspect(p)).share).toBe(BASE + 100_000);
  });

  it("a renewal with fewer units keeps the old reservation until it lapses (staircase)", async () => {
    const p = shared();
    const big = await grant(p, 300_000, 100_000);
    const small = await grant(p, 100_000, 2_000_000);
    expect(small.seq).toBeGreaterThan(big.seq);
    const l = await eu.store.inspect(p);
    expect(l.share).toBe(l.nowUs < big.deadlineUs + FAST.epsilonUs ? BASE - 300_000 : BASE - 100_000);
    await us.gossip.mergeRemote(p, [small, big], {});
    // The borrower uses only the highest seq.
    expect((await us.store.inspect(p)).share).toBe(BASE + 100_000);
    await sleep(200);
    expect((await eu.store.inspect(p)).share).toBe(BASE - 100_000);
  });

  it("lending below the floor is refused, and borrowed units are never re-lent (trap 3)", async () => {
    const p = shared();
    const refused = await eu.gossip.grantLoan(p, "us", BASE - FLOOR + 1);
    expect(refused).toMatchObject({ ok: false, reason: "floor" });
    // us borrows 300k, then tries to lend more than its own base allows.
    const loan = await grant(p, 300_000, 2_000_000);
    await us.gossip.mergeRemote(p, [loan], {});
    expect((await us.store.inspect(p)).share).toBe(BASE + 300_000);
    expect(await us.gossip.grantLoan(p, "eu", BASE - FLOOR + 1)).toMatchObject({
      ok: false,
      reason: "floor",
    });
    const ok = await us.gossip.grantLoan(p, "eu", BASE - FLOOR);
    expect(ok.ok).toBe(true);
    // Two borrowers together are bounded by the same base.
    const p2 = shared();
    await grant(p2, 300_000);
    const g2 = await eu.gossip.grantLoan(p2, "ap", 200_000);
    expect(g2).toMatchObject({ ok: false, reason: "floor" });
    expect((await eu.gossip.grantLoan(p2, "ap", 180_000)).ok).toBe(true);
    expect(await eu.gossip.grantLoan(p2, "eu", 1)).toMatchObject({ ok: false, reason: "self" });
  });

  it("window algorithms never lend", async () => {
    const p = shared({ algorithm: "fixed_window", windowMs: 1000 });
    expect(await eu.gossip.grantLoan(p, "us", 1000)).toMatchObject({ ok: false, reason: "algorithm" });
  });
});

describe("split refill (traps 1 and 10)", () => {
  it("a share rise inside the interval refills each piece at its own rate and capacity", async () => {
    const p = shared();
    // Lender at 100k ppm while the loan is reserved: capacity 10, rate 10/s; afterwards 50 and 50/s.
    const loan = await grant(p, 400_000, 200_000);
    const drained = await eu.store.check(p, 10);
    expect(drained.allowed).toBe(true);
    expect(drained.tokens).toBe(0);
    const t0 = drained.nowUs;
    const tc = loan.deadlineUs + FAST.epsilonUs;
    await sleep((tc - t0) / 1000 + 150);
    const v = await eu.store.inspect(p);
    const t1 = v.nowUs;
    expect(t1).toBeGreaterThan(tc);
    const piece1 = Math.min(10, (10 * (tc - t0)) / 1e6);
    const expected = Math.min(50, piece1 + (50 * (t1 - tc)) / 1e6);
    expect(v.tokens).toBeCloseTo(expected, 9);
    // What the flawed variants would give, all different from the truth:
    const newRateWhole = Math.min(50, (50 * (t1 - t0)) / 1e6);
    const oldRateNewCap = Math.min(50, (10 * (t1 - t0)) / 1e6);
    expect(Math.abs(v.tokens - newRateWhole)).toBeGreaterThan(1);
    expect(Math.abs(v.tokens - oldRateNewCap)).toBeGreaterThan(1);
  });
});

describe("recovery (DESIGN §4, trap 4)", () => {
  it("after the marker vanishes: share ≤ floor, no grants, new buckets start empty until recoveryEnd + C/r", async () => {
    const redis = servers[0]!.client();
    const store = createRedisStore({ redis, region: "eu", timing: FAST });
    const gossip = createGossipStore({ redis, region: "eu", timing: FAST });
    const old = shared();
    expect((await store.check(old, 1)).allowed).toBe(true);
    await redis.del(...ALL_SHARDS.map(markerKey));
    const p = shared({ capacity: 10, refillPerSecond: 20 }); // C/r = 0.5 s
    const first = await store.check(p, 1);
    expect(first.recovering).toBe(true);
    expect(first.allowed).toBe(false);
    expect(first.tokens).toBe(0);
    expect(first.share).toBe(FLOOR);
    // The bucket of the earlier incarnation is discarded too.
    const again = await store.check(old, 1);
    expect(again).toMatchObject({ recovering: true, share: FLOOR });
    expect(await gossip.grantLoan(p, "us", 1000)).toMatchObject({ ok: false, reason: "recovering" });
    const inc = await gossip.currentIncarnation(p.tenant);
    const recEnd = inc.bornUs + FAST.loanDurationUs + 2 * FAST.epsilonUs;
    expect(inc.bornUs).toBe(first.nowUs);
    await sleep((recEnd - first.nowUs) / 1000 + 20);
    const after = await store.check(p, 0);
    expect(after.recovering).toBe(false);
    expect(after.share).toBe(BASE);
    // Created empty at t0 (never persisted by the denial: recreated empty now), it refills from here.
    expect(after.tokens).toBe(0);
    expect((await gossip.grantLoan(p, "us", 1000)).ok).toBe(true);
    await initFreshRegionAgain(redis);
  });

  it("after FLUSHALL the next check is conservative and the share stays ≤ floor until recovery end", async () => {
    const redis = servers[1]!.client();
    const store = createRedisStore({ redis, region: "us", timing: FAST });
    const p = shared();
    expect((await store.check(p, 1)).allowed).toBe(true);
    await redis.flushall();
    const d = await store.check(p, 1);
    expect(d).toMatchObject({ allowed: false, recovering: true, share: FLOOR, tokens: 0 });
    const born = d.nowUs;
    for (let i = 0; i < 8; i++) {
      const v = await store.inspect(p);
      const rec = v.nowUs < born + FAST.loanDurationUs + 2 * FAST.epsilonUs;
      expect(v.share).toBe(rec ? FLOOR : BASE);
      await sleep(100);
    }
    await initFreshRegionAgain(redis);
  });
});

/** Puts a region back on a never-recovering marker for the tests that follow. */
async function initFreshRegionAgain(redis: Redis): Promise<void> {
  await redis.del(...ALL_SHARDS.map(markerKey));
  await initFreshRegion(redis);
}
