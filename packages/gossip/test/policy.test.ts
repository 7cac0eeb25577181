import fc from "fast-check";
import { regionOfReplica } from "@geoquota/crdt";
import { describe, expect, it } from "vitest";
import {
  computeTargets,
  decideRound,
  initialDemand,
  initialPolicyMemory,
  type LenderState,
  lendingHeadroom,
  observeDemand,
  planLoans,
  planReturns,
  proportionalTargets,
  type RegionQuota,
  totalsByRegion,
  U,
} from "../src/policy/index.js";

const THREE: RegionQuota[] = [
  { region: "eu", baseShare: 333_334, floorShare: 20_000 },
  { region: "us", baseShare: 333_333, floorShare: 20_000 },
  { region: "ap", baseShare: 333_333, floorShare: 20_000 },
];

describe("demand estimation", () => {
  it("splits replica ids at the last dot and sums incarnations by region", () => {
    expect(regionOfReplica("eu-west.a1")).toBe("eu-west");
    expect(regionOfReplica("eu.west.a1")).toBe("eu.west");
    expect(regionOfReplica("bare")).toBe("bare");
    expect(totalsByRegion({ "eu.a": 3, "eu.b": 4, "us.x": 1 })).toEqual({ eu: 7, us: 1 });
  });

  it("converges to a steady rate, counting admitted and denied cost", () => {
    let s = initialDemand();
    let adm = 0;
    let den = 0;
    for (let i = 0; i <= 40; i++) {
      s = observeDemand(s, { admitted: { "eu.a": adm }, denied: { "eu.a": den } }, i * 250_000, {
        halfLifeMs: 500,
      });
      adm += 10; // 40/s admitted
      den += 15; // 60/s denied
    }
    expect(s.ratePerSec.eu).toBeCloseTo(100, 3);
  });

  it("takes a first reading and a newly seen replica as a baseline, not a spike", () => {
    let s = observeDemand(initialDemand(), { admitted: { "eu.a": 1e9 }, denied: {} }, 0);
    expect(s.ratePerSec.eu ?? 0).toBe(0);
    // An old incarnation re-learned from a peer after a restart: no spike.
    s = observeDemand(s, { admitted: { "eu.a": 1e9, "us.old": 5e8 }, denied: {} }, 300_000);
    expect(s.ratePerSec.us ?? 0).toBe(0);
    // Its growth afterwards counts.
    s = observeDemand(s, { admitted: { "eu.a": 1e9, "us.old": 5e8 + 30 }, denied: {} }, 600_000);
    expect(s.ratePerSec.us).toBeGreaterThan(0);
  });

  it("survives entries vanishing (own state wiped) and coming back from peers", () => {
    let s = observeDemand(initialDemand(), { admitted: { "eu.a": 100 }, denied: {} }, 0);
    s = observeDemand(s, { admitted: { "eu.b": 0 }, denied: {} }, 250_000); // wiped: fresh incarnation
    s = observeDemand(s, { admitted: { "eu.b": 5 }, denied: {} }, 500_000);
    const before = s.ratePerSec.eu ?? 0;
    s = observeDemand(s, { admitted: { "eu.a": 100, "eu.b": 5 }, denied: {} }, 750_000); // re-learned
    expect(s.ratePerSec.eu ?? 0).toBeLessThanOrEqual(before);
  });

  it("decays to exactly zero for an idle region", () => {
    let s = observeDemand(initialDemand(), { admitted: { "eu.a": 0 }, denied: {} }, 0);
    s = observeDemand(s, { admitted: { "eu.a": 1000 }, denied: {} }, 100_000);
    for (let i = 2; i < 400; i++)
      s = observeDemand(s, { admitted: { "eu.a": 1000 }, denied: {} }, i * 100_000);
    expect(s.ratePerSec.eu).toBe(0);
  });
});

