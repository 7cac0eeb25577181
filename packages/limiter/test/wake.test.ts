// A key whose demand crosses the region's slice wakes the region's gossip
// daemon (RegionStore.wake, DESIGN §3 "Demand, targets and lending"): the
// first store denial after a quiet second wakes it; a key denied on and on
// does not keep waking it, and the process wakes at most every 50 ms.
import { describe, expect, it } from "vitest";
import { Limiter } from "../src/limiter.js";
import { manualClock, testConfig, testPolicies } from "./helpers/config.js";
import { FakeStore } from "./helpers/fake-store.js";

class WakeCountingStore extends FakeStore {
  wakes = 0;
  wake(): void {
    this.wakes++;
  }
}

describe("a limiter wakes its daemon when a key starts being denied", () => {
  it("once per crossing of the slice, per key, at most every 50 ms", async () => {
    const store = new WakeCountingStore();
    const clock = manualClock();
    const limiter = new Limiter({ store, config: testConfig(), policies: testPolicies(), clock: clock.now });
    // walk_in_* fall to the "*" rule: a bucket of this region's part of 5 tokens (the fake
    // store's clock stands still: no refill).
    const check = (tenant = "walk_in_7") => limiter.check(tenant, "payments_checkout", 1);
    const untilDenied = async (tenant: string) => {
      for (let i = 0; i < 10; i++) {
        const wakesBefore = store.wakes;
        if (!(await check(tenant)).allowed) return wakesBefore;
      }
      throw new Error(`${tenant} never denied`);
    };
    expect(await untilDenied("walk_in_7"), "admissions wake nothing").toBe(0);
    expect(store.wakes, "the first denial wakes").toBe(1);
    // Another key crossing its slice within 50 ms of the last wake: none (that round is coming).
    clock.advance(10);
    await untilDenied("walk_in_8");
    expect(store.wakes).toBe(1);
    // Denied on and on, each within a second of the last: the same crossing, no more wakes.
    for (let i = 0; i < 4; i++) {
      clock.advance(100);
      expect((await check()).allowed).toBe(false);
    }
    expect(store.wakes).toBe(1);
    // A second without a denial of walk_in_7, then one: a new crossing.
    clock.advance(1000);
    expect((await check()).allowed).toBe(false);
    expect(store.wakes).toBe(2);
    // Window algorithms keep static slices: their denials wake nothing (none in this policy
    // set; the rule is the algorithm check in Limiter.denied).
  });
});
