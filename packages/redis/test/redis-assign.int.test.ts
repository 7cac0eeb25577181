// RLQS quota assignments as leases of burst and rate (DESIGN §11, lua/assign_reserve.lua), on a
// real Redis: reserved from the send until TTL + the delivery margin, the rate held as share, never
// lent, returned or released underneath. The arithmetic equals the model's (lua-differential).
import {
  assignReserveArgs,
  bindScripts,
  dirtyKey,
  dirtyMember,
  drainGenKey,
  keyArgsBuilder,
  shardOf,
} from "@geoquota/redis";
import { expect, it } from "vitest";
import { inspectKey } from "../src/store.js";
import { freshRegionPerFile, policy, TIMING } from "./redis-helpers.js";

const fx = freshRegionPerFile();
const args = keyArgsBuilder(TIMING);
const U = 1_000_000;

function leasesKey(p: ReturnType<typeof policy<"token_bucket">>): string {
  return `gq:{s${shardOf(p.tenant)}}:${p.tenant}:api:k`;
}

async function reserve(
  p: ReturnType<typeof policy<"token_bucket">>,
  id: string,
  burst: number,
  rate: number,
  ttlUs: number,
  marginUs: number,
  supersedes = "",
) {
  return bindScripts(fx.redis).run(
    "assignReserve",
    assignReserveArgs(args(p), "eu", id, burst, rate, ttlUs, marginUs, supersedes),
  );
}

it("an assignment is reserved from its send until TTL plus the delivery margin, its rate held as share", async () => {
  const p = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000, floor: 20_000 });
  const r = await reserve(p, "s1", 30, 20, 1_000_000, 200_000);
  // q = ⌈20·U/100⌉ = 200,000 ppm (capacity 20 with it); the burst beyond it (10) as leased tokens;
  // the record keeps the burst granted (30).
  expect(r).toMatchObject({ burst: 30, rate: 20, ttlUs: 1_000_000 });
  expect(r.expiryUs - r.nowUs).toBe(1_000_000 + 200_000);
  expect(await fx.redis.hget(leasesKey(p), "q|s1")).toBe(`10:${r.expiryUs}:200000:30`);
  const v = await fx.setup.store.check(p, 0);
  // The bucket's own slice: share 300,000 (rate 30/s), capacity 30 − 10 leased = 20.
  expect(v.capacity).toBe((100 * 300_000) / U - 10);
  // Burst + bucket ≤ the slice's capacity (50); rate + bucket rate ≤ the slice's rate (50/s).
  expect(30 + v.tokens).toBeLessThanOrEqual((100 * 500_000) / U);
  // An assignment past D is capped at D (the reply's TTL says what was granted).
  const long = await reserve(p, "s2", 1, 1, 10_000_000, 200_000);
  expect(long.expiryUs - long.nowUs).toBe(TIMING.loanDurationUs);
  expect(long.ttlUs).toBe(TIMING.loanDurationUs - 200_000);
});

it("the share under a live assignment is never lent away, returned or released underneath", async () => {
  const p = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000, floor: 20_000 });
  const r = await reserve(p, "s1", 1, 40, 2_000_000, 200_000);
  expect(r.rate).toBe(40);
  const a = args(p);
  const s = bindScripts(fx.redis);
  // The lender may lend base − floor (480,000) only where no assignment holds it: 400,000 does.
  const all = await s.call("loanGrant", a.keys, ["eu", "us", 480_000, 1_000_000]);
  expect(all).toMatchObject({ ok: false, reason: "leased" });
  const free = await s.call("loanGrant", a.keys, ["eu", "us", 100_000, 1_000_000]);
  expect(free).toMatchObject({ ok: true, units: 100_000 });
  // A release naming it gives nothing back and leaves it reserved.
  const rel = await s.call("leaseRelease", a.keys, ["eu", "q|s1", "0"]);
  expect(rel.returned).toBe(0);
  expect(await fx.redis.hget(leasesKey(p), "q|s1")).toBe(`0:${r.expiryUs}:400000:1`);
  // Nothing left to assign: the rest of the slice is lent.
  expect((await reserve(p, "s2", 1, 5, 1_000_000, 0)).ttlUs).toBe(0);
});