describe("targets", () => {
  it("gives a single hot region U − (n−1)·floor", () => {
    const t = proportionalTargets(THREE, { eu: 500 });
    expect(t).toEqual({ eu: 960_000, us: 20_000, ap: 20_000 });
  });

  it("keeps bases when nobody exceeds its base slice", () => {
    const t = computeTargets(THREE, { eu: 20, us: 25, ap: 1 }, 100, undefined);
    expect(t).toEqual({ eu: 333_334, us: 333_333, ap: 333_333 });
  });

  it("ignores moves inside the hysteresis band", () => {
    const a = computeTargets(THREE, { eu: 100, us: 50 }, 100, undefined);
    const b = computeTargets(THREE, { eu: 101, us: 50 }, 100, a);
    expect(b).toEqual(a);
    const c = computeTargets(THREE, { eu: 150, us: 50 }, 100, a);
    expect(c).not.toEqual(a);
  });

  it("property: integers in [floor, U] summing to U", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 6 }),
        fc.array(fc.double({ min: 0, max: 1e6, noNaN: true }), { minLength: 6, maxLength: 6 }),
        fc.integer({ min: 0, max: 100_000 }),
        (n, ds, floor) => {
          const regions: RegionQuota[] = [];
          let left = U;
          for (let i = 0; i < n; i++) {
            const b = i === n - 1 ? left : Math.floor(U / n);
            left -= b;
            regions.push({ region: `r${i}`, baseShare: b, floorShare: Math.min(floor, Math.floor(U / n)) });
          }
          const demand: Record<string, number> = {};
          regions.forEach((q, i) => {
            demand[q.region] = ds[i] ?? 0;
          });
          const t = computeTargets(regions, demand, 10, undefined);
          let sum = 0;
          for (const q of regions) {
            const v = t[q.region] ?? -1;
            expect(Number.isInteger(v)).toBe(true);
            expect(v).toBeGreaterThanOrEqual(q.floorShare);
            expect(v).toBeLessThanOrEqual(U);
            sum += v;
          }
          expect(sum).toBe(U);
        },
      ),
    );
  });
});

function lender(over: Partial<LenderState> = {}): LenderState {
  return {
    region: "us",
    baseShare: 333_333,
    floorShare: 20_000,
    recovering: false,
    reserved: {},
    current: {},
    ...over,
  };
}

describe("lending", () => {
  const hot = { eu: 960_000, us: 20_000, ap: 20_000 };

  it("lends everything above the floor to the only deficit region", () => {
    expect(planLoans(lender(), THREE, hot)).toEqual({ eu: 313_333 });
  });

  it("lends nothing while recovering", () => {
    expect(planLoans(lender({ recovering: true }), THREE, hot)).toEqual({});
  });

  it("renews at the current size inside the hysteresis band", () => {
    const l = lender({ reserved: { eu: 310_000 }, current: { eu: 310_000 } });
    expect(planLoans(l, THREE, hot)).toEqual({ eu: 310_000 });
  });

  it("renews at the current size when the wanted loan shrank by less than 5% of U; shrinks past it, ends at none", () => {
    const l = lender({ reserved: { eu: 313_333 }, current: { eu: 313_333 } });
    // us itself wants a little more: its ideal loan to eu is 30k smaller (a demand estimate's noise).
    expect(planLoans(l, THREE, { eu: 930_000, us: 50_000, ap: 20_000 })).toEqual({ eu: 313_333 });
    // 70k smaller: shrunk.
    expect(planLoans(l, THREE, { eu: 890_000, us: 90_000, ap: 20_000 })).toEqual({ eu: 243_333 });
    // No deficit anywhere: no loan, whatever the band.
    expect(planLoans(l, THREE, { eu: 333_333, us: 333_333, ap: 333_334 })).toEqual({});
    // Growth follows the 1% band as before.
    const small = lender({ reserved: { eu: 200_000 }, current: { eu: 200_000 } });
    expect(planLoans(small, THREE, hot)).toEqual({ eu: 313_333 });
  });

  it("never lets reservations exceed base − floor, even while a larger old grant is still reserved", () => {
    // Demand moved from eu to ap: the old 300k grant to eu stays reserved until it expires.
    const l = lender({ reserved: { eu: 300_000 }, current: { eu: 300_000 } });
    const plan = planLoans(l, THREE, { eu: 20_000, us: 20_000, ap: 960_000 });
    expect(plan.eu ?? 0).toBe(0);
    expect(Math.max(plan.ap ?? 0, 0)).toBeLessThanOrEqual(333_333 - 20_000 - 300_000);
  });

  it("property: Σ max(reserved, grant) ≤ base − floor, never a loan to itself", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 400_000 }), { minLength: 3, maxLength: 3 }),
        fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: 3, maxLength: 3 }),
        ([a, b, c], [ra, rb, rc]) => {
          const regions = THREE;
          const raw = [a ?? 0, b ?? 0, c ?? 0];
          const targets = proportionalTargets(regions, { eu: raw[0] ?? 0, us: raw[1] ?? 0, ap: raw[2] ?? 0 });
          const self = lender({ reserved: { eu: ra ?? 0, ap: rc ?? 0, us: 0 }, current: { eu: rb ?? 0 } });
          const plan = planLoans(self, regions, targets);
          expect(plan.us).toBeUndefined();
          const budget = Math.max(0, self.baseShare - self.floorShare - (ra ?? 0) - (rc ?? 0));
          let growth = 0;
          for (const [k, w] of Object.entries(plan)) growth += Math.max(0, w - (self.reserved[k] ?? 0));
          expect(growth).toBeLessThanOrEqual(budget);
          expect(lendingHeadroom(self)).toBe(budget);
        },
      ),
    );
  });
});

