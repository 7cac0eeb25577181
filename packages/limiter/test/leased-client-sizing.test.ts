// Issue 24 point 4: the leased client's synchronous fast path, the batch and
// low-water mark sized from the observed rate, and the refresh before a lease
// ends, under the lease safety rules (trap 6: never past send + granted − margin;
// no token counted before its grant lands).
import { keyPolicy } from "@geoquota/testkit";
import { describe, expect, it } from "vitest";
import { LeasedClient, leasedHeldBound } from "../src/leased-client.js";
import { Limiter } from "../src/limiter.js";
import type { KeyPolicy, Lease } from "@geoquota/core";
import { manualClock, testConfig } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";
import { withPoliciesFor } from "./helpers/leased-mode.js";

const big: KeyPolicy = keyPolicy({
  resource: "sized",
  capacity: 1_000_000,
  refillPerSecond: 1_000_000,
  baseShare: 1_000_000,
});

/** Answers each acquire `rttMs` (on the manual clock) after it was sent, when `pump` is called. */
class DelayedStore extends FakeStore {
  readonly asked: number[] = [];
  private waiting: { dueMs: number; open: () => void }[] = [];
  constructor(
    private readonly now: () => number,
    /** Round-trip of the acquires sent from now on. */
    public rttMs: number,
  ) {
    super();
  }
  override async acquireLease(p: KeyPolicy, tokens: number, durationMs: number): Promise<Lease> {
    this.asked.push(tokens);
    await new Promise<void>((open) => this.waiting.push({ dueMs: this.now() + this.rttMs, open }));
    return super.acquireLease(p, tokens, durationMs);
  }
  get pending(): number {
    return this.waiting.length;
  }
  /** Lets every acquire whose round-trip is over land. */
  async pump(): Promise<void> {
    if (!this.waiting.some((w) => w.dueMs <= this.now())) return;
    const due = this.waiting.filter((w) => w.dueMs <= this.now());
    this.waiting = this.waiting.filter((w) => w.dueMs > this.now());
    for (const w of due) w.open();
    for (let i = 0; i < 4; i++) await new Promise((r) => setImmediate(r));
  }
}

/** Steady demand: one take every `everyMs` for `forMs`; counts the takes that found no token. */
async function steady(
  c: LeasedClient,
  store: DelayedStore,
  clock: ReturnType<typeof manualClock>,
  everyMs: number,
  forMs: number,
  onStep?: () => void,
): Promise<{ takes: number; dry: number }> {
  let takes = 0;
  let dry = 0;
  for (let t = 0; t < forMs; t += everyMs) {
    clock.advance(everyMs);
    await store.pump();
    takes++;
    if (!c.tryTake(1)) dry++;
    onStep?.();
  }
  return { takes, dry };
}