it("a usage report counts admissions and denials in the key's counters and on the change feed, taking nothing from the bucket", async () => {
  const p = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000, floor: 20_000 });
  await reserve(p, "u1", 10, 10, 1_000_000, 0);
  const store = fx.setup.store;
  const before = await store.inspect(p);
  const shard = shardOf(p.tenant);
  // As a drain round does: the member popped, the generation moved on.
  await fx.redis.srem(dirtyKey(shard), dirtyMember(p.tenant, p.resource));
  await fx.redis.incr(drainGenKey(shard));
  await store.countUsage(p, 7, 3);
  await store.countUsage(p, 2, 0);
  const after = await store.inspect(p);
  const own = (m: Readonly<Record<string, number>>) => Object.values(m).reduce((x, y) => x + y, 0);
  expect(own(after.counters.admitted) - own(before.counters.admitted)).toBe(9);
  expect(own(after.counters.denied) - own(before.counters.denied)).toBe(3);
  expect(own(after.counters.refunded)).toBe(own(before.counters.refunded));
  // The bucket refills on its own: the report took nothing (tokens never fall).
  expect(after.tokens).toBeGreaterThanOrEqual(before.tokens);
  expect(await fx.redis.sismember(dirtyKey(shard), dirtyMember(p.tenant, p.resource))).toBe(1);
});

it("an ask without a token is refused: a token bucket of max_tokens 0 admits nothing, whatever its rate", async () => {
  const p = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000, floor: 20_000 });
  const none = await reserve(p, "z1", 0, 20, 1_000_000, 0);
  expect(none).toMatchObject({ burst: 0, rate: 0, ttlUs: 0, shareUnits: 500_000 });
  expect(await fx.redis.hget(leasesKey(p), "q|z1")).toBeNull();
  // The reply names the region's share before the reservation (its bucket's plus assignments').
  const one = await reserve(p, "z2", 1, 20, 1_000_000, 0);
  expect(one).toMatchObject({ burst: 1, rate: 20, shareUnits: 500_000 });
  expect((await reserve(p, "z3", 1, 5, 1_000_000, 0)).shareUnits).toBe(500_000);
});

it("the key's view for gossip names each live assignment's share, which its lending and returns must not take", async () => {
  const p = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000, floor: 20_000 });
  await reserve(p, "v1", 5, 20, 1_000_000, 0);
  const v = await inspectKey(bindScripts(fx.redis), args(p), "eu");
  expect(v.leases["q|v1"]).toMatchObject({ tokens: 0, shareUnits: 200_000 });
});

it("an ask beyond what is free gets the largest assignment that fits, the rate first", async () => {
  const p = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000, floor: 20_000 });
  // A burst-only assignment holds 30 of the slice's capacity (50) as leased tokens.
  await reserve(p, "f1", 30, 0, 1_000_000, 0);
  // All of the rate (50/s) and a burst of 50 do not fit: what is left (capacity 20) goes to the rate
  // first (20/s, q = 200,000 with its capacity 20), then the burst beside it (20, within C·q/U).
  const r = await reserve(p, "f2", 50, 50, 1_000_000, 0);
  expect(r).toMatchObject({ burst: 20, rate: 20, ttlUs: 1_000_000 });
  expect(await fx.redis.hget(leasesKey(p), "q|f2")).toBe(`0:${r.expiryUs}:200000:20`);
  // Nothing is left for a third.
  expect((await reserve(p, "f3", 10, 10, 1_000_000, 0)).ttlUs).toBe(0);
  expect((await fx.setup.store.check(p, 0)).capacity).toBe(0);
});

it("an assignment over a share drop inside the delivery margin is sized to the drop; past the margin it is cut there", async () => {
  const p = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000, floor: 20_000 });
  const a = args(p);
  const s = bindScripts(fx.redis);
  const [sec, usec] = await fx.redis.time();
  const deadline = Number(sec) * 1e6 + Number(usec) + 1_000_000;
  // 300,000 ppm borrowed until deadline − ε (750 ms from now).
  await s.call("loanMerge", a.keys, ["eu", 1, "us", 300_000, deadline, 1, 0]);
  // A drop 750 ms away inside a 900 ms margin: a cut would leave no TTL, so the rate is what the
  // base share alone backs (50/s of the 80/s now), for the whole TTL.
  const inMargin = await reserve(p, "d1", 1, 100, 1_000_000, 900_000);
  expect(inMargin).toMatchObject({ rate: 50, ttlUs: 1_000_000 });
  // Nothing of the base is left; the borrowed 300,000 is, until the drop: cut there, not shrunk.
  const cut = await reserve(p, "d2", 1, 100, 1_000_000, 5_000);
  expect(cut.rate).toBe(30);
  expect(cut.expiryUs).toBe(deadline - TIMING.epsilonUs);
});

