// The pool behind the service's leased path (limiter.ts `limit`): one client
// per key, a changed policy replaces the key's client, and the bound evicts a
// key not used since the last scan before any key that was (second chance).
import { keyPolicy } from "@geoquota/testkit";
import { describe, expect, it } from "vitest";
import { LeasePool } from "../src/lease-pool.js";
import type { KeyPolicy } from "@geoquota/core";
import { FakeStore } from "./helpers/fake-store.js";

const policyOf = (resource: string, capacity = 300): KeyPolicy =>
  keyPolicy({ resource, capacity, refillPerSecond: 30, baseShare: 333_334 });

describe("lease pool", () => {
  it("serves one client per key: the same policy object, or an equal one", async () => {
    const pool = new LeasePool(new FakeStore(), { maxKeys: 10 });
    const p = policyOf("r1");
    const c = pool.get(p);
    expect(pool.get(p)).toBe(c);
    expect(pool.get({ ...p })).toBe(c);
    expect(pool.peek(p)).toBe(c);
    expect(pool.size).toBe(1);
    await pool.close();
  });

  it("a changed policy replaces the key's client, also for the old policy object's next call", async () => {
    const pool = new LeasePool(new FakeStore(), { maxKeys: 10 });
    const before = policyOf("r1", 300);
    const after = policyOf("r1", 600);
    const old = pool.get(before);
    const fresh = pool.get(after);
    expect(fresh).not.toBe(old);
    expect(fresh.policy).toBe(after);
    expect(pool.peek(after)).toBe(fresh);
    // The old object's cached entry is no longer live: it is served by policy, not from the cache.
    const back = pool.get(before);
    expect(back).not.toBe(old);
    expect(back).not.toBe(fresh);
    expect(back.policy).toBe(before);
    expect(pool.size).toBe(1);
    await pool.close();
  });

  it("at the bound, a key used since the last scan outlives one that was not", async () => {
    const pool = new LeasePool(new FakeStore(), { maxKeys: 3 });
    const [a, b, c, d] = ["a", "b", "c", "d"].map((r) => policyOf(r)) as [
      KeyPolicy,
      KeyPolicy,
      KeyPolicy,
      KeyPolicy,
    ];
    const ca = pool.get(a);
    const cb = pool.get(b);
    const cc = pool.get(c);
    expect(pool.get(a)).toBe(ca); // a used again: b is now the least recently used
    pool.get(d);
    expect(pool.size).toBe(3);
    expect(pool.peek(a)).toBe(ca);
    expect(pool.peek(b)).toBeUndefined();
    expect(pool.peek(c)).toBe(cc);
    // The evicted key's policy object no longer reaches its old client.
    const nb = pool.get(b);
    expect(nb).not.toBe(cb);
    expect(pool.size).toBe(3);
    await pool.close();
  });

  it("every key marked: one pass clears the marks and the oldest goes", async () => {
    const pool = new LeasePool(new FakeStore(), { maxKeys: 2 });
    const [a, b, c] = ["a", "b", "c"].map((r) => policyOf(r)) as [KeyPolicy, KeyPolicy, KeyPolicy];
    pool.get(a);
    pool.get(b);
    pool.get(a);
    pool.get(b);
    pool.get(c);
    expect(pool.size).toBe(2);
    expect(pool.peek(a)).toBeUndefined();
    expect(pool.peek(b)).toBeDefined();
    expect(pool.peek(c)).toBeDefined();
    await pool.close();
  });

  it("refuses a bound that is not a positive integer, naming it", () => {
    expect(() => new LeasePool(new FakeStore(), { maxKeys: 0 })).toThrow(
      /maxKeys must be a positive integer, got 0/,
    );
  });
});
