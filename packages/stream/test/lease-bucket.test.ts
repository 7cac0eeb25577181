// The limiter's LeasedClient as streams run it (STREAM_LEASE_MODE), on an
// injected clock: partial takes across leases, early release of a used-up
// lease, pacing after short grants, timing from the send.
import type { KeyPolicy, RegionStore } from "@geoquota/core";
import { LeasedClient, type LeasedClientOptions } from "@geoquota/limiter";
import { describe, expect, it } from "vitest";
import { LocalBucket, leaseSizing, STREAM_LEASE_MODE } from "../src/index.js";
import { FakeStore } from "./fake-store.js";

const policy = (capacity: number, refillPerSecond: number, baseShare = 1_000_000): KeyPolicy => ({
  tenant: "t",
  resource: "stream_bytes",
  limit: { algorithm: "token_bucket", capacity, refillPerSecond },
  baseShare,
  floorShare: 0,
});

const flush = () => new Promise((r) => setImmediate(r));

/** The client the stream limiter builds for one (tenant, resource). */
const streamLeases = (store: RegionStore, p: KeyPolicy, o: LeasedClientOptions) =>
  new LeasedClient(store, p, { ...STREAM_LEASE_MODE, ...o });

describe("LeasedClient in stream mode", () => {
  it("pays a cost larger than a batch in several takes, oldest lease first", async () => {
    const now = 0;
    const store = new FakeStore(() => now);
    const b = streamLeases(store, policy(10_000, 1000), { batch: 100, lowWater: 50, clock: () => now });
    expect(b.takeUpTo(250)).toBe(0); // nothing held yet; starts an acquire
    await flush();
    expect(b.takeUpTo(250)).toBe(100);
    await flush();
    expect(b.takeUpTo(150)).toBe(100);
    await flush();
    expect(b.takeUpTo(50)).toBe(50);
  });

  it("releases a lease as soon as it is used up (its capacity returns at once)", async () => {
    const now = 0;
    const store = new FakeStore(() => now);
    const b = streamLeases(store, policy(1000, 1000), { batch: 100, lowWater: 0, clock: () => now });
    b.takeUpTo(1);
    await flush();
    expect(b.takeUpTo(100)).toBe(100);
    await flush();
    expect(store.releases).toEqual([{ leaseId: "l1", used: 100, atMs: 0 }]);
  });

  it("after a short grant the next acquire waits pacingMs", async () => {
    let now = 0;
    const store = new FakeStore(() => now);
    const b = streamLeases(store, policy(10, 100), {
      batch: 50,
      lowWater: 0,
      pacingMs: 50,
      clock: () => now,
    });
    b.takeUpTo(1);
    await flush();
    expect(b.takeUpTo(100)).toBe(10); // granted 10 of 50: short
    await flush();
    const before = store.acquires;
    now = 20;
    b.takeUpTo(1);
    await flush();
    expect(store.acquires).toBe(before); // still pacing
    now = 60;
    b.takeUpTo(1);
    await flush();
    expect(store.acquires).toBe(before + 1);
  });

  it("a lease is usable until send time + duration − margin, even if the grant arrives late", async () => {
    let now = 0;
    const store = new FakeStore(() => now);
    const b = streamLeases(store, policy(1000, 1), {
      batch: 100,
      lowWater: 0,
      durationMs: 1000,
      marginMs: 100,
      clock: () => now,
    });
    b.takeUpTo(1); // sent at 0
    now = 50; // the grant is received 50 ms after the send
    await flush();
    now = 899;
    expect(b.available()).toBe(100);
    now = 900;
    expect(b.available()).toBe(0);
    await flush();
    expect(store.releases.at(-1)).toMatchObject({ used: 0 });
  });

  it("close returns unused tokens", async () => {
    const now = 0;
    const store = new FakeStore(() => now);
    const b = streamLeases(store, policy(1000, 1), { batch: 100, lowWater: 0, clock: () => now });
    b.takeUpTo(1);
    await flush();
    b.takeUpTo(30);
    await b.close();
    expect(store.releases).toEqual([{ leaseId: "l1", used: 30, atMs: 0 }]);
    expect(b.takeUpTo(1)).toBe(0);
  });
});

describe("LocalBucket and lease sizing", () => {
  it("partial takes and refill on the injected clock", () => {
    let now = 0;
    const lb = new LocalBucket(100, 50, () => now);
    expect(lb.takeUpTo(150)).toBe(100);
    expect(lb.msUntil(50)).toBe(1000);
    now = 500;
    expect(lb.takeUpTo(100)).toBe(25);
    expect(lb.msUntil(1000)).toBe(2000); // capped at capacity
  });

  it("default batch: 0.1 s of the slice rate, ≤ a quarter of the slice capacity", () => {
    expect(leaseSizing(policy(65_536, 65_536))).toEqual({ batch: 6553, lowWater: 3276 });
    expect(leaseSizing(policy(1000, 100_000, 500_000))).toEqual({ batch: 125, lowWater: 62 });
    expect(leaseSizing(policy(1, 1))).toEqual({ batch: 1, lowWater: 0 });
    expect(leaseSizing(policy(1000, 1000), { batch: 7 })).toEqual({ batch: 7, lowWater: 3 });
  });
});
