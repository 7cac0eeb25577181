// Whole-protocol deterministic simulation (VOPR-style). Every seed is a random
// scenario (3–5 regions, clock offsets up to 2ε apart, drop/dup/reorder/delay,
// partitions, state losses, daemon restarts, shifting demand); the checkers
// run after every event. A failure names its seed: replay with GQ_SEED=<n>;
// GQ_SIM_LONG=1 runs 20× more seeds.
import { isLongMode, runSeeds } from "@geoquota/sim";
import { describe, expect, it } from "vitest";
import {
  bruteForceExcess,
  type FaultOptions,
  type PlantedBugs,
  runModel,
  scenarioFor,
  WindowOracle,
} from "../src/model/index.js";

const LONG = isLongMode();
const QUIET: FaultOptions = {
  dropRate: 0,
  duplicateRate: 0,
  latencyMinUs: 1_000,
  latencyMaxUs: 50_000,
  partitionEveryUs: 0,
  stateLosses: 0,
  daemonRestarts: 0,
};

function mustPass(seed: number, r: ReturnType<typeof runModel>): void {
  if (!r.ok) throw new Error(r.failure ?? `seed ${seed} failed`);
}

describe("the exact G1 oracle", () => {
  it("agrees with brute force over all windows", () => {
    let x = 7;
    const next = (m: number): number => {
      x = (x * 1103515245 + 12345) % 2147483648;
      return x % m;
    };
    for (let trial = 0; trial < 200; trial++) {
      const adm: { atUs: number; cost: number }[] = [];
      let t = 0;
      for (let i = 0; i < 40; i++) {
        t += next(3) === 0 ? 0 : next(200_000);
        adm.push({ atUs: t, cost: 1 + next(3) });
      }
      const o = new WindowOracle(5, 10);
      for (const a of adm) o.admit(a.atUs, a.cost);
      expect(o.worstExcessScaled).toBe(bruteForceExcess(adm, 5, 10));
      expect(o.violation === undefined).toBe(bruteForceExcess(adm, 5, 10) <= 0);
    }
  });
});

describe("whole protocol under random faults", () => {
  it("keeps Σ s ≤ U at every instant, G1 exactly, and converges after heal", () => {
    const n = runSeeds("protocol sim", { count: 1_500, longCount: 20_000 }, (seed) =>
      mustPass(seed, runModel(scenarioFor(seed))),
    );
    expect(n).toBeGreaterThan(0);
  }, 240_000);
});

describe("utilization and re-weighting", () => {
  it("a single hot region reaches ≥ 0.95 of r once loans settle (3 regions, floor 2%)", () => {
    runSeeds("hot region", { count: 40, firstSeed: 2_000_001 }, (seed) => {
      const r = runModel(
        scenarioFor(seed, {
          regions: 3,
          faults: QUIET,
          demand: { kind: "hot", ratio: 2 },
          durationUs: 14_000_000,
        }),
      );
      mustPass(seed, r);
      if (!(r.utilization >= 0.95)) throw new Error(`utilization ${r.utilization} < 0.95`);
    });
  });

  it("quota follows a moving hot spot within a few seconds", () => {
    runSeeds("demand shift", { count: 40, firstSeed: 3_000_001 }, (seed) => {
      const r = runModel(
        scenarioFor(seed, {
          regions: 3,
          faults: QUIET,
          demand: { kind: "hot", ratio: 2, shiftAtUs: 8_000_000 },
          durationUs: 16_000_000,
        }),
      );
      mustPass(seed, r);
      if (r.reweightUs === undefined || r.reweightUs > 4_000_000) {
        throw new Error(`re-weighting took ${r.reweightUs} µs`);
      }
    });
  });
});

/** Searches seeds until a checker fails; returns the first failing seed (or undefined). */
function firstFailing(bugs: PlantedBugs, maxSeeds: number, stateLosses?: number): string | undefined {
  for (let seed = 1; seed <= maxSeeds; seed++) {
    const base = scenarioFor(seed, { bugs });
    const opts = stateLosses === undefined ? base : { ...base, faults: { ...base.faults, stateLosses } };
    const r = runModel(opts);
    if (!r.ok) return r.failure;
  }
  return undefined;
}

describe("planted bugs make the checkers fail", () => {
  it("(a) borrower uses a loan until deadline + ε", () => {
    const f = firstFailing({ borrowerLate: true }, 200);
    expect(f, "no seed in 1..200 caught the late borrower").toBeDefined();
    expect(f).toMatch(/GQ_SEED=\d+/);
  });

  it("(b) lender re-lends borrowed units and lends below its floor", () => {
    const f = firstFailing({ relendBorrowed: true }, 200);
    expect(f, "no seed in 1..200 caught re-lending").toBeDefined();
  });

  it("(c) recovery skipped after state loss", () => {
    const f = firstFailing({ skipRecovery: true }, 200, 2);
    expect(f, "no seed in 1..200 caught the skipped recovery").toBeDefined();
  });

  it("clock offsets beyond 2ε break Σ s ≤ U (ε is load-bearing)", () => {
    let f: string | undefined;
    for (let seed = 1; seed <= 200 && f === undefined; seed++) {
      const r = runModel(scenarioFor(seed, { clockSpreadUs: 1_500_000 }));
      if (!r.ok) f = r.failure;
    }
    expect(f, "a 6ε clock spread was never caught").toBeDefined();
  });
});

if (LONG) {
  describe("long mode", () => {
    it("is on", () => expect(LONG).toBe(true));
  });
}