describe("early return", () => {
  const inUse = [
    { lender: "us", units: 300_000, seq: 7 },
    { lender: "ap", units: 300_000, seq: 9 },
  ];

  it("returns every loan when demand is gone", () => {
    const r = planReturns(
      { region: "eu", baseShare: 333_334, recovering: false, inUse },
      {
        eu: 333_334,
        us: 333_333,
        ap: 333_333,
      },
    );
    expect(r.map((l) => l.lender).sort()).toEqual(["ap", "us"]);
  });

  it("keeps what still covers the need, returns the surplus", () => {
    const r = planReturns(
      { region: "eu", baseShare: 333_334, recovering: false, inUse },
      {
        eu: 600_000,
        us: 200_000,
        ap: 200_000,
      },
    );
    expect(r).toEqual([{ lender: "ap", units: 300_000, seq: 9 }]);
  });

  it("returns nothing inside the band, everything while recovering", () => {
    const t = { eu: 933_334, us: 33_333, ap: 33_333 };
    expect(planReturns({ region: "eu", baseShare: 333_334, recovering: false, inUse }, t)).toEqual([]);
    expect(planReturns({ region: "eu", baseShare: 333_334, recovering: true, inUse }, t)).toHaveLength(2);
  });

  it("never plans a return of share that backs outstanding in-process leases (pinned, DESIGN §3)", () => {
    const t = { eu: 333_334, us: 333_333, ap: 333_333 }; // no need left: both loans are surplus
    const self = { region: "eu", baseShare: 333_334, recovering: false, inUse };
    expect(planReturns(self, t)).toHaveLength(2);
    // Leases back 600,000 ppm: base + one loan (633,334) covers it, so one loan goes back…
    expect(planReturns({ ...self, leasePinnedPpm: 600_000 }, t)).toEqual([
      { lender: "ap", units: 300_000, seq: 9 },
    ]);
    expect(planReturns({ ...self, recovering: true, leasePinnedPpm: 600_000 }, t)).toHaveLength(1);
    // …and with leases backing more than base + one loan, nothing goes back, recovering or not.
    expect(planReturns({ ...self, leasePinnedPpm: 700_000 }, t)).toEqual([]);
    expect(planReturns({ ...self, recovering: true, leasePinnedPpm: 700_000 }, t)).toEqual([]);
  });
});

describe("a whole round", () => {
  it("moves quota to a hot region after a few readings", () => {
    let mem = initialPolicyMemory();
    let grants: Readonly<Record<string, number>> = {};
    for (let i = 0; i < 10; i++) {
      const d = decideRound(mem, {
        self: "us",
        regions: THREE,
        refillPerSecond: 100,
        nowUs: i * 300_000,
        counters: { admitted: { "eu.a": i * 30, "us.b": 0 }, denied: { "eu.a": i * 60 } },
        recovering: false,
        reserved: {},
        current: {},
        inUse: [],
      });
      mem = d.memory;
      grants = d.grants;
    }
    expect(grants).toEqual({ eu: 313_333 });
  });
});