it("a renewal superseding a live assignment holds the larger rate, not both: it reaches the free rate while the old one is live", async () => {
  const p = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000, floor: 20_000 });
  // Old: 25/s (q = 250,000, capacity 25) with a burst of 5 (within it: no leased tokens).
  const old = await reserve(p, "r1", 5, 25, 1_000_000, 100_000);
  expect(old).toMatchObject({ burst: 5, rate: 25 });
  // The renewal asks all of the slice's rate. Its share may be the old one's (the proxy runs one
  // bucket at a time); both bursts stay backed: the old one's 5 become leased tokens on it. So the
  // renewal gets 50 − 5 = 45/s, not the 25/s left beside the old one's share.
  const r = await reserve(p, "r2", 5, 50, 1_000_000, 100_000, "r1");
  expect(r).toMatchObject({ burst: 5, rate: 45, ttlUs: 1_000_000 });
  expect(await fx.redis.hget(leasesKey(p), "q|r1")).toBe(`5:${old.expiryUs}:0:5`);
  expect(await fx.redis.hget(leasesKey(p), "q|r2")).toBe(`0:${r.expiryUs}:450000:5`);
  // Share held 450,000 = max(q_old, q_new); capacity held 45 + 5 ≥ both bursts; the bucket keeps
  // nothing (its 5/s and no capacity).
  const v = await fx.setup.store.check(p, 1);
  expect(v.allowed).toBe(false);
  expect(v.capacity).toBe(0);
});

it("a smaller renewal leaves the old record the share it still needs; the old burst stays backed beside the new one", async () => {
  const p = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000, floor: 20_000 });
  // Old: 10/s (q = 100,000) and a burst of 30: 20 of it as leased tokens.
  const old = await reserve(p, "b1", 30, 10, 1_000_000, 100_000);
  expect(await fx.redis.hget(leasesKey(p), "q|b1")).toBe(`20:${old.expiryUs}:100000:30`);
  // The renewal (10/s, burst 10) takes the old one's share; the old one's burst (30) is backed by
  // leased tokens alone now (30), the new one's by its share (capacity 10).
  const r = await reserve(p, "b2", 10, 10, 1_000_000, 100_000, "b1");
  expect(r).toMatchObject({ burst: 10, rate: 10 });
  expect(await fx.redis.hget(leasesKey(p), "q|b1")).toBe(`30:${old.expiryUs}:0:30`);
  expect(await fx.redis.hget(leasesKey(p), "q|b2")).toBe(`0:${r.expiryUs}:100000:10`);
  // Σ bursts (40) + the bucket's capacity ≤ 50: a check cannot count on more than 10.
  expect((await fx.setup.store.check(p, 0)).capacity).toBe(10);
  // A supersede naming an unknown id is a fresh assignment (through the store: the ask's field).
  const fresh = await fx.setup.store.reserveAssignment?.(p, {
    id: "b3",
    burst: 1,
    rate: 5,
    ttlUs: 1_000_000,
    marginUs: 0,
    supersedes: "nope",
  });
  expect(fresh).toMatchObject({ rate: 5 });
  await expect(
    fx.setup.store.reserveAssignment?.(p, {
      id: "b4",
      burst: 1,
      rate: 1,
      ttlUs: 1,
      marginUs: 0,
      supersedes: "a|b",
    }),
  ).rejects.toThrow(/assignment/);
});

it("a record written without its burst (g:e:q) is superseded at its most: the renewal gets no more rate than beside it", async () => {
  const p = policy({ capacity: 100, refillPerSecond: 100 }, { base: 500_000, floor: 20_000 });
  const old = await reserve(p, "l1", 5, 25, 1_000_000, 100_000);
  // As the script before bursts were kept wrote it: the burst may be all of C·q/U + g = 25.
  await fx.redis.hset(leasesKey(p), "q|l1", `0:${old.expiryUs}:250000`);
  const r = await reserve(p, "l2", 5, 50, 1_000_000, 100_000, "l1");
  // Its share moves, its capacity (25) stays as leased tokens: 25/s left, as for a fresh one.
  expect(r).toMatchObject({ burst: 5, rate: 25 });
  expect(await fx.redis.hget(leasesKey(p), "q|l1")).toBe(`25:${old.expiryUs}:0`);
  expect((await fx.setup.store.check(p, 0)).capacity).toBe(0);
});
