import { checkGlobalBound, keyPolicy } from "@geoquota/testkit";
import { describe, expect, it } from "vitest";
import { LeasedClient } from "../src/leased-client.js";
import type { KeyPolicy, Lease } from "@geoquota/core";
import { manualClock } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";

// us-east slice of C = 300, r = 30/s at 1/3: capacity 100, 10/s.
const policy: KeyPolicy = keyPolicy({
  resource: "r1",
  capacity: 300,
  refillPerSecond: 30,
  baseShare: 333_334,
});

/** A FakeStore whose acquireLease answers only when the test says so. */
class GatedStore extends FakeStore {
  private gates: (() => void)[] = [];
  override async acquireLease(p: KeyPolicy, tokens: number, durationMs: number): Promise<Lease> {
    await new Promise<void>((resolve) => this.gates.push(resolve));
    return super.acquireLease(p, tokens, durationMs);
  }
  get pending(): number {
    return this.gates.length;
  }
  open(): void {
    const g = this.gates.shift();
    g?.();
  }
}

const flush = () => new Promise((r) => setImmediate(r));

describe("leased client", () => {
  it("times a lease from the SEND of the acquire, not from its receipt (trap 6)", async () => {
    const clock = manualClock(1000);
    const store = new GatedStore();
    const c = new LeasedClient(store, policy, { clock: clock.now, durationMs: 2000, marginMs: 100 });
    const taking = c.take(1); // sent at t = 1000
    clock.advance(500); // the grant arrives 500 ms later
    store.open();
    expect(await taking).toBe(true);
    clock.advance(1399); // t = 2899 = send + duration − margin − 1
    expect(c.tryTake(1)).toBe(true);
    clock.advance(1); // t = 2900: timed from receipt it would last until 3400
    expect(c.available()).toBe(0);
    expect(c.tryTake(1)).toBe(false);
    await flush();
    // The expired lease was reported with its use (2 tokens).
    expect(store.released).toEqual([{ leaseId: "L1", used: 2 }]);
    store.open(); // let the prefetch it started go, so close() does not wait forever
    await c.close();
  });

  it("never uses more time than the store granted", async () => {
    const clock = manualClock(0);
    const store = new FakeStore();
    const short = Object.assign(Object.create(store) as FakeStore, {
      acquireLease: async (p: KeyPolicy, n: number, _d: number) => store.acquireLease(p, n, 500),
    });
    const c = new LeasedClient(short, policy, { clock: clock.now, durationMs: 2000, marginMs: 100 });
    expect(await c.take(1)).toBe(true);
    clock.advance(399);
    expect(c.tryTake(1)).toBe(true);
    clock.advance(1);
    expect(c.tryTake(1)).toBe(false);
    await c.close();
  });

  it("serves from memory and prefetches asynchronously at the low-water mark", async () => {
    const clock = manualClock();
    const store = new FakeStore();
    const c = new LeasedClient(store, policy, { clock: clock.now, batch: 50, lowWater: 10 });
    expect(await c.take(1)).toBe(true);
    expect(store.calls.filter((x) => x.op === "acquireLease")).toHaveLength(1);
    for (let i = 0; i < 38; i++) expect(c.tryTake(1)).toBe(true);
    expect(c.available()).toBe(11);
    expect(store.calls.filter((x) => x.op === "acquireLease")).toHaveLength(1); // memory only
    expect(c.tryTake(1)).toBe(true); // 10 left: low water → prefetch
    await c.settled();
    expect(store.calls.filter((x) => x.op === "acquireLease")).toHaveLength(2);
    expect(c.available()).toBe(60);
    // Leased tokens stay counted against the bucket: 100 − 100 reserved.
    expect(store.outstandingFor(policy)).toBe(100);
    await c.close();
  });

  it("a cost may span two leases; close reports use and returns the unused", async () => {
    const clock = manualClock();
    const store = new FakeStore();
    const c = new LeasedClient(store, policy, { clock: clock.now, batch: 50, lowWater: 10 });
    await c.take(45);
    await c.settled();
    expect(c.available()).toBe(55);
    expect(c.tryTake(7.5)).toBe(true); // 5 from the first lease, 2.5 from the second
    await c.close();
    expect(store.released).toEqual([
      { leaseId: "L1", used: 50 },
      { leaseId: "L2", used: 2.5 },
    ]);
    expect(store.outstandingFor(policy)).toBe(0);
    const view = await store.inspect(policy);
    expect(view.tokens).toBeCloseTo(100.0002 - 52.5, 6);
    expect(c.tryTake(1)).toBe(false); // closed
  });

  it("backs off after an empty grant instead of asking on every check", async () => {
    const clock = manualClock();
    const store = new FakeStore();
    const a = new LeasedClient(store, policy, {
      clock: clock.now,
      batch: 100,
      lowWater: 10,
      retryBackoffMs: 100,
    });
    expect(await a.take(100)).toBe(true); // the whole slice
    const b = new LeasedClient(store, policy, {
      clock: clock.now,
      batch: 50,
      lowWater: 10,
      retryBackoffMs: 100,
    });
    expect(await b.take(1)).toBe(false);
    const asked = store.calls.length;
    for (let i = 0; i < 10; i++) expect(b.tryTake(1)).toBe(false);
    expect(store.calls.length).toBe(asked);
    clock.advance(100);
    b.tryTake(1);
    await b.settled();
    expect(store.calls.length).toBe(asked + 1);
    await a.close();
    await b.close();
  });

  it("keeps serving held leases while the store fails, and nothing beyond them", async () => {
    const clock = manualClock();
    const store = new FakeStore();
    const errors: unknown[] = [];
    const c = new LeasedClient(store, policy, {
      clock: clock.now,
      batch: 20,
      lowWater: 5,
      onError: (e) => errors.push(e),
    });
    expect(await c.take(1)).toBe(true);
    store.failWith = new Error("down");
    let admitted = 1;
    for (let i = 0; i < 50; i++) if (c.tryTake(1)) admitted++;
    await c.settled();
    expect(admitted).toBe(20);
    expect(errors.length).toBeGreaterThan(0);
    store.failWith = undefined;
    await c.close();
  });

  it("never uses a lease past the store's reservation (else the refilled bucket and stale tokens overlap)", async () => {
    const p: KeyPolicy = {
      ...policy,
      limit: { algorithm: "token_bucket", capacity: 10, refillPerSecond: 20 },
      baseShare: 1_000_000,
    };
    let nowMs = 0;
    const store = new FakeStore({ nowUs: () => nowMs * 1000 });
    const mk = (batch: number) =>
      new LeasedClient(store, p, { clock: () => nowMs, batch, lowWater: 0, durationMs: 1000, marginMs: 50 });
    const a = mk(5);
    const b = mk(10);
    const admissions: { sentMs: number; answeredMs: number; cost: number }[] = [];
    const take = async (c: LeasedClient) => {
      if (await c.take(1)) admissions.push({ sentMs: nowMs, answeredMs: nowMs, cost: 1 });
    };
    await take(a); // a holds 4 unused of 5
    nowMs += 1100; // the store's reservation of a's lease is over; the bucket refilled
    for (let i = 0; i < 10; i++) await take(b);
    for (let i = 0; i < 4; i++) await take(a); // a must not spend its stale tokens
    const verdict = checkGlobalBound(admissions, { capacity: 10, refillPerSecond: 20 });
    expect(verdict.ok, JSON.stringify(verdict.worstInterval)).toBe(true);
    await a.close();
    await b.close();
  });
});