describe("leased client: fast path and sizing", () => {
  it("the fast path never serves a lease at or past its end (send + granted − margin)", async () => {
    const clock = manualClock(0);
    const store = new FakeStore();
    const c = new LeasedClient(store, big, {
      clock: clock.now,
      batch: 50,
      lowWater: 0,
      durationMs: 1000,
      marginMs: 100,
    });
    expect(await c.take(1)).toBe(true); // sent at 0: usable until 900
    clock.advance(899);
    expect(c.tryTake(1)).toBe(true); // 48 left: the fast path
    clock.advance(1);
    // No available() first: the take itself must see the end.
    expect(c.tryTake(1)).toBe(false);
    await c.close();
  });

  it("counts no token of an acquire in flight before its grant lands", async () => {
    const clock = manualClock(0);
    const store = new DelayedStore(clock.now, 20);
    const c = new LeasedClient(store, big, { clock: clock.now, batch: 50, lowWater: 10 });
    const first = c.take(1);
    clock.advance(20);
    await store.pump();
    expect(await first).toBe(true);
    for (let i = 0; i < 49; i++) expect(c.tryTake(1)).toBe(true); // the prefetch left at 10
    expect(store.pending).toBe(1);
    // The lease is spent and the next one not granted yet: nothing to take.
    expect(c.tryTake(1)).toBe(false);
    expect(c.tryTake(0.5)).toBe(false);
    expect(c.available()).toBe(0);
    clock.advance(20);
    await store.pump();
    expect(c.available()).toBe(50);
    await c.close();
    // Never more used than granted.
    expect(store.released.reduce((a, r) => a + r.used, 0)).toBeLessThanOrEqual(100);
  });

  it("sizes the batch from the observed rate, and its low-water mark from the round-trip: never dry under steady demand", async () => {
    const clock = manualClock(0);
    const store = new DelayedStore(clock.now, 20);
    const opts = {
      clock: clock.now,
      batch: 50,
      lowWater: 5,
      maxBatch: 5000,
      durationMs: 2000,
      marginMs: 100,
    };
    const c = new LeasedClient(store, big, opts);
    const bound = leasedHeldBound(opts);
    let heldMax = 0;
    const warm = await steady(c, store, clock, 1, 2000);
    expect(warm.takes).toBe(2000);
    // Dry only while the first grants land (34 takes here: deterministic, manual clock).
    expect(warm.dry).toBeLessThanOrEqual(40);
    // 1 token/ms for 5 s with a 20 ms round-trip: the mark covers the round-trip.
    const run = await steady(c, store, clock, 1, 5000, () => {
      heldMax = Math.max(heldMax, c.available());
    });
    expect(run.dry).toBe(0);
    // A second's worth at 1 token/ms, far above the smallest batch; never above maxBatch.
    const late = store.asked.slice(-3);
    for (const n of late) expect(n).toBeGreaterThan(500);
    expect(Math.max(...store.asked)).toBeLessThanOrEqual(5000);
    // A fixed batch of 50 asks ~100 times in these 5 s; sized, a handful.
    expect(store.asked.length).toBeLessThan(30);
    expect(heldMax).toBeLessThanOrEqual(bound);
    await c.close();
  });

  it("asks for the next lease before the newest one ends, so a slow key does not run dry at the end", async () => {
    const clock = manualClock(0);
    const store = new DelayedStore(clock.now, 20);
    const c = new LeasedClient(store, big, {
      clock: clock.now,
      batch: 50,
      lowWater: 5,
      maxBatch: 5000,
      durationMs: 1000,
      marginMs: 100,
    });
    await steady(c, store, clock, 10, 500);
    // One take per 10 ms: a lease of 50 outlives its 900 ms; each ends with tokens left.
    const run = await steady(c, store, clock, 10, 5000);
    expect(run.dry).toBe(0);
    await c.close();
  });

  it("never holds more than leasedHeldBound, also when a fast round-trip follows a slow stretch", async () => {
    const clock = manualClock(0);
    const store = new DelayedStore(clock.now, 800);
    const opts = {
      clock: clock.now,
      batch: 50,
      lowWater: 10,
      maxBatch: 5000,
      durationMs: 2000,
      marginMs: 100,
    };
    const c = new LeasedClient(store, big, opts);
    const bound = leasedHeldBound(opts);
    // 10 tokens/ms for 4 s over 800 ms round-trips: batches at maxBatch, and a refresh lead
    // (two smoothed round-trips) near the lease's usable 1.9 s. Then round-trips of 1 ms and a
    // trickle: the next refreshes land while the two previous leases are still live (three
    // leases, ~1.5·bound, when the asks are not capped by the room left under the bound).
    let heldMax = 0;
    for (let t = 0; t < 7000; t++) {
      clock.advance(1);
      if (t === 4000) store.rttMs = 1;
      await store.pump();
      const n = t < 4000 ? 10 : t % 20 === 0 ? 1 : 0;
      for (let k = 0; k < n; k++) c.tryTake(1);
      heldMax = Math.max(heldMax, c.available());
    }
    expect(Math.max(...store.asked)).toBe(5000);
    expect(heldMax).toBeLessThanOrEqual(bound);
    // The cap trims an ask; the client goes on leasing (no stall at the bound).
    expect(c.available()).toBeGreaterThan(0);
    await c.close();
  });

  it.each([1, 4])(
    "the region config's defaults (leased: { enabled: true }): %i token/ms never runs dry in the service",
    async (perMs) => {
      const clock = manualClock(0);
      const store = new DelayedStore(clock.now, 20);
      const limiter = new Limiter({
        store,
        config: testConfig({ leased: { enabled: true } }),
        policies: withPoliciesFor("steady", "sized", { capacity: 1_000_000, refillPerSecond: 1_000_000 }),
        clock: clock.now,
      });
      const run = async (forMs: number) => {
        let dry = 0;
        for (let t = 0; t < forMs; t++) {
          clock.advance(1);
          await store.pump();
          for (let k = 0; k < perMs; k++)
            if ((await limiter.check("steady", "sized")).source !== "lease") dry++;
        }
        return dry;
      };
      await run(2000);
      // Every decision from memory: the batch follows the rate and the mark the round-trip
      // (a fixed batch of 50 with its mark of 10 runs dry every 10 to 50 ms here).
      expect(await run(5000)).toBe(0);
      expect(store.asked.length).toBeLessThan(40);
      await limiter.close();
    },
  );

  it("without maxBatch the batch stays fixed (the stream package's leases)", async () => {
    const clock = manualClock(0);
    const store = new DelayedStore(clock.now, 20);
    const c = new LeasedClient(store, big, { clock: clock.now, batch: 50, lowWater: 10 });
    await steady(c, store, clock, 1, 1000);
    expect(new Set(store.asked)).toEqual(new Set([50]));
    await c.close();
  });

  it("rejects a maxBatch below batch", () => {
    expect(() => new LeasedClient(new FakeStore(), big, { batch: 50, maxBatch: 10 })).toThrow(/maxBatch/);
  });
});
