// Sizing RLQS asks from demand (rlqs-sizing.ts): the first ask is a part of the base slice, then
// the demand with headroom between a floor and the key's whole rate; the burst is a twentieth of a second
// of the rate, within what its share holds of capacity; a rise in demand is taken at once, a fall averaged.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  askSize,
  DemandEstimate,
  fairAskSize,
  RLQS_ASSIGNED_PART,
  RLQS_BURST_SECONDS,
  RLQS_DEMAND_HEADROOM,
  RLQS_MIN_SLICE_FRACTION,
  wantsMore,
} from "../src/rlqs-sizing.js";

const L = { capacity: 1000, rate: 200, sliceCapacity: 250, sliceRate: 50 };

describe("askSize", () => {
  it("asks for the initial part of the base slice before any demand is known", () => {
    expect(askSize(L, undefined, 0.5)).toEqual({ rate: 25, burst: 1 });
  });

  it("asks for the demand with headroom, between the floor and the key's whole rate", () => {
    expect(askSize(L, 80, 0.5)).toEqual({ rate: 80 * RLQS_DEMAND_HEADROOM, burst: 5 });
    // A hot proxy may ask beyond the base slice (a region that borrowed holds more).
    expect(askSize(L, 1000, 0.5)).toEqual({ rate: 200, burst: 10 });
    // A quiet one keeps a floor, and at least one token.
    expect(askSize(L, 0, 0.5)).toEqual({ rate: 50 * RLQS_MIN_SLICE_FRACTION, burst: 1 });
    // The burst is a twentieth of a second of rate, within the rate's share of capacity.
    expect(askSize({ ...L, capacity: 10 }, 100, 0.5)).toEqual({ rate: 125, burst: 6 });
  });

  it("a bucket that never refills asks for a part of the slice's burst", () => {
    expect(askSize({ ...L, rate: 0, sliceRate: 0 }, 30, 0.5)).toEqual({ rate: 0, burst: 125 });
  });

  it("never asks for more than the key's rate, nor a burst beyond the rate's share of capacity", () => {
    fc.assert(
      fc.property(fc.option(fc.double({ min: 0, max: 1e6, noNaN: true }), { nil: undefined }), (d) => {
        const a = askSize(L, d, 0.5);
        expect(a.rate).toBeLessThanOrEqual(L.rate);
        expect(a.rate).toBeGreaterThan(0);
        expect(a.burst).toBeLessThanOrEqual(Math.max(1, (a.rate * L.capacity) / L.rate));
        expect(a.burst).toBeLessThanOrEqual(Math.max(1, a.rate * RLQS_BURST_SECONDS));
        expect(a.burst).toBeGreaterThanOrEqual(1);
      }),
    );
  });
});

describe("DemandEstimate", () => {
  it("takes a rise at once and averages a fall; a report over no time says nothing", () => {
    const d = new DemandEstimate();
    expect(d.perSecond).toBeUndefined();
    d.observe(10, 0);
    expect(d.perSecond).toBeUndefined();
    d.observe(20, 200_000);
    expect(d.perSecond).toBe(100);
    d.observe(0, 200_000);
    expect(d.perSecond).toBe(50);
    d.observe(100, 200_000);
    expect(d.perSecond).toBe(500);
  });
});

describe("wantsMore", () => {
  it("only a proxy that denied, asking for a tenth more than it holds", () => {
    expect(wantsMore(0, 10, 100)).toBe(false);
    expect(wantsMore(3, 10, 10.5)).toBe(false);
    expect(wantsMore(3, 10, 11.5)).toBe(true);
  });
});

describe("fairAskSize", () => {
  it("divides a first ask among the region's proxies on the key, leaving the bucket a part for the bursts", () => {
    // Alone, the initial fraction (25/s of the base slice's 50/s); with two, each at most half of
    // 95% of the slice (23.75/s); initialFraction 1 alone: 95% of the slice, never all of it.
    expect(fairAskSize(L, undefined, 0, undefined, 0.5, 1)).toEqual({ rate: 25, burst: 1 });
    expect(fairAskSize(L, undefined, 0, undefined, 0.5, 2).rate).toBeCloseTo(RLQS_ASSIGNED_PART * 25, 9);
    expect(fairAskSize(L, undefined, 0, undefined, 1, 1).rate).toBeCloseTo(RLQS_ASSIGNED_PART * 50, 9);
    fc.assert(
      fc.property(fc.double({ min: 0.01, max: 1, noNaN: true }), fc.integer({ min: 1, max: 50 }), (f, n) => {
        const sum = n * fairAskSize(L, undefined, 0, undefined, f, n).rate;
        return (
          sum <= Math.max(RLQS_ASSIGNED_PART * L.sliceRate, n * L.sliceRate * RLQS_MIN_SLICE_FRACTION) + 1e-9
        );
      }),
    );
  });
});
