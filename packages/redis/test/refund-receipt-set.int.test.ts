// The set of used refund receipts (P:f, lua/refund.lua; DESIGN §7) on a real
// Redis: each used receipt stays in it until the receipt expires, so it
// cannot be refunded twice, and leaves it after, so the set stays bounded.
// Its member's score is the receipt's expiry; the key's TTL covers the latest
// expiry of its members (a later receipt never shortens it, a longer one
// extends it) and no more.
import { refundedReceiptsKey } from "@geoquota/redis";
import { describe, expect, it } from "vitest";
import type { KeyPolicy } from "@geoquota/core";
import { freshRegionPerFile, policy, sleep } from "./redis-helpers.js";

const fx = freshRegionPerFile();

let n = 0;
async function redisNowUs(): Promise<number> {
  const [s, us] = await fx.redis.time();
  return Number(s) * 1_000_000 + Number(us);
}

/** Refunds a fresh receipt (or `id` again) admitted now, refundable for `forMs`. */
async function refundFor(p: KeyPolicy, forMs: number, id = `s${process.pid}x${++n}`) {
  const admittedUs = await redisNowUs();
  const expiresUs = admittedUs + forMs * 1000;
  const out = await fx.setup.store.refund(p, 1, { id, admittedUs, expiresUs });
  return { id, expiresUs, out };
}

async function replay(p: KeyPolicy, r: { id: string; expiresUs: number }) {
  const out = await fx.setup.store.refund(p, 1, {
    id: r.id,
    admittedUs: await redisNowUs(),
    expiresUs: r.expiresUs,
  });
  return out.refunded ? "refunded" : out.reason;
}

/**
 * The key's remaining TTL against what it must cover: [latest expiry − now, that + 2 ms], with
 * "now" bracketed by a Redis TIME before and after the PTTL (on a loaded machine the calls are
 * milliseconds apart, and a TIME read only after the PTTL made the bound too tight).
 */
async function ttlCovers(
  key: string,
  latestExpiryUs: number,
): Promise<{ pttl: number; lo: number; hi: number }> {
  const before = await redisNowUs();
  const pttl = await fx.redis.pttl(key);
  const after = await redisNowUs();
  return {
    pttl,
    lo: Math.floor((latestExpiryUs - after) / 1000) - 1,
    hi: Math.ceil((latestExpiryUs - before) / 1000) + 2,
  };
}

describe("the set of used refund receipts", () => {
  it("keeps each receipt scored by its expiry; its TTL covers the latest expiry, never shortened, and no more", async () => {
    const p = policy();
    const key = refundedReceiptsKey(p.tenant, p.resource);
    const a = await refundFor(p, 5000);
    expect(a.out.refunded).toBe(true);
    expect(Number(await fx.redis.zscore(key, a.id))).toBe(a.expiresUs);
    let t = await ttlCovers(key, a.expiresUs);
    expect(t.pttl).toBeGreaterThanOrEqual(t.lo);
    expect(t.pttl).toBeLessThanOrEqual(t.hi);
    // A receipt expiring sooner does not shorten the set's life…
    const b = await refundFor(p, 500);
    expect(b.out.refunded).toBe(true);
    t = await ttlCovers(key, a.expiresUs);
    expect(t.pttl).toBeGreaterThanOrEqual(t.lo);
    expect(t.pttl).toBeLessThanOrEqual(t.hi);
    // …one expiring later extends it.
    const c = await refundFor(p, 8000);
    expect(c.out.refunded).toBe(true);
    t = await ttlCovers(key, c.expiresUs);
    expect(t.pttl).toBeGreaterThanOrEqual(t.lo);
    expect(t.pttl).toBeLessThanOrEqual(t.hi);
  });

  it("a receipt cannot be refunded again until it expires, whatever expired or was refunded since", async () => {
    // A long receipt, then a short one (its TTL must not cut the long one's life short).
    const p = policy();
    const key = refundedReceiptsKey(p.tenant, p.resource);
    const long = await refundFor(p, 1500);
    const short = await refundFor(p, 300);
    expect([long.out.refunded, short.out.refunded]).toEqual([true, true]);
    await sleep(500);
    // Another refund with a later expiry trims what expired (the short one), nothing else.
    const later = await refundFor(p, 5000);
    expect(later.out.refunded).toBe(true);
    expect(await fx.redis.zscore(key, short.id)).toBeNull();
    expect(await replay(p, long)).toBe("used");
    expect(await replay(p, later)).toBe("used");
    // A short receipt, then a long one (the long one's refund must extend the set's life).
    const q = policy();
    const s2 = await refundFor(q, 300);
    const l2 = await refundFor(q, 1500);
    expect([s2.out.refunded, l2.out.refunded]).toEqual([true, true]);
    await sleep(500);
    expect(await replay(q, l2)).toBe("used");
  });

  it("expired receipts leave the set and the set expires: the state stays bounded", async () => {
    const p = policy();
    const key = refundedReceiptsKey(p.tenant, p.resource);
    // A long-lived member keeps the key alive while the short ones expire.
    const long = await refundFor(p, 5000);
    for (let i = 0; i < 5; i++) expect((await refundFor(p, 200)).out.refunded).toBe(true);
    expect(await fx.redis.zcard(key)).toBe(6);
    await sleep(300);
    const one = await refundFor(p, 400);
    expect(one.out.refunded).toBe(true);
    expect(await fx.redis.zrange(key, "0", "-1")).toEqual([one.id, long.id]);
    // Once its latest receipt expired, the key itself is gone.
    const q = policy();
    for (let i = 0; i < 2; i++) expect((await refundFor(q, 200)).out.refunded).toBe(true);
    await sleep(350);
    expect(await fx.redis.exists(refundedReceiptsKey(q.tenant, q.resource))).toBe(0);
  });
});
